"""A Gaussian mixture with isotropic components and an exact normalizing constant.

    f(x) = Σ_k w_k exp(−|x − μ_k|² / (2 σ_k²)),   x ∈ ℝ^d,   w_k > 0,

so Z = Σ_k w_k (2π σ_k²)^{d/2}. The weights need not sum to one; the normalized
density is the mixture with component probabilities π_k ∝ w_k (2π σ_k²)^{d/2}.
With components far apart (``well_separated``) MCMC cannot cross between modes,
which is what makes the mixture a test of an estimator's weights rather than its
kernel. Densities act on ONE particle x of shape (d,).
"""
import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks
from jaxz.types import Array, PRNGKey


def well_separated(dim: int = 2, separation: float = 10.0, weights=(0.3, 0.7), scales=(1.0, 0.5)):
    """Two components at ∓(separation/2)·e₁: returns (weights (2,), means (2, d), scales (2,))
    as numpy arrays (convert to the dtype you need)."""
    means = np.zeros((2, dim))
    means[0, 0], means[1, 0] = -separation / 2.0, separation / 2.0
    return np.asarray(weights, float), means, np.asarray(scales, float)


def _check(weights, means, scales) -> None:
    """weights (K,), means (K, d), scales (K,): a length-1 array or 1-D means would be
    broadcast into another mixture (1-D means read as one point in d = K dimensions).
    Concrete weights must be finite, >= 0 and not all 0, scales finite and > 0; a traced
    one passes the value checks (its shape is still checked)."""
    if np.ndim(means) != 2 or np.shape(means)[0] < 1:
        raise ValueError(f"means must have shape (K, d) (one row per component), got shape {np.shape(means)}")
    num_components = np.shape(means)[0]
    for name, value in (("weights", weights), ("scales", scales)):
        if np.shape(value) != (num_components,):
            raise ValueError(f"{name} must have shape ({num_components},) (K, as means), got shape {np.shape(value)}")
    _checks.positive("scales", scales)
    if _checks.is_traced(weights):
        return
    weights = np.asarray(weights, np.float64)
    if not np.all(np.isfinite(weights) & (weights >= 0)):
        shown = weights.tolist() if weights.size <= 8 else "an array"
        raise ValueError(f"weights must be finite and >= 0, got {shown}")
    if not np.any(weights > 0):
        raise ValueError("weights must not all be 0 (Z would be 0)")


def _log_component_kernels(x: Array, means: Array, scales: Array) -> Array:
    return -0.5 * jnp.sum((x - means) ** 2, axis=-1) / scales**2


def log_density(x: Array, weights: Array, means: Array, scales: Array) -> Array:
    """log f(x) = log Σ_k w_k exp(−|x − μ_k|² / (2σ_k²)) for one particle x (d,):
    weights (K,), means (K, d), scales (K,) (ValueError otherwise)."""
    _check(weights, means, scales)
    if np.shape(x) != np.shape(means)[1:]:
        raise ValueError(f"x must be one particle of shape (d,) = {np.shape(means)[1:]}, got shape {np.shape(x)}")
    return jax.scipy.special.logsumexp(jnp.log(weights) + _log_component_kernels(x, means, scales))


def _log_component_masses(weights: Array, means: Array, scales: Array) -> Array:
    dim = jnp.shape(means)[-1]
    return jnp.log(weights) + 0.5 * dim * jnp.log(2.0 * jnp.pi * jnp.asarray(scales) ** 2)


def exact_log_z(weights: Array, means: Array, scales: Array) -> Array:
    """log Z = log Σ_k w_k (2π σ_k²)^{d/2}. weights (K,) >= 0, not all 0; means (K, d);
    scales (K,) > 0 (ValueError otherwise; values are checked where concrete)."""
    _check(weights, means, scales)
    return jax.scipy.special.logsumexp(_log_component_masses(weights, means, scales))


def sample(rng_key: PRNGKey, weights: Array, means: Array, scales: Array, shape: tuple = ()) -> Array:
    """Exact draws of the normalized mixture, shape ``shape + (d,)``."""
    _check(weights, means, scales)
    key_component, key_noise = jax.random.split(rng_key)
    means = jnp.asarray(means)
    component = jax.random.categorical(key_component, _log_component_masses(weights, means, scales), shape=shape)
    noise = jax.random.normal(key_noise, tuple(shape) + means.shape[-1:], dtype=means.dtype)
    return means[component] + jnp.asarray(scales, means.dtype)[component][..., None] * noise


__all__ = ["well_separated", "log_density", "exact_log_z", "sample"]
