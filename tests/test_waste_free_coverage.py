"""Waste-free SMC's error bar run by run (issue 23): the chain-genealogy / chain-variance
standard error, the step-size rescue that lets the chains move, and the STATUS_LOW_ESS
diagnostics (chains that never moved, a collapsed chain genealogy, too few chains).

The cheap tests use tiny problems; the statistical checks on the eggbox and shells of
Feroz, Hobson & Bridges (2009) are marked slow.
"""
import math
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz.estimators import _chains

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import calibration_hard  # noqa: E402


def _gaussian_path(dim=2, scale=0.2, dtype=jnp.float32):
    """Base N(0, I), target exp(−|x − 0.5|²/(2 σ²)): log Z = (d/2) log(2π σ²)."""

    def log_base(x):
        return -0.5 * jnp.sum(x**2) - 0.5 * dim * jnp.log(2 * jnp.pi).astype(x.dtype)

    def log_target(x):
        return -0.5 * jnp.sum((x - 0.5) ** 2) / scale**2

    path = jaxz.paths.geometric(log_base, log_target,
                                sample_base=lambda key, n: jax.random.normal(key, (n, dim), dtype))
    return path, 0.5 * dim * math.log(2 * math.pi * scale**2)


def _runs(path, estimator, num_particles, num_runs, seed=0, max_steps=100):
    def one(key):
        key_init, key_run = jax.random.split(key)
        return jaxz.run(estimator, key_run, path.sample_base(key_init, num_particles), max_steps=max_steps).estimate

    return jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(seed), num_runs))


def test_waste_free_stderr_is_never_zero_and_covers_on_an_easy_target():
    """A 2-d Gaussian 0.2 times the base's scale, M = 32 chains of 8 states, 48 runs: no
    s.e. is 0 or nan; among unflagged runs the fraction within 1.96 s.e. is at least
    0.80 (95% expected; 0.80 is 4.3 binomial s.e. of 48 runs below it), and, so that an
    inflated error bar cannot pass, the rms s.e. is within [0.66, 1.51] of the rms error
    (an rms from 48 runs has relative s.e. 1/sqrt(94) = 0.10: 4 of those each side in log)."""
    path, exact = _gaussian_path()
    estimator = jaxz.smc(path, jaxz.kernels.hmc(path), waste_free=True, chain_length=8)
    estimate = _runs(path, estimator, 256, 48)
    stderr = np.asarray(estimate.log_z_stderr, np.float64)
    assert np.all(np.isfinite(stderr)) and np.all(stderr > 0)
    ok = np.asarray(estimate.status) == 0
    assert ok.mean() > 0.8
    errors = np.asarray(estimate.log_z, np.float64) - exact
    z = np.abs(errors) / stderr
    assert np.mean(z[ok] <= 1.96) >= 0.80, z
    ratio = np.sqrt(np.mean(stderr[ok] ** 2) / np.mean(errors[ok] ** 2))
    assert 0.66 < ratio < 1.51, ratio


def _two_modes(dtype=jnp.float32):
    """Uniform prior on [−10, 10]², likelihood N(x; (−5, 0), 0.5² I) + 2 N(x; (5, 0), 0.05² I)
    (normalized bumps, equal heights of mass 1 and 2): log Z = log 3 − log 400."""
    log_volume = 2 * math.log(20.0)

    def log_prior(x):
        return jnp.where(jnp.all(jnp.abs(x) <= 10.0), -jnp.asarray(log_volume, x.dtype), -jnp.inf)

    def log_likelihood(x):
        wide = -0.5 * jnp.sum((x - jnp.array([-5.0, 0.0], x.dtype)) ** 2) / 0.25 - jnp.log(2 * jnp.pi * 0.25)
        narrow = -0.5 * jnp.sum((x - jnp.array([5.0, 0.0], x.dtype)) ** 2) / 0.0025 - jnp.log(2 * jnp.pi * 0.0025)
        return jnp.logaddexp(wide, jnp.log(2.0).astype(x.dtype) + narrow)

    path = jaxz.paths.likelihood_tempering(
        log_prior, log_likelihood, sample_prior=lambda key, n: jax.random.uniform(key, (n, 2), dtype, -10.0, 10.0))
    return path, math.log(3.0) - log_volume


