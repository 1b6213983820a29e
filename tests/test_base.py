"""The driver: scan for static schedules, while_loop with a padded trace otherwise,
done-masking, and the STATUS_MAX_STEPS flag."""
import jax
import numpy as np

import jaxz


def test_fixed_schedule_runs_the_same_by_scan_and_by_while_loop(gaussian):
    """A static estimator driven with max_steps (while_loop) gives the scan's bits, and
    the padded trace beyond num_steps is zero (frozen steps record nothing)."""
    path = gaussian.path()
    estimator = jaxz.ais(path, jaxz.kernels.rwmh(path, 0.5), jaxz.schedules.linear(6))
    positions = gaussian.base_draws(jax.random.key(1), 16)
    by_scan = jaxz.run(estimator, jax.random.key(0), positions)
    by_loop = jaxz.run(estimator, jax.random.key(0), positions, max_steps=9)
    assert int(by_scan.num_steps) == int(by_loop.num_steps) == 5
    assert by_loop.trace.beta.shape == (9,)
    np.testing.assert_allclose(by_loop.trace.beta[:5], by_scan.trace.beta, rtol=1e-6)
    np.testing.assert_array_equal(by_loop.trace.beta[5:], 0.0)
    assert by_scan.estimate.status == 0 and by_loop.estimate.status == 0


def test_freeze_when_done_returns_a_done_state_unchanged(gaussian):
    path = gaussian.path()
    estimator = jaxz.smc(path, jaxz.kernels.rwmh(path, 0.5), betas=jaxz.schedules.linear(3))
    result = jax.jit(lambda key: jaxz.run(estimator, key, gaussian.base_draws(jax.random.key(1), 8)))(jax.random.key(0))
    assert bool(result.state.done)
    again, info = jax.jit(estimator.step)(jax.random.key(9), result.state)
    for before, after in zip(jax.tree.leaves(result.state), jax.tree.leaves(again)):
        np.testing.assert_array_equal(before, after)
    assert all(np.all(np.asarray(leaf) == 0) for leaf in jax.tree.leaves(info))


def test_run_is_vmappable_over_keys_and_positions(gaussian):
    path = gaussian.path()
    estimator = jaxz.smc(path, jaxz.kernels.rwmh(path, 0.5), target_ess=0.5)
    keys = jax.random.split(jax.random.key(0), 3)
    positions = jax.vmap(lambda k: gaussian.base_draws(k, 8))(keys)
    result = jax.jit(jax.vmap(lambda k, x: jaxz.run(estimator, k, x, max_steps=20)))(keys, positions)
    assert result.estimate.log_z.shape == (3,)
    assert result.trace.beta.shape == (3, 20)
    assert np.all(np.isfinite(result.estimate.log_z))
