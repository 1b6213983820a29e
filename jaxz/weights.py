"""Log-weight algebra, in one place.

Every function takes log-weights along the last axis and an optional boolean
``mask`` of the same shape: masked-out slots (padding in a fixed-size buffer)
count as zero weight and are never read. A log-weight of ``nan`` must be
sanitized first (``sanitize``); ``-inf`` is a legal zero weight.
"""
import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks, reduction
from jaxz._status import STATUS_NONFINITE, STATUS_OK
from jaxz.types import Array


def check_shapes(log_weights: Array, mask: Array | None = None) -> None:
    """A ValueError for an empty weight vector (no entry along the last axis) or a
    ``mask`` of another shape than ``log_weights``; shapes are static, so this also runs
    under tracing. Every function here checks its input with it."""
    shape = jnp.shape(log_weights)
    if len(shape) == 0 or shape[-1] == 0:
        raise ValueError(f"log_weights must have at least one entry along its last axis, got shape {shape}")
    if mask is not None and jnp.shape(mask) != shape:
        raise ValueError(f"mask must have the shape of log_weights {shape}, got {jnp.shape(mask)}")


def _no_nan_or_plus_inf(name: str, log_weights: Array) -> None:
    """Concrete log-weights hold no nan or +inf (a broken density: ``sanitize`` first);
    traced ones pass."""
    if isinstance(log_weights, jax.core.Tracer):
        return
    array = np.asarray(log_weights)
    if np.any(np.isnan(array) | (array == np.inf)):
        raise ValueError(f"{name} contain nan or +inf, which is no weight (a broken density): pass them through "
                         "jaxz.weights.sanitize first, or mask those slots out")


def _apply_mask(log_weights: Array, mask: Array | None) -> Array:
    check_shapes(log_weights, mask)
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


