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
    half the runs that count have one. Each run's reported s.e. holds log Ẑ_r's bias
    (``jaxz.weights.stderr_with_log_bias``); with it undone (``variance_without_log_bias``),
    σ̂_r² gives V_r = 1 − exp(−σ̂_r²), the run's relative variance of Ẑ_r (the
    genealogy's 1 − V form, or the delta method's). Weighted by Ẑ_r², Σ_r Ẑ_r² V_r is
    unbiased for Σ_r Var(Ẑ_r) where Ẑ_r² V_r is unbiased for Var(Ẑ_r) (Lee & Whiteley
    2018's estimator, exactly): the runs whose Ẑ_r is low, and whose own V_r reads low with
    it, weigh little. Divided by (Σ_r Ẑ_r)² it is the relative variance of the pooled mean.
    The runs are independent draws of one estimator, so each Ẑ_r² V_r estimates the same
    Var(Ẑ): where a few runs have no s.e. of their own (a genealogy too short to read), the
    R_own that do stand for all R, Σ_own Ẑ_r² V_r · R / R_own. Measured (twisted SMC-Base on
    the Gaussian CAR, 8,000 pools of 8, 1.4 % of runs without an s.e.): beyond 3 s.e. 0.87 %
    when one missing s.e. dropped the pool's own-error-bar half, 0.80 % with it read from
    the others."""
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

    ``estimate`` has a leading run axis on every field (what ``jax.vmap`` over keys
    gives). Each run's Ẑ_r = exp(log_z_r) is unbiased for Z (for the unbiased
    estimators), so their mean is too: log Ẑ = log (1/R) Σ_r Ẑ_r, with the standard
    error of that mean from the spread of the Ẑ_r (delta method,
    ``jaxz.weights.stderr_log_mean_exp``), valid whatever each run's own error bar,
    widened by t_{R−1}(0.975)/1.96 (R the runs pooled; ``jaxz.weights.student_t_factor``)
    so that log Ẑ ± 1.96 s.e. is the Student-t interval of a spread read from R runs.
    Measured (AIS with an exact kernel on a Gaussian path, 32,000 runs pooled in groups;
    coverage / beyond 3 s.e. without → with the factor): R = 4 0.845 / 0.062 → 0.947 /
    0.017; R = 8 (``jaxz.evidence``'s default) 0.897 / 0.023 → 0.944 / 0.011, with 4 times
    more particles per run 0.915 / 0.022 → 0.953 / 0.007; R = 32 0.946 → 0.957 (factor
    1.04).
    The s.e. is the larger of that and the s.e. the runs' log Ẑ_r would give if they were
    normal (Cox's log-normal interval from their upper spread, ``_stderr_log_normal``): where
    log Ẑ spreads by a nat or more, a few runs rarely draw the large Ẑ_r that their mean
    needs, and the mean and the spread of the Ẑ_r then read low together. Measured (6,400
    runs per model pooled by 8, coverage / beyond 3 s.e. delta only → with the larger):
    twisted SMC on a Gaussian CAR (sd of log Ẑ 1.1) 0.910 / 0.031 → 0.953 / 0.015, SMC-Base
    on a periodic 8 × 8 Ising lattice (sd 1.7) 0.770 / 0.110 → 0.876 / 0.052, the LDA toy
    (sd 0.27) 0.951 → 0.955, AIS with 4 rungs (log Ẑ skewed left) 0.944 → 0.970. Still
    short: with 8 runs and a spread of a nat no symmetric bar holds at both 1.96 and 3 s.e.
    (exactly log-normal runs, σ = 1.1: 0.919 / 0.026), and where log Ẑ is skewed to the
    right (SMC-Twist on the 16 × 16 Ising models: 0.81-0.89; 0.76-0.92 pooled by 50) no
    spread read from the runs sees a tail they have not drawn (there the runs' Ẑ/Z has
    Pareto k̂ 0.39, 0.59 and 0.64-0.72 over 6,400 runs per model: no finite variance for
    two of the three): more particles per run (less spread of log Ẑ) is the remedy, not
    more runs.
    Where at least half the runs that count have a finite s.e. of their own (a resolved
    genealogy, or the delta method), the pooled variance is the average of the spread's
    estimate above and the runs' own, Σ_r Ẑ_r² V_r / (Σ_r Ẑ_r)² with V_r each run's
    relative variance of Ẑ_r (``_stderr_within_runs``): two estimates of one variance, the
    runs' weighted by Ẑ_r² as Lee & Whiteley's is unbiased on that scale, so that the runs
    that read low do not weigh; the runs without an s.e. of their own are read from the
    others (their sum scaled by R / R_own).
    Measured, coverage / beyond 3 s.e. spread only → averaged: twisted SMC-Base on a Gaussian
    CAR (40,000 runs pooled by 8) 0.942 / 0.015 → 0.948 / 0.007; AIS with an exact kernel
    and 20 rungs (16,000 runs) by 4 0.954 / 0.017 → 0.968 / 0.006, by 8 0.951 / 0.010 →
    0.962 / 0.004; exactly log-normal runs reporting their exact s.e. (20,000 pools of 8)
    σ = 0.7 0.937 / 0.016 → 0.948 / 0.007, σ = 1.1 0.922 / 0.025 → 0.926 / 0.016. Where
    half of the runs have a nan s.e. (SMC-Twist on the critical 8 × 8 lattice at N = 1024,
    1,600 pools of 8), reading them from the others took it from 0.939 / 0.013 (the spread
    alone in almost every pool) to 0.979 / 0.005, the pooled s.e. then larger than needed
    (rms 3.5x the spread: the other runs' own σ̂² are the noisy, flagged ones).
    The pooled log Ẑ is the log of an unbiased mean, so it lies about s²/2 below log Z on
    average: the s.e. reported is sqrt(s² + s⁴/4) of that s (``jaxz.weights.stderr_with_log_bias``).
    Costs add up; status bits are OR-ed, except STATUS_STDERR_UNRESOLVED (a run's own
    s.e. was not resolved), which the pooled error bar does not need, and the bits of
    STATUS_LOW_ESS, which the pool carries (the flagged runs' own bits) only where the runs
    that carry them hold half of Σ_r Ẑ_r or more (the mean rests on them), or are half the
    runs or more (the flag then describes the runs whose spread the pooled s.e. reads, as
    for SGAIS's runs, which are not unbiased draws): a rare flagged run is still an unbiased
    draw whose spread the pooled s.e. reads, and OR-ing a flag that 0.25 % of runs carry
    (SMC-Twist on the critical 8 × 8 lattice, N = 1024, 25,600 runs) flagged 39 % of pools of
    200 runs and would flag almost every pool of thousands, while those pools covered 0.980
    (the unflagged 0.949). When the
    pooled runs' ESS is below 2 (one run dominates the mean) the result is flagged
    STATUS_FEW_PARTICLES, as its spread is not yet seen; so is a single run (its s.e. is nan:
    one run has no spread). A nan or
    +inf run (a broken run: no unbiased Ẑ is infinite) is left out of the mean and
    flagged STATUS_NONFINITE; a run with log_z = −inf (a legitimate zero estimate) counts.
    Half-precision runs (float16, bfloat16) are pooled in float32, and the result is
    float32: their Ẑ spread and summed costs would round to an s.e. of 0 and an
    infinite cost. Every field must have the same leading run axis (ValueError otherwise).

    reciprocal: pool 1/Ẑ_r instead, log Ẑ = −log (1/R) Σ_r 1/Ẑ_r, for estimators whose 1/Ẑ
        is the unbiased one (``jaxz.raise_``: E[1/Ẑ] = 1/Z); the roles of −inf and +inf
        swap (a run with log_z = +inf, 1/Ẑ = 0, counts). Pooling RAISE's Ẑ_r instead is
        biased upward whatever R (E[Ẑ_r] ≥ Z by Jensen): on a Gaussian path with 5 rungs
        and 8 runs of 100 particles pooled, 500 pools, the mean error was +0.80 pooling Ẑ
        and +0.41 pooling 1/Ẑ (100 rungs: +0.0035 and +0.0001, each with coverage 0.95).
        With N particles in every run this is RAISE's one-run estimate from all R·N reverse
        weights.
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
    """χ²_ν quantile by Wilson & Hilferty's cube (1931): within 3 % of the exact value at
    p = 0.999 from ν = 1 (11.1 against 10.8), closer above."""
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
