"""Finite-state hidden Markov model with an exact (forward-algorithm) log-likelihood.

    x_1 ~ π,   x_t | x_{t−1} ~ A[x_{t−1}, ·],   y_t | x_t ~ g(· | x_t),   x_t ∈ {0, …, K−1}

with Gaussian emissions g(y | k) = N(y; μ_k, σ_k²) or categorical emissions
g(y | k) = B[k, y]. The first state is drawn at the time of the first observation,
the convention of ``jaxz.particle_filter``. The forward algorithm (Rabiner 1989,
eqs. 19-21), in log space,

    α_1(k) = log π_k + log g(y_1 | k),
    α_t(k) = log Σ_j exp(α_{t−1}(j) + log A_{jk}) + log g(y_t | k),
    log p(y_{1:T}) = log Σ_k exp α_T(k),

gives the likelihood exactly in O(T K²). One particle of the bootstrap filter is a
state index (an int32 scalar); ``particle_filter_callables(params)`` returns the
one-particle functions ``jaxz.particle_filter`` takes.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks
from jaxz.types import Array, PRNGKey


class GaussianEmission(NamedTuple):
    means: Array  # μ_k (K,)
    scales: Array  # σ_k (K,), > 0


class CategoricalEmission(NamedTuple):
    log_probs: Array  # log B (K, M): row k is the distribution of y given x = k


class HMM(NamedTuple):
    log_initial: Array  # log π (K,)
    log_transition: Array  # log A (K, K), rows indexed by the previous state
    emission: GaussianEmission | CategoricalEmission


def _check_distribution(name: str, probs: np.ndarray, axis: int = -1) -> None:
    if np.any(~np.isfinite(probs)) or np.any(probs < 0):
        raise ValueError(f"{name} must hold finite probabilities >= 0")
    totals = probs.sum(axis=axis)
    if not np.allclose(totals, 1.0, atol=1e-6):
        raise ValueError(f"{name} must sum to 1 along its last axis, got sums {np.round(totals, 6).tolist()}")


def gaussian_emission(means, scales, dtype=float) -> GaussianEmission:
    """g(y | k) = N(y; μ_k, σ_k²) for scalar observations. ``means``, ``scales``: (K,)."""
    means, scales = np.asarray(means, float), np.asarray(scales, float)
    if means.ndim != 1 or scales.shape != means.shape:
        raise ValueError(f"means and scales must both have shape (K,), got {means.shape} and {scales.shape}")
    if np.any(~np.isfinite(means)) or np.any(~(scales > 0)) or np.any(~np.isfinite(scales)):
        raise ValueError("means must be finite and scales finite and > 0")
    return GaussianEmission(jnp.asarray(means, dtype), jnp.asarray(scales, dtype))


def categorical_emission(probs, dtype=float) -> CategoricalEmission:
    """g(y | k) = B[k, y] for observations y ∈ {0, …, M−1}. ``probs``: (K, M), rows sum to 1."""
    probs = np.asarray(probs, float)
    if probs.ndim != 2:
        raise ValueError(f"probs must have shape (K, M), got {probs.shape}")
    _check_distribution("probs", probs)
    with np.errstate(divide="ignore"):
        return CategoricalEmission(jnp.asarray(np.log(probs), dtype))


def hmm(initial, transition, emission: GaussianEmission | CategoricalEmission, dtype=None) -> HMM:
    """An HMM from probabilities: ``initial`` π (K,), ``transition`` A (K, K) with rows
    summing to 1, and an emission built by ``gaussian_emission`` / ``categorical_emission``.
    The dtype follows the emission's unless given."""
    initial, transition = np.asarray(initial, float), np.asarray(transition, float)
    if initial.ndim != 1 or initial.shape[0] < 1:
        raise ValueError(f"initial must have shape (K,) with K >= 1, got {initial.shape}")
    num_states = initial.shape[0]
    if transition.shape != (num_states, num_states):
        raise ValueError(f"transition must have shape ({num_states}, {num_states}) to match initial, "
                         f"got {transition.shape}")
    _check_distribution("initial", initial)
    _check_distribution("transition", transition)
    if isinstance(emission, GaussianEmission):
        emission_states = emission.means.shape[0]
    elif isinstance(emission, CategoricalEmission):
        emission_states = emission.log_probs.shape[0]
    else:
        raise ValueError(f"emission must be a GaussianEmission or CategoricalEmission, got {type(emission).__name__}")
    if emission_states != num_states:
        raise ValueError(f"emission must describe {num_states} states (as initial), got {emission_states}")
    dtype = jax.tree.leaves(emission)[0].dtype if dtype is None else dtype
    emission = jax.tree.map(lambda leaf: jnp.asarray(leaf, dtype), emission)
    with np.errstate(divide="ignore"):
        return HMM(jnp.asarray(np.log(initial), dtype), jnp.asarray(np.log(transition), dtype), emission)


