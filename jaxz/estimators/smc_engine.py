"""The SMC engine: one tempered step, reweight → resample if needed → move, over a
schedule part (which β comes next) and a mutation part (how the particles are
resampled and moved). ``jaxz.smc`` assembles the default; ``smc_schedules`` and
``smc_mutations`` hold the parts. docs/architecture.md shows how to assemble a variant.

One step from β_t to β_{t+1} (Del Moral, Doucet & Jasra 2006, §3.1; the lecture notes'
SMC sampler; seed RTS §2 for the path f_β):

    w_{t+1}^i = f_{β_{t+1}}(x_t^i) / f_{β_t}(x_t^i)                  (incremental weight)
    log Ẑ_{t+1} = log Ẑ_t + log Σ_i W_t^i w_{t+1}^i                 (normalized W_t)
    W_{t+1}^i ∝ W_t^i w_{t+1}^i, then resample if the ESS is low and move x^i with a
    kernel invariant for f_{β_{t+1}}.

For a schedule and kernels fixed in advance Ẑ = Z_0 ∏_t Σ_i W_t^i w_{t+1}^i is unbiased
for Z_1 whichever resampling events occur (Del Moral 2004, Prop. 7.4.1).
"""
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxz import weights as _weights
from jaxz.base import freeze_when_done
from jaxz.estimators import _genealogy, _particles
from jaxz.kernels.base import KernelState, Population
from jaxz.types import Array


class SMCState(NamedTuple):
    kernel_states: KernelState
    log_weights: Array  # normalized log W_t
    log_z: Array  # log Ẑ_t accumulated so far (including log Z_0)
    beta: Array
    index: Array  # number of steps taken
    genealogy: _genealogy.Genealogy  # lagged ancestors, for the variance estimate
    min_ess: Array  # smallest ESS (a count) after any reweighting so far
    schedule: Any  # replayed schedule: (betas padded with 1, a pilot's kernel parameters, moves, probes); else ()
    done: Array
    status: Array
    cost: Array
    acceptance_rate: Array  # mean acceptance of the last move (nan before the first): read by Kernel.adapt
    num_mcmc_steps: Array  # int32: moves per particle at the next stage (adapted moves; waste-free: the last stage's)
    log_z_variance: Array  # waste-free: Σ_t of the stages' chain variances of log (1/N) Σ w_t (Dau & Chopin 2022)
    moved: Array  # fraction of particles (waste-free: chains) that the last move moved (continuous states)
    # evaluations so far, all particles: log f (the reweightings, the schedule's trial βs; the final
    # support check counted from the start) and gradients of log f (the moves; a gradient-free
    # kernel's log f evaluations are counted here too); a pilot's included
    log_density_evaluations: Array
    gradient_evaluations: Array


class SMCInfo(NamedTuple):
    beta: Array
    ess: Array  # ESS fraction after reweighting, before resampling
    resampled: Array
    acceptance_rate: Array
    log_z_increment: Array
    kernel_parameters: Any  # the parameters of this stage's move (TunedParameters; () for an untuned kernel)
    num_mcmc_steps: Array  # moves per particle (per kept state, waste-free) at this stage
    probe_transitions: Array  # trial transitions of the step-size rescue at this stage (counted in the cost)
    log_density_evaluations: Array  # log f evaluations of this stage, all particles (reweighting + moves)
    gradient_evaluations: Array  # gradients of log f this stage's moves took, all particles


class Schedule(NamedTuple):
    """Which β comes next. ``next_beta(state, log_current, read) -> (β_{t+1}, status,
    log densities evaluated per particle)``: ``read(β)`` gives log f_β at the particles and
    ``log_current`` is ``read(β_t)``. ``replay``: the mutation takes this stage's kernel
    parameters and moves from ``state.schedule`` (a pilot's) instead of tuning them."""
    next_beta: Callable
    replay: bool = False
    num_steps: int | None = None  # static number of steps (a fixed ladder), or None


class Mutation(NamedTuple):
    """How the reweighted particles are resampled and moved. ``move(keys, state,
    population, increments, ess, log_target) -> (updates, resampled, Moves)``: the
    ``SMCState`` fields it changes, whether it resampled, and what the move did.
    ``families(num_particles)``: the units the genealogy tracks (particles, or chains)."""
    move: Callable
    families: Callable
    chain_lags: Any = None  # the lags the genealogy reads (waste-free chains), or None
    chain_shape: Callable | None = None  # waste-free: num_particles -> (chains M, length P); else None
    genealogy_valid: bool = True  # its resampling leaves a single-run s.e. (multinomial, or none)
    first_moves: int = 1  # SMCState.num_mcmc_steps at the start


