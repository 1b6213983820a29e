"""Statistics of M parallel Markov chains of P states each ((P, M) arrays, time first):
Geyer's (1992) initial monotone sequence estimate of the variance of their mean, and their
integrated autocorrelation time. Waste-free SMC (Dau & Chopin 2022) reads both at every
stage from its chains' weights: the stage's share of Var(log Ẑ), and the moves its next
chains need (``waste_free_num_moves``). Also the layout of those chains (``waste_free_shape``)
and the constants that waste-free ``jaxz.smc`` is tuned by."""
import jax.numpy as jnp

from jaxz.estimators import _genealogy
from jaxz.types import Array

# Waste-free chain length P when neither num_chains nor chain_length is given (the longest divisor of N up to it):
# short chains do not forget their start, a bias the chain-variance s.e. cannot see.
DEFAULT_CHAIN_LENGTH = 50
# Waste-free moves between kept states (adapted for a tuned kernel): aim at an integrated autocorrelation time of
# the weights along a chain of at most this fraction of its length; with τ near P, Geyer's estimator on chains
# barely longer than τ reads the per-stage variances low.
WASTE_FREE_AUTOCORRELATION = 0.2
# ... and the first stage's moves (there are no chains yet to measure τ on; the later stages cannot undo a slow
# start).
WASTE_FREE_FIRST_MOVES = 5
# Waste-free runs with fewer chains than this are flagged STATUS_FEW_CHAINS: the s.e. reads the spread between
# chains, and a handful of chains can all miss a mode.
MIN_WASTE_FREE_CHAINS = 10
# The chain genealogy's candidate lags: those of standard SMC and 1 and 2 generations. From M ≈ 20 chains the
# shortest standard lag (4) keeps only a few effective families and its estimate is noisy; lags 1 and 2 keep more.
WASTE_FREE_LAGS = (1, 2) + _genealogy.CANDIDATE_LAGS


def asymptotic_variance(values: Array) -> tuple[Array, Array]:
    """(σ², c_0) of M chains of length P (``values``: (P, M)): pooled autocovariances
    c_k = Σ_m Σ_{j<P−k} (x_{j,m} − x̄)(x_{j+k,m} − x̄) / (P M), pair sums
    Γ_i = c_{2i} + c_{2i+1} kept while positive and non-increasing, σ² = −c_0 + 2 Σ Γ_i,
    clipped at 0."""
    length, num_chains = values.shape
    centred = values - jnp.mean(values)
    size = 1 << (2 * length - 1).bit_length()  # a power of two >= 2P: no circular overlap
    spectrum = jnp.fft.rfft(centred, n=size, axis=0)
    autocovariance = jnp.sum(jnp.fft.irfft(spectrum * jnp.conj(spectrum), n=size, axis=0)[:length], axis=1)
    autocovariance = autocovariance / (length * num_chains)
    pairs = autocovariance[0 : 2 * (length // 2) : 2] + autocovariance[1 : 2 * (length // 2) : 2]
    previous = jnp.concatenate([pairs[:1], pairs[:-1]])
    keep = jnp.cumprod((pairs > 0) & (pairs <= previous))
    asymptotic = -autocovariance[0] + 2.0 * jnp.sum(keep * pairs)
    return jnp.maximum(asymptotic, 0.0), autocovariance[0]


def chain_mean_variance(values: Array) -> Array:
    """Var(x̄) ≈ σ² / (P M) of the mean of M chains of length P (``values``: (P, M), time
    first), σ² by ``asymptotic_variance`` (the estimator of Dau & Chopin 2022 for
    waste-free SMC)."""
    return asymptotic_variance(values)[0] / values.size


def _autocorrelation_time(asymptotic: Array, c0: Array) -> Array:
    """τ = σ² / c_0; 1 where c_0 is not positive: every value equal, or none a number (a
    stage whose weights all vanished, where the run ends with log Ẑ = −∞ and
    STATUS_DEGENERATE)."""
    return jnp.where(c0 > 0, asymptotic / jnp.where(c0 > 0, c0, 1.0), 1.0)


def chain_autocorrelation_time(values: Array) -> Array:
    """τ = σ² / c_0 of ``asymptotic_variance`` (1 for independent states; see
    ``_autocorrelation_time`` for the degenerate cases): the chains of P states hold about
    P M / τ independent ones."""
    return _autocorrelation_time(*asymptotic_variance(values))


def weight_statistics(increments: Array, num_chains: int) -> tuple[Array, Array]:
    """(Var of log((1/N) Σ_n w_n), τ of w) for one waste-free stage, from one pass over the
    chains: the N = P·M weights w_n = f_{β_{t+1}}/f_{β_t}(x_n) (index k·M + m is state k of
    chain m) over their mean; by the delta method the variance is the chain variance of
    the mean of w / w̄."""
    top = jnp.max(jnp.where(jnp.isfinite(increments), increments, -jnp.inf))
    ratios = jnp.exp(increments - top)
    values = (ratios / jnp.mean(ratios)).reshape(-1, num_chains)
    asymptotic, c0 = asymptotic_variance(values)
    return asymptotic / values.size, _autocorrelation_time(asymptotic, c0)


def waste_free_shape(num_particles: int, num_chains: int | None = None, chain_length: int | None = None):
    """(M, P) of waste-free SMC for N particles: P = ``chain_length``, or N / ``num_chains``, or
    the longest chain up to DEFAULT_CHAIN_LENGTH that divides N; ValueError unless N = M · P."""
    if chain_length is not None:
        length = chain_length
    elif num_chains is not None:
        length = num_particles // num_chains
    else:
        length = max(p for p in range(1, min(DEFAULT_CHAIN_LENGTH, num_particles) + 1) if num_particles % p == 0)
    if num_chains is not None and num_particles % num_chains:
        raise ValueError(f"num_chains ({num_chains}) must divide the number of particles ({num_particles})")
    if num_particles % length or length < 2:
        raise ValueError(f"chain_length ({length}) must be >= 2 and divide the number of particles "
                         f"({num_particles}); pass num_chains or chain_length to waste_free SMC")
    return num_particles // length, length


def waste_free_num_moves(tau: Array, num_moves, length: int, max_moves) -> Array:
    """Kernel moves between two kept states for this stage's chains: the chains the
    previous stage grew with ``num_moves`` moves show, in the weights w_{t+1} that this
    stage's estimate reads, an autocorrelation time ``tau`` (``_chains.weight_statistics``);
    τ scales about as 1/moves, so ⌈moves · τ̂ / (WASTE_FREE_AUTOCORRELATION · P)⌉, within
    [1, ``max_moves``], brings it to that fraction of the chain length P. Decided from the
    chains before the move, as the standard moves are (see ``_moves.next_num_moves``). Not at
    the first stage, whose particles are the base's independent draws rather than chains:
    it keeps its starting moves (``num_mcmc_steps``, by default WASTE_FREE_FIRST_MOVES)."""
    needed = jnp.ceil(num_moves * tau / (WASTE_FREE_AUTOCORRELATION * length))
    return jnp.clip(needed, 1, max_moves).astype(jnp.int32)


__all__ = ["asymptotic_variance", "chain_mean_variance", "chain_autocorrelation_time", "weight_statistics",
           "waste_free_shape", "waste_free_num_moves"]
