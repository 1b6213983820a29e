"""Bootstrap particle filter (Gordon, Salmond & Smith 1993) with ESS-triggered
resampling and its unbiased likelihood estimate.

For a state-space model x_1 ~ μ, x_t ~ f(· | x_{t−1}), y_t ~ g(· | x_t), step t:

    1. (t > 1) resample the particles when ESS(W_{t−1}) < ``resample_ess``·N,
       resetting W_{t−1} to 1/N;
    2. (t > 1) propagate x_t^i ~ f(· | x_{t−1}^i)   (t = 1: the initial draws);
    3. reweight: log Ẑ_t = log Ẑ_{t−1} + log Σ_i W_{t−1}^i g(y_t | x_t^i),
       W_t^i ∝ W_{t−1}^i g(y_t | x_t^i).

Ẑ_T is an unbiased estimate of p(y_{1:T}) whichever resampling events occur
(Del Moral 2004); log Ẑ_T is biased low by Jensen. One step absorbs one time step
of ``observations`` (a pytree whose leading axis is time).
"""
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import resampling as _resampling
from jaxz import weights as _weights
from jaxz.base import Estimate, Estimator, freeze_when_done
from jaxz.estimators import _genealogy, _particles
from jaxz.types import Array, ArrayTree, PRNGKey


class ParticleFilterState(NamedTuple):
    positions: ArrayTree  # x_t^i, leading axis = particles
    log_weights: Array  # normalized log W_t
    log_z: Array  # log Ẑ_t = log p̂(y_{1:t})
    index: Array  # t: number of observations absorbed
    observations: ArrayTree  # y_{1:T}, leading axis = time
    genealogy: _genealogy.Genealogy  # lagged ancestors, for the variance estimate
    min_ess: Array  # smallest ESS (a count) after any reweighting
    done: Array
    status: Array
    cost: Array


class ParticleFilterInfo(NamedTuple):
    ess: Array  # ESS fraction after reweighting by g(y_t | x_t)
    resampled: Array  # whether step t resampled before propagating
    log_z_increment: Array  # log p̂(y_t | y_{1:t−1})


def _num_time_steps(observations) -> int:
    leaves = jax.tree.leaves(observations)
    if not leaves:
        raise ValueError("observations must be a non-empty pytree of arrays with a leading time axis")
    sizes = {np.shape(leaf)[0] if np.ndim(leaf) > 0 else None for leaf in leaves}
    if None in sizes or len(sizes) != 1:
        raise ValueError(f"observations must have one common leading (time) axis, got leading sizes {sizes}")
    (size,) = sizes
    if size == 0:
        raise ValueError("observations must hold at least one time step, got 0")
    return size


