"""Resampling schemes: log-weights in, ancestor indices out.

All schemes are jittable with a fixed output size ``num_samples`` (default: the
number of slots) and unbiased: the expected number of offspring of slot i is
``num_samples · w̃_i``. A ``mask`` marks the live slots of a padded buffer; masked
slots have zero weight and are never chosen. Log-weights need not be normalized.
A concrete all-False mask raises ValueError; a traced one cannot be checked, and its
callers flag the run (every weight dead: STATUS_DEGENERATE).

Only multinomial resampling draws offspring independently given the weights, which
the genealogy variance estimator of the particle methods needs (Lee & Whiteley 2018);
the others have lower variance but no single-run standard error.
"""
import jax
import jax.numpy as jnp
import numpy as np

from jaxz import reduction
from jaxz import weights as _weights
from jaxz.types import Array, PRNGKey


def _probabilities(log_weights: Array, mask: Array | None) -> Array:
    if mask is not None and not isinstance(mask, jax.core.Tracer) and not np.any(np.asarray(mask)):
        raise ValueError("mask selects no slot: there is nothing to resample (all entries are False)")
    return jnp.exp(_weights.normalize(log_weights, mask))


def _inverse_cdf(probabilities: Array, uniforms: Array) -> Array:
    """Indices i with cdf[i-1] <= u < cdf[i], for sorted uniforms in [0, 1)."""
    cdf = reduction.cumsum(probabilities)  # one fixed order on any device layout
    # Guard against round-off leaving cdf[-1] < max(u): clip to the last live slot.
    last_live = jnp.max(jnp.where(probabilities > 0, jnp.arange(probabilities.shape[0]), 0))
    indices = jnp.searchsorted(cdf, uniforms * cdf[-1], side="right")
    return jnp.minimum(indices, last_live).astype(jnp.int32)


def multinomial(rng_key: PRNGKey, log_weights: Array, num_samples: int | None = None,
                mask: Array | None = None) -> Array:
    """Independent draws from the categorical distribution w̃ (sorted uniforms)."""
    num_samples = log_weights.shape[0] if num_samples is None else num_samples
    probabilities = _probabilities(log_weights, mask)
    # Sorted uniforms from normalized exponential spacings: one O(n) pass, no sort.
    spacings = jax.random.exponential(rng_key, (num_samples + 1,), dtype=probabilities.dtype)
    uniforms = reduction.cumsum(spacings)[:-1] / reduction.sum(spacings)
    return _inverse_cdf(probabilities, uniforms)


def stratified(rng_key: PRNGKey, log_weights: Array, num_samples: int | None = None,
               mask: Array | None = None) -> Array:
    """One uniform in each stratum [k/M, (k+1)/M)."""
    num_samples = log_weights.shape[0] if num_samples is None else num_samples
    probabilities = _probabilities(log_weights, mask)
    offsets = jax.random.uniform(rng_key, (num_samples,), dtype=probabilities.dtype)
    uniforms = (jnp.arange(num_samples, dtype=probabilities.dtype) + offsets) / num_samples
    return _inverse_cdf(probabilities, uniforms)


def systematic(rng_key: PRNGKey, log_weights: Array, num_samples: int | None = None,
               mask: Array | None = None) -> Array:
    """One shared uniform shifted into each stratum: (k + U)/M."""
    num_samples = log_weights.shape[0] if num_samples is None else num_samples
    probabilities = _probabilities(log_weights, mask)
    offset = jax.random.uniform(rng_key, (), dtype=probabilities.dtype)
    uniforms = (jnp.arange(num_samples, dtype=probabilities.dtype) + offset) / num_samples
    return _inverse_cdf(probabilities, uniforms)


def residual(rng_key: PRNGKey, log_weights: Array, num_samples: int | None = None, mask: Array | None = None) -> Array:
    """⌊M w̃_i⌋ deterministic copies of each slot, the remainder drawn multinomially
    from the residual weights M w̃_i − ⌊M w̃_i⌋ (Liu & Chen 1998)."""
    num_slots = log_weights.shape[0]
    num_samples = num_slots if num_samples is None else num_samples
    probabilities = _probabilities(log_weights, mask)
    expected = num_samples * probabilities
    copies = jnp.floor(expected).astype(jnp.int32)
    num_deterministic = jnp.sum(copies)
    deterministic = jnp.repeat(jnp.arange(num_slots, dtype=jnp.int32), copies, total_repeat_length=num_samples)
    residual_weights = jnp.maximum(expected - copies, 0.0)
    # When the expected counts are all integers the residual is empty: fall back to the
    # plain weights (those draws are then never used).
    residual_probabilities = jnp.where(reduction.sum(residual_weights) > 0, residual_weights, probabilities)
    # IID (unsorted) uniforms: only the slots past num_deterministic are used, and that
    # tail of a sorted draw would be biased towards the last slots.
    uniforms = jax.random.uniform(rng_key, (num_samples,), dtype=probabilities.dtype)
    random_part = _inverse_cdf(residual_probabilities, uniforms)
    position = jnp.arange(num_samples)
    return jnp.where(position < num_deterministic, deterministic, random_part).astype(jnp.int32)


SCHEMES = {"multinomial": multinomial, "stratified": stratified, "systematic": systematic, "residual": residual}

__all__ = ["multinomial", "stratified", "systematic", "residual", "SCHEMES"]
