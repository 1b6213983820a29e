"""What importance-type weights can vouch for: the s.e. of log mean w read with their
fitted Pareto tail, and STATUS_LOW_ESS where too few of them, or too heavy a tail, carry
the estimate. Used by importance sampling, AIS and RAISE, the mixture stage of
``jaxz.evidence``, SGAIS's chunks, and the particle runs that never resampled
(``jaxz.estimators._particles.genealogy_estimate``)."""

import jax.numpy as jnp

from jaxz import weights as _weights
from jaxz._status import STATUS_FEW_PARTICLES, STATUS_HEAVY_TAIL

MIN_EFFECTIVE_PARTICLES = 2.0  # below this ESS an estimate is flagged STATUS_LOW_ESS
MIN_PARETO_SAMPLES = 100  # the Pareto-k̂ tail check needs this many weights (M = 20 in the tail)

UNRELIABLE_PARETO_SHAPE = 0.7  # Vehtari et al. (2024): above it the weights' mean is not usable


def importance_stderr(log_weights, *, never_resampled: bool = False):
    """The delta-method standard error of log mean w, its second moment's upper tail from
    the fitted Pareto tail (``weights.stderr_log_mean_exp_pareto``) when there are at least
    MIN_PARETO_SAMPLES weights, else the plain ``weights.stderr_log_mean_exp``; nan where
    the tail is so heavy (Pareto k̂ > 0.7) that the variance it estimates does not exist in
    practice. The sample variance alone is too small in exactly the runs whose skewed
    weights have not drawn their largest values; the fitted tail extrapolates past them.

    never_resampled: the weights of a particle run that never resampled (``genealogy_estimate``).
    Where resampling waits for the ESS to fall, the runs that drew their tail's large
    weights resampled, so the runs left are those whose tail looks lighter than it is,
    and they lie low. The tail is then extrapolated from k̂ + sd(k̂)/2 (up to 0.7, and for
    k̂ up to 0.7 rather than 1/2), sd(k̂) = (1 + k̂)/√M: a wider error bar for every such
    run, as no run can tell that it has not drawn its tail. The coverage it gives is in
    benchmarks/results/calibration.md."""
    if log_weights.shape[-1] < MIN_PARETO_SAMPLES:
        return _weights.stderr_log_mean_exp(log_weights)
    margin, limit = (0.5, UNRELIABLE_PARETO_SHAPE) if never_resampled else (0.0, 0.5)  # 0.0, 0.5: the defaults
    stderr = _weights.stderr_log_mean_exp_pareto(log_weights, shape_margin=margin, max_shape=limit)
    return jnp.where(_weights.pareto_heavy_tail(log_weights, UNRELIABLE_PARETO_SHAPE), jnp.nan, stderr)


def low_ess_status(log_weights, status, mask=None, never_resampled=False):
    """``status`` with STATUS_FEW_PARTICLES added when importance-type weights have an
    ESS below MIN_EFFECTIVE_PARTICLES, and STATUS_HEAVY_TAIL when they have an upper tail so
    heavy (Pareto k̂ above ``jaxz.weights.pareto_threshold(n)``, Vehtari et al. 2024) that
    the delta-method standard error computed from them is unreliable, or a bulk so spread
    that the draws stand for fewer than MIN_EFFECTIVE_PARTICLES were the log-weights normal
    (``jaxz.weights.log_normal_ess``) while the tail fit cannot rule out a heavy tail
    (k̂ > 0 and k̂ + 2(1 + k̂)/√M above the threshold, (1 + k̂)/√M the GPD shape's
    asymptotic sd from M exceedances): Kish's ESS then reads only the weights drawn. The
    sd term leaves unflagged a spread bulk whose top is bounded (one proposal's weights).

    Below MIN_PARETO_SAMPLES weights no tail can be fitted. For a particle run that never
    resampled (``never_resampled``, a bool or per-run array: sequential importance sampling
    over every step of the model) the bulk's spread then decides alone. Not for other
    weights: one proposal's bounded top reads as spread too, and so do AIS's weights over a
    short ladder; nor for a resampled run's last weights, which carry only the steps since,
    whose variance the genealogy reads."""
    num_slots = log_weights.shape[-1]
    low = _weights.ess(log_weights, mask) < MIN_EFFECTIVE_PARTICLES
    # k̂ needs a tail to fit: below MIN_PARETO_SAMPLES weights (20 tail points) it is noise;
    # a run that never resampled is judged by its bulk's spread alone there (see above)
    spread = _weights.log_normal_ess(log_weights, mask) < MIN_EFFECTIVE_PARTICLES
    heavy = spread & never_resampled
    if num_slots >= MIN_PARETO_SAMPLES:
        threshold = _weights.pareto_threshold(num_slots)
        shape, fits = _weights.pareto_khat_and_fit(log_weights, mask)
        # the bulk's spread says the draws stand for fewer than 2 (log-normal ESS), and the
        # tail fit cannot rule out a heavy tail: k̂ + 2 sd(k̂) above the threshold, sd(k̂) ≈
        # (1 + k̂)/√M (the GPD shape's asymptotic sd from M exceedances)
        undecided = _weights.khat_plus_sds(shape, _weights.pareto_tail_size(num_slots), 2.0) > threshold
        heavy = ((shape > threshold) & fits) | (spread & (shape > 0) & undecided & fits)
    several = num_slots > 1
    status = (status | jnp.where(low & several, STATUS_FEW_PARTICLES, 0)
              | jnp.where(heavy & several, STATUS_HEAVY_TAIL, 0))
    return jnp.asarray(status).astype(jnp.int32)