def particle_filter(sample_initial: Callable, sample_transition: Callable, log_observation: Callable,
                    *, resample_ess: float = 0.5, resampling: Callable | str = "multinomial",
                    particle_sharding=None) -> Estimator:
    """Bootstrap particle filter estimating log p(y_{1:T}).

    sample_initial(rng_key) -> x_1, one particle (a pytree).
    sample_transition(rng_key, x) -> x_t given x_{t−1}, one particle. A time-dependent
        model carries its time in the particle (see ``jaxz.models.nlssm``).
    log_observation(x, y) -> log g(y_t | x_t), y one time step of ``observations``.
    resample_ess: resample when ESS < resample_ess · N (1 = every step;
        ``jaxz.resampling.resample_if_needed``).
    resampling: a function of ``jaxz.resampling`` or its name; multinomial (the default)
        is the one scheme with a valid single-run standard error (see ``jaxz.smc``);
        the others report a nan s.e. once they resample.
    particle_sharding: None, or a ``jax.sharding.Sharding`` of the particle axis (e.g.
        ``NamedSharding(jaxz.sharding.mesh(), PartitionSpec("particles"))``) that the
        particles drawn in ``init`` are laid out with; every later step follows it.
    ``init(rng_key, num_particles, observations)``; one step per time step, so
    ``jaxz.run(pf, key, num_particles, observations)`` runs T steps.
    """
    for name, fn in [("sample_initial", sample_initial), ("sample_transition", sample_transition),
                     ("log_observation", log_observation)]:
        if not callable(fn):
            raise ValueError(f"{name} must be callable, got {type(fn).__name__}")
    resample_ess = _particles.check_fraction("resample_ess", resample_ess)
    resampling, genealogy_valid = _particles.resampler(resampling)

    def init(rng_key: PRNGKey, num_particles: int, observations) -> ParticleFilterState:
        num_particles = _particles.check_count("num_particles", num_particles)
        num_time_steps = _num_time_steps(observations)
        positions = jax.vmap(sample_initial)(jax.random.split(rng_key, num_particles))
        positions = _particles.constrain(positions, particle_sharding)
        dtype = _particles.float_dtype(positions)
        first_y = jax.tree.map(lambda leaf: leaf[0], observations)
        _particles.check_scalar_function("log_observation", log_observation, _particles.first_particle(positions),
                                         first_y)
        zero = jnp.zeros((), dtype)
        return ParticleFilterState(
            positions, jnp.full((num_particles,), -jnp.log(num_particles), dtype), zero, jnp.int32(0),
            observations, _genealogy.init(num_particles, _genealogy.default_lag(num_particles), dtype),
            jnp.asarray(num_particles, dtype),
            jnp.bool_(num_time_steps == 0), jnp.int32(0), jnp.asarray(num_particles, dtype),
        )

    @freeze_when_done
    def step(rng_key, state: ParticleFilterState):
        key_resample, key_move = jax.random.split(rng_key)
        num_particles = state.log_weights.shape[0]
        dtype = state.log_weights.dtype
        first = state.index == 0

        # 1. resample when ESS(W_{t−1}) < resample_ess · N (never before the first observation)
        resampled = _resampling.resample_if_needed(key_resample, state.log_weights, resampling, resample_ess,
                                                   allowed=~first)
        positions = _particles.take(state.positions, resampled.ancestors)
        log_weights = resampled.log_weights

        # 2. propagate x_t ~ f(· | x_{t−1}); at t = 1 the initial draws stand
        moved = jax.vmap(sample_transition)(jax.random.split(key_move, num_particles), positions)
        positions = jax.tree.map(lambda old, new: jnp.where(first, old, new), positions, moved)

        # 3. reweight by g(y_t | x_t): log Ẑ_t = log Ẑ_{t−1} + log Σ_i W_{t−1}^i g(y_t | x_t^i)
        y = jax.tree.map(lambda leaf: leaf[state.index], state.observations)
        log_likelihoods, status = _weights.sanitize(
            jax.vmap(log_observation, in_axes=(0, None))(positions, y).astype(dtype)
        )
        unnormalized = log_weights + log_likelihoods
        log_z_increment = _weights.logsumexp(unnormalized)
        log_weights = _weights.normalize(unnormalized)
        ess = _weights.ess(log_weights)
        index = state.index + 1
        num_time_steps = jax.tree.leaves(state.observations)[0].shape[0]
        new_state = ParticleFilterState(
            positions, log_weights, state.log_z + log_z_increment, index, state.observations,
            _genealogy.resample(state.genealogy, state.log_weights, resampled.ancestors, resampled.resampled),
            jnp.minimum(state.min_ess, ess),
            index >= num_time_steps, state.status | status,
            state.cost + jnp.where(first, 0, num_particles).astype(dtype),
        )
        info = ParticleFilterInfo(ess / num_particles, resampled.resampled, log_z_increment)
        return new_state, info

    def finalize(state: ParticleFilterState) -> Estimate:
        return _particles.genealogy_estimate(
            state.log_z, state.log_weights, state.genealogy, genealogy_valid, state.min_ess, state.cost, state.status,
        )

    def num_steps(num_particles, observations) -> int:
        return _num_time_steps(observations)

    return Estimator(init, step, finalize, num_steps)


__all__ = ["ParticleFilterState", "ParticleFilterInfo", "particle_filter"]