class Moves(NamedTuple):
    """What a mutation reports for ``SMCInfo``."""
    num_moves: Array
    probe_transitions: Array
    log_density_evaluations: Array
    gradient_evaluations: Array


def initial_state(path, kernel_states, dtype, num_mcmc_steps, mutation: Mutation, schedule_buffer=()):
    """The state at β = 0: ``kernel_states`` at exact draws of f_0, equal weights."""
    num_particles = jax.tree.leaves(kernel_states.position)[0].shape[0]
    zero = jnp.zeros((), dtype)
    families = mutation.families(num_particles)
    return SMCState(
        kernel_states, jnp.full((num_particles,), -jnp.log(num_particles), dtype),
        jnp.asarray(path.log_z0, dtype), zero, jnp.int32(0),
        _genealogy.init(families, _genealogy.default_lag(families), dtype, mutation.chain_lags),
        jnp.asarray(num_particles, dtype), schedule_buffer, jnp.bool_(False), jnp.int32(0), zero,
        jnp.full((), jnp.nan, dtype), jnp.int32(num_mcmc_steps), zero, jnp.ones((), dtype),
        # the support check of finalize (log f_0 at every particle); the kernels' caches at β = 0
        jnp.asarray(num_particles, dtype), jnp.asarray(num_particles, dtype),
    )


def build_step(path, schedule: Schedule, mutation: Mutation, batch_size=None) -> Callable:
    """``step(rng_key, state) -> (state, SMCInfo)``: one stage β_t → β_{t+1}."""

    @freeze_when_done
    def step(rng_key, state: SMCState):
        key_resample, key_move = jax.random.split(rng_key)
        positions = state.kernel_states.position
        num_particles = state.log_weights.shape[0]
        # log f_{β_t} at the particles, once for the choice of β_{t+1} and the reweighting
        read = _particles.log_density_reader(path, positions, batch_size)
        log_current = read(state.beta)
        beta_next, beta_status, schedule_evaluations = schedule.next_beta(state, log_current, read)

        # Reweight: log Ẑ_{t+1} = log Ẑ_t + log Σ_i W_t^i w_{t+1}^i
        increments, status = _particles.incremental_log_weights(path, positions, state.beta, beta_next, batch_size,
                                                                log_current, read)
        unnormalized = state.log_weights + increments
        log_z_increment = _weights.logsumexp(unnormalized)
        log_weights = _weights.normalize(unnormalized)
        ess = _weights.ess(log_weights)

        # Resample if needed, then move with a kernel invariant for f_{β_{t+1}}
        population = Population(positions, log_weights, beta_next, state.acceptance_rate)
        updates, resampled, moves = mutation.move((key_resample, key_move), state, population, increments, ess,
                                                  log_current + increments)
        log_z = state.log_z + log_z_increment
        done = (beta_next >= 1.0) | jnp.isneginf(log_z)  # nothing more to learn once every weight died
        dtype = log_weights.dtype
        log_density_evaluations = jnp.asarray(num_particles * schedule_evaluations + moves.log_density_evaluations,
                                              dtype)
        gradient_evaluations = jnp.asarray(moves.gradient_evaluations, dtype)
        new_state = state._replace(
            log_z=log_z, beta=beta_next, index=state.index + 1, min_ess=jnp.minimum(state.min_ess, ess),
            done=done, status=state.status | status | beta_status,
            log_density_evaluations=state.log_density_evaluations + log_density_evaluations,
            gradient_evaluations=state.gradient_evaluations + gradient_evaluations, **updates,
        )
        parameters = new_state.kernel_states.parameters if isinstance(new_state.kernel_states, KernelState) else ()
        info = SMCInfo(beta_next, ess / num_particles, resampled, updates["acceptance_rate"], log_z_increment,
                       parameters, jnp.int32(moves.num_moves), jnp.asarray(moves.probe_transitions, jnp.int32),
                       log_density_evaluations, gradient_evaluations)
        return new_state, info

    return step


__all__ = ["SMCState", "SMCInfo", "Schedule", "Mutation", "Moves", "initial_state", "build_step"]
