"""Tempered sequential Monte Carlo (resample-move; Chopin 2002, Del Moral, Doucet &
Jasra 2006) with a fixed, an adaptive or a two-pass schedule.

Each step goes from β_t to β_{t+1}: reweight by f_{β_{t+1}}/f_{β_t}, accumulate
log Ẑ, resample only when ESS < ``resample_ess``·N, then move every particle with
the kernel at β_{t+1}. Between resampling events the weights are carried, so for a
schedule fixed in advance

    Ẑ = Z_0 ∏_t Σ_i W_t^i w_{t+1}^i

is unbiased for Z_1 whichever resampling events occur (Del Moral 2004).

An adaptive schedule (each β_{t+1} chosen from the current particles so that the
conditional ESS is ``target_ess``; Zhou, Johansen & Aston 2016) makes the targets
depend on the particles, and Ẑ is then only consistent: it is biased low by O(1/N)
beyond the Jensen gap of log Ẑ (measured with exact draws on a Gaussian: E[Ẑ/Z] =
0.85 / 0.96 / 0.99 at N = 50 / 200 / 800; Beskos, Jasra, Kantas & Thiery 2016 give the
limit theory). ``schedule="two_pass"`` restores unbiasedness: a pilot adaptive run on
independent base draws fixes the schedule, and the estimate comes from a fresh run on
that fixed schedule (pilot cost included in ``Estimate.cost``).
"""
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxz import weights as _weights
from jaxz.base import STATUS_MAX_STEPS, Estimate, Estimator, freeze_when_done, run
from jaxz.estimators import _particles
from jaxz.kernels.base import Kernel, KernelState
from jaxz.paths import Path
from jaxz.schedules import next_temperature, validate
from jaxz.types import Array

SCHEDULES = ("adaptive", "two_pass")