def log_normal_ess(log_weights: Array, mask: Array | None = None) -> Array:
    """The ESS the weights' upper half implies were log w normal: n exp(−σ̂²), with
    σ̂ = q(0.8413) − q(0.5) of the log-weights (their upper half's spread, read as a
    normal's sd; for log w ~ N(μ, σ²), E[w²]/E[w]² = exp(σ²), so n/exp(σ²) is Kong's
    ESS in expectation). Kish's ``ess`` reads Σ w² from the draws and is too large in
    exactly the samples that have not drawn their largest weights; this reads the spread
    from the bulk, which the draws do sample: a few hundred draws whose log-weights
    spread by σ̂ = 3 nats stand for n e^{−9} effective draws, however even the drawn weights
    look. Chatterjee & Diaconis (2018, "The sample size required in importance sampling",
    Ann. Appl. Probab. 28, Thm 1.1) give the same scale: n must exceed exp(KL), and
    KL = σ²/2 for log-normal weights. Only the upper half is read: the lower tail of
    log w (draws where the target is thin) does not move the mean. Weights bounded above
    still read small where their top is far above the median (a proposal much wider than
    its target), so ``STATUS_LOW_ESS`` reads this only where the Pareto fit of the top
    cannot rule out a heavy tail. Masked or −inf slots are left out; n counts the live
    slots. 0 where fewer than two live weights; nan where a live log-weight is nan or +inf
    (not a weight: it is not silently left out)."""
    log_weights = _apply_mask(log_weights, mask)
    live = jnp.isfinite(log_weights)
    n = jnp.sum(live, axis=-1).astype(log_weights.dtype)
    values = jnp.where(live, log_weights, jnp.nan)
    median, upper = jnp.nanquantile(values, jnp.asarray([0.5, 0.8413447460685429], log_weights.dtype), axis=-1)
    spread = jnp.where(n >= 2, upper - median, jnp.inf)
    broken = jnp.any(jnp.isnan(log_weights) | (log_weights == jnp.inf), axis=-1)
    return jnp.where(broken, jnp.nan, jnp.where(n >= 2, n * jnp.exp(-(spread**2)), 0.0))


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
    nan for fewer than two weights (one draw says nothing about the spread) and where a
    live log-weight is nan or +inf (as ``log_mean_exp`` is then nan or +inf); inf when
    every weight is zero.
    """
    n = _count(log_weights, mask)
    log_w = normalize(log_weights, mask)
    sum_sq = jnp.exp(logsumexp(2.0 * log_w))
    rel_var = jnp.maximum(n * sum_sq - 1.0, 0.0) * n / jnp.maximum(n - 1.0, 1.0)
    stderr = jnp.sqrt(rel_var / n)
    total = logsumexp(log_weights, mask)
    stderr = jnp.where(jnp.isneginf(total), jnp.inf, stderr)
    # normalize reads a nan or +inf total as uniform weights, whose s.e. would be exactly 0
    return jnp.where((n < 2) | jnp.isnan(total) | (total == jnp.inf), jnp.nan, stderr)


def pareto_tail_size(num_slots: int) -> int:
    """M = min(⌈n/5⌉, ⌈3√n⌉) (at most n − 1) for n = ``num_slots`` weights: the number of
    largest weights whose tail PSIS fits (Vehtari et al. 2024, §3, r_eff = 1), used by
    ``pareto_khat``, ``hill_khat`` and ``stderr_log_mean_exp_pareto``."""
    return min(int(min(np.ceil(num_slots / 5.0), np.ceil(3.0 * np.sqrt(num_slots)))), num_slots - 1)


def khat_plus_sds(shape: Array, num_tail: int, num_sds: float) -> Array:
    """k̂ + num_sds · (1 + k̂)/√M for a fitted shape k̂ = ``shape`` from M = ``num_tail``
    exceedances (``pareto_tail_size``): (1 + k̂)/√M is the GPD shape's asymptotic sd, so
    this is k̂ moved ``num_sds`` of its standard deviations up."""
    return shape + num_sds * (1.0 + shape) / np.sqrt(num_tail)


def _pareto_tail(log_weights: Array, mask: Array | None = None):
    """The PSIS tail fit shared by ``pareto_khat`` and ``stderr_log_mean_exp_pareto``.

    Returns (ordered, k̂, σ̂): the M + 1 largest log-weights ascending (the threshold
    first), and the GPD shape and scale fitted to the exceedances of exp(ordered − max)
    over the threshold; k̂ is −inf where no tail can be fitted (see ``pareto_khat``).
    M is static (from the number of slots), so the function jits and vmaps.
    """
    log_weights = _apply_mask(log_weights, mask)
    num_tail = pareto_tail_size(log_weights.shape[-1])
    if num_tail < 4:
        blank = jnp.full(log_weights.shape[:-1], -jnp.inf, log_weights.dtype)
        return log_weights[..., :0], blank, jnp.zeros_like(blank)
    # the M + 1 largest, ascending (top_k returns them descending; ties keep any order)
    ordered = jnp.flip(jax.lax.top_k(log_weights, num_tail + 1)[0], axis=-1)
    top = ordered[..., -1:]
    scaled = jnp.exp(ordered - jnp.where(jnp.isfinite(top), top, 0.0))
    tail = scaled[..., 1:] - scaled[..., :1]  # exceedances over the threshold, ascending
    shape, scale = _gpd_fit(tail, jnp.isfinite(ordered[..., 0]))
    return ordered, shape, scale


def pareto_khat(log_weights: Array, mask: Array | None = None) -> Array:
    """Pareto k̂: the estimated shape of the weights' upper tail (Vehtari, Simpson,
    Gelman, Yao & Gabry 2024, "Pareto smoothed importance sampling", JMLR 25(72), §3).

    A generalized Pareto distribution (GPD, shape k, scale σ: P(Y > y) = (1 + k y/σ)^(−1/k))
    is fitted to the exceedances of the M = min(⌈n/5⌉, ⌈3√n⌉) largest weights over the
    next one (r_eff = 1), by the posterior mean of Zhang & Stephens (2009, "A new and
    efficient estimation method for the generalized Pareto distribution", Technometrics
    51): a fixed grid of m = 30 + ⌊√M⌋ values θ_j = 1/y_(M) + (1 − √(m/(j − 1/2)))/(3 y_(q)),
    y_(q) the first quartile, of θ = −k/σ, weighted by the profile log-likelihood
    ℓ(θ) = M (log(θ/k(θ)) − k(θ) − 1) with k(θ) = −mean log(1 − θ y); then k̂ = mean
    log(1 − θ̂ y), σ̂ = −k̂/θ̂, and k̂ is shrunk toward 1/2 by the weakly informative prior
    of PSIS, (M k̂ + 10 · 1/2)/(M + 10). The weights' variance is
    finite for k < 1/2 and their mean for k < 1; above ``pareto_threshold(n)`` the
    estimate and its delta-method standard error are unreliable.

    ``log_weights``: (..., n), reduced along the last axis; ``mask`` as elsewhere in this
    module (masked slots are zero weights; M stays that of n slots, so the tail must hold
    M + 1 live weights). Returns k̂ (shape ``log_weights.shape[:-1]``, the input's dtype),
    −inf where no tail can be fitted: fewer than M + 1 live weights, a flat tail (equal
    weights), or n < 16 (M < 4). float32 and float64 alike: the fit runs on weights
    scaled by their maximum, in [0, 1].
    """
    return _pareto_tail(log_weights, mask)[1]


pareto_shape = pareto_khat  # the name under which 0.x releases exported it


def hill_khat(log_weights: Array, mask: Array | None = None) -> Array:
    """Hill's estimate of the weights' Pareto tail index (Hill 1975, "A simple general
    approach to inference about the tail of a distribution", Ann. Statist. 3): the mean
    of log(w_(i) / w_(M+1)) over the M = min(⌈n/5⌉, ⌈3√n⌉) largest weights (the tail
    size of ``pareto_khat``).

    Where log w has an exponential upper tail (Pareto weights: the reverse weights of
    RAISE, exp(−Δβ h) of a log-density ratio h whose lower tail is unbounded), this is the
    maximum-likelihood k of that tail, with sd k/√M against (1 + k)/√M for the GPD fit of
    ``pareto_khat`` (0.18 against 0.40 at k = 0.8, M = 20). It is not a test of a heavy
    tail in general: a log-normal bulk reads as k ≈ 0.56σ at M = n/5 (the normal's mean
    excess over its 0.8 quantile), so it answers only where the tail's form is known.

    Shapes and masks as ``pareto_khat``; −inf where no tail can be read (fewer than M + 1
    live weights, or n < 16). A nan or +inf log-weight (a broken density, not a weight:
    ``sanitize`` first) in an unmasked slot is a ValueError for concrete weights; traced
    ones give nan there (from n = 16), not the −inf of the lightest tail."""
    log_weights = _apply_mask(log_weights, mask)
    _no_nan_or_plus_inf("log_weights", log_weights)
    num_tail = pareto_tail_size(log_weights.shape[-1])
    if num_tail < 4:
        return jnp.full(log_weights.shape[:-1], -jnp.inf, log_weights.dtype)
    top = jax.lax.top_k(log_weights, num_tail + 1)[0]  # descending
    threshold = top[..., -1]
    excess = jnp.mean(top[..., :-1] - threshold[..., None], axis=-1)
    khat = jnp.where(jnp.isfinite(threshold) & jnp.isfinite(top[..., 0]), excess, -jnp.inf)
    broken = jnp.isnan(top[..., 0]) | (top[..., 0] == jnp.inf)  # top_k puts nan and +inf first
    return jnp.where(broken, jnp.nan, khat)


# a fitted heavy tail is refused where all M of its draws would stay below the largest exceedance seen with less
# than this probability (the fit says the sample should have reached far higher)
TAIL_FIT_LEVEL = 1e-3


def pareto_tail_fits(log_weights: Array, mask: Array | None = None) -> Array:
    """Whether the Pareto tail of ``pareto_khat`` is consistent with the largest weight.

    A GPD fitted with shape k̂ > 0 to the M exceedances predicts their maximum: P(max ≤ y)
    = F(y)^M. Where the observed largest exceedance is so small that this is below
    TAIL_FIT_LEVEL, the tail is lighter than the fit says (a bounded weight whose top
    values pile up near their supremum, as a Gaussian-mixture proposal's for a two-mode
    target can: the exceedances skewed within a bounded range), and k̂ says nothing
    about the estimate's reliability. True for k̂ ≤ 0 and where no tail is fitted."""
    return _tail_fits(*_pareto_tail(log_weights, mask), jnp.shape(log_weights)[:-1])


def _tail_fits(ordered, shape, scale, batch_shape):
    """``pareto_tail_fits`` from a ``_pareto_tail`` fit."""
    if ordered.shape[-1] == 0:
        return jnp.ones(batch_shape, bool)
    num_tail = ordered.shape[-1] - 1
    largest = 1.0 - jnp.exp(ordered[..., 0] - ordered[..., -1])  # in weights scaled by the largest
    heavy = (shape > 0) & (scale > 0) & jnp.isfinite(shape)
    k = jnp.where(heavy, shape, 1.0)
    survival = jnp.exp(-jnp.log1p(k * largest / jnp.where(heavy, scale, 1.0)) / k)
    log_probability = num_tail * jnp.log1p(-jnp.minimum(survival, 1.0 - jnp.finfo(survival.dtype).eps))
    return ~heavy | (log_probability >= np.log(TAIL_FIT_LEVEL))


def pareto_khat_and_fit(log_weights: Array, mask: Array | None = None) -> tuple[Array, Array]:
    """(k̂, whether the largest weight does not refute the fit): ``pareto_khat`` and
    ``pareto_tail_fits`` from one tail fit."""
    ordered, shape, scale = _pareto_tail(log_weights, mask)
    return shape, _tail_fits(ordered, shape, scale, jnp.shape(log_weights)[:-1])


def pareto_heavy_tail(log_weights: Array, threshold, mask: Array | None = None) -> Array:
    """Whether the weights' tail is heavier than ``threshold``: Pareto k̂ above it, with a
    fit that the largest weight does not refute (``pareto_khat_and_fit``)."""
    shape, fits = pareto_khat_and_fit(log_weights, mask)
    return (shape > threshold) & fits


TAIL_REACH = 100.0  # the Pareto s.e. integrates the fitted tail up to what TAIL_REACH × n draws would reach
_NODES, _NODE_WEIGHTS = np.polynomial.legendre.leggauss(48)  # Gauss–Legendre on [−1, 1]


def _gpd_capped_second_moment(threshold, shape, scale, num_tail: int, dtype):
    """E[(u + min(Y, y_max))²] for Y ~ GPD(k, σ) and y_max its quantile of exceedance
    probability 1/(TAIL_REACH · M): with z = −log P(Y > y), Y = σ (e^{kz} − 1)/k and
    E[g(Y)] = ∫_0^{z_max} g(Y(z)) e^{−z} dz + e^{−z_max} g(Y(z_max)), by Gauss–Legendre."""
    z_max = float(np.log(TAIL_REACH * num_tail))
    z = jnp.asarray(0.5 * z_max * (_NODES + 1.0), dtype)
    weights = jnp.asarray(0.5 * z_max * _NODE_WEIGHTS * np.exp(-0.5 * z_max * (_NODES + 1.0)), dtype)
    k = shape[..., None]
    flat = jnp.abs(k) < 1e-6  # the exponential tail, k → 0: Y = σ z
    k_safe = jnp.where(flat, 1.0, k)

    def exceedance(z):
        return scale[..., None] * jnp.where(flat, z, jnp.expm1(k_safe * z) / k_safe)

    inside = jnp.sum(weights * (threshold[..., None] + exceedance(z)) ** 2, axis=-1)
    cap = (threshold + exceedance(jnp.asarray([z_max], dtype))[..., 0]) ** 2
    return inside + np.exp(-z_max) * cap


def stderr_log_mean_exp_pareto(log_weights: Array, mask: Array | None = None, *, shape_margin: float = 0.0,
                               max_shape: float = 0.5) -> Array:
    """``stderr_log_mean_exp`` with the weights' second moment taken partly from their
    fitted Pareto tail: Σ w² over the n − M smallest weights, plus M times the second
    moment of u + Y, Y ~ GPD(k̂, σ̂) the exceedance over the threshold u (the
    semi-parametric moment estimate of Peng 2001, "Estimating the mean of a heavy tailed
    distribution", Statist. Probab. Lett. 52, with the tail fit of ``pareto_khat``).

    The sample variance of skewed weights is too small exactly in the runs that have not
    drawn their largest values, so the plain delta-method s.e. under-covers run by run;
    the fitted tail extrapolates past the largest draw, up to the weight that
    TAIL_REACH · n draws would reach (the quantile 1 − 1/(TAIL_REACH · n): the full
    moment, 2σ²/((1 − k)(1 − 2k)), overstates the spread of log Ẑ; TAIL_REACH is chosen
    on the calibration table, benchmarks/results/calibration.md). The larger of the two relative
    variances is used, so the s.e. never shrinks; where k̂ ≥ ``max_shape`` (by default 1/2:
    no finite variance to extrapolate) or no tail can be fitted, this is the plain
    ``stderr_log_mean_exp``.

    shape_margin: extrapolate from the shape min(k̂ + shape_margin · (1 + k̂)/√M, max_shape)
        rather than k̂ ((1 + k̂)/√M the GPD shape's asymptotic sd from M exceedances): a
        tail read from weights that may not yet have drawn their largest values (the
        particle samplers' runs that never resampled use 1/2 with ``max_shape`` 0.7,
        ``jaxz.estimators._weight_checks.importance_stderr``).
    """
    if not 0.0 <= float(shape_margin) or not 0.0 < float(max_shape) < 1.0:
        raise ValueError(f"shape_margin must be >= 0 and max_shape in (0, 1), got {shape_margin}, {max_shape}")
    plain = stderr_log_mean_exp(log_weights, mask)
    num_tail = pareto_tail_size(jnp.shape(log_weights)[-1])
    if num_tail < 4:
        return plain
    ordered, shape, scale = _pareto_tail(log_weights, mask)
    log_weights = _apply_mask(log_weights, mask)
    n = _count(log_weights, mask)
    top = ordered[..., -1]
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    threshold = jnp.exp(ordered[..., 0] - top)
    scaled = jnp.exp(log_weights - top[..., None])
    total = reduction.sum(scaled, axis=-1)  # sums over the weights: one fixed order on any layout
    # Σ w² over the n − M smallest: all minus the M largest (their rounding error is small
    # against the tail's own M·u² and more)
    sum_sq_top = reduction.sum(jnp.exp(2.0 * (ordered[..., 1:] - top[..., None])), axis=-1)
    sum_sq_bulk = jnp.maximum(reduction.sum(scaled**2, axis=-1) - sum_sq_top, 0.0)
    usable = (shape < max_shape) & jnp.isfinite(shape) & jnp.isfinite(plain) & (scale > 0)
    if shape_margin:
        shape = jnp.minimum(khat_plus_sds(shape, num_tail, shape_margin), max_shape)
    k = jnp.where(usable, shape, 0.0)  # keeps the unused branch finite
    tail_moment = _gpd_capped_second_moment(threshold, k, scale, num_tail, log_weights.dtype)
    second_moment = n * (sum_sq_bulk + num_tail * tail_moment) / total**2  # E[w²] / mean(w)²
    rel_var = jnp.maximum(second_moment - 1.0, 0.0) * n / jnp.maximum(n - 1.0, 1.0)
    tailed = jnp.sqrt(rel_var / n)
    return jnp.where(usable, jnp.maximum(tailed, plain), plain)


def _gpd_fit(x: Array, live: Array) -> tuple[Array, Array]:
    """Zhang & Stephens (2009) posterior-mean fit of a generalized Pareto distribution to
    the ascending exceedances x (last axis), with the PSIS prior on the shape. Returns
    (k̂, σ̂); k̂ = −inf where not ``live`` or the fit is degenerate."""
    n = x.shape[-1]
    m = 30 + int(np.sqrt(n))
    quartile = x[..., int(n / 4.0 + 0.5) - 1]
    largest = x[..., -1]
    j = jnp.arange(1, m + 1, dtype=x.dtype)
    safe_largest = jnp.where(largest > 0, largest, 1.0)
    safe_quartile = jnp.where(quartile > 0, quartile, 1.0)
    # candidate θ = −k/σ, spread around 1/x_max (Zhang & Stephens, eq. 3.2 with prior 3)
    theta = 1.0 / safe_largest[..., None] + (1.0 - jnp.sqrt(m / (j - 0.5))) / (3.0 * safe_quartile[..., None])
    k_of_theta = jnp.mean(jnp.log1p(-theta[..., :, None] * x[..., None, :]), axis=-1)
    profile = n * (jnp.log(-theta / k_of_theta) - k_of_theta - 1.0)  # profile log-likelihood
    posterior = jax.nn.softmax(jnp.where(jnp.isfinite(profile), profile, -jnp.inf), axis=-1)
    theta_hat = jnp.sum(posterior * jnp.where(jnp.isfinite(profile), theta, 0.0), axis=-1)
    raw_shape = jnp.mean(jnp.log1p(-theta_hat[..., None] * x), axis=-1)
    scale = -raw_shape / theta_hat  # σ = −k/θ with the likelihood's k (as in Zhang & Stephens)
    shape = (n * raw_shape + 10 * 0.5) / (n + 10)  # PSIS's weakly informative prior on k
    usable = live & (largest > 0) & (quartile > 0) & jnp.isfinite(shape)
    return jnp.where(usable, shape, -jnp.inf), jnp.where(usable & jnp.isfinite(scale), scale, 0.0)


def pareto_threshold(num_samples: int) -> float:
    """The k̂ above which importance-sampling estimates from ``num_samples`` draws are
    unreliable: min(1 − 1/log10(n), 0.7) (Vehtari et al. 2024, §3.2.4). ``num_samples``
    is a count, an integer >= 1 (ValueError otherwise); below 11 the threshold is that of n = 11."""
    num_samples = _checks.integer("num_samples", num_samples, 1, what="importance draws")
    return float(min(1.0 - 1.0 / np.log10(max(num_samples, 11)), 0.7))


Z_975 = 1.959963984540054  # the standard normal's 0.975 quantile
MIN_DEGREES_OF_FREEDOM = 1.0  # t_1 (Cauchy): the widest interval used, 6.5 × the normal one
MAX_DEGREES_OF_FREEDOM = 1e6  # above: the normal quantile (the factor differs from 1 by < 1e-6)


def stderr_with_log_bias(stderr: Array) -> Array:
    """The error bar of log Ẑ about log Z when Ẑ is unbiased: sqrt(s² + (s²/2)²), the root
    mean square error of log Ẑ rather than its standard deviation s.

    E[Ẑ] = Z puts log Ẑ below log Z on average, by s²/2 to second order (the delta method;
    exactly so when Ẑ is log-normal, the limit of the particle methods' central limit
    theorem), and the bias grows against the spread as s does: at s = 1 it is half an s.e.,
    so the symmetric interval log Ẑ ± 1.96 s misses on the low side far more often than
    on the high one. Where s is small nothing changes (s = 0.2: 0.5 % wider). nan and
    +inf stay so. An
    s.e. is >= 0: a concrete negative (or −inf) entry is a ValueError; a traced one gives nan."""
    if not isinstance(stderr, jax.core.Tracer) and np.any(np.asarray(stderr) < 0):
        raise ValueError(f"stderr must be >= 0 (a standard error; nan and +inf pass through), got "
                         f"{stderr if np.size(stderr) <= 8 else 'an array with negative entries'}")
    return jnp.where(stderr < 0, jnp.nan, stderr * jnp.sqrt(1.0 + 0.25 * stderr**2))


def variance_without_log_bias(stderr: Array) -> Array:
    """The variance s² of log Ẑ back from an error bar r = ``stderr_with_log_bias(s)``:
    s² + s⁴/4 = r² gives s² = 2 (sqrt(1 + r²) − 1). nan and inf stay so."""
    return 2.0 * (jnp.sqrt(1.0 + stderr**2) - 1.0)


def student_t_factor(nu: Array, iterations: int = 60) -> Array:
    """t_ν(0.975) / z(0.975), ν clipped to [MIN_DEGREES_OF_FREEDOM, MAX_DEGREES_OF_FREEDOM].

    t_ν(p) for p > 1/2 solves I_x(ν/2, 1/2) = 2(1 − p) with x = ν/(ν + t²) (the t
    distribution's CDF through the regularized incomplete beta function); I_x increases
    in x, so bisection on x ∈ (0, 1) finds it to the dtype's precision in 60 halvings.
    A concrete nan ν is a ValueError (no degrees of freedom to clip); a traced one gives a
    nan factor (an unknown interval)."""
    if not isinstance(nu, jax.core.Tracer) and np.any(np.isnan(np.asarray(nu, dtype=float))):
        raise ValueError(f"nu (degrees of freedom) must be a number (clipped to [{MIN_DEGREES_OF_FREEDOM:g}, "
                         f"{MAX_DEGREES_OF_FREEDOM:g}]), got nan")
    nu = jnp.clip(nu, MIN_DEGREES_OF_FREEDOM, MAX_DEGREES_OF_FREEDOM)
    half = jnp.asarray(0.5, nu.dtype)
    target = jnp.asarray(2 * (1 - 0.975), nu.dtype)

    def halve(_, bounds):
        low, high = bounds
        middle = 0.5 * (low + high)
        below = jax.scipy.special.betainc(0.5 * nu, half, middle) < target
        return jnp.where(below, middle, low), jnp.where(below, high, middle)

    low, high = jax.lax.fori_loop(0, iterations, halve, (jnp.zeros_like(nu), jnp.ones_like(nu)))
    x = 0.5 * (low + high)
    quantile = jnp.sqrt(nu * (1 - x) / x)
    return jnp.where(nu >= MAX_DEGREES_OF_FREEDOM, 1.0, jnp.maximum(quantile / Z_975, 1.0)).astype(nu.dtype)


__all__ = [
    "sanitize",
    "logsumexp",
    "log_mean_exp",
    "normalize",
    "log_ess",
    "ess",
    "log_normal_ess",
    "conditional_ess",
    "stderr_log_mean_exp",
    "stderr_log_mean_exp_pareto",
    "stderr_with_log_bias",
    "variance_without_log_bias",
    "pareto_khat",
    "hill_khat",
    "pareto_tail_fits",
    "pareto_khat_and_fit",
    "pareto_heavy_tail",
    "pareto_tail_size",
    "khat_plus_sds",
    "check_shapes",
    "pareto_shape",
    "pareto_threshold",
    "student_t_factor",
]
