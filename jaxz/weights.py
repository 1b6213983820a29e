"""Log-weight algebra, in one place.

Every function takes log-weights along the last axis and an optional boolean
``mask`` of the same shape: masked-out slots (padding in a fixed-size buffer)
count as zero weight and are never read. A log-weight of ``nan`` must be
sanitized first (``sanitize``); ``-inf`` is a legal zero weight.
"""
import jax.numpy as jnp

from jaxz.base import STATUS_NONFINITE, STATUS_OK
from jaxz.types import Array


def _apply_mask(log_weights: Array, mask: Array | None) -> Array:
    if mask is None:
        return log_weights
    return jnp.where(mask, log_weights, -jnp.inf)


def _count(log_weights: Array, mask: Array | None) -> Array:
    if mask is None:
        return jnp.asarray(log_weights.shape[-1], log_weights.dtype)
    return jnp.sum(mask, axis=-1).astype(log_weights.dtype)


def sanitize(log_weights: Array) -> tuple[Array, Array]:
    """Replace ``nan`` and ``+inf`` log-weights by ``-inf`` (zero weight).

    Returns the cleaned log-weights and an int32 status: STATUS_NONFINITE if any
    entry was replaced. (``+inf`` cannot be a weight: it is a broken density.)
    """
    bad = jnp.isnan(log_weights) | (log_weights == jnp.inf)
    status = jnp.where(jnp.any(bad), STATUS_NONFINITE, STATUS_OK).astype(jnp.int32)
    return jnp.where(bad, -jnp.inf, log_weights), status


def logsumexp(log_weights: Array, mask: Array | None = None) -> Array:
    """log Σ_i w_i over unmasked slots; ``-inf`` when every weight is zero."""
    log_weights = _apply_mask(log_weights, mask)
    top = jnp.max(log_weights, axis=-1, keepdims=True)
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    total = jnp.sum(jnp.exp(log_weights - top), axis=-1)
    return jnp.log(total) + top[..., 0]


def log_mean_exp(log_weights: Array, mask: Array | None = None) -> Array:
    """log (1/n Σ_i w_i), n the number of unmasked slots."""
    return logsumexp(log_weights, mask) - jnp.log(_count(log_weights, mask))


def normalize(log_weights: Array, mask: Array | None = None) -> Array:
    """Normalized log-weights log w̃_i = log w_i − log Σ_j w_j (masked slots: −inf).

    If every weight is zero the result is uniform over the unmasked slots, so that
    downstream resampling stays well defined; callers flag the degeneracy.
    """
    log_weights = _apply_mask(log_weights, mask)
    total = logsumexp(log_weights)
    uniform = _apply_mask(jnp.zeros_like(log_weights), mask) - jnp.log(_count(log_weights, mask))[..., None]
    normalized = log_weights - total[..., None]
    return jnp.where(jnp.isfinite(total)[..., None], normalized, uniform)


def log_ess(log_weights: Array, mask: Array | None = None) -> Array:
    """log ESS = 2 log Σ w − log Σ w² (Kong's effective sample size, in log space)."""
    log_weights = _apply_mask(log_weights, mask)
    return 2.0 * logsumexp(log_weights) - logsumexp(2.0 * log_weights)


def ess(log_weights: Array, mask: Array | None = None) -> Array:
    """Effective sample size (Σ w)² / Σ w², in [1, n]; 0 when every weight is zero."""
    value = jnp.exp(log_ess(log_weights, mask))
    return jnp.where(jnp.isnan(value), 0.0, value)


def conditional_ess(log_weights: Array, log_increments: Array, mask: Array | None = None) -> Array:
    """Conditional ESS of Zhou, Johansen & Aston (2016), as a fraction of n.

    CESS / n = (Σ_i W_i u_i)² / Σ_i W_i u_i², with W the normalized current weights
    and u the incremental weights. It is 1 when the increments are constant, and it
    does not mix the existing degeneracy of W into the choice of the next step.
    """
    log_w = normalize(log_weights, mask)
    log_increments = _apply_mask(log_increments, mask)
    log_cess = 2.0 * logsumexp(log_w + log_increments) - logsumexp(log_w + 2.0 * log_increments)
    value = jnp.exp(log_cess)  # (Σ W u)² / Σ W u², already a fraction of n
    return jnp.where(jnp.isnan(value), 0.0, value)


def stderr_log_mean_exp(log_weights: Array, mask: Array | None = None) -> Array:
    """Delta-method standard error of ``log_mean_exp``: sqrt(Var(w) / (n · mean(w)²)).

    With normalized weights w̃, Var(w)/mean(w)² = (n Σ w̃² − 1) · n / (n − 1).
    """
    n = _count(log_weights, mask)
    log_w = normalize(log_weights, mask)
    sum_sq = jnp.exp(logsumexp(2.0 * log_w))
    rel_var = jnp.maximum(n * sum_sq - 1.0, 0.0) * n / jnp.maximum(n - 1.0, 1.0)
    return jnp.sqrt(rel_var / n)


__all__ = [
    "sanitize",
    "logsumexp",
    "log_mean_exp",
    "normalize",
    "log_ess",
    "ess",
    "conditional_ess",
    "stderr_log_mean_exp",
]
