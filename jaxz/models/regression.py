"""Bayesian linear regression with a conjugate prior: exact log evidence.

    θ ~ N(0, τ² I_d),    y_n | x_n, θ ~ N(x_nᵀ θ, σ²),   n = 1..N,

with τ = ``prior_scale`` and σ = ``noise_scale`` known. Marginally
y ~ N(0, σ² I_N + τ² X Xᵀ), so the evidence is exact. By the determinant lemma
and Woodbury it costs only d × d algebra:

    log p(y) = −N/2 log 2πσ² − ½ log|I_d + (τ²/σ²) XᵀX|
               − (1/2σ²) (yᵀy − bᵀ (σ²/τ² I_d + XᵀX)⁻¹ b),    b = Xᵀy.

``data`` is the pair (X (N, d), y (N,)); one observation ``datum`` is (x (d,), y ()).
``log_likelihood(theta, datum)`` is per observation, the form the streaming
estimators (SGAIS) take; ``total_log_likelihood(theta, data)`` sums it.
"""
import jax
import jax.numpy as jnp

from jaxz.types import Array, PRNGKey


def log_prior(theta: Array, prior_scale=1.0) -> Array:
    """log N(θ; 0, τ² I) (normalized)."""
    dim = theta.shape[-1]
    return -0.5 * jnp.sum(theta**2) / prior_scale**2 - dim * (0.5 * jnp.log(2.0 * jnp.pi) + jnp.log(prior_scale))


def sample_prior(rng_key: PRNGKey, dim: int, shape: tuple = (), prior_scale=1.0, dtype=float) -> Array:
    """Exact prior draws, shape ``shape + (dim,)``."""
    return prior_scale * jax.random.normal(rng_key, tuple(shape) + (dim,), dtype=dtype)


def log_likelihood(theta: Array, datum, noise_scale=1.0) -> Array:
    """log N(y; xᵀθ, σ²) for one observation ``datum = (x, y)``."""
    x, y = datum
    residual = y - jnp.dot(x, theta)
    return -0.5 * residual**2 / noise_scale**2 - 0.5 * jnp.log(2.0 * jnp.pi) - jnp.log(noise_scale)


def total_log_likelihood(theta: Array, data, noise_scale=1.0) -> Array:
    """Σ_n log N(y_n; x_nᵀθ, σ²) over ``data = (X, y)``."""
    return jnp.sum(jax.vmap(log_likelihood, in_axes=(None, 0, None))(theta, data, noise_scale))


def exact_log_evidence(data, prior_scale=1.0, noise_scale=1.0) -> Array:
    """log p(y | X) = log N(y; 0, σ² I + τ² X Xᵀ), computed in d × d (see module docstring)."""
    inputs, targets = data
    num_data, dim = inputs.shape
    noise_var, prior_var = noise_scale**2, prior_scale**2
    gram = inputs.T @ inputs
    eye = jnp.eye(dim, dtype=inputs.dtype)
    chol = jnp.linalg.cholesky(noise_var / prior_var * eye + gram)
    projected = jax.scipy.linalg.solve_triangular(chol, inputs.T @ targets, lower=True)
    quadratic = (jnp.sum(targets**2) - jnp.sum(projected**2)) / noise_var
    # |I + (τ²/σ²) XᵀX| = |σ²/τ² I + XᵀX| · (τ²/σ²)^d
    log_det = 2.0 * jnp.sum(jnp.log(jnp.diag(chol))) + dim * jnp.log(prior_var / noise_var)
    return -0.5 * num_data * jnp.log(2.0 * jnp.pi * noise_var) - 0.5 * log_det - 0.5 * quadratic


def posterior(data, prior_scale=1.0, noise_scale=1.0) -> tuple[Array, Array]:
    """The exact Gaussian posterior N(m, S): S = (XᵀX/σ² + I/τ²)⁻¹, m = S Xᵀy/σ²."""
    inputs, targets = data
    dim = inputs.shape[1]
    precision = inputs.T @ inputs / noise_scale**2 + jnp.eye(dim, dtype=inputs.dtype) / prior_scale**2
    cov = jnp.linalg.inv(precision)
    return cov @ inputs.T @ targets / noise_scale**2, cov


def generate(rng_key: PRNGKey, num_data: int, dim: int, prior_scale=1.0, noise_scale=1.0, dtype=float):
    """Simulate from the model: X with standard normal entries, θ from the prior, y from
    the likelihood. Returns ``((X, y), theta)``."""
    key_x, key_theta, key_noise = jax.random.split(rng_key, 3)
    inputs = jax.random.normal(key_x, (num_data, dim), dtype=dtype)
    theta = sample_prior(key_theta, dim, prior_scale=prior_scale, dtype=dtype)
    targets = inputs @ theta + noise_scale * jax.random.normal(key_noise, (num_data,), dtype=dtype)
    return (inputs, targets), theta


__all__ = [
    "log_prior",
    "sample_prior",
    "log_likelihood",
    "total_log_likelihood",
    "exact_log_evidence",
    "posterior",
    "generate",
]
