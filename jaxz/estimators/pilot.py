"""Pilot and replay, shared by ``jaxz.ais(tuning="pilot")`` and ``jaxz.smc(schedule=
"two_pass")``: an estimator whose schedule or kernels adapt to its own particles gives
a biased Ẑ (the adaptation reads the particles the weights are computed on). A pilot
run on independent draws of f_0 fixes what adapts (the β ladder, each stage's kernel
parameters and number of moves); the run proper replays it, so its kernels depend on
its own particles only through their weights, and Ẑ is unbiased again (Del Moral 2004:
unbiasedness holds for kernels and ladders fixed in advance). The pilot's cost is added
to the run's."""
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxz.base import STATUS_MAX_STEPS, Estimator, run
from jaxz.types import Array


class Pilot(NamedTuple):
    trace: Any  # the pilot's Info, one entry per step (padded to max_steps)
    num_steps: Array  # steps the pilot took
    status: Array  # STATUS_MAX_STEPS if it did not finish within max_steps, else 0
    state: Any  # its final state (its cost, its evaluation counts)


def pilot_run(estimator: Estimator, rng_key, sample_base, num_particles: int, *, max_steps=None) -> Pilot:
    """Run ``estimator`` from ``num_particles`` fresh draws of ``sample_base`` (f_0)."""
    key_draws, key_pilot = jax.random.split(rng_key)
    result = run(estimator, key_pilot, sample_base(key_draws, num_particles), max_steps=max_steps)
    status = jnp.where(result.state.done, 0, STATUS_MAX_STEPS).astype(jnp.int32)
    return Pilot(result.trace, result.num_steps, status, result.state)


def padded_ladder(pilot: Pilot, dtype) -> Array:
    """The pilot's β ladder from 0, padded with 1 past its last step (length max_steps + 1)."""
    stages = jnp.arange(pilot.trace.beta.shape[0]) < pilot.num_steps
    return jnp.concatenate([jnp.zeros((1,), dtype), jnp.where(stages, pilot.trace.beta, 1.0)])


__all__ = ["Pilot", "pilot_run", "padded_ladder"]
