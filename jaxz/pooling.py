"""Pooling independent runs into one Estimate: ``combine_runs``, the recommended error bar.

Each run's Ẑ_r (or 1/Ẑ_r) is unbiased, so their mean is too; its standard error is read
from the runs' spread (delta method and Cox's log-normal interval, Student-t widened),
averaged with the runs' own error bars where at least half the runs have one, and holds
the log of the mean's bias. See ``combine_runs``.
"""
import math
import statistics

import jax.numpy as jnp
import numpy as np

from jaxz import weights as _weights
from jaxz._status import (
    STATUS_DEGENERATE, STATUS_FEW_PARTICLES, STATUS_LOW_ESS, STATUS_NONFINITE, STATUS_OK, STATUS_RUNS_DISAGREE,
    STATUS_STDERR_UNRESOLVED,
)
from jaxz.base import Estimate
from jaxz.types import Array


def _or_over_runs(status: Array) -> Array:
    """The bitwise OR of the runs' status words, as a max per bit: XLA has no cross-device
    OR reduction, so ``jnp.bitwise_or.reduce`` fails on runs sharded over devices."""
    bits = jnp.left_shift(jnp.int32(1), jnp.arange(31, dtype=jnp.int32))
    return jnp.sum(jnp.where(jnp.max(status[:, None] & bits, axis=0) > 0, bits, 0)).astype(jnp.int32)


def _stderr_log_normal(log_z: Array, valid: Array) -> Array:
    """The s.e. of log Z from R runs whose log Ẑ_r were normal, N(log Z − σ²/2, σ²) (the
    limit of the SMC central limit theorem for log Ẑ; E[Ẑ] = Z): the estimate m̂ + σ̂²/2 has
    variance σ²/R + σ⁴/(2(R − 1)) (Cox's interval for a log-normal mean; Zhou & Gao 1997,
    Statist. Med. 16). σ̂² is read from the runs above their mean only, twice their semi-
    variance: the right tail of log Ẑ is what the mean of the Ẑ_r needs and misses, while
    runs far below (AIS with few rungs: log Ẑ skewed to the left, Ẑ light-tailed) do not
    threaten it and would only widen the bar. 0 when a valid run has log Ẑ = −inf."""
    finite = valid & jnp.isfinite(log_z)
    count = jnp.sum(finite).astype(log_z.dtype)
    mean = jnp.sum(jnp.where(finite, log_z, 0.0)) / jnp.maximum(count, 1.0)
    above = jnp.where(finite, jnp.maximum(log_z - mean, 0.0), 0.0)
    spread = 2.0 * jnp.sum(above**2) / jnp.maximum(count - 1.0, 1.0)
    stderr = jnp.sqrt(spread / count + spread**2 / (2.0 * jnp.maximum(count - 1.0, 1.0)))
    return jnp.where(jnp.sum(finite) == jnp.sum(valid), stderr, 0.0)


def _stderr_within_runs(log_z: Array, stderr: Array, valid: Array) -> tuple[Array, Array]:
    """The s.e. of log (1/R) Σ_r Ẑ_r from the runs' own error bars, and whether at least
    half the runs that count have one.

    Each run's reported s.e. σ̂_r, its log-bias undone (``variance_without_log_bias``), gives
    V_r = 1 − exp(−σ̂_r²), the relative variance of Ẑ_r. Σ_r Ẑ_r² V_r is unbiased for
    Σ_r Var(Ẑ_r) where each Ẑ_r² V_r is (Lee & Whiteley 2018's estimator), so runs whose Ẑ_r
    and V_r read low together weigh little; divided by (Σ_r Ẑ_r)² it is the relative variance
    of the mean. The runs draw one estimator, so the R_own runs with an s.e. stand for all R:
    the sum is scaled by R / R_own."""
    counts = valid & ~jnp.isneginf(log_z)  # a run with Ẑ_r = 0 adds nothing to either sum
    has = counts & jnp.isfinite(stderr)
    num_counts, num_has = jnp.sum(counts), jnp.sum(has)
    enough = (2 * num_has >= num_counts) & (num_has > 0)
    own = jnp.where(has, stderr, 0.0).astype(log_z.dtype)
    relative = -jnp.expm1(-_weights.variance_without_log_bias(own))
    shares = jnp.exp(2.0 * _weights.normalize(log_z, counts))  # (Ẑ_r / Σ Ẑ)²
    scale = num_counts.astype(log_z.dtype) / jnp.maximum(num_has, 1).astype(log_z.dtype)
    pooled = jnp.sum(jnp.where(has, shares * relative, 0.0)) * scale
    return jnp.sqrt(-jnp.log1p(-jnp.minimum(pooled, 1.0))), enough


