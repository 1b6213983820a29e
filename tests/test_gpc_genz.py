"""The EP-free reference for the GPC figure: Genz's separation of variables with a randomly
shifted lattice (and Botev's minimax tilt), ``gpc.orthant_log_probability`` /
``gpc.genz_log_z``, against orthant probabilities with closed forms:

    equicorrelated ρ = 1/2, n variables: P(w ≥ 0) = 1/(n + 1)  (w_i = (g_0 + g_i)/√2:
        the chance that g_0 is the largest of n + 1 i.i.d. normals, sign-flipped);
    n = 3, any correlation: 1/8 + (asin ρ_12 + asin ρ_13 + asin ρ_23)/(4π)  (Sheppard);
    independent: 2⁻ⁿ;

and against scipy's Genz integration on a small GPC subset at the seed's hard point."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import jaxz
from jaxz.models import gpc

NUM_RUNS, NUM_SHIFTS, NUM_POINTS = 200, 16, 64
MISS_PROBABILITY = 1e-4  # false-alarm rate of the coverage check


def equicorrelated(size):
    return 0.5 * (np.eye(size) + np.ones((size, size))), -np.log(size + 1.0)


def trivariate():
    draws = np.random.default_rng(3).normal(size=(3, 5))
    covariance = draws @ draws.T
    scale = np.sqrt(np.diag(covariance))
    rho = covariance / scale[:, None] / scale[None, :]
    exact = 0.125 + (np.arcsin(rho[0, 1]) + np.arcsin(rho[0, 2]) + np.arcsin(rho[1, 2])) / (4 * np.pi)
    return covariance, np.log(exact)


def independent(size):
    scales = np.linspace(0.5, 3.0, size)
    return np.diag(scales**2), -size * np.log(2.0)


CASES = {"equicorrelated12": lambda: equicorrelated(12), "equicorrelated30": lambda: equicorrelated(30),
         "sheppard3": trivariate}
VARIANTS = {"tilted": {}, "plain": dict(tilting=False), "unordered": dict(reorder=False, tilting=False)}


def coverage_check(log_z, stderr, exact):
    """Each run's |log Ẑ − log P| ≤ t_{S−1, 0.975} s.e. in about 95 % of the runs: the misses
    must lie within the binomial(NUM_RUNS, 0.05) quantiles at MISS_PROBABILITY on either side
    (a delta-method s.e. over S shifts, studentized; none missed means an inflated error bar),
    the rms s.e. within [0.82, 1.22] of the rms error (an rms from 200 runs has relative s.e.
    1/sqrt(398) = 0.05: 4 of those each side in log), and the runs' mean log Ẑ must not sit
    off the exact value by more than 5 of its standard errors plus log Ẑ's Jensen bias (half
    the runs' observed variance: a mean of unbiased Ẑ's logged)."""
    log_z, stderr = np.asarray(log_z, np.float64), np.asarray(stderr, np.float64)
    assert np.all(np.isfinite(log_z)) and np.all(stderr > 0)
    t = (log_z - exact) / stderr
    misses = int(np.sum(np.abs(t) > stats.t.ppf(0.975, NUM_SHIFTS - 1)))
    assert (stats.binom.ppf(MISS_PROBABILITY, NUM_RUNS, 0.05) <= misses
            <= stats.binom.ppf(1 - MISS_PROBABILITY, NUM_RUNS, 0.05)), (misses, exact, log_z.mean())
    ratio = np.sqrt(np.mean(stderr**2) / np.mean((log_z - exact) ** 2))
    assert 0.82 < ratio < 1.22, ratio
    spread = log_z.std(ddof=1) / np.sqrt(log_z.size)
    assert abs(log_z.mean() - exact) < 5 * spread + log_z.var(ddof=1) / 2, (log_z.mean(), exact, spread)


@pytest.mark.parametrize("case, variant", [("equicorrelated12", "tilted"), ("sheppard3", "tilted"),
                                           ("equicorrelated12", "plain"), ("sheppard3", "unordered"),
                                           pytest.param("equicorrelated30", "tilted", marks=pytest.mark.slow)])
def test_orthant_probability_covers_closed_forms_over_seeds(case, variant):
    """200 independent estimates (16 shifts of a 64-point lattice each), float64; with and
    without the tilt and the reordering (each is an unbiased estimator on its own)."""
    covariance, exact = CASES[case]()
    options = VARIANTS[variant]
    with jax.enable_x64(True):
        run = jax.jit(jax.vmap(lambda key: gpc.orthant_log_probability(jnp.asarray(covariance), key, NUM_POINTS,
                                                                       NUM_SHIFTS, **options)))
        estimate = run(jax.random.split(jax.random.key(0), NUM_RUNS))
    coverage_check(estimate.log_z, estimate.stderr, exact)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_orthant_probability_is_exact_for_independent_variables(variant):
    """Independent w: every factor Φ(·) is 1/2 whatever the draws (untilted), and the
    tilt's saddle point is μ* = 0 there, so every estimate is 2⁻ⁿ with a zero spread."""
    covariance, exact = independent(7)
    with jax.enable_x64(True):
        estimate = gpc.orthant_log_probability(jnp.asarray(covariance), jax.random.key(0), 8, 4, **VARIANTS[variant])
    np.testing.assert_allclose(np.asarray(estimate.log_z_shifts), exact, rtol=1e-12)


