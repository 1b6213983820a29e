"""The three streaming-data models of the SGAIS paper (Cameron, Eggers & Kroon 2019, §6),
with their data generators. Likelihoods are per observation, ``log_likelihood(θ, datum)``.

- Linear regression, 6 parameters: x = (x_1..x_5, 1) with x_j ~ N(0, 1), a bias column,
  y = xᵀθ + ε, ε ~ N(0, σ²); θ ~ N(0, τ² I). Exact evidence (``jaxz.models.regression``).
- Multiclass logistic regression, 10-D inputs, 4 classes: θ is the (11, 4) matrix of
  weights and biases, 44 parameters (``jaxz.models.logistic``).
- Gaussian mixture for 2-D data with K components, 5K parameters (25 for K = 5):
  mixing logits (K), means (K × 2), log standard deviations (K × 2, diagonal), packed in
  one vector θ = (logits, means, log_scales). Priors: logits ~ N(0, 1), means ~ N(0, 5² I),
  log_scales ~ N(0, 1).

``gmm_data`` draws mixture data from random component parameters; ``shifting_gmm_data``
is the non-stationary stream of the seed's Figure 5 (3 components for the first 1,000
points, 5 up to 10,000, 7 after).
"""
import jax
import jax.numpy as jnp
import numpy as np

from jaxz.models import logistic, regression
from jaxz.types import Array, PRNGKey

LINEAR_DIM = 6  # 5 inputs + bias
LOGISTIC_FEATURES, LOGISTIC_CLASSES = 10, 4  # 44 parameters
GMM_DIM = 2
MEAN_PRIOR_SCALE = 5.0


# --- linear regression (6 parameters, exact evidence) -------------------------------------

def linear_regression_data(rng_key: PRNGKey, num_data: int, noise_scale=1.0, prior_scale=1.0, dtype=float):
    """((X (N, 6) with a last column of ones, y (N,)), θ_true) with θ_true drawn from the prior."""
    regression._check_scales(prior_scale, noise_scale)
    key_x, key_theta, key_noise = jax.random.split(rng_key, 3)
    inputs = jax.random.normal(key_x, (num_data, LINEAR_DIM - 1), dtype=dtype)
    inputs = jnp.concatenate([inputs, jnp.ones((num_data, 1), dtype)], axis=1)
    theta = regression.sample_prior(key_theta, LINEAR_DIM, prior_scale=prior_scale, dtype=dtype)
    targets = inputs @ theta + noise_scale * jax.random.normal(key_noise, (num_data,), dtype=dtype)
    return (inputs, targets), theta


linear_log_prior = regression.log_prior
linear_log_likelihood = regression.log_likelihood
linear_exact_log_evidence = regression.exact_log_evidence


def linear_sample_prior(rng_key: PRNGKey, num: int, dtype=float) -> Array:
    return regression.sample_prior(rng_key, LINEAR_DIM, (num,), dtype=dtype)


# --- multiclass logistic regression (10-D inputs, 4 classes, 44 parameters) ---------------

def logistic_data(rng_key: PRNGKey, num_data: int, dtype=float):
    """((X (N, 10), labels (N,)), θ_true (11, 4)) simulated from the prior and the softmax."""
    return logistic.generate(rng_key, num_data, LOGISTIC_FEATURES, LOGISTIC_CLASSES, dtype=dtype)


logistic_log_prior = logistic.log_prior
logistic_log_likelihood = logistic.log_likelihood


def logistic_sample_prior(rng_key: PRNGKey, num: int, dtype=float) -> Array:
    return logistic.sample_prior(rng_key, LOGISTIC_FEATURES, LOGISTIC_CLASSES, (num,), dtype=dtype)


# --- Gaussian mixture for 2-D data (5K parameters) -----------------------------------------

def gmm_num_parameters(num_components: int) -> int:
    return num_components * (1 + 2 * GMM_DIM)


def gmm_unpack(theta: Array, num_components: int):
    """θ (5K,) -> (logits (K,), means (K, 2), log_scales (K, 2))."""
    k = num_components
    logits = theta[:k]
    means = theta[k:k + k * GMM_DIM].reshape(k, GMM_DIM)
    log_scales = theta[k + k * GMM_DIM:].reshape(k, GMM_DIM)
    return logits, means, log_scales


def _standard_normal_log_density(z: Array) -> Array:
    return -0.5 * jnp.sum(z**2) - 0.5 * z.size * jnp.log(2.0 * jnp.pi)


