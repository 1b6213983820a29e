"""The genealogy standard error of log Ẑ for resampling particle methods, with a fixed
lag so that it stays usable over long horizons.

Lee & Whiteley (2018) estimate Var(Ẑ)/Ẑ² from the time-0 ancestors ("Eves") of the final
particles, for multinomial resampling (Du & Guyader 2021 for ESS-triggered resampling):

    1 − V = r^{m+1} U_0,     r = N/(N − 1),   U_q = 1 − Σ_k (Σ_{i: A_q^i = k} W^i)²,

m the number of resampling events, W the final normalized weights and A_q^i the index,
among the particles of generation q (those made by the q-th resampling; q = 0 the
initial ones), of particle i's ancestor. Over long runs every lineage coalesces (U_0 → 0,
V → 1: the error bar saturates near 1 nat whatever the true error). The product
telescopes over generations,

    r^{m+1} U_0 = r U_m ∏_{q=0}^{m−1} F_q,    F_q = r U_q / U_{q+1},

and each factor depends only on how the families of generation q split into those of
q + 1. Following the fixed-lag idea of Olsson & Douc (2019, Bernoulli 25(2)), the factor
of generation q is read from the genealogy as it stands λ generations later (the weights
then current stand in for the final ones), when its families are still numerous, instead
of at the end. With m ≤ λ nothing is lagged and the estimate is exactly Lee & Whiteley's;
with m > λ it ignores dependence longer than λ generations (the particle system forgets
its past; the lag trades that truncation against coalescence noise).

The state keeps, per particle, its ancestors at the last λ + 1 generations (an (N, λ+1)
table of int16, int32 beyond 32,767 particles, updated by one gather per resampling event)
and the running sum of the closed factors' logs.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxz import reduction
from jaxz.types import Array

MAX_LAG = 128  # memory: N × (λ_max + 1) int16 (int32 beyond 32,767 particles)
CANDIDATE_LAGS = (4, 8, 16, 32, 64, 128)
MIN_FAMILIES = 8.0  # a lag is usable while the oldest generation it reads keeps this many effective families
# σ̂² is reported where it exceeds NOISE_MULTIPLE × its noise (sd). 0: only non-positive estimates are refused; a
# positive multiple also refuses many runs of calibrated estimators (the trade-off: docs/changelog.d/docstrings.md).
NOISE_MULTIPLE = 0.0
# a run vouches for σ̂² only where the lag-0 variance (``local_variance``: each block's delta-method variance,
# read from N weights) is at least MIN_LOCAL_TO_NOISE × σ̂²'s noise; an empirical bar, see ``drowned``.
MIN_LOCAL_TO_NOISE = 0.3


def default_lag(num_particles: int) -> int:
    """λ_max = N/8 within [4, MAX_LAG]: the longest lag kept (memory N × (λ_max + 1)). Two
    lineages merge with probability about λ/N under neutral multinomial resampling, so
    beyond N/8 generations the families would be few even without selection."""
    return int(min(max(num_particles // 8, 4), MAX_LAG))


class Genealogy(NamedTuple):
    lineage: Array  # (N, λ_max+1): column j = ancestor at generation g − j (the particle itself at j = 0)
    log_closed: Array  # (len(lags),): per candidate lag, Σ log F_q over the generations that left its window
    generation: Array  # g: resampling events so far
    closed_square: Array  # (len(lags),): per candidate lag, Σ (log F_q)² over the same generations (the noise)
    log_local: Array  # Σ over resampling events of −log(r (1 − Σ W²)): the lag-0 estimate's closed blocks


def _index_dtype(num_particles: int):
    return jnp.int16 if num_particles <= jnp.iinfo(jnp.int16).max else jnp.int32


def _lags(max_lag: int, candidates=None) -> tuple[int, ...]:
    """The candidate lags ≤ λ_max (λ_max itself always among them), from ``candidates``
    (None: CANDIDATE_LAGS)."""
    candidates = CANDIDATE_LAGS if candidates is None else candidates
    return tuple(sorted({lag for lag in candidates if lag < max_lag} | {max_lag}))


def init(num_particles: int, lag: int, dtype, candidates=None) -> Genealogy:
    """An empty genealogy of ``num_particles`` keeping λ_max = ``lag`` generations;
    ``candidates`` (None: CANDIDATE_LAGS) the lags it may read, passed again to
    ``resample`` and ``log_variance``."""
    own = jnp.arange(num_particles, dtype=_index_dtype(num_particles))
    # before any resampling every column is the particle itself (its own Eve)
    zeros = jnp.zeros((len(_lags(lag, candidates)),), dtype)
    return Genealogy(jnp.tile(own[:, None], (1, lag + 1)), zeros, jnp.int32(0), zeros, jnp.zeros((), dtype))


def _family_weights(log_weights: Array, ancestors: Array) -> Array:
    """Σ_{i: ancestors_i = k} W_i for each k (W = exp(log_weights), normalized), summed
    exactly, so that no order of the additions shows in the bits: a scatter-add over a
    particle axis split across devices adds each device's part and then the parts, an order
    that changes with the layout. Each weight is cut into two fixed-point
    integers, W_i = (h_i + l_i 2^−L) 2^−B up to 2^−(B+L), B = 31 (float32) or 63 (float64)
    and L = B − ⌈log2 N⌉; unsigned sums of them cannot overflow (Σ h ≤ 2^B because Σ W ≤ 1,
    Σ l < N 2^L ≤ 2^B) and integer addition is exact in any order. The truncation, at most
    2^−(B+L) per weight (2^−42 at N = 10⁶ in float32), is far below the weights' own
    rounding."""
    num_particles = log_weights.shape[0]
    dtype = log_weights.dtype
    integer = jnp.uint64 if jnp.finfo(dtype).bits > 32 else jnp.uint32
    high_bits = jnp.iinfo(integer).bits - 1
    low_bits = high_bits - max(num_particles - 1, 1).bit_length()
    scaled = jnp.exp(log_weights) * jnp.asarray(2.0**high_bits, dtype)  # exact: a power of two
    high = jnp.floor(scaled)
    low = jnp.floor((scaled - high) * jnp.asarray(2.0**low_bits, dtype))  # scaled − high: exact
    high_sums, low_sums = (jax.ops.segment_sum(part.astype(integer), ancestors, num_segments=num_particles)
                           for part in (high, low))
    # powers of two again: every product exact, so a fused multiply-add rounds the same
    return (high_sums.astype(dtype) * jnp.asarray(2.0**-high_bits, dtype)
            + low_sums.astype(dtype) * jnp.asarray(2.0 ** -(high_bits + low_bits), dtype))


def _family_concentration(log_weights: Array, ancestors: Array) -> Array:
    """Σ_k (Σ_{i: ancestors_i = k} W_i)²: the probability that two draws from W (with
    replacement) share their ancestor; its inverse is the effective number of families.
    Both sums are layout-independent (``_family_weights``, ``jaxz.reduction``)."""
    concentration = reduction.sum(_family_weights(log_weights, ancestors) ** 2)
    return jnp.where(jnp.any(jnp.isnan(log_weights)), jnp.nan, concentration)  # the integers drop a nan


def _log_unlike(log_weights: Array, ancestors: Array) -> Array:
    """log U = log(1 − Σ_k (Σ_{i: ancestors_i = k} W_i)²)."""
    return jnp.log(jnp.maximum(1.0 - _family_concentration(log_weights, ancestors), 0.0))


def _log_ratio(num_particles: int, dtype) -> Array:
    return jnp.asarray(jnp.log(num_particles / (num_particles - 1.0)) if num_particles > 1 else jnp.inf, dtype)


def _log_block(log_weights: Array, log_r: Array) -> Array:
    """−log(r (1 − Σ W²)): one block's delta-method variance of log Ẑ (the weights since
    the last resampling, normalized), Lee & Whiteley's estimate with nothing resampled."""
    concentration = reduction.sum(jnp.exp(2.0 * log_weights))
    return -(log_r + jnp.log(jnp.maximum(1.0 - concentration, 0.0)))


