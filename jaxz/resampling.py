"""Resampling schemes: log-weights in, ancestor indices out.

All schemes are jittable with a fixed output size ``num_samples`` (default: the
number of slots; a Python int >= 0, static: it sets the shape, and 0 draws an empty
array) and unbiased: the expected number of offspring of slot i is
``num_samples · w̃_i``. A ``mask`` marks the live slots of a padded buffer; masked
slots have zero weight and are never chosen (nor read). Log-weights need not be
normalized, but a live one must not be nan or +inf (a broken density: sanitize it with
``jaxz.weights.sanitize``), and at least one must be > −inf.

Concrete log-weights (and masks) that break these rules raise ValueError. Traced ones
(under ``jit`` / ``vmap``) cannot be checked: there, a nan or +inf total weight, and
all weights zero, make the draws uniform over the live slots, which mean nothing; the
estimators sanitize first and flag such a run (STATUS_NONFINITE, STATUS_DEGENERATE),
and a caller of these functions under ``jit`` must do the same.

Only multinomial resampling draws offspring independently given the weights, which
the genealogy variance estimator of the particle methods needs (Lee & Whiteley 2018);
the others have lower variance but no single-run standard error.
"""
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks, reduction
from jaxz import weights as _weights
from jaxz.types import Array, PRNGKey


def check_log_weights(log_weights: Array, mask: Array | None = None, name: str = "log_weights") -> None:
    """Concrete weights that can be resampled: some live slot (``mask``), no nan or +inf
    among the live log-weights, and not all of them −inf. ``normalize`` reads a nan or +inf
    total, and a zero one, as "draw uniformly", so without this check such weights gave
    plausible-looking uniform draws. Traced values pass (see the module docstring)."""
    _weights.check_shapes(log_weights, mask)  # shapes first: an empty vector is no "all -inf"
    if mask is not None and not _checks.is_traced(mask) and not np.any(np.asarray(mask)):
        raise ValueError("mask selects no slot: there is nothing to resample (all entries are False)")
    if _checks.is_traced(log_weights) or _checks.is_traced(mask):
        return
    live = np.asarray(log_weights)
    if mask is not None:
        live = live[np.asarray(mask, bool)]
    if np.any(np.isnan(live)) or np.any(live == np.inf):
        raise ValueError(f"{name} contain nan or +inf (a broken density, not a weight): "
                         "fix it, or sanitize it with jaxz.weights.sanitize (nan and +inf become weight 0)")
    if not np.any(live > -np.inf):
        raise ValueError(f"{name} are all -inf (every weight is zero): there is nothing to resample")


def _num_samples(log_weights: Array, num_samples) -> int:
    """The output size: the number of slots by default, else a static int >= 0."""
    if num_samples is None:
        return log_weights.shape[0]
    return _checks.integer("num_samples", num_samples, minimum=0, what="draws")


def _probabilities(log_weights: Array, mask: Array | None) -> Array:
    check_log_weights(log_weights, mask)
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
    num_samples = _num_samples(log_weights, num_samples)
    probabilities = _probabilities(log_weights, mask)
    # Sorted uniforms from normalized exponential spacings: one O(n) pass, no sort.
    spacings = jax.random.exponential(rng_key, (num_samples + 1,), dtype=probabilities.dtype)
    uniforms = reduction.cumsum(spacings)[:-1] / reduction.sum(spacings)
    return _inverse_cdf(probabilities, uniforms)


def stratified(rng_key: PRNGKey, log_weights: Array, num_samples: int | None = None,
               mask: Array | None = None) -> Array:
    """One uniform in each stratum [k/M, (k+1)/M)."""
    num_samples = _num_samples(log_weights, num_samples)
    probabilities = _probabilities(log_weights, mask)
    offsets = jax.random.uniform(rng_key, (num_samples,), dtype=probabilities.dtype)
    uniforms = (jnp.arange(num_samples, dtype=probabilities.dtype) + offsets) / num_samples
    return _inverse_cdf(probabilities, uniforms)


