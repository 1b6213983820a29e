"""Gaussian targets with exact normalizing constants.

The target is the unnormalized density

    f(x) = exp(log_scale) · exp(−½ (x − μ)ᵀ Σ⁻¹ (x − μ)),   x ∈ ℝ^d,

whose normalizing constant is Z = exp(log_scale) · (2π)^{d/2} |Σ|^{1/2}. Every
log-density acts on ONE particle ``x`` of shape (d,); estimators vmap it. Bind the
parameters with ``functools.partial`` or a lambda.
"""
import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks
from jaxz.types import Array, PRNGKey


def _check_cov_shape(cov) -> int:
    """Σ is (d, d) with d >= 1 (static: holds under jit); returns d."""
    shape = np.shape(cov)
    if len(shape) != 2 or shape[0] != shape[1] or shape[0] < 1:
        raise ValueError(f"cov must be a (d, d) matrix with d >= 1, got shape {shape}")
    return shape[0]


def _cholesky(cov: Array) -> Array:
    return jnp.linalg.cholesky(jnp.asarray(cov))


def log_density(x: Array, mean: Array, cov: Array, log_scale=0.0) -> Array:
    """log f(x) = log_scale − ½ (x − μ)ᵀ Σ⁻¹ (x − μ) (unnormalized)."""
    chol = _cholesky(cov)
    whitened = jax.scipy.linalg.solve_triangular(chol, x - mean, lower=True)
    return log_scale - 0.5 * jnp.sum(whitened**2)


def exact_log_z(cov: Array, log_scale=0.0) -> Array:
    """log Z = log_scale + (d/2) log 2π + ½ log |Σ|. Σ must be (d, d), d >= 1; a concrete
    Σ must be symmetric positive definite (ValueError; its Cholesky factor would be nan)
    and a concrete log_scale finite."""
    _check_cov_shape(cov)
    _checks.positive_definite("cov", cov)
    _checks.finite("log_scale", log_scale)
    chol = _cholesky(cov)
    dim = chol.shape[-1]
    return log_scale + 0.5 * dim * jnp.log(2.0 * jnp.pi) + jnp.sum(jnp.log(jnp.diag(chol)))


def log_normal(x: Array, mean: Array, cov: Array) -> Array:
    """The normalized log N(x; μ, Σ) = log f(x) − log Z with log_scale = 0."""
    return log_density(x, mean, cov) - exact_log_z(cov)


def sample(rng_key: PRNGKey, mean: Array, cov: Array, shape: tuple = ()) -> Array:
    """Exact draws of N(μ, Σ): an array of shape ``shape + (d,)``. ``mean`` (d,), ``cov`` (d, d)
    (ValueError otherwise)."""
    dim = _check_cov_shape(cov)
    if np.shape(mean)[-1:] != (dim,):
        raise ValueError(f"mean must have shape (d,) = ({dim},) to match cov {np.shape(cov)}, got {np.shape(mean)}")
    chol = _cholesky(cov)
    mean = jnp.asarray(mean)
    noise = jax.random.normal(rng_key, tuple(shape) + mean.shape[-1:], dtype=chol.dtype)
    return mean + noise @ chol.T


# Standard normal base: the usual β = 0 end of a geometric path.


def log_standard_normal(x: Array) -> Array:
    """log N(x; 0, I) for one particle x of shape (d,) (normalized)."""
    return -0.5 * jnp.sum(x**2) - 0.5 * x.shape[-1] * jnp.log(2.0 * jnp.pi).astype(x.dtype)


def sample_standard_normal(rng_key: PRNGKey, dim: int, shape: tuple = (), dtype=float) -> Array:
    """Draws of N(0, I_dim), shape ``shape + (dim,)``."""
    return jax.random.normal(rng_key, tuple(shape) + (dim,), dtype=dtype)


__all__ = [
    "log_density",
    "exact_log_z",
    "log_normal",
    "sample",
    "log_standard_normal",
    "sample_standard_normal",
]