def combine_runs(estimate: Estimate, *, reciprocal: bool = False) -> Estimate:
    """Pool independent runs into one Estimate: the recommended error bar.

    ``estimate`` has a leading run axis (R,) on every field (``jax.vmap`` over keys). Each
    run's Ẑ_r = exp(log_z_r) is unbiased for Z, so their mean is too:
    log Ẑ = log (1/R) Σ_r Ẑ_r. Its standard error s is built in three parts:

    1. between runs: the larger of the delta-method s.e. of the mean from the spread of the
       Ẑ_r (``jaxz.weights.stderr_log_mean_exp``) and Cox's log-normal s.e. from the runs'
       upper spread (``_stderr_log_normal``: where log Ẑ spreads by a nat or more, a few runs
       rarely draw the large Ẑ_r the mean needs, and the mean and spread read low together),
       widened by t_{R−1}(0.975)/1.96 (``jaxz.weights.student_t_factor``) so that
       log Ẑ ± 1.96 s is a Student-t interval;
    2. within runs: where at least half the runs that count have a finite s.e. of their own,
       the pooled variance is the average of the between-runs one and
       Σ_r Ẑ_r² V_r / (Σ_r Ẑ_r)² (``_stderr_within_runs``; Lee & Whiteley 2018);
    3. the log's bias: log of an unbiased mean lies about s²/2 below log Z, so the s.e.
       reported is sqrt(s² + s⁴/4) (``jaxz.weights.stderr_with_log_bias``).

    No spread read from the runs sees a right tail of log Ẑ they have not drawn: where
    log Ẑ spreads by a nat or more, more particles per run is the remedy, not more runs.

    Costs add up. Status bits are OR-ed, except STATUS_STDERR_UNRESOLVED (the pooled error
    bar does not need a run's own) and the STATUS_LOW_ESS bits, which the pool carries only
    where the runs that carry them hold half of Σ_r Ẑ_r or more, or are half the runs or more
    (then they are the runs the spread is read from): a rare flagged run is still an
    unbiased draw whose spread the pooled s.e. reads, and OR-ing a rare flag would flag
    almost every large pool. STATUS_FEW_PARTICLES where the runs' ESS is below 2 (one run
    dominates the mean) or R = 1 (no spread: the s.e. is nan). A nan or +inf run is left
    out of the mean and flagged STATUS_NONFINITE (no unbiased Ẑ is infinite); a run with
    log_z = −inf (a legitimate zero) counts. Half-precision runs are pooled, and returned,
    in float32 (their spread and summed costs would round to 0 and inf). Every field must
    have the same leading run axis (ValueError otherwise).

    reciprocal: pool 1/Ẑ_r instead, log Ẑ = −log (1/R) Σ_r 1/Ẑ_r, for estimators whose
        1/Ẑ is the unbiased one (``jaxz.raise_``: E[1/Ẑ] = 1/Z; pooling their Ẑ_r is biased
        upward whatever R, by Jensen); −inf and +inf swap roles. With N particles in every
        run this is RAISE's one-run estimate from all R·N reverse weights.
    """
    if not isinstance(reciprocal, (bool, np.bool_)):  # a string such as "no" would read as True
        raise ValueError(f"reciprocal must be a bool (True pools 1/Ẑ_r, False pools Ẑ_r), got {reciprocal!r}")
    log_z = jnp.asarray(estimate.log_z)
    if log_z.ndim != 1 or log_z.shape[0] < 1:
        raise ValueError(f"estimate must have one leading run axis (vmap over keys), got log_z of shape {log_z.shape}")
    num_runs = log_z.shape[0]
    for name in ("log_z_stderr", "cost", "status"):
        shape = jnp.shape(getattr(estimate, name))
        if shape[:1] != (num_runs,):
            raise ValueError(f"estimate.{name} must have the leading run axis of log_z ({num_runs} runs), "
                             f"got shape {shape}")
    dtype = jnp.promote_types(log_z.dtype, jnp.float32) if jnp.issubdtype(log_z.dtype, jnp.floating) else None
    log_z = log_z.astype(dtype) if dtype is not None else log_z
    sign = -1.0 if reciprocal else 1.0
    log_z = sign * log_z  # the log of the unbiased quantity: Ẑ, or 1/Ẑ
    valid = ~jnp.isnan(log_z) & (log_z != jnp.inf)
    status = jnp.where(jnp.all(valid), STATUS_OK, STATUS_NONFINITE)
    pooled = _weights.log_mean_exp(log_z, valid)
    num_valid = jnp.sum(valid)
    # the spread is read from the runs themselves: a Student-t interval with R − 1 degrees
    # of freedom (a nan s.e. below two runs, from stderr_log_mean_exp, stays nan)
    widen = _weights.student_t_factor(jnp.maximum(num_valid - 1, 1).astype(log_z.dtype))
    between = jnp.maximum(_weights.stderr_log_mean_exp(log_z, valid), _stderr_log_normal(log_z, valid)) * widen
    # where most runs have their own error bar, the two estimates of the pooled variance are averaged
    within, use_own = _stderr_within_runs(log_z, jnp.asarray(estimate.log_z_stderr).astype(log_z.dtype), valid)
    stderr = jnp.where(use_own & jnp.isfinite(between), jnp.sqrt(0.5 * (between**2 + within**2)), between)
    stderr = _weights.stderr_with_log_bias(stderr)  # log of a mean of unbiased Ẑ_r: off by about s²/2
    run_status = jnp.asarray(estimate.status, jnp.int32)
    status = status | (_or_over_runs(run_status) & ~(STATUS_STDERR_UNRESOLVED | STATUS_LOW_ESS))
    status = jnp.where(jnp.isneginf(pooled), status | STATUS_DEGENERATE, status)
    low_runs = valid & ((run_status & STATUS_LOW_ESS) != 0)
    low_share = jnp.sum(jnp.where(low_runs, jnp.exp(_weights.normalize(log_z, valid)), 0.0))  # of Σ_r Ẑ_r
    # the flagged runs' own bits reach the pool where the mean rests on them, or where they are
    # half the runs or more (the flag then describes the runs the spread is read from, not a rare one)
    carried = ((low_share >= 0.5) | (2 * jnp.sum(low_runs) >= num_valid)) & jnp.isfinite(pooled)
    status = status | jnp.where(carried, _or_over_runs(jnp.where(low_runs, run_status, 0)) & STATUS_LOW_ESS, 0)
    few = ((num_runs == 1) | (_weights.ess(log_z, valid) < 2.0)) & jnp.isfinite(pooled)
    status = status | jnp.where(few, STATUS_FEW_PARTICLES, 0)
    cost = jnp.asarray(estimate.cost)
    if jnp.issubdtype(cost.dtype, jnp.floating):
        cost = cost.astype(jnp.promote_types(cost.dtype, jnp.float32))
    return Estimate(sign * pooled, stderr, jnp.sum(cost, axis=0), status.astype(jnp.int32))


