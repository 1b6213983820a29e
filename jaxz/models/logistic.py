"""Bayesian multiclass (softmax) logistic regression with a Gaussian prior.

    θ = (W, b),  W (d, K), b (K,),   vec θ ~ N(0, s² I)
    p(y_n = k | x_n, θ) = softmax(x_nᵀ W + b)_k

One particle θ is the (d + 1, K) matrix whose last row is the bias b. There is no
closed-form evidence: this is the realistic target of the tempered estimators.
``data`` is (X (N, d), y (N,) int labels); one ``datum`` is (x (d,), y ()).
"""
import jax
import jax.numpy as jnp

from jaxz.types import Array, PRNGKey


def _logits(theta: Array, inputs: Array) -> Array:
    return inputs @ theta[:-1] + theta[-1]


def log_prior(theta: Array, prior_scale=1.0) -> Array:
    """log N(vec θ; 0, s² I) (normalized)."""
    size = theta.size
    return -0.5 * jnp.sum(theta**2) / prior_scale**2 - size * (0.5 * jnp.log(2.0 * jnp.pi) + jnp.log(prior_scale))


def sample_prior(rng_key: PRNGKey, num_features: int, num_classes: int, shape: tuple = (),
                 prior_scale=1.0, dtype=float) -> Array:
    """Exact prior draws, shape ``shape + (num_features + 1, num_classes)``."""
    return prior_scale * jax.random.normal(rng_key, tuple(shape) + (num_features + 1, num_classes), dtype=dtype)


def log_likelihood(theta: Array, datum) -> Array:
    """log p(y | x, θ) = (xᵀW + b)_y − log Σ_k exp (xᵀW + b)_k for one observation."""
    x, y = datum
    logits = _logits(theta, x)
    return logits[y] - jax.scipy.special.logsumexp(logits)


def total_log_likelihood(theta: Array, data) -> Array:
    """Σ_n log p(y_n | x_n, θ) over ``data = (X, y)``."""
    inputs, labels = data
    logits = _logits(theta, inputs)
    chosen = jnp.take_along_axis(logits, labels[:, None], axis=1)[:, 0]
    return jnp.sum(chosen - jax.scipy.special.logsumexp(logits, axis=1))


def generate(rng_key: PRNGKey, num_data: int, num_features: int, num_classes: int, prior_scale=1.0, dtype=float):
    """Simulate: X standard normal, θ from the prior, labels from the softmax.
    Returns ``((X, y), theta)``."""
    key_x, key_theta, key_y = jax.random.split(rng_key, 3)
    inputs = jax.random.normal(key_x, (num_data, num_features), dtype=dtype)
    theta = sample_prior(key_theta, num_features, num_classes, prior_scale=prior_scale, dtype=dtype)
    labels = jax.random.categorical(key_y, _logits(theta, inputs), axis=1).astype(jnp.int32)
    return (inputs, labels), theta


__all__ = ["log_prior", "sample_prior", "log_likelihood", "total_log_likelihood", "generate"]
