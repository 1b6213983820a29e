"""Annealed importance sampling (Neal 2001) and its reverse, RAISE (Burda, Grosse &
Salakhutdinov 2015).

AIS moves particles from f_0 to f_1 along a fixed schedule β_0 = 0 < ... < β_K = 1.
Each step t multiplies a particle's weight by f_{β_t}(x)/f_{β_{t−1}}(x) and then moves
it with a kernel leaving f_{β_t} invariant. E[w] = Z_1/Z_0, so Ẑ = Z_0 · mean(w) is
unbiased and log Ẑ is, on average, an underestimate (Jensen).

RAISE runs the same chain down the ladder from (approximate) draws of f_1: E[w] =
Z_0/Z_1, so Ẑ = Z_0 / mean(w) and log Ẑ is a stochastic upper bound when the start
is exact; the two sandwich log Z.
"""
from typing import NamedTuple

import jax.numpy as jnp

from jaxz import weights as _weights
from jaxz.base import Estimate, Estimator, freeze_when_done
from jaxz.estimators import _particles
from jaxz.kernels.base import Kernel, KernelState
from jaxz.paths import Path
from jaxz.schedules import validate
from jaxz.types import Array


class AISState(NamedTuple):
    kernel_states: KernelState  # one per particle, leading axis = particles
    log_weights: Array  # (num_particles,) accumulated log importance weights
    index: Array  # current position on the ladder (0 .. K)
    done: Array
    status: Array
    cost: Array


class AISInfo(NamedTuple):
    beta: Array
    ess: Array
    acceptance_rate: Array


def _annealer(path: Path, kernel: Kernel, betas, *, reverse: bool) -> Estimator:
    _particles.check_path(path)
    betas = validate(betas)
    ladder = betas[::-1] if reverse else betas
    num_steps = ladder.shape[0] - 1

    def init(rng_key, positions) -> AISState:
        num_particles = _particles.num_particles_of(positions)
        dtype = _particles.float_dtype(positions)
        _particles.check_scalar_function("path.log_density", path.log_density,
                                         _particles.first_particle(positions), jnp.zeros((), dtype))
        states = _particles.kernel_init(kernel, positions, jnp.asarray(ladder[0], dtype))
        return AISState(
            states, jnp.zeros((num_particles,), dtype), jnp.int32(0), jnp.bool_(num_steps == 0),
            jnp.int32(0), jnp.zeros((), dtype),
        )

    @freeze_when_done
    def step(rng_key, state: AISState):
        dtype = state.log_weights.dtype
        schedule = jnp.asarray(ladder, dtype)
        beta_from, beta_to = schedule[state.index], schedule[state.index + 1]
        # Neal (2001), eq. (3): w ← w · f_{β_t}(x_{t−1}) / f_{β_{t−1}}(x_{t−1})
        increments, status = _particles.incremental_log_weights(
            path, state.kernel_states.position, beta_from, beta_to
        )
        log_weights = state.log_weights + increments
        # then x_t ~ T_t(x_{t−1}, ·), invariant for f_{β_t}
        states, acceptance = _particles.kernel_step(kernel, rng_key, state.kernel_states, beta_to)
        num_particles = log_weights.shape[0]
        index = state.index + 1
        new_state = AISState(
            states, log_weights, index, index >= num_steps, state.status | status,
            state.cost + num_particles * kernel.num_transitions,
        )
        return new_state, AISInfo(beta_to, _weights.ess(log_weights), acceptance)

    def finalize(state: AISState) -> Estimate:
        log_mean_w = _weights.log_mean_exp(state.log_weights)
        log_z0 = jnp.asarray(path.log_z0, state.log_weights.dtype)
        if reverse:  # E[w] = Z_0 / Z_1
            log_z = jnp.where(jnp.isneginf(log_mean_w), -jnp.inf, log_z0 - log_mean_w)
        else:  # E[w] = Z_1 / Z_0
            log_z = log_z0 + log_mean_w
        stderr = _particles.importance_stderr(state.log_weights)
        status = _particles.low_ess_status(state.log_weights, state.status)
        return _particles.make_estimate(log_z, stderr, state.cost, status)

    return Estimator(init, step, finalize, num_steps)


def ais(path: Path, kernel: Kernel, betas) -> Estimator:
    """Annealed importance sampling along ``betas`` (increasing from 0 to 1).

    ``init(rng_key, positions)`` takes exact draws of f_0 (leading axis = particles).
    One step = one rung: reweight, then one kernel application per particle.
    ``finalize`` gives log Ẑ = log Z_0 + log mean(w) with a delta-method standard error,
    calibrated while the weights' ESS is a fair fraction of N; a run whose final ESS is
    below 2 particles is flagged STATUS_LOW_ESS (its s.e. then sees one weight and is
    meaningless). ``betas`` may be traced (a vmapped sweep over schedules).
    """
    return _annealer(path, kernel, betas, reverse=False)


def raise_(path: Path, kernel: Kernel, betas) -> Estimator:
    """Reverse AIS (RAISE): the chain of ``ais`` run from β = 1 down to β = 0.

    ``betas`` is given increasing, as for ``ais``. ``init(rng_key, positions)`` takes
    draws of (or chains seeded near) f_1 — exact draws, or data-seeded states for
    models like RBMs. log Ẑ = log Z_0 − log mean(w) is a stochastic upper bound on
    log Z when the start is exact.
    """
    return _annealer(path, kernel, betas, reverse=True)