def three_state(dtype=float) -> HMM:
    """The 3-state model of the calibration benchmark: sticky transitions
    (A_kk = 0.8, 0.1 elsewhere), uniform start, Gaussian emissions with means
    (−2, 0, 2) and sd 1."""
    transition = np.full((3, 3), 0.1) + 0.7 * np.eye(3)
    return hmm(np.full(3, 1.0 / 3.0), transition, gaussian_emission([-2.0, 0.0, 2.0], [1.0, 1.0, 1.0], dtype))


def log_emission(params: HMM, y) -> Array:
    """log g(y | k) for every state k: shape (K,). A categorical y outside {0, …, M−1}
    has probability 0 under the model: −inf (indexing would clamp or wrap it)."""
    emission = params.emission
    if isinstance(emission, GaussianEmission):
        z = (y - emission.means) / emission.scales
        return -0.5 * z**2 - jnp.log(emission.scales) - 0.5 * jnp.log(2.0 * jnp.pi).astype(z.dtype)
    num_values = emission.log_probs.shape[1]
    inside = (y >= 0) & (y < num_values)
    return jnp.where(inside, emission.log_probs[:, jnp.clip(y, 0, num_values - 1)], -jnp.inf)


def _check_one_observation(y) -> None:
    """One y_t is a scalar (both emissions): a (K,) y_t would be broadcast against the
    K states, state k silently scored against y_t[k]. Shapes are static: holds under jit."""
    if np.ndim(y) != 0:
        raise ValueError(f"observations must have shape (T,) (scalar emissions): one time step y_t has shape "
                         f"{np.shape(y)}, expected ()")


def check_observations(params: HMM, observations) -> None:
    """Observations the model can score: shape (T,) (checked also under tracing), a nan
    (Gaussian) would make log p(y) nan, and a categorical value outside {0, …, M−1}
    would be clamped or wrapped by indexing. Traced values pass unchecked."""
    shape = np.shape(observations)
    if len(shape) != 1 or shape[0] < 1:
        raise ValueError(f"observations must have shape (T,) with T >= 1 (scalar emissions), got shape {shape}")
    if _checks.is_traced(observations):
        return
    values = np.asarray(observations)
    emission = params.emission
    if isinstance(emission, GaussianEmission):
        _checks.finite("observations", values)
        return
    num_values = emission.log_probs.shape[1]
    if values.dtype.kind == "f":
        if not np.all(np.isfinite(values)) or np.any(values != np.round(values)):
            raise ValueError(f"observations must be integers in [0, {num_values - 1}] (categorical values)")
    elif values.dtype.kind not in "iu":
        raise ValueError(f"observations must be integers in [0, {num_values - 1}], got dtype {values.dtype}")
    if np.any(values < 0) or np.any(values >= num_values):
        raise ValueError(f"observations must be integers in [0, {num_values - 1}] (categorical values), "
                         f"got values from {values.min()} to {values.max()}")


def sample_initial(rng_key: PRNGKey, params: HMM) -> Array:
    """x_1 ~ π, one particle (int32 state index)."""
    return jax.random.categorical(rng_key, params.log_initial).astype(jnp.int32)


def sample_transition(rng_key: PRNGKey, x: Array, params: HMM) -> Array:
    """x_t ~ A[x_{t−1}, ·], one particle."""
    return jax.random.categorical(rng_key, params.log_transition[x]).astype(jnp.int32)