def test_chains_that_never_move_are_flagged():
    """A kernel that never moves (an RWMH with a zero proposal) leaves every chain a copy
    of its seed: the run is flagged STATUS_LOW_ESS, waste-free or not."""
    path, _ = _gaussian_path()
    # (a scale of 1e-30 moves no float: x + 1e-30 z rounds back to x; a zero scale is refused)
    kernel = jaxz.kernels.rwmh(path, jnp.full(2, 1e-30))
    for options in (dict(waste_free=True, chain_length=8), dict()):
        estimator = jaxz.smc(path, kernel, **options)
        estimate = _runs(path, estimator, 256, 2)
        assert np.all(np.asarray(estimate.status) & jaxz.STATUS_LOW_ESS), options
    moving = _runs(path, jaxz.smc(path, jaxz.kernels.rwmh(path, 0.3 * jnp.ones(2)), waste_free=True,
                                  chain_length=8), 256, 2)
    assert not np.any(np.asarray(moving.status) & jaxz.STATUS_LOW_ESS)


def _ar1_chains(key, rho, length, num_chains):
    """(length, num_chains) stationary AR(1) chains of unit variance: τ = (1 + ρ)/(1 − ρ)."""
    noise = jax.random.normal(key, (length, num_chains))
    first = noise[0]

    def step(x, z):
        x = rho * x + jnp.sqrt(1 - rho**2) * z
        return x, x

    _, rest = jax.lax.scan(step, first, noise[1:])
    return jnp.concatenate([first[None], rest])


def test_waste_free_moves_follow_the_chains_autocorrelation_time():
    """The moves between kept states scale with the weights' autocorrelation time along
    the previous stage's chains: AR(1) chains with ρ = 0.9 (τ = 19) read τ̂ within 15 %;
    P = 50 states at 2 moves need ⌈2 · 19 / (0.2 · 50)⌉ = 4 (3 where Geyer's estimate reads
    low on chains 2.6 τ long), P = 200 one, independent states one; a tuned run starts at
    WASTE_FREE_FIRST_MOVES and stays within its cap."""
    chains = _ar1_chains(jax.random.key(0), 0.9, 4000, 20)
    tau = float(_chains.chain_autocorrelation_time(chains))
    assert abs(tau - 19.0) < 0.15 * 19.0, tau

    def moves_for(increments, length):
        return int(_chains.waste_free_num_moves(_chains.weight_statistics(increments, 20)[1], 2, length, 30))

    for length, expected in ((50, (3, 4)), (200, (1,))):
        increments = 0.01 * _ar1_chains(jax.random.key(1), 0.9, length, 20).reshape(-1)  # w ≈ 1 + 0.01 x
        moves = moves_for(increments, length)
        assert moves in expected, (length, moves)
    independent = 0.01 * jax.random.normal(jax.random.key(2), (50 * 20,))
    assert moves_for(independent, 50) == 1
    path, _ = _gaussian_path()
    estimator = jaxz.smc(path, jaxz.kernels.hmc(path), waste_free=True, chain_length=8, max_mcmc_steps=12)
    result = jaxz.run(estimator, jax.random.key(3), path.sample_base(jax.random.key(4), 256), max_steps=100)
    moves = np.asarray(result.trace.num_mcmc_steps)[: int(result.num_steps)]
    assert moves[0] == _chains.WASTE_FREE_FIRST_MOVES and np.all((moves >= 1) & (moves <= 12)), moves


def test_fewer_than_ten_chains_are_flagged():
    """M = 4 chains (N = 64, P = 16) on two modes of masses 1 and 2, the heavier 10x
    narrower: the s.e. reads the spread between chains, and with 4 of them runs that the
    other diagnostics let through were beyond 3 s.e. (5 of 14): every run is flagged
    STATUS_LOW_ESS (MIN_WASTE_FREE_CHAINS = 10)."""
    path, _ = _two_modes()
    estimator = jaxz.smc(path, jaxz.kernels.rwmh(path), waste_free=True, chain_length=16)
    estimate = _runs(path, estimator, 64, 16)
    assert np.all(np.asarray(estimate.status) & jaxz.STATUS_LOW_ESS)
    enough = _runs(path, jaxz.smc(path, jaxz.kernels.rwmh(path), waste_free=True, chain_length=16), 160, 16)
    assert not np.all(np.asarray(enough.status) & jaxz.STATUS_LOW_ESS)  # M = 10: the rule alone flags none


