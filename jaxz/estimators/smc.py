"""Tempered sequential Monte Carlo (resample-move; Chopin 2002, Del Moral, Doucet &
Jasra 2006) with a fixed or an adaptive schedule.

Each step goes from β_t to β_{t+1}: reweight by f_{β_{t+1}}/f_{β_t}, accumulate
log Ẑ, resample only when ESS < ``resample_ess``·N, then move every particle with
the kernel at β_{t+1}. Between resampling events the weights are carried, so
Ẑ = Z_0 ∏_t Σ_i W_t^i w_{t+1}^i is unbiased for Z_1 whichever events occur.
"""
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxz import resampling as _resampling
from jaxz import weights as _weights
from jaxz.base import Estimate, Estimator, freeze_when_done
from jaxz.estimators import _particles
from jaxz.kernels.base import Kernel, KernelState
from jaxz.paths import Path
from jaxz.schedules import next_temperature, validate
from jaxz.types import Array


class SMCState(NamedTuple):
    kernel_states: KernelState
    log_weights: Array  # normalized log W_t
    log_z: Array  # log Ẑ_t accumulated so far (including log Z_0)
    beta: Array
    index: Array  # number of steps taken
    eve: Array  # ancestor at time 0 of each particle (for the variance estimate)
    num_resampling: Array
    done: Array
    status: Array
    cost: Array


class SMCInfo(NamedTuple):
    beta: Array
    ess: Array  # ESS fraction after reweighting, before resampling
    resampled: Array
    acceptance_rate: Array
    log_z_increment: Array


def smc(
    path: Path,
    kernel: Kernel,
    *,
    betas=None,
    target_ess: float = 0.5,
    resample_ess: float = 0.5,
    num_mcmc_steps: int = 1,
    resampling: Callable | str = _resampling.systematic,
) -> Estimator:
    """Tempered SMC from f_0 (``positions`` passed to ``init`` are exact draws) to f_1.

    betas: a fixed schedule from 0 to 1, or None for an adaptive one that picks each
        β_{t+1} by bisection so the conditional ESS is ``target_ess`` (Zhou et al. 2016).
    resample_ess: resample when ESS / N falls below it.
    num_mcmc_steps: kernel applications per particle per step.
    resampling: a function of ``jaxz.resampling`` or its name.
    With an adaptive schedule, drive it with ``jaxz.run(..., max_steps=...)``.
    """
    target_ess = _particles.check_fraction("target_ess", target_ess)
    resample_ess = _particles.check_fraction("resample_ess", resample_ess)
    if int(num_mcmc_steps) < 1:
        raise ValueError(f"num_mcmc_steps must be >= 1, got {num_mcmc_steps}")
    if isinstance(resampling, str):
        if resampling not in _resampling.SCHEMES:
            raise ValueError(f"resampling must be one of {sorted(_resampling.SCHEMES)}, got {resampling!r}")
        resampling = _resampling.SCHEMES[resampling]
    schedule = None if betas is None else validate(betas)
    num_steps = None if schedule is None else schedule.shape[0] - 1

    def init(rng_key, positions) -> SMCState:
        num_particles = _particles.num_particles_of(positions)
        dtype = _particles.float_dtype(positions)
        zero = jnp.zeros((), dtype)
        return SMCState(
            _particles.kernel_init(kernel, positions, zero),
            jnp.full((num_particles,), -jnp.log(num_particles), dtype),
            jnp.asarray(path.log_z0, dtype), zero, jnp.int32(0), jnp.arange(num_particles, dtype=jnp.int32),
            jnp.int32(0), jnp.bool_(False), jnp.int32(0), zero,
        )

    @freeze_when_done
    def step(rng_key, state: SMCState):
        key_resample, key_move = jax.random.split(rng_key)
        positions = state.kernel_states.position
        num_particles = state.log_weights.shape[0]
        dtype = state.log_weights.dtype
        if schedule is None:
            def log_increment_fn(beta_new):
                return _particles.incremental_log_weights(path, positions, state.beta, beta_new)[0]

            beta_next = next_temperature(state.log_weights, log_increment_fn, state.beta, target_ess)
        else:
            beta_next = jnp.asarray(schedule, dtype)[state.index + 1]

        # Reweight: log Ẑ_{t+1} = log Ẑ_t + log Σ_i W_t^i w_{t+1}^i
        increments, status = _particles.incremental_log_weights(path, positions, state.beta, beta_next)
        unnormalized = state.log_weights + increments
        log_z_increment = _weights.logsumexp(unnormalized)
        log_weights = _weights.normalize(unnormalized)
        ess_fraction = _weights.ess(log_weights) / num_particles

        # Resample only when the ESS is low: fewer resampling events, less variance.
        resample = ess_fraction < resample_ess
        ancestors = jnp.where(
            resample, resampling(key_resample, log_weights), jnp.arange(num_particles, dtype=jnp.int32)
        )
        kernel_states = _particles.take(state.kernel_states, ancestors)
        log_weights = jnp.where(resample, -jnp.log(jnp.asarray(num_particles, dtype)), log_weights)

        # Move: num_mcmc_steps kernel applications invariant for f_{β_{t+1}}
        kernel_states, acceptance = _particles.kernel_step(
            kernel, key_move, kernel_states, beta_next, int(num_mcmc_steps)
        )
        log_z = state.log_z + log_z_increment
        done = (beta_next >= 1.0) | jnp.isneginf(log_z)  # nothing more to learn once every weight died
        new_state = SMCState(
            kernel_states, log_weights, log_z, beta_next, state.index + 1,
            state.eve[ancestors], state.num_resampling + resample, done, state.status | status,
            state.cost + num_particles * int(num_mcmc_steps) * kernel.num_transitions,
        )
        return new_state, SMCInfo(beta_next, ess_fraction, resample, acceptance, log_z_increment)

    def finalize(state: SMCState) -> Estimate:
        stderr = _particles.eve_log_z_stderr(state.log_weights, state.eve, state.num_resampling)
        return _particles.make_estimate(state.log_z, stderr, state.cost, state.status)

    return Estimator(init, step, finalize, num_steps)
