"""Bayesian multiclass (softmax) logistic regression with a Gaussian prior.

    θ = (W, b),  W (d, K), b (K,),   vec θ ~ N(0, s² I)
    p(y_n = k | x_n, θ) = softmax(x_nᵀ W + b)_k

One particle θ is the (d + 1, K) matrix whose last row is the bias b. There is no
closed-form evidence: this is the realistic target of the tempered estimators.
``data`` is (X (N, d), y (N,) int labels); one ``datum`` is (x (d,), y ()).
"""
import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks
from jaxz.types import Array, PRNGKey


def _logits(theta: Array, inputs: Array) -> Array:
    return inputs @ theta[:-1] + theta[-1]


def log_prior(theta: Array, prior_scale=1.0) -> Array:
    """log N(vec θ; 0, s² I) (normalized). ``prior_scale``: one s > 0 (ValueError otherwise)."""
    _checks.positive_scalar("prior_scale", prior_scale)
    size = theta.size
    return -0.5 * jnp.sum(theta**2) / prior_scale**2 - size * (0.5 * jnp.log(2.0 * jnp.pi) + jnp.log(prior_scale))


def sample_prior(rng_key: PRNGKey, num_features: int, num_classes: int, shape: tuple = (),
                 prior_scale=1.0, dtype=float) -> Array:
    """Exact prior draws, shape ``shape + (num_features + 1, num_classes)``."""
    return prior_scale * jax.random.normal(rng_key, tuple(shape) + (num_features + 1, num_classes), dtype=dtype)


def _check_labels(labels, num_classes: int) -> None:
    """Concrete labels must be integers in {0, …, K−1}: indexing would wrap −1 to the last
    class and fill 7 (of 3) with nan. Traced labels pass (``_chosen_logits`` gives them −inf)."""
    if _checks.is_traced(labels):
        return
    values = np.asarray(labels)
    expected = f"labels (data[1]) must be integers in [0, {num_classes - 1}] (num_classes = {num_classes})"
    if values.dtype.kind not in "iu":
        raise ValueError(f"{expected}, got dtype {values.dtype}")
    if values.size and (values.min() < 0 or values.max() >= num_classes):
        raise ValueError(f"{expected}, got values from {values.min()} to {values.max()}")


def _chosen_logits(logits: Array, labels: Array) -> Array:
    """logits[..., y] per label; a (traced) label outside {0, …, K−1} has probability 0: −inf."""
    num_classes = logits.shape[-1]
    inside = (labels >= 0) & (labels < num_classes)
    clipped = jnp.clip(labels, 0, num_classes - 1)
    chosen = jnp.take_along_axis(logits, clipped[..., None], axis=-1)[..., 0]
    return jnp.where(inside, chosen, -jnp.inf)


def log_likelihood(theta: Array, datum) -> Array:
    """log p(y | x, θ) = (xᵀW + b)_y − log Σ_k exp (xᵀW + b)_k for one observation."""
    x, y = datum
    _check_labels(y, theta.shape[-1])
    logits = _logits(theta, x)
    return _chosen_logits(logits, y) - jax.scipy.special.logsumexp(logits)


def total_log_likelihood(theta: Array, data) -> Array:
    """Σ_n log p(y_n | x_n, θ) over ``data = (X, y)``; concrete labels must be integers in
    {0, …, K−1} (ValueError), traced ones outside it have probability 0 (−inf)."""
    inputs, labels = data
    _check_labels(labels, theta.shape[-1])
    logits = _logits(theta, inputs)
    return jnp.sum(_chosen_logits(logits, labels) - jax.scipy.special.logsumexp(logits, axis=1))


def generate(rng_key: PRNGKey, num_data: int, num_features: int, num_classes: int, prior_scale=1.0, dtype=float):
    """Simulate: X standard normal, θ from the prior, labels from the softmax.
    Returns ``((X, y), theta)``; ``num_classes`` K >= 2 (a softmax over one class is no
    classification)."""
    num_classes = _checks.integer("num_classes", num_classes, 2, "classes of the softmax")
    key_x, key_theta, key_y = jax.random.split(rng_key, 3)
    inputs = jax.random.normal(key_x, (num_data, num_features), dtype=dtype)
    theta = sample_prior(key_theta, num_features, num_classes, prior_scale=prior_scale, dtype=dtype)
    labels = jax.random.categorical(key_y, _logits(theta, inputs), axis=1).astype(jnp.int32)
    return (inputs, labels), theta


__all__ = ["log_prior", "sample_prior", "log_likelihood", "total_log_likelihood", "generate"]
