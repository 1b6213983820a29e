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
    practice: RAISE with a 5-temperature ladder reported 0.61x the spread of its runs
    before the nan. The sample variance alone covered only 0.77 of the unflagged runs of
    AIS with 5 temperatures (400 runs, 8% beyond 3 s.e.): skewed weights look light in
    the runs that have not drawn their largest values; the fitted tail extrapolates.

    never_resampled: the weights of a particle run that never resampled (``genealogy_estimate``).
    Where resampling waits for the ESS to fall, the runs that drew their tail's large
    weights before the last step resampled, so the runs left are those whose tail looks
    lighter than it is, and they lie low: SMC-Twist on the critical 8 × 8 lattice at
    N = 1024 with resample_ess = 0.5 (1,600 runs, 74 % never resampled), their mean
    log Ẑ − log Z −0.018 against +0.032 for the runs that resampled, falling with the
    run's Pareto k̂ (−0.032 at k̂ 0.2-0.3, −0.006 at 0.6-0.7, 0.000 above). The tail is
    then extrapolated from k̂ + sd(k̂)/2 (up to 0.7, and for k̂ up to 0.7 rather than
    1/2), sd(k̂) = (1 + k̂)/√M. On those 1,600 runs the row went from 0.891 covered with
    2.2 % beyond 3 s.e. to 0.965 with 0.6 % (k̂ + 0: 0.923 with 1.6 %; k̂ + sd/4: 0.948
    with 1.0 %; k̂ + sd: 0.982 with 0.3 %; the runs that drew no large weight, k̂ < 0.3,
    still cover only 0.67), its rms s.e. from 1.0 to 1.5 × the spread of log Ẑ; in the
    calibration table (other keys) N = 1024 0.885 / 1.9 % → 0.963 / 0.6 % (800 runs),
    N = 8192 0.909 / 1.25 % (400 runs) → 0.949 / 0.8 % (2,000 runs; 0.959 / 1.1 % over
    the first 800), SMC-Base on a 4 × 4 grid 0.969 → 0.978; the filters', tempered SMC's
    and the Gaussian CAR's rows did not change (their runs resample)."""
    if log_weights.shape[-1] < MIN_PARETO_SAMPLES:
        return _weights.stderr_log_mean_exp(log_weights)
    margin, limit = (0.5, UNRELIABLE_PARETO_SHAPE) if never_resampled else (0.0, 0.5)  # 0.0, 0.5: the defaults
    stderr = _weights.stderr_log_mean_exp_pareto(log_weights, shape_margin=margin, max_shape=limit)
    return jnp.where(_weights._heavy_tail(log_weights, UNRELIABLE_PARETO_SHAPE), jnp.nan, stderr)


def low_ess_status(log_weights, status, mask=None, never_resampled=False):
    """``status`` with STATUS_FEW_PARTICLES added when importance-type weights have an
    ESS below MIN_EFFECTIVE_PARTICLES, STATUS_HEAVY_TAIL when they have an upper tail so heavy (Pareto
    k̂ above ``jaxz.weights.pareto_threshold(n)``, Vehtari et al. 2024) that the
    delta-method standard error computed from them is unreliable (measured on RAISE
    with a short ladder: s.e. 1.6x too small over 400 runs before this flag), or a bulk
    so spread that the draws stand for fewer than MIN_EFFECTIVE_PARTICLES were the
    log-weights normal (``jaxz.weights.log_normal_ess``) while the tail fit cannot rule
    out a heavy tail (k̂ > 0 and k̂ + 2(1 + k̂)/√M above the threshold, (1 + k̂)/√M the
    GPD shape's asymptotic sd from M exceedances): Kish's ESS then reads only the weights
    drawn. Measured on AIS with 5 temperatures (Gaussian path, d = 4, N = 100; 2,000
    runs): k̂ flagged 79 % of the runs, and the other 21 % covered 0.90 with 2.6 % beyond
    3 s.e. (log-weights' upper half spread 3-5 nats: a log-normal ESS of 100 e^{-9} or
    less); with this check 99.55 % are flagged. Without the sd term the check flagged the
    evidence suite's importance stages on the 5- and 10-d shells (64,000 draws, a bulk as
    spread, a bounded top), and their runs fell back to SMC's estimates (MSE 20-170x);
    with it those stages and AIS and RAISE with 100 temperatures are not flagged.
    Below MIN_PARETO_SAMPLES weights no tail can be fitted. For a particle run that never
    resampled (``never_resampled``, a bool or per-run array: sequential importance sampling
    over every step of the model) the bulk's spread then decides alone. Measured: SMC-Twist
    never resampling (SIS-Twist) on the seed's 544-variable binomial CAR at N = 64 spread its
    log-weights by about 4 nats (a log-normal ESS of 64 e^{-16}); of 200 runs the 62 with a
    Kish ESS of 2 or more covered 0.065 with 87 % beyond 3 s.e. at status 0, and all 200 are
    flagged now. Not for other weights: one proposal's bounded top reads as spread too, and
    so do AIS's weights over a short ladder (3 rungs, 2-d Gaussian path, N = 64: calibrated,
    0.95 over 400 runs, and the spread alone flagged 99.8 % of them; k̂'s sign from a dozen
    tail points, as the test below 100 draws, flagged 69 %); nor a resampled run's last
    weights, which carry only the steps since, whose variance the genealogy reads (a
    Gaussian CAR at N = 64 resampling at every step: 92 % of 2,000 calibrated runs)."""
    num_slots = log_weights.shape[-1]
    low = _weights.ess(log_weights, mask) < MIN_EFFECTIVE_PARTICLES
    # k̂ needs a tail to fit: below MIN_PARETO_SAMPLES weights (20 tail points) it is noise;
    # a run that never resampled is judged by its bulk's spread alone there (see above)
    spread = _weights.log_normal_ess(log_weights, mask) < MIN_EFFECTIVE_PARTICLES
    heavy = spread & never_resampled
    if num_slots >= MIN_PARETO_SAMPLES:
        threshold = _weights.pareto_threshold(num_slots)
        shape, fits = _weights._fitted_shape(log_weights, mask)
        # the bulk's spread says the draws stand for fewer than 2 (log-normal ESS), and the
        # tail fit cannot rule out a heavy tail: k̂ + 2 sd(k̂) above the threshold, sd(k̂) ≈
        # (1 + k̂)/√M (the GPD shape's asymptotic sd from M exceedances)
        undecided = _weights._shape_plus_sds(shape, _weights._num_tail(num_slots), 2.0) > threshold
        heavy = ((shape > threshold) & fits) | (spread & (shape > 0) & undecided & fits)
    several = num_slots > 1
    status = status | jnp.where(low & several, STATUS_FEW_PARTICLES, 0) | jnp.where(heavy & several, STATUS_HEAVY_TAIL, 0)
    return jnp.asarray(status).astype(jnp.int32)
