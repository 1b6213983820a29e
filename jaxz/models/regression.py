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
import numpy as np

from jaxz import _checks
from jaxz.types import Array, PRNGKey


def log_prior(theta: Array, prior_scale=1.0) -> Array:
    """log N(θ; 0, τ² I) (normalized)."""
    _checks.positive_scalar("prior_scale", prior_scale)
    dim = theta.shape[-1]
    return -0.5 * jnp.sum(theta**2) / prior_scale**2 - dim * (0.5 * jnp.log(2.0 * jnp.pi) + jnp.log(prior_scale))


def sample_prior(rng_key: PRNGKey, dim: int, shape: tuple = (), prior_scale=1.0, dtype=float) -> Array:
    """Exact prior draws, shape ``shape + (dim,)``."""
    return prior_scale * jax.random.normal(rng_key, tuple(shape) + (dim,), dtype=dtype)


def log_likelihood(theta: Array, datum, noise_scale=1.0) -> Array:
    """log N(y; xᵀθ, σ²) for one observation ``datum = (x, y)``."""
    _checks.positive_scalar("noise_scale", noise_scale)
    x, y = datum
    residual = y - jnp.dot(x, theta)
    return -0.5 * residual**2 / noise_scale**2 - 0.5 * jnp.log(2.0 * jnp.pi) - jnp.log(noise_scale)


def total_log_likelihood(theta: Array, data, noise_scale=1.0) -> Array:
    """Σ_n log N(y_n; x_nᵀθ, σ²) over ``data = (X, y)``."""
    return jnp.sum(jax.vmap(log_likelihood, in_axes=(None, 0, None))(theta, data, noise_scale))


def exact_log_evidence(data, prior_scale=1.0, noise_scale=1.0) -> Array:
    """log p(y | X) = log N(y; 0, σ² I + τ² X Xᵀ), computed in d × d (see module docstring).

    Computed from the QR factorization of the stacked (N + d, d) matrix A = [X; √λ I],
    λ = σ²/τ², never from XᵀX: with AᵀA = λI + XᵀX = RᵀR, log|I + XᵀX/λ| =
    2 Σ log|R_ii| − d log λ, and yᵀy − bᵀ(λI + XᵀX)⁻¹b = min_θ |y − Xθ|² + λ|θ|², evaluated
    at θ* = R⁻¹ Q_Xᵀ y as that sum of squares. The textbook form subtracts two numbers
    of size |y|², which float32 cannot afford at large N; this form is off only by the
    rounding of the result itself. Raises ValueError for scales that are not scalars > 0,
    for data that is not (X (N, d), y (N,)) and for non-finite (concrete) data."""
    inputs, targets = _check_data(data)
    _check_scales(prior_scale, noise_scale)
    _checks.finite("data", data)
    num_data, dim = inputs.shape
    noise_var, prior_var = noise_scale**2, prior_scale**2
    ridge = noise_var / prior_var
    eye = jnp.eye(dim, dtype=inputs.dtype)
    orthogonal, triangular = jnp.linalg.qr(jnp.concatenate([inputs, jnp.sqrt(ridge) * eye]))
    theta = jax.scipy.linalg.solve_triangular(triangular, orthogonal[:num_data].T @ targets, lower=False)
    residual = targets - inputs @ theta
    quadratic = (jnp.sum(residual**2) + ridge * jnp.sum(theta**2)) / noise_var
    # |I + (τ²/σ²) XᵀX| = |λI + XᵀX| / λ^d = Π R_ii² / λ^d
    log_det = 2.0 * jnp.sum(jnp.log(jnp.abs(jnp.diag(triangular)))) - dim * jnp.log(ridge)
    return -0.5 * num_data * jnp.log(2.0 * jnp.pi * noise_var) - 0.5 * log_det - 0.5 * quadratic


def _check_scales(prior_scale, noise_scale) -> None:
    _checks.positive_scalar("prior_scale", prior_scale)
    _checks.positive_scalar("noise_scale", noise_scale)


def _check_data(data) -> tuple[Array, Array]:
    """``data`` as the pair (X (N, d), y (N,)); shapes are static, so this holds under jit."""
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise ValueError(f"data must be (X (N, d), y (N,)), got {type(data).__name__}")
    inputs, targets = data
    if np.ndim(inputs) != 2 or np.shape(targets) != np.shape(inputs)[:1]:
        raise ValueError(f"data must be (X (N, d), y (N,)), got shapes {np.shape(inputs)} and {np.shape(targets)}")
    return inputs, targets


def posterior(data, prior_scale=1.0, noise_scale=1.0) -> tuple[Array, Array]:
    """The exact Gaussian posterior N(m, S): S = (XᵀX/σ² + I/τ²)⁻¹, m = S Xᵀy/σ²."""
    inputs, targets = _check_data(data)
    _check_scales(prior_scale, noise_scale)
    _checks.finite("data", data)
    dim = inputs.shape[1]
    precision = inputs.T @ inputs / noise_scale**2 + jnp.eye(dim, dtype=inputs.dtype) / prior_scale**2
    cov = jnp.linalg.inv(precision)
    return cov @ inputs.T @ targets / noise_scale**2, cov


def generate(rng_key: PRNGKey, num_data: int, dim: int, prior_scale=1.0, noise_scale=1.0, dtype=float):
    """Simulate from the model: X with standard normal entries, θ from the prior, y from
    the likelihood. Returns ``((X, y), theta)``."""
    _check_scales(prior_scale, noise_scale)
    num_data = _checks.integer("num_data", num_data, 1)
    dim = _checks.integer("dim", dim, 1)
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