# runs_disagree: Cochran's Q beyond its χ² quantile at 1 − HETEROGENEITY_LEVEL flags the pool; a run beyond
# DISAGREEMENT combined s.e.s of the runs' median is flagged whatever Q says
HETEROGENEITY_LEVEL = 1e-3
DISAGREEMENT = 4.0


def _chi2_quantile(probability, degrees):
    """χ²_ν quantile by Wilson & Hilferty's cube (1931); at p = 0.999 it is within 3 % of the
    exact quantile for every ν ≥ 1."""
    z = statistics.NormalDist().inv_cdf(probability)
    return degrees * (1.0 - 2.0 / (9.0 * degrees) + z * jnp.sqrt(2.0 / (9.0 * degrees))) ** 3


def runs_disagree(estimate: Estimate) -> tuple[Array, Array]:
    """(pool_flag, run_flags): whether independent runs (leading run axis) disagree beyond
    their own error bars, the check that sees a mode some runs missed.

    Cochran's Q = Σ_r (log Ẑ_r − m)² / s_r² over the runs with status 0 and a finite,
    positive s.e. (m their inverse-variance mean) is χ²_{k−1} when every s_r is right; above
    its 1 − HETEROGENEITY_LEVEL quantile the pool is flagged. A run beyond DISAGREEMENT
    combined s.e.s of the runs' median (whose s.e. is √(π/2) × the median s.e. / √k) is
    flagged whatever Q says: over many runs one run that lost a mode barely moves Q. The
    median, not m: runs that lost a mode often keep the smallest s.e.s and would pull m to
    themselves. The majority is taken as right; where most runs are wrong the runs flagged
    are the good ones, but the pool is flagged either way (``pool_runs``)."""
    log_z, stderr = estimate.log_z, estimate.log_z_stderr
    usable = (estimate.status == 0) & jnp.isfinite(log_z) & jnp.isfinite(stderr) & (stderr > 0)
    precision = jnp.where(usable, 1.0 / jnp.where(usable, stderr, 1.0) ** 2, 0.0)
    values = jnp.where(usable, log_z, 0.0)
    mean = jnp.sum(precision * values) / jnp.maximum(jnp.sum(precision), jnp.finfo(log_z.dtype).tiny)
    count = jnp.sum(usable)
    degrees = jnp.maximum(count - 1, 1).astype(log_z.dtype)
    pooled = (count >= 2) & (jnp.sum(precision * (values - mean) ** 2) > _chi2_quantile(1.0 - HETEROGENEITY_LEVEL,
                                                                                          degrees))
    centre = jnp.nanmedian(jnp.where(usable, log_z, jnp.nan))
    typical = jnp.nanmedian(jnp.where(usable, stderr, jnp.nan))
    centre_stderr = math.sqrt(math.pi / 2) * typical / jnp.sqrt(jnp.maximum(count, 1))
    gap = jnp.abs(log_z - centre) / jnp.sqrt(stderr ** 2 + centre_stderr ** 2)
    return pooled, usable & (gap > DISAGREEMENT)


def pool_runs(estimate: Estimate) -> tuple[Estimate, Estimate]:
    """(runs, pool): the runs with STATUS_RUNS_DISAGREE where they disagree with the others
    (``runs_disagree``), and ``combine_runs`` of them, flagged STATUS_RUNS_DISAGREE where Q
    rejects and carrying every flagged run's causes (stricter than ``combine_runs``, which
    carries them only where those runs hold half the mean: here a run that lost a mode
    weighs little and is the warning)."""
    inconsistent, outliers = runs_disagree(estimate)
    runs = estimate._replace(status=(estimate.status | jnp.where(outliers, STATUS_RUNS_DISAGREE, 0)).astype(jnp.int32))
    pooled = combine_runs(runs)
    status = pooled.status | jnp.where(inconsistent, STATUS_RUNS_DISAGREE, 0)
    status = status | _or_over_runs(runs.status & STATUS_LOW_ESS)
    return runs, pooled._replace(status=jnp.asarray(status).astype(jnp.int32))


__all__ = ["combine_runs", "runs_disagree", "pool_runs"]