def gmm_log_prior(theta: Array, num_components: int = 5) -> Array:
    """logits ~ N(0, 1), means ~ N(0, 5² I), log_scales ~ N(0, 1) (normalized)."""
    logits, means, log_scales = gmm_unpack(theta, num_components)
    scale = jnp.asarray(MEAN_PRIOR_SCALE, theta.dtype)
    return (_standard_normal_log_density(logits) + _standard_normal_log_density(means / scale)
            - means.size * jnp.log(scale) + _standard_normal_log_density(log_scales))


def gmm_log_likelihood(theta: Array, datum: Array, num_components: int = 5) -> Array:
    """log Σ_k softmax(logits)_k N(y; μ_k, diag σ_k²) for one 2-D point ``datum``."""
    logits, means, log_scales = gmm_unpack(theta, num_components)
    z = (datum - means) * jnp.exp(-log_scales)
    log_components = -0.5 * jnp.sum(z**2, axis=1) - jnp.sum(log_scales, axis=1) - 0.5 * GMM_DIM * jnp.log(2.0 * jnp.pi)
    return jax.scipy.special.logsumexp(jax.nn.log_softmax(logits) + log_components)


def gmm_sample_prior(rng_key: PRNGKey, num: int, num_components: int = 5, dtype=float) -> Array:
    k = num_components
    key_logits, key_means, key_scales = jax.random.split(rng_key, 3)
    logits = jax.random.normal(key_logits, (num, k), dtype)
    means = MEAN_PRIOR_SCALE * jax.random.normal(key_means, (num, k * GMM_DIM), dtype)
    log_scales = jax.random.normal(key_scales, (num, k * GMM_DIM), dtype)
    return jnp.concatenate([logits, means, log_scales], axis=1)


def gmm_components(rng_key: PRNGKey, num_components: int):
    """Random data-generating components: weights (K,), means (K, 2), scales (K, 2) (numpy).
    Means are spread over [−8, 8]², standard deviations in [0.5, 1.5]."""
    rng = np.random.default_rng(np.asarray(jax.random.key_data(rng_key)).ravel())
    weights = rng.dirichlet(np.full(num_components, 5.0))
    means = rng.uniform(-8.0, 8.0, size=(num_components, GMM_DIM))
    scales = rng.uniform(0.5, 1.5, size=(num_components, GMM_DIM))
    return weights, means, scales


def gmm_sample(rng_key: PRNGKey, num_data: int, weights, means, scales, dtype=float) -> Array:
    """``num_data`` i.i.d. 2-D points from the mixture (weights, means, scales)."""
    key_component, key_noise = jax.random.split(rng_key)
    component = jax.random.categorical(key_component, jnp.log(jnp.asarray(weights)), shape=(num_data,))
    noise = jax.random.normal(key_noise, (num_data, GMM_DIM), dtype)
    return (jnp.asarray(means, dtype)[component] + jnp.asarray(scales, dtype)[component] * noise).astype(dtype)


def gmm_data(rng_key: PRNGKey, num_data: int, num_components: int = 5, dtype=float):
    """(points (N, 2), (weights, means, scales)) from a random K-component mixture."""
    key_components, key_points = jax.random.split(rng_key)
    components = gmm_components(key_components, num_components)
    return gmm_sample(key_points, num_data, *components, dtype=dtype), components


def shifting_gmm_data(rng_key: PRNGKey, num_data: int, schedule=((1_000, 3), (10_000, 5), (None, 7)), dtype=float):
    """The non-stationary stream of the seed's Figure 5: points 0..999 from a 3-component
    mixture, 1,000..9,999 from a 5-component one, the rest from a 7-component one.
    Each larger mixture keeps the earlier components (the stream grows new clusters).
    ``schedule`` lists (end index or None, number of components)."""
    key_components, key_points = jax.random.split(rng_key)
    max_components = max(k for _, k in schedule)
    _, means, scales = gmm_components(key_components, max_components)
    pieces, start = [], 0
    for (end, k), key in zip(schedule, jax.random.split(key_points, len(schedule))):
        end = num_data if end is None else min(end, num_data)
        if end <= start:
            continue
        weights = np.full(k, 1.0 / k)
        pieces.append(gmm_sample(key, end - start, weights, means[:k], scales[:k], dtype=dtype))
        start = end
    return jnp.concatenate(pieces, axis=0)


__all__ = [
    "linear_regression_data", "linear_log_prior", "linear_log_likelihood", "linear_exact_log_evidence",
    "linear_sample_prior", "logistic_data", "logistic_log_prior", "logistic_log_likelihood",
    "logistic_sample_prior", "gmm_num_parameters", "gmm_unpack", "gmm_log_prior", "gmm_log_likelihood",
    "gmm_sample_prior", "gmm_components", "gmm_sample", "gmm_data", "shifting_gmm_data",
]
