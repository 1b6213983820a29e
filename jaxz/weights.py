"""Log-weight algebra, in one place.

Every function takes log-weights along the last axis and an optional boolean
``mask`` of the same shape: masked-out slots (padding in a fixed-size buffer)
count as zero weight and are never read. A log-weight of ``nan`` must be
sanitized first (``sanitize``); ``-inf`` is a legal zero weight.
"""
import jax
import jax.numpy as jnp
import numpy as np

from jaxz import reduction
from jaxz._status import STATUS_NONFINITE, STATUS_OK
from jaxz.types import Array


def _check(log_weights: Array, mask: Array | None = None) -> None:
    """Shapes are static: reject empty weight vectors and masks of another shape."""
    shape = jnp.shape(log_weights)
    if len(shape) == 0 or shape[-1] == 0:
        raise ValueError(f"log_weights must have at least one entry along its last axis, got shape {shape}")
    if mask is not None and jnp.shape(mask) != shape:
        raise ValueError(f"mask must have the shape of log_weights {shape}, got {jnp.shape(mask)}")


def _apply_mask(log_weights: Array, mask: Array | None) -> Array:
    _check(log_weights, mask)
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
    return reduction.logsumexp(_apply_mask(log_weights, mask), axis=-1)  # one fixed order on any layout


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
    nan for fewer than two weights (one draw says nothing about the spread); inf when
    every weight is zero.
    """
    n = _count(log_weights, mask)
    log_w = normalize(log_weights, mask)
    sum_sq = jnp.exp(logsumexp(2.0 * log_w))
    rel_var = jnp.maximum(n * sum_sq - 1.0, 0.0) * n / jnp.maximum(n - 1.0, 1.0)
    stderr = jnp.sqrt(rel_var / n)
    stderr = jnp.where(jnp.isneginf(logsumexp(log_weights, mask)), jnp.inf, stderr)
    return jnp.where(n < 2, jnp.nan, stderr)


def pareto_shape(log_weights: Array, mask: Array | None = None) -> Array:
    """Pareto k̂: the estimated shape of the weights' upper tail (Vehtari, Simpson,
    Gelman, Yao & Gabry 2024, "Pareto smoothed importance sampling", §3).

    A generalized Pareto distribution is fitted to the M = min(⌈n/5⌉, ⌈3√n⌉) largest
    weights above the next one, by the profile-likelihood quadrature of Zhang &
    Stephens (2009) with the weakly informative prior of PSIS (k̂ shrunk toward 0.5 as
    if by 10 pseudo-observations). When k̂ exceeds ``pareto_threshold(n)`` the weights'
    variance is so poorly estimated (or infinite, k̂ ≥ 1/2 in theory) that a
    delta-method standard error computed from them cannot be trusted.
    Returns −inf when the tail is flat (equal weights) or fewer than 5 weights are live.
    """
    log_weights = _apply_mask(log_weights, mask)
    n_slots = log_weights.shape[-1]
    num_tail = int(min(np.ceil(n_slots / 5.0), np.ceil(3.0 * np.sqrt(n_slots))))
    if num_tail < 4:
        return jnp.full(log_weights.shape[:-1], -jnp.inf, log_weights.dtype)
    ordered = jnp.sort(log_weights, axis=-1)[..., n_slots - num_tail - 1:]  # threshold, then the tail ascending
    top = ordered[..., -1:]
    scaled = jnp.exp(ordered - jnp.where(jnp.isfinite(top), top, 0.0))
    tail = scaled[..., 1:] - scaled[..., :1]  # exceedances over the threshold, ascending
    return _gpd_shape(tail, jnp.isfinite(ordered[..., 0]))


def _gpd_shape(x: Array, live: Array) -> Array:
    """Zhang & Stephens (2009) posterior-mean fit of a generalized Pareto shape to the
    ascending exceedances x (last axis), with the PSIS prior; −inf where not ``live``."""
    n = x.shape[-1]
    m = 30 + int(np.sqrt(n))
    quartile = x[..., int(n / 4.0 + 0.5) - 1]
    largest = x[..., -1]
    j = jnp.arange(1, m + 1, dtype=x.dtype)
    # candidate θ = −k/σ, spread around 1/x_max (Zhang & Stephens, eq. 3.2 with prior 3)
    theta = 1.0 / largest[..., None] + (1.0 - jnp.sqrt(m / (j - 0.5))) / (3.0 * quartile[..., None])
    k_of_theta = jnp.mean(jnp.log1p(-theta[..., :, None] * x[..., None, :]), axis=-1)
    profile = n * (jnp.log(-theta / k_of_theta) - k_of_theta - 1.0)  # profile log-likelihood
    posterior = jax.nn.softmax(jnp.where(jnp.isfinite(profile), profile, -jnp.inf), axis=-1)
    theta_hat = jnp.sum(posterior * jnp.where(jnp.isfinite(profile), theta, 0.0), axis=-1)
    shape = jnp.mean(jnp.log1p(-theta_hat[..., None] * x), axis=-1)
    shape = (n * shape + 10 * 0.5) / (n + 10)  # PSIS's weakly informative prior on k
    usable = live & (largest > 0) & (quartile > 0) & jnp.isfinite(shape)
    return jnp.where(usable, shape, -jnp.inf)


def pareto_threshold(num_samples: int) -> float:
    """The k̂ above which importance-sampling estimates from ``num_samples`` draws are
    unreliable: min(1 − 1/log10(n), 0.7) (Vehtari et al. 2024, §3.2.4)."""
    return float(min(1.0 - 1.0 / np.log10(max(num_samples, 11)), 0.7))


__all__ = [
    "sanitize",
    "logsumexp",
    "log_mean_exp",
    "normalize",
    "log_ess",
    "ess",
    "conditional_ess",
    "stderr_log_mean_exp",
    "pareto_shape",
    "pareto_threshold",
]
