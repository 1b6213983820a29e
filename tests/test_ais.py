"""AIS and RAISE on a Gaussian path with exact log Z."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz

NUM_RUNS = 500


def _runs(estimator, positions_fn, num_runs=NUM_RUNS, num_particles=16, seed=0):
    keys = jax.random.split(jax.random.key(seed), num_runs)

    @jax.jit
    @jax.vmap
    def one(key):
        key_init, key_run = jax.random.split(key)
        return jaxz.run(estimator, key_run, positions_fn(key_init, num_particles)).estimate

    return one(keys)


def test_ais_z_hat_unbiased_on_gaussian(gaussian):
    """E[Ẑ] = Z: the mean of Ẑ/Z over 500 independent runs is within 4 s.e. of 1."""
    path = gaussian.path()
    kernel = jaxz.kernels.hmc(path, 0.3, 5)
    estimates = _runs(jaxz.ais(path, kernel, jaxz.schedules.linear(8)), gaussian.base_draws)
    ratio = np.exp(np.asarray(estimates.log_z, np.float64) - gaussian.log_z)
    stderr = ratio.std(ddof=1) / np.sqrt(ratio.size)
    assert abs(ratio.mean() - 1.0) < 4 * stderr
    assert np.all(estimates.status == 0)
    assert np.all(estimates.cost == 16 * 7)


def test_ais_log_z_within_its_standard_error(gaussian):
    """One long AIS run: |log Ẑ − log Z| < 4 × its delta-method standard error, and the
    standard error agrees with the spread of log Ẑ over runs (ratio within [0.7, 1.4])."""
    path = gaussian.path()
    kernel = jaxz.kernels.repeat(jaxz.kernels.hmc(path, 0.3, 5), 2)
    estimates = _runs(jaxz.ais(path, kernel, jaxz.schedules.linear(20)), gaussian.base_draws,
                      num_runs=64, num_particles=256)
    log_z = np.asarray(estimates.log_z)
    assert abs(log_z[0] - gaussian.log_z) < 4 * float(estimates.log_z_stderr[0])
    ratio = float(np.mean(estimates.log_z_stderr)) / log_z.std(ddof=1)
    assert 0.7 < ratio < 1.4, ratio
    assert np.all(estimates.cost == 256 * 19 * 2)


def test_ais_underestimates_and_raise_overestimates_on_average(gaussian):
    """Jensen: E[log Ẑ_AIS] ≤ log Z ≤ E[log Ẑ_RAISE] (RAISE started from exact draws of
    the target). A short ladder makes both biases many standard errors large."""
    path = gaussian.path()
    kernel = jaxz.kernels.hmc(path, 0.3, 5)
    betas = jaxz.schedules.linear(4)
    ais = np.asarray(_runs(jaxz.ais(path, kernel, betas), gaussian.base_draws, num_particles=4).log_z)
    raise_ = np.asarray(_runs(jaxz.raise_(path, kernel, betas), gaussian.target_draws, num_particles=4).log_z)
    ais_se = ais.std(ddof=1) / np.sqrt(ais.size)
    raise_se = raise_.std(ddof=1) / np.sqrt(raise_.size)
    assert ais.mean() + 3 * ais_se < gaussian.log_z
    assert raise_.mean() - 3 * raise_se > gaussian.log_z


def test_raise_recovers_log_z_with_a_fine_ladder(gaussian):
    """With 50 rungs RAISE is calibrated over 64 runs: E[1/Ẑ] = 1/Z (its unbiased quantity)
    within 4 s.e. of the runs' spread, every run unflagged, and the rms reported s.e. within
    [0.7, 1.43] of the rms error of log Ẑ (the sd of 64 normal draws has relative s.e.
    1/sqrt(126) = 0.089: the band is 4 of those each side). A single run checked against
    4 of its own s.e. passed any inflated error bar."""
    path = gaussian.path()
    kernel = jaxz.kernels.hmc(path, 0.3, 5)
    estimator = jaxz.raise_(path, kernel, jaxz.schedules.linear(50))

    @jax.jit
    @jax.vmap
    def one(key):
        key_draws, key_run = jax.random.split(key)
        return jaxz.run(estimator, key_run, gaussian.target_draws(key_draws, 512)).estimate

    estimate = one(jax.random.split(jax.random.key(3), 64))
    errors = np.asarray(estimate.log_z, np.float64) - gaussian.log_z
    stderr = np.asarray(estimate.log_z_stderr, np.float64)
    assert np.all(np.asarray(estimate.status) == 0) and np.all(np.isfinite(stderr) & (stderr > 0))
    inverse = np.exp(-errors)  # (1/Ẑ) / (1/Z)
    assert abs(inverse.mean() - 1.0) < 4 * inverse.std(ddof=1) / np.sqrt(inverse.size), inverse.mean()
    ratio = np.sqrt(np.mean(stderr**2) / np.mean(errors**2))
    assert 0.7 < ratio < 1.43, (ratio, np.sqrt(np.mean(stderr**2)), errors.std())


@pytest.mark.slow
def test_ais_follows_float64_inputs(gaussian):
    path = gaussian.path()
    with jax.enable_x64(True):
        kernel = jaxz.kernels.mala(path, 0.2)
        positions = gaussian.base_draws(jax.random.key(0), 32, jnp.float64)
        estimate = jaxz.run(jaxz.ais(path, kernel, jaxz.schedules.linear(5)), jax.random.key(1), positions).estimate
        assert estimate.log_z.dtype == jnp.float64
        assert estimate.log_z_stderr.dtype == jnp.float64
    positions = gaussian.base_draws(jax.random.key(0), 32, jnp.float32)
    estimate = jaxz.run(jaxz.ais(path, kernel, jaxz.schedules.linear(5)), jax.random.key(1), positions).estimate
    assert estimate.log_z.dtype == jnp.float32


@pytest.mark.parametrize("betas", [[0.0, 0.5, 0.4, 1.0], [0.1, 1.0], [0.0, 0.9], [0.0]])
def test_ais_rejects_bad_schedules(gaussian, betas):
    path = gaussian.path()
    with pytest.raises(ValueError, match="betas"):
        jaxz.ais(path, jaxz.kernels.hmc(path, 0.1, 3), betas)
