"""Integrated autocorrelation time against the exact value for AR(1) chains."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxz import diagnostics


def _ar1_chains(rho, num_steps, num_chains, seed=0):
    """x_t = ρ x_{t−1} + sqrt(1 − ρ²) ε_t, started in stationarity; axis 0 = time."""
    rng = np.random.default_rng(seed)
    noise = rng.normal(size=(num_steps, num_chains))
    chain = np.empty_like(noise)
    chain[0] = noise[0]
    scale = np.sqrt(1 - rho**2)
    for t in range(1, num_steps):
        chain[t] = rho * chain[t - 1] + scale * noise[t]
    return chain


@pytest.mark.parametrize("rho", [0.0, 0.7])
def test_integrated_autocorrelation_time_of_ar1_matches_exact(rho):
    """τ = (1 + ρ)/(1 − ρ) for AR(1); 16 independent chains give the estimator's spread,
    and the mean must lie within 4 standard errors of the truth (plus the known
    O(τ·M/n) downward bias of a windowed estimate with a centred chain)."""
    num_steps, num_chains = 50_000, 16
    chains = _ar1_chains(rho, num_steps, num_chains)
    taus = np.asarray(jax.jit(diagnostics.integrated_autocorrelation_time)(jnp.asarray(chains)))
    assert taus.shape == (num_chains,)
    exact = (1 + rho) / (1 - rho)
    stderr = taus.std(ddof=1) / np.sqrt(num_chains)
    window_bias = exact * (2 * 5 * exact + 1) / num_steps
    assert abs(taus.mean() - exact) < 4 * stderr + window_bias
    ess = np.asarray(diagnostics.effective_sample_size(jnp.asarray(chains)))
    np.testing.assert_allclose(ess, num_steps / taus, rtol=1e-5)


def test_autocorrelation_is_one_at_lag_zero_and_geometric_for_ar1():
    chain = jnp.asarray(_ar1_chains(0.5, 100_000, 1, seed=1))
    rho = np.asarray(diagnostics.autocorrelation(chain))[:4, 0]
    assert rho[0] == pytest.approx(1.0)
    # sd of a sample autocorrelation at small lags is at most 1/sqrt(n)·sqrt((1+ρ²)/(1−ρ²)) (Bartlett): 5 of them
    np.testing.assert_allclose(rho[1:], 0.5 ** np.arange(1, 4), atol=5 * np.sqrt(1.67 / 100_000))
