"""Statistics of M parallel Markov chains of P states each ((P, M) arrays, time first):
Geyer's (1992) initial monotone sequence estimate of the variance of their mean, and their
integrated autocorrelation time. Waste-free SMC (Dau & Chopin 2022) reads both at every
stage from its chains' weights: the stage's share of Var(log Ẑ), and the moves its next
chains need (``jaxz.estimators.smc.waste_free_num_moves``)."""
import jax.numpy as jnp

from jaxz.types import Array


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


__all__ = ["asymptotic_variance", "chain_mean_variance", "chain_autocorrelation_time", "weight_statistics"]