def local_variance(genealogy: Genealogy, log_weights: Array) -> Array:
    """The lag-0 estimate of Var(log Ẑ): the sum over the blocks between resampling events
    (the last one ending at ``log_weights``) of each block's delta-method variance, with no
    dependence between generations read. Its noise is that of N weights per block, not of
    the few families a genealogy keeps."""
    log_r = _log_ratio(log_weights.shape[0], log_weights.dtype)
    return genealogy.log_local + _log_block(log_weights, log_r)


def drowned(genealogy: Genealogy, local: Array, noise: Array) -> Array:
    """Whether the genealogy's own noise drowns the variance the weights show: once
    anything was resampled, the lag-0 variance ``local`` (``local_variance``, read from N
    weights per block) below MIN_LOCAL_TO_NOISE × ``noise`` (the sd of σ̂², from
    ``lagged_estimate``). The rest of σ̂² is the dependence between generations, read from
    the few families the genealogy keeps. Where only that lifts σ̂² above its noise, either
    the variance is itself below the noise (a near-exact sampler: σ̂² is mostly the
    genealogy's neutral drift, and the runs that read it positive over-cover) or it rests
    on those few families, whose reading is unbiased for Var(Ẑ) on the scale of Ẑ² only,
    so that the runs whose Ẑ is low read little of it. An empirical rule: MIN_LOCAL_TO_NOISE
    separates the runs of calibrated filters and tempered SMC (above it) from genealogies
    that over- or under-cover on lattice models (below); the quantiles it was set from are
    in docs/changelog.d/docstrings.md."""
    return (genealogy.generation > 0) & (local < MIN_LOCAL_TO_NOISE * noise)


