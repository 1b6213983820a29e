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
    """With many rungs RAISE's upper bound closes on log Z within its standard error."""
    path = gaussian.path()
    kernel = jaxz.kernels.hmc(path, 0.3, 5)
    estimate = jax.jit(
        lambda key: jaxz.run(jaxz.raise_(path, kernel, jaxz.schedules.linear(50)), key,
                             gaussian.target_draws(jax.random.key(7), 512)).estimate
    )(jax.random.key(3))
    assert abs(float(estimate.log_z) - gaussian.log_z) < 4 * float(estimate.log_z_stderr) + 1e-3


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
