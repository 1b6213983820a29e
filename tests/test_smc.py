"""Tempered SMC on a Gaussian path with exact log Z."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz


def _vmapped(estimator, gaussian, num_runs, num_particles, max_steps=None, seed=0):
    @jax.jit
    @jax.vmap
    def one(key):
        key_init, key_run = jax.random.split(key)
        positions = gaussian.base_draws(key_init, num_particles)
        return jaxz.run(estimator, key_run, positions, max_steps=max_steps)

    return one(jax.random.split(jax.random.key(seed), num_runs))


def _resampling_exercised(result):
    """With 16 particles a few genealogies collapse to one Eve family: those runs are
    flagged STATUS_LOW_ESS (their s.e. is meaningless), and nothing else is. Some but not
    all steps resampled: the carried-weights path was exercised."""
    assert np.all((result.estimate.status & ~(jaxz.STATUS_LOW_ESS | jaxz.STATUS_STDERR_UNRESOLVED)) == 0)
    resampled = np.asarray(result.trace.resampled).sum()
    assert 0 < resampled < np.asarray(result.num_steps).sum()


def test_smc_z_hat_unbiased_on_gaussian(gaussian):
    """E[Ẑ] = Z for a fixed schedule, whichever steps resample: the mean of Ẑ/Z over 500
    runs is within 4 standard errors of 1."""
    path = gaussian.path()
    estimator = jaxz.smc(path, jaxz.kernels.hmc(path, 0.3, 5), betas=jaxz.schedules.linear(6), resample_ess=0.5)
    result = _vmapped(estimator, gaussian, 500, 16, None)
    ratio = np.exp(np.asarray(result.estimate.log_z, np.float64) - gaussian.log_z)
    stderr = ratio.std(ddof=1) / np.sqrt(ratio.size)
    assert abs(ratio.mean() - 1.0) < 4 * stderr
    _resampling_exercised(result)


def test_smc_adaptive_schedule_runs_vmapped_with_partial_resampling(gaussian):
    """An adaptive schedule is tuned on the particles it weights, so its Ẑ is not unbiased
    (O(1/N); test_error_bars measures E[Ẑ/Z] = 0.83 at d = 20, N = 50, and that the two-pass
    schedule removes it): here only the status and the resampling path are checked, over 500
    runs of 16 particles whose schedules differ in length."""
    path = gaussian.path()
    estimator = jaxz.smc(path, jaxz.kernels.hmc(path, 0.3, 5), target_ess=0.3, resample_ess=0.5)
    result = _vmapped(estimator, gaussian, 500, 16, 50)
    assert len(np.unique(np.asarray(result.num_steps))) > 1
    _resampling_exercised(result)


def test_smc_standard_error_matches_spread_of_runs(gaussian):
    """The Lee–Whiteley standard error is calibrated: its mean over runs is within
    [0.6, 1.6] of the observed sd of log Ẑ, and the truth lies within 4 s.e. of the first run."""
    path = gaussian.path()
    kernel = jaxz.kernels.hmc(path, 0.3, 5)
    result = _vmapped(jaxz.smc(path, kernel, target_ess=0.5, num_mcmc_steps=2), gaussian, 64, 256, 50)
    log_z = np.asarray(result.estimate.log_z)
    ratio = float(np.mean(result.estimate.log_z_stderr)) / log_z.std(ddof=1)
    assert 0.6 < ratio < 1.6, ratio
    assert abs(log_z[0] - gaussian.log_z) < 4 * float(result.estimate.log_z_stderr[0])


def test_adaptive_schedule_keeps_conditional_ess_at_target(gaussian):
    """Each adaptive step (except a final whole step) lands on the target CESS, so the
    ESS after reweighting stays near target × (previous ESS); the schedule ends at 1."""
    path = gaussian.path()
    kernel = jaxz.kernels.hmc(path, 0.3, 5)
    result = jaxz.run(jaxz.smc(path, kernel, target_ess=0.5, resample_ess=1.0), jax.random.key(0),
                      gaussian.base_draws(jax.random.key(1), 2000), max_steps=50)
    steps = int(result.num_steps)
    betas = np.asarray(result.trace.beta[:steps])
    assert betas[-1] == 1.0 and np.all(np.diff(betas) > 0)
    # resample_ess = 1 resamples every step, so the pre-resampling ESS is the CESS.
    np.testing.assert_allclose(np.asarray(result.trace.ess[: steps - 1]), 0.5, atol=0.02)
    assert int(result.state.genealogy.generation) == steps or float(result.trace.ess[steps - 1]) == 1.0


@pytest.mark.slow  # CI time: run with pytest -m slow
def test_smc_same_key_same_bits_with_and_without_jit(gaussian):
    path = gaussian.path()
    estimator = jaxz.smc(path, jaxz.kernels.rwmh(path, 0.5), target_ess=0.5)
    positions = gaussian.base_draws(jax.random.key(1), 64)
    eager = jaxz.run(estimator, jax.random.key(2), positions, max_steps=30)
    jitted = jax.jit(lambda key: jaxz.run(estimator, key, positions, max_steps=30))(jax.random.key(2))
    again = jax.jit(lambda key: jaxz.run(estimator, key, positions, max_steps=30))(jax.random.key(2))
    np.testing.assert_allclose(eager.estimate.log_z, jitted.estimate.log_z, rtol=1e-5)
    assert eager.num_steps == jitted.num_steps
    assert jitted.estimate.log_z == again.estimate.log_z


@pytest.mark.slow  # CI time: run with pytest -m slow
def test_smc_vmap_over_runs_equals_python_loop(gaussian):
    """Runs that take different numbers of adaptive steps are frozen once done, so the
    vmapped runs equal the same runs made one at a time."""
    path = gaussian.path()
    estimator = jaxz.smc(path, jaxz.kernels.rwmh(path, 0.5), target_ess=0.95)
    keys = jax.random.split(jax.random.key(5), 6)
    run = jax.jit(lambda key: jaxz.run(estimator, key, gaussian.base_draws(key, 8), max_steps=60))
    batched = jax.vmap(run)(keys)
    looped = [run(key) for key in keys]
    assert len(set(int(r.num_steps) for r in looped)) > 1  # the runs really differ in length
    for i, single in enumerate(looped):
        np.testing.assert_allclose(batched.estimate.log_z[i], single.estimate.log_z, rtol=1e-5, atol=1e-5)
        assert int(batched.num_steps[i]) == int(single.num_steps)


def test_smc_legacy_and_new_style_keys_both_work(gaussian):
    path = gaussian.path()
    estimator = jaxz.smc(path, jaxz.kernels.rwmh(path, 0.5), betas=jaxz.schedules.linear(4))
    positions = gaussian.base_draws(jax.random.key(1), 32)
    log_z = jax.jit(lambda key: jaxz.run(estimator, key, positions).estimate.log_z)
    new, legacy = log_z(jax.random.key(0)), log_z(jax.random.PRNGKey(0))
    assert np.isfinite(new) and np.asarray(new).tobytes() == np.asarray(legacy).tobytes()  # the same key bits


def test_smc_float64_end_to_end(gaussian):
    path = gaussian.path()
    with jax.enable_x64(True):
        positions = gaussian.base_draws(jax.random.key(1), 512, jnp.float64)
        estimator = jaxz.smc(path, jaxz.kernels.hmc(path, 0.3, 5), target_ess=0.5, num_mcmc_steps=2)
        estimate = jax.jit(lambda key: jaxz.run(estimator, key, positions, max_steps=50).estimate)(jax.random.key(0))
        assert estimate.log_z.dtype == jnp.float64
        # bounded too, so that an inflated s.e. cannot pass: twice the spread of log Ẑ (sd 0.073 over 200 runs)
        assert abs(float(estimate.log_z) - gaussian.log_z) < 4 * float(estimate.log_z_stderr) < 4 * 2 * 0.073