def test_orthant_probability_in_float32():
    """The same coverage in float32 (the lattice is exact in uint32 fixed point)."""
    covariance, exact = equicorrelated(12)
    run = jax.jit(jax.vmap(lambda key: gpc.orthant_log_probability(jnp.asarray(covariance, jnp.float32), key,
                                                                   NUM_POINTS, NUM_SHIFTS)))
    estimate = run(jax.random.split(jax.random.key(1), NUM_RUNS))
    assert estimate.log_z.dtype == jnp.float32
    coverage_check(estimate.log_z, estimate.stderr, exact)


def test_prioritized_cholesky_factors_the_reordered_covariance():
    """L Lᵀ = Σ[order][:, order] with L lower triangular and ``order`` a permutation, on a
    GPC covariance at the hard amplitude (cond ≈ 10⁵)."""
    with jax.enable_x64(True):
        data = np.random.default_rng(0).uniform(-1, 1, size=(12, 3))
        model = gpc.probit(data, np.where(data[:, 0] > 0, 1.0, -1.0), amplitude=np.exp(5.1), lengthscale=3.0)
        covariance = gpc.orthant_covariance(model) * model.labels[:, None] * model.labels[None, :]
        factor, order = gpc.prioritized_cholesky(covariance)
        order = np.asarray(order)
        assert sorted(order.tolist()) == list(range(12))
        np.testing.assert_allclose(np.triu(np.asarray(factor), 1), 0.0)
        reordered = np.asarray(covariance)[order][:, order]
        np.testing.assert_allclose(np.asarray(factor @ factor.T), reordered, rtol=1e-9, atol=1e-9 * reordered.max())


@pytest.mark.slow  # CI time (default selection under ~10 minutes on 2 cores)
def test_minimax_tilt_bounds_the_probability_from_above():
    """Botev (2017, Thm. 2): exp ψ(x*; μ*) ≥ P at the saddle point."""
    with jax.enable_x64(True):
        for covariance, exact in (equicorrelated(12), trivariate(), equicorrelated(30)):
            factor, _ = gpc.prioritized_cholesky(jnp.asarray(covariance))
            psi, mu = gpc.minimax_tilt(factor)
            assert np.all(np.isfinite(np.asarray(mu)))
            assert float(psi) >= exact


@pytest.mark.slow  # CI time (default selection under ~10 minutes on 2 cores)
def test_genz_log_z_matches_scipy_on_a_hard_gpc_subset():
    """10 digits at the seed's hard point: our log Ẑ within 5 s.e. (plus scipy's own
    spread over its repeats) of scipy's Genz value."""
    with jax.enable_x64(True):
        digits = jaxz.data.digits_3_vs_5()
        pick = np.random.RandomState(1).permutation(digits.labels.shape[0])[:10]
        model = gpc.probit(digits.inputs[pick], digits.labels[pick].astype(np.float64),
                           amplitude=np.exp(5.1), lengthscale=np.exp(4.85 - np.log(2.0)))
        exact, error = gpc.exact_log_z(model, relative_error=1e-3)
        estimate = gpc.genz_log_z(model, jax.random.key(0), 1024, 16)
    assert abs(float(estimate.log_z) - exact) < 5 * float(estimate.stderr) + error, (float(estimate.log_z), exact)
