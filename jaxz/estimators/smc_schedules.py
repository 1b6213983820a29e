"""Schedule parts of the SMC engine (``smc_engine.Schedule``): which β comes next.

- ``fixed(betas)``: a ladder given in advance (Ẑ unbiased: Del Moral 2004).
- ``adaptive(path, target_ess)``: β_{t+1} chosen from the particles so that the
  conditional ESS of the reweighting is ``target_ess`` (Zhou, Johansen & Aston 2016,
  eq. 3.5; ``jaxz.schedules.next_temperature``). The targets then depend on the
  particles and Ẑ is consistent but biased low by O(1/N) (Beskos, Jasra, Kantas &
  Thiery 2016).
- ``replayed()``: the ladder, kernel parameters and moves of a pilot run, held in
  ``SMCState.schedule`` (see ``jaxz.estimators.pilot``): the run proper depends on its
  particles only through its weights, so Ẑ is unbiased again.
"""
import jax.numpy as jnp

from jaxz.estimators import _particles
from jaxz.estimators.smc_engine import Schedule
from jaxz.schedules import bisection_iterations, next_temperature

# log f evaluations per particle and stage besides the bisection's: f at β_t, at β' = 1,
# twice at the chosen β_{t+1} (its status check and the reweighting), the reweighting
ADAPTIVE_FIXED_EVALUATIONS = 5.0
# with a ladder given (or read off an affine path: f_0 and f_1): f at β_t and at β_{t+1}
LADDER_EVALUATIONS = 2.0


def fixed(betas) -> Schedule:
    """The ladder ``betas`` (validated: increasing from 0 to 1)."""

    def next_beta(state, log_current, read):
        return jnp.asarray(betas, state.log_weights.dtype)[state.index + 1], jnp.int32(0), LADDER_EVALUATIONS

    return Schedule(next_beta, replay=False, num_steps=betas.shape[0] - 1)


def adaptive(path, target_ess, batch_size=None) -> Schedule:
    """β_{t+1} by bisection so that the conditional ESS is ``target_ess`` (a fraction)."""
    affine = bool(getattr(path, "affine", False))

    def next_beta(state, log_current, read):
        positions = state.kernel_states.position

        def log_increment_fn(beta_new):
            return _particles.incremental_log_weights(path, positions, state.beta, beta_new, batch_size,
                                                      log_current, read)[0]

        beta_next, status = next_temperature(state.log_weights, log_increment_fn, state.beta, target_ess,
                                             return_status=True)
        if affine:  # every trial β read off the line between f_0 and f_1
            return beta_next, status, LADDER_EVALUATIONS
        dtype = state.log_weights.dtype
        return beta_next, status, bisection_iterations(state.beta, dtype) + ADAPTIVE_FIXED_EVALUATIONS

    return Schedule(next_beta, replay=False, num_steps=None)


def replayed() -> Schedule:
    """The pilot's ladder (``state.schedule[0]``, padded with 1 past its last stage)."""

    def next_beta(state, log_current, read):
        ladder = state.schedule[0]
        return jnp.asarray(ladder, state.log_weights.dtype)[state.index + 1], jnp.int32(0), LADDER_EVALUATIONS

    return Schedule(next_beta, replay=True, num_steps=None)


__all__ = ["fixed", "adaptive", "replayed"]