class SMCState(NamedTuple):
    kernel_states: KernelState
    log_weights: Array  # normalized log W_t
    log_z: Array  # log Ẑ_t accumulated so far (including log Z_0)
    beta: Array
    index: Array  # number of steps taken
    eve: Array  # ancestor at time 0 of each particle (for the variance estimate)
    num_resampling: Array
    min_ess: Array  # smallest ESS (a count) after any reweighting so far
    schedule: Any  # two-pass: the pilot's schedule (padded with 1); otherwise ()
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
    resampling: Callable | str = "multinomial",
    schedule: str = "adaptive",
    max_stages: int = 1000,
) -> Estimator:
    """Tempered SMC from f_0 (``positions`` passed to ``init`` are exact draws) to f_1.

    betas: a fixed schedule from 0 to 1 (Ẑ unbiased), or None for an adaptive one that
        picks each β_{t+1} by bisection so the conditional ESS is ``target_ess``.
    schedule: with ``betas=None``, "adaptive" (one pass; Ẑ biased low by O(1/N)) or
        "two_pass" (a pilot adaptive run on fresh draws of ``path.sample_base`` fixes the
        schedule, then the run proper uses it: Ẑ unbiased, about twice the cost).
    max_stages: cap on the pilot's number of stages (two-pass only).
    resample_ess: resample when ESS / N falls below it.
    num_mcmc_steps: kernel applications per particle per step.
    resampling: a function of ``jaxz.resampling`` or its name. The default, multinomial,
        is the one scheme with a valid single-run standard error (the genealogy estimator
        of Lee & Whiteley 2018, with the adaptive-resampling count of Du & Guyader 2021);
        systematic / stratified / residual have lower variance but report a nan s.e.
        once they resample (use ``jaxz.combine_runs`` over vmapped runs).
    target_ess and betas may be traced (built inside ``jit``/``vmap`` to sweep over
    them); they are then checked for shape only.
    With an adaptive or two-pass schedule, drive it with ``jaxz.run(..., max_steps=...)``.
    ``Estimate.status`` gets STATUS_LOW_ESS when a reweighting left fewer than 2
    effective particles or every particle descends from one initial draw, and
    STATUS_PRECISION_LOSS when the log densities are too large for their differences
    to be resolved in the working dtype.
    """
    _particles.check_path(path)
    target_ess = _particles.check_fraction("target_ess", target_ess)
    resample_ess = _particles.check_fraction("resample_ess", resample_ess)
    num_mcmc_steps = _particles.check_count("num_mcmc_steps", num_mcmc_steps)
    resampling, genealogy_valid = _particles.resampler(resampling)
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    fixed = None if betas is None else validate(betas)
    if fixed is not None and schedule != "adaptive":
        raise ValueError(f"schedule={schedule!r} needs betas=None (it builds the schedule), got a fixed betas")
    two_pass = fixed is None and schedule == "two_pass"
    if two_pass:
        if path.sample_base is None:
            raise ValueError("schedule='two_pass' needs path.sample_base: the pilot run draws its own base particles")
        max_stages = _particles.check_count("max_stages", max_stages)
    num_steps = None if fixed is None else fixed.shape[0] - 1

    def initial_state(positions, schedule_buffer) -> SMCState:
        num_particles = _particles.num_particles_of(positions)
        dtype = _particles.float_dtype(positions)
        _particles.check_scalar_function("path.log_density", path.log_density,
                                         _particles.first_particle(positions), jnp.zeros((), dtype))
        zero = jnp.zeros((), dtype)
        return SMCState(
            _particles.kernel_init(kernel, positions, zero),
            jnp.full((num_particles,), -jnp.log(num_particles), dtype),
            jnp.asarray(path.log_z0, dtype), zero, jnp.int32(0), jnp.arange(num_particles, dtype=jnp.int32),
            jnp.int32(0), jnp.asarray(num_particles, dtype), schedule_buffer, jnp.bool_(False), jnp.int32(0), zero,
        )

    def make_step(choose_beta):
        @freeze_when_done
        def step(rng_key, state: SMCState):
            key_resample, key_move = jax.random.split(rng_key)
            positions = state.kernel_states.position
            num_particles = state.log_weights.shape[0]
            dtype = state.log_weights.dtype
            beta_next, beta_status = choose_beta(state, positions)

            # Reweight: log Ẑ_{t+1} = log Ẑ_t + log Σ_i W_t^i w_{t+1}^i
            increments, status = _particles.incremental_log_weights(path, positions, state.beta, beta_next)
            unnormalized = state.log_weights + increments
            log_z_increment = _weights.logsumexp(unnormalized)
            log_weights = _weights.normalize(unnormalized)
            ess = _weights.ess(log_weights)

            # Resample only when the ESS is low: fewer resampling events, less variance.
            resample = ess < resample_ess * num_particles
            ancestors = jnp.where(
                resample, resampling(key_resample, log_weights), jnp.arange(num_particles, dtype=jnp.int32)
            )
            kernel_states = _particles.take(state.kernel_states, ancestors)
            log_weights = jnp.where(resample, -jnp.log(jnp.asarray(num_particles, dtype)), log_weights)

            # Move: num_mcmc_steps kernel applications invariant for f_{β_{t+1}}
            kernel_states, acceptance = _particles.kernel_step(kernel, key_move, kernel_states, beta_next, num_mcmc_steps)
            log_z = state.log_z + log_z_increment
            done = (beta_next >= 1.0) | jnp.isneginf(log_z)  # nothing more to learn once every weight died
            new_state = state._replace(
                kernel_states=kernel_states, log_weights=log_weights, log_z=log_z, beta=beta_next,
                index=state.index + 1, eve=state.eve[ancestors], num_resampling=state.num_resampling + resample,
                min_ess=jnp.minimum(state.min_ess, ess), done=done, status=state.status | status | beta_status,
                cost=state.cost + num_particles * num_mcmc_steps * kernel.num_transitions,
            )
            return new_state, SMCInfo(beta_next, ess / num_particles, resample, acceptance, log_z_increment)

        return step

    def adaptive_beta(state, positions):
        def log_increment_fn(beta_new):
            return _particles.incremental_log_weights(path, positions, state.beta, beta_new)[0]

        return next_temperature(state.log_weights, log_increment_fn, state.beta, target_ess, return_status=True)

    def scheduled_beta(state, positions):
        ladder = fixed if fixed is not None else state.schedule
        return jnp.asarray(ladder, state.log_weights.dtype)[state.index + 1], jnp.int32(0)

    adaptive_step = make_step(adaptive_beta)
    step = adaptive_step if fixed is None and not two_pass else make_step(scheduled_beta)

    def init(rng_key, positions) -> SMCState:
        if not two_pass:
            return initial_state(positions, ())
        # Pass 1: an adaptive pilot on independent base draws fixes the schedule.
        num_particles = _particles.num_particles_of(positions)
        key_draws, key_pilot = jax.random.split(rng_key)
        pilot_positions = path.sample_base(key_draws, num_particles)
        pilot = Estimator(lambda key, x: initial_state(x, ()), adaptive_step, finalize)
        result = run(pilot, key_pilot, pilot_positions, max_steps=max_stages)
        dtype = result.state.log_weights.dtype
        stages = jnp.arange(max_stages) < result.num_steps
        ladder = jnp.concatenate([jnp.zeros((1,), dtype), jnp.where(stages, result.trace.beta, 1.0)])
        state = initial_state(positions, ladder)
        pilot_status = jnp.where(result.state.done, 0, STATUS_MAX_STEPS).astype(jnp.int32)
        return state._replace(cost=state.cost + result.state.cost, status=state.status | pilot_status)

    def finalize(state: SMCState) -> Estimate:
        final_ess = _weights.ess(state.log_weights)
        return _particles.particle_estimate(
            state.log_z, state.log_weights, state.eve, state.num_resampling, genealogy_valid,
            jnp.minimum(state.min_ess, final_ess), state.cost, state.status,
        )

    return Estimator(init, step, finalize, num_steps)


__all__ = ["smc", "SMCState", "SMCInfo", "SCHEDULES"]