def resample(genealogy: Genealogy, log_weights: Array, ancestors: Array, resampled: Array,
             candidates=None) -> Genealogy:
    """Account for one step: if it resampled (``ancestors`` chosen from normalized
    ``log_weights``), close, for every candidate lag λ, the factor of the generation
    leaving its window (read with these weights), and shift every lineage one generation.
    A generation that closes with one family left makes its factor 0 (σ̂² = ∞ at that lag)."""
    num_particles, width = genealogy.lineage.shape
    dtype = log_weights.dtype
    log_r = _log_ratio(num_particles, dtype)
    lags = _lags(width - 1, candidates)
    log_u = {j: _log_unlike(log_weights, genealogy.lineage[:, j]) for j in sorted({*lags, *(j - 1 for j in lags)})}
    log_factors = jnp.stack([log_r + log_u[lag] - log_u[lag - 1] for lag in lags])
    closes = resampled & (genealogy.generation - jnp.asarray(lags) >= 0)  # generation g − λ leaves the window
    shifted = jnp.concatenate(
        [jnp.arange(num_particles, dtype=genealogy.lineage.dtype)[:, None], genealogy.lineage[ancestors, : width - 1]],
        axis=1,
    )
    return Genealogy(
        jnp.where(resampled, shifted, genealogy.lineage),
        genealogy.log_closed + jnp.where(closes, log_factors, 0.0),
        genealogy.generation + resampled.astype(jnp.int32),
        genealogy.closed_square + jnp.where(closes, log_factors**2, 0.0),
        genealogy.log_local + jnp.where(resampled, _log_block(log_weights, log_r), 0.0),
    )


def lagged_estimate(genealogy: Genealogy, log_weights: Array, candidates=None,
                    min_lag: int | Array | None = None) -> tuple[Array, Array, Array]:
    """(σ̂², noise, families) at the chosen lag, σ̂² as computed (it may be negative):
    the pieces ``log_variance`` decides from (see there). ``min_lag`` (None: no bound)
    excludes the lags that would truncate a dependence known to reach that many
    generations (a model's bandwidth): a lag below it is read only where it truncates
    nothing (the run resampled no more often than the lag), and where no lag at or above
    it keeps MIN_FAMILIES families, the shortest of those is read all the same."""
    num_particles, width = genealogy.lineage.shape
    dtype = log_weights.dtype
    lags = jnp.asarray(_lags(width - 1, candidates))
    log_r = _log_ratio(num_particles, dtype)
    log_u = jax.vmap(_log_unlike, in_axes=(None, 1))(log_weights, genealogy.lineage)  # (λ+1,), column j ↔ g − j
    # open factors of lag λ: generations q = g − j for j = 1..min(λ, g): F_q = r U_q / U_{q+1}
    j = jnp.arange(1, width)
    terms = log_r + log_u[1:] - log_u[:-1]
    open_ = (j[None, :] <= jnp.minimum(genealogy.generation, lags)[:, None])
    log_open = jnp.sum(jnp.where(open_, terms[None, :], 0.0), axis=1)
    log_kept = log_r + log_u[0] + log_open + genealogy.log_closed  # per lag: log(1 − V)
    variances = -jnp.where(jnp.isnan(log_kept), -jnp.inf, log_kept)
    # the factors read, log F_q for q = 0..g−1: their scatter about their mean (the signal,
    # −v_q/N each) times their number is the variance of their sum
    count = genealogy.generation.astype(dtype)
    total = genealogy.log_closed + log_open
    square = genealogy.closed_square + jnp.sum(jnp.where(open_, terms[None, :] ** 2, 0.0), axis=1)
    scatter = jnp.maximum(square - total**2 / jnp.maximum(count, 1.0), 0.0)
    noise = jnp.sqrt(scatter * count / jnp.maximum(count - 1.0, 1.0))
    oldest = jnp.minimum(genealogy.generation, lags)
    family_counts = jax.vmap(
        lambda column: 1.0 / _family_concentration(log_weights, genealogy.lineage[:, column])
    )(oldest)
    usable = (family_counts >= MIN_FAMILIES) & jnp.isfinite(variances)
    fallback = 0
    if min_lag is not None:
        reaches = (lags >= min_lag) | (genealogy.generation <= lags)  # no dependence truncated
        usable = usable & reaches
        fallback = jnp.argmax(reaches)  # the shortest lag that reaches (λ_max always does past the check)
    chosen = jnp.where(jnp.any(usable), jnp.max(jnp.where(usable, jnp.arange(lags.shape[0]), 0)), fallback)
    return variances[chosen], noise[chosen], family_counts[chosen]