def systematic(rng_key: PRNGKey, log_weights: Array, num_samples: int | None = None,
               mask: Array | None = None) -> Array:
    """One shared uniform shifted into each stratum: (k + U)/M."""
    num_samples = _num_samples(log_weights, num_samples)
    probabilities = _probabilities(log_weights, mask)
    offset = jax.random.uniform(rng_key, (), dtype=probabilities.dtype)
    uniforms = (jnp.arange(num_samples, dtype=probabilities.dtype) + offset) / num_samples
    return _inverse_cdf(probabilities, uniforms)


def residual(rng_key: PRNGKey, log_weights: Array, num_samples: int | None = None, mask: Array | None = None) -> Array:
    """⌊M w̃_i⌋ deterministic copies of each slot, the remainder drawn multinomially
    from the residual weights M w̃_i − ⌊M w̃_i⌋ (Liu & Chen 1998)."""
    num_slots = log_weights.shape[0]
    num_samples = _num_samples(log_weights, num_samples)
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


class Resampled(NamedTuple):
    """What ``resample_if_needed`` did: the ancestor of each new slot, the new
    (normalized) log-weights, whether it resampled, and the ESS it decided on."""
    ancestors: Array  # int32 (num_samples,)
    log_weights: Array  # (num_samples,): uniform after resampling, else the kept slots' weights
    resampled: Array  # bool scalar
    ess: Array  # ESS (a count) of the weights before


def resample_if_needed(rng_key: PRNGKey, log_weights: Array, resampling: Callable, resample_ess,
                       *, reference_count=None, allowed=True, force=False, num_samples: int | None = None,
                       mask: Array | None = None, ess: Array | None = None) -> Resampled:
    """ESS-triggered resampling, the one rule of every particle method here (Liu & Chen
    1995; Del Moral, Doucet & Jasra 2012; the lecture notes' SIR with adaptive resampling):
    resample when ESS < ``resample_ess`` · ``reference_count`` (default: the number of
    slots), or when ``force``; never where ``allowed`` is False.

    log_weights: normalized log-weights (N,) (masked slots ignored); resampling: a scheme
    of this module; num_samples: the number of new slots (default N). Without resampling
    the new slots are the first ``num_samples`` live ones, their weights renormalized (with
    no mask and num_samples = N: the weights as they are). Between resampling events the
    weights are carried, so Ẑ stays unbiased whichever events occur (Del Moral 2004).
    """
    num_slots = log_weights.shape[0]
    num_samples = num_slots if num_samples is None else num_samples
    dtype = log_weights.dtype
    if ess is None:
        ess = _weights.ess(log_weights, mask)
    reference = num_slots if reference_count is None else reference_count
    resample = jnp.asarray(allowed) & (jnp.asarray(force) | (ess < resample_ess * reference))
    if mask is None and num_samples == num_slots:  # every slot kept as it is, or resampled in place
        kept, kept_log_weights = jnp.arange(num_slots, dtype=jnp.int32), log_weights
        drawn = resampling(rng_key, log_weights)
    else:
        kept = (jnp.arange(num_samples, dtype=jnp.int32) if mask is None
                else jnp.nonzero(mask, size=num_samples, fill_value=0)[0].astype(jnp.int32))
        kept_log_weights = _weights.normalize(log_weights[kept])
        drawn = resampling(rng_key, log_weights, num_samples, mask)
    ancestors = jnp.where(resample, drawn, kept)
    uniform = -jnp.log(jnp.asarray(num_samples, dtype))
    return Resampled(ancestors, jnp.where(resample, uniform, kept_log_weights), resample, ess)


SCHEMES = {"multinomial": multinomial, "stratified": stratified, "systematic": systematic, "residual": residual}

__all__ = ["multinomial", "stratified", "systematic", "residual", "SCHEMES", "Resampled", "resample_if_needed"]