def log_observation(x: Array, y, params: HMM) -> Array:
    """log g(y_t | x_t) for one scalar y_t (ValueError otherwise, also under tracing)."""
    _check_one_observation(y)
    return log_emission(params, y)[x]


def sample_observation(rng_key: PRNGKey, x: Array, params: HMM) -> Array:
    """y_t ~ g(· | x_t)."""
    emission = params.emission
    if isinstance(emission, GaussianEmission):
        noise = jax.random.normal(rng_key, (), dtype=emission.means.dtype)
        return emission.means[x] + emission.scales[x] * noise
    return jax.random.categorical(rng_key, emission.log_probs[x]).astype(jnp.int32)


def particle_filter_callables(params: HMM):
    """(sample_initial(key), sample_transition(key, x), log_observation(x, y)) bound to ``params``."""
    return (
        lambda rng_key: sample_initial(rng_key, params),
        lambda rng_key, x: sample_transition(rng_key, x, params),
        lambda x, y: log_observation(x, y, params),
    )


def simulate(rng_key: PRNGKey, params: HMM, num_steps: int) -> tuple[Array, Array]:
    """Draw (x_{1:T}, y_{1:T}), each with leading axis time (``lax.scan``)."""
    key_init, key_scan = jax.random.split(rng_key)

    def body(x, key):
        key_observation, key_transition = jax.random.split(key)
        y = sample_observation(key_observation, x, params)
        return sample_transition(key_transition, x, params), (x, y)

    _, (states, observations) = jax.lax.scan(
        body, sample_initial(key_init, params), jax.random.split(key_scan, num_steps)
    )
    return states, observations


def _at_least_float32(array):
    array = jnp.asarray(array)
    if jnp.issubdtype(array.dtype, jnp.floating) and jnp.finfo(array.dtype).bits < 32:
        return array.astype(jnp.float32)
    return array


def exact_log_likelihood(params: HMM, observations) -> Array:
    """log p(y_{1:T}) by the forward algorithm in log space (module docstring; ``lax.scan``).

    The carry is the normalized filter log p(x_t | y_{1:t}) and the running log-likelihood,
    so nothing under- or overflows however long the series. Observations must have shape
    (T,) (ValueError, also under jit); concrete ones are checked too: finite for Gaussian
    emissions, integers in {0, …, M−1} for categorical ones. A half-precision model or
    series is computed (and returned) in float32: float16 sums of T increments lose nats."""
    check_observations(params, observations)
    params, observations = jax.tree.map(_at_least_float32, (params, observations))
    log_transition = params.log_transition

    def update(log_predicted, y):
        joint = log_predicted + log_emission(params, y)  # log p(x_t, y_t | y_{1:t−1})
        log_increment = jax.nn.logsumexp(joint)  # log p(y_t | y_{1:t−1})
        return joint - log_increment, log_increment

    first = jax.tree.map(lambda leaf: leaf[0], observations)
    rest = jax.tree.map(lambda leaf: leaf[1:], observations)
    log_filter, log_likelihood = update(params.log_initial, first)

    def body(carry, y):
        log_filter, log_likelihood = carry
        # α_t = log Σ_j exp(α_{t−1}(j) + log A_{jk}) + log g(y_t | k), normalized
        log_predicted = jax.nn.logsumexp(log_filter[:, None] + log_transition, axis=0)
        log_filter, log_increment = update(log_predicted, y)
        return (log_filter, log_likelihood + log_increment), None

    (_, log_likelihood), _ = jax.lax.scan(body, (log_filter, log_likelihood), rest)
    return log_likelihood


exact_log_z = exact_log_likelihood

__all__ = [
    "HMM",
    "GaussianEmission",
    "CategoricalEmission",
    "hmm",
    "gaussian_emission",
    "categorical_emission",
    "three_state",
    "log_emission",
    "sample_initial",
    "sample_transition",
    "log_observation",
    "sample_observation",
    "particle_filter_callables",
    "simulate",
    "exact_log_likelihood",
    "exact_log_z",
]