@pytest.mark.xfail(strict=True, reason="a known limit (issue 23's closing note): no per-run diagnostic sees a mode "
                                       "that no particle reached; measured 40 of 60 unflagged runs beyond 3 s.e.")
def test_a_narrow_heavy_mode_is_covered_or_flagged():
    """The promise on the same two modes with M = 20 chains (N = 320, P = 16): at most one
    of 32 runs unflagged and beyond 3 s.e. It does not hold: from a uniform prior few
    particles start in the narrow mode's basin (1.8e-4 of the box), local moves never carry
    them there from the wide one, and runs that under-represent it look like a unimodal
    posterior (standard SMC with tuned HMC at N = 1000: 50 of 57 unflagged runs beyond 3
    s.e., mean error −0.84). Strict: the day it passes, this marker must go."""
    path, exact = _two_modes()
    estimator = jaxz.smc(path, jaxz.kernels.rwmh(path), waste_free=True, chain_length=16)
    estimate = _runs(path, estimator, 320, 32)
    flagged = np.asarray(estimate.status) != 0
    z = np.abs(np.asarray(estimate.log_z, np.float64) - exact) / np.asarray(estimate.log_z_stderr, np.float64)
    assert np.sum(z[~flagged] > 3.0) <= 1, z[~flagged]


@pytest.mark.slow
def test_step_size_rescue_lets_waste_free_chains_move_on_the_eggbox():
    """The eggbox at N = 1000 (M = 20 chains of 50; at N = 400, M = 8, every run is flagged
    for its few chains): before the rescue, the particles' covariance (the whole box) as
    mass matrix gave acceptance 0 from the second stage on and log Ẑ up to 12 nats low with
    status 0 (N = 400). Now the final acceptance is well above 0 and the estimate is within
    3 s.e. or flagged."""
    path = calibration_hard.eggbox_path()
    exact = calibration_hard.eggbox_log_z(1001)
    estimator = jaxz.smc(path, jaxz.kernels.hmc(path), waste_free=True)

    def one(key):
        key_init, key_run = jax.random.split(key)
        return jaxz.run(estimator, key_run, path.sample_base(key_init, 1000), max_steps=100)

    result = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(3), 4))
    steps = np.asarray(result.num_steps)
    acceptance = np.asarray(result.trace.acceptance_rate)
    assert np.all(acceptance[np.arange(4), steps - 2] > 0.05), acceptance
    estimate = result.estimate
    z = np.abs(np.asarray(estimate.log_z, np.float64) - exact) / np.asarray(estimate.log_z_stderr, np.float64)
    assert np.all((z <= 3.0) | (np.asarray(estimate.status) != 0)), z


@pytest.mark.slow
@pytest.mark.parametrize("model", ["eggbox", "shells d=10"])
@pytest.mark.parametrize("configuration", ["waste_free", "default"])
def test_coverage_on_hard_targets(model, configuration):
    """The calibration rows of benchmarks/calibration_hard.py at 64 runs: among unflagged
    runs at least 0.85 within 1.96 s.e. (0.95 expected; 0.85 is 3.7 binomial s.e. below
    it at 64 runs) and at most 2 beyond 3 s.e."""
    path_fn, _, exact, _ = calibration_hard.hard_problems()[model]
    path = path_fn(jnp.float32)
    estimator, max_steps = calibration_hard.estimator_for(configuration, path, 1000)
    estimate = _runs(path, estimator, 1000, 64, seed=11, max_steps=max_steps)
    ok = np.asarray(estimate.status) == 0
    assert ok.mean() > 0.5
    z = np.abs(np.asarray(estimate.log_z, np.float64) - exact) / np.asarray(estimate.log_z_stderr, np.float64)
    assert np.mean(z[ok] <= 1.96) >= 0.85, z[ok]
    assert np.sum(z[ok] > 3.0) <= 2, z[ok]


def test_exact_values_of_the_hard_rows_match_the_paper():
    """The shells' radial integrals agree with Feroz et al. (2009)'s analytical values to
    their two decimals; the eggbox quadrature is stable under grid refinement."""
    for dim, paper in calibration_hard.SHELL_PAPER_LOG_Z.items():
        assert abs(calibration_hard.shell_log_z(dim) - paper) < 0.01
    assert abs(calibration_hard.eggbox_log_z(801) - calibration_hard.eggbox_log_z(1601)) < 1e-3