def log_variance(genealogy: Genealogy, log_weights: Array, candidates=None) -> tuple[Array, Array]:
    """(σ̂², families): the estimated variance of log Ẑ from the final normalized weights,
    and the effective number of families, 1/Σ_k (Σ_{i: A_q^i = k} W^i)², at the oldest
    generation the chosen lag reads (the Eves while m ≤ λ) — below 2 the estimate rests
    on one family and says nothing.

    σ̂² = −log(1 − V) = −log(r U_m) − Σ_q log F_q: each factor is 1 − v_q/N + O(N⁻²),
    v_q generation q's term of the asymptotic variance, so σ̂² sums those terms on the
    log scale. It equals V (the relative variance of Ẑ, Lee & Whiteley's estimand) to first
    order when V is small, and unlike V — which cannot exceed 1 — it still measures a
    spread of several nats on long horizons.

    The lag: the longest candidate whose oldest generation still has MIN_FAMILIES
    effective families among the final particles (the shortest if none has). A longer lag
    truncates less of the dependence between generations, a collapsed window reads its
    factors from a handful of families and is noisy and inflated: a filter whose past is
    forgotten fast wants short lags, a model with long-range factors long ones.

    Below its own noise, σ̂² is nan (``jaxz.estimators._particles.genealogy_estimate``
    then reports a nan s.e. with STATUS_STDERR_UNRESOLVED). Each factor log F_q carries the
    randomness of the multinomial draws in its window (neutral drift: even when every
    weight is equal and Ẑ is exact, E[log F_q] ≈ 0 but its spread is not), so
    noise = sqrt(m/(m−1) Σ_q (log F_q − mean)²) over the m factors read (the closed and
    the open ones; their scatter about their mean, which is the signal) estimates the sd
    of σ̂². An estimate below NOISE_MULTIPLE × noise, or σ̂² ≤ 0 once anything was
    resampled (clipping it to 0 would report an s.e. of exactly 0 for a random estimate),
    has a relative error of order one or more and is not reported. With no resampling
    (importance sampling) σ̂² ≥ 0 up to rounding, 0 only for equal weights, where Ẑ is
    exact.
    """
    variance, noise, families = lagged_estimate(genealogy, log_weights, candidates)
    return resolve(genealogy, variance, noise), families


def resolve(genealogy: Genealogy, variance: Array, noise: Array) -> Array:
    """σ̂² as reported: nan when negative or below NOISE_MULTIPLE × its noise once
    anything was resampled (see ``log_variance``)."""
    # nothing resampled: −log(r(1 − Σ W²)) ≥ 0, and 0 only for equal weights (an exact Ẑ)
    resolved = jnp.where(genealogy.generation > 0, (variance > 0) & (variance >= NOISE_MULTIPLE * noise), True)
    return jnp.where(resolved, jnp.maximum(variance, 0.0), jnp.nan)


def degrees_of_freedom(variance: Array, noise: Array) -> Array:
    """ν = 2 σ̂⁴ / noise²: the degrees of freedom of a χ²_ν/ν-distributed σ̂² with the
    measured sd (Satterthwaite 1946). Infinite when σ̂² carries no noise (no resampling:
    the delta method of importance sampling)."""
    return jnp.where(noise > 0, 2.0 * variance**2 / jnp.where(noise > 0, noise, 1.0) ** 2, jnp.inf)


__all__ = ["Genealogy", "init", "resample", "local_variance", "drowned", "log_variance", "lagged_estimate", "resolve",
           "degrees_of_freedom", "default_lag", "MAX_LAG", "CANDIDATE_LAGS", "MIN_FAMILIES", "NOISE_MULTIPLE",
           "MIN_LOCAL_TO_NOISE"]
