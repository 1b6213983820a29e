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

from jaxz.types import Array, PRNGKey


def well_separated(dim: int = 2, separation: float = 10.0, weights=(0.3, 0.7), scales=(1.0, 0.5)):
    """Two components at ∓(separation/2)·e₁: returns (weights (2,), means (2, d), scales (2,))
    as numpy arrays (convert to the dtype you need)."""
    means = np.zeros((2, dim))
    means[0, 0], means[1, 0] = -separation / 2.0, separation / 2.0
    return np.asarray(weights, float), means, np.asarray(scales, float)


def _log_component_kernels(x: Array, means: Array, scales: Array) -> Array:
    return -0.5 * jnp.sum((x - means) ** 2, axis=-1) / scales**2


def log_density(x: Array, weights: Array, means: Array, scales: Array) -> Array:
    """log f(x) = log Σ_k w_k exp(−|x − μ_k|² / (2σ_k²))."""
    return jax.scipy.special.logsumexp(jnp.log(weights) + _log_component_kernels(x, means, scales))


def _log_component_masses(weights: Array, means: Array, scales: Array) -> Array:
    dim = jnp.shape(means)[-1]
    return jnp.log(weights) + 0.5 * dim * jnp.log(2.0 * jnp.pi * jnp.asarray(scales) ** 2)


def exact_log_z(weights: Array, means: Array, scales: Array) -> Array:
    """log Z = log Σ_k w_k (2π σ_k²)^{d/2}."""
    return jax.scipy.special.logsumexp(_log_component_masses(weights, means, scales))


def sample(rng_key: PRNGKey, weights: Array, means: Array, scales: Array, shape: tuple = ()) -> Array:
    """Exact draws of the normalized mixture, shape ``shape + (d,)``."""
    key_component, key_noise = jax.random.split(rng_key)
    means = jnp.asarray(means)
    component = jax.random.categorical(key_component, _log_component_masses(weights, means, scales), shape=shape)
    noise = jax.random.normal(key_noise, tuple(shape) + means.shape[-1:], dtype=means.dtype)
    return means[component] + jnp.asarray(scales, means.dtype)[component][..., None] * noise


__all__ = ["well_separated", "log_density", "exact_log_z", "sample"]
