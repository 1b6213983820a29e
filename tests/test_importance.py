"""Importance sampling: log Ẑ against the exact Gaussian log Z, unbiasedness of Ẑ,
non-finite densities, bad arguments, dtypes, determinism; SIR draws."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz.models import gaussian

MEAN = np.array([0.5, -1.0])
COV = np.array([[1.0, 0.3], [0.3, 0.5]])
LOG_SCALE = 2.0  # f = e² · exp(−½ (x − μ)ᵀ Σ⁻¹ (x − μ)): log Z is known and not 0
PROPOSAL_SCALE = 2.0  # q = N(0, 4 I), wider than the target: finite weight variance


def _run(estimator, key, num_samples):
    return jax.jit(lambda k: jaxz.run(estimator, k, num_samples))(key)


def _problem(dtype):
    mean, cov = jnp.asarray(MEAN, dtype), jnp.asarray(COV, dtype)

    def log_target(x):
        return gaussian.log_density(x, mean, cov, LOG_SCALE)

    def sample_proposal(key):
        return PROPOSAL_SCALE * jax.random.normal(key, (2,), dtype)

    def log_proposal(x):
        return gaussian.log_standard_normal(x / PROPOSAL_SCALE) - 2 * jnp.log(jnp.asarray(PROPOSAL_SCALE, dtype))

    exact = float(gaussian.exact_log_z(jnp.asarray(COV), LOG_SCALE))
    return log_target, sample_proposal, log_proposal, exact


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_importance_log_z_within_its_stderr_of_exact_gaussian(dtype):
    with jax.enable_x64(dtype == jnp.float64):
        log_target, sample_proposal, log_proposal, exact = _problem(dtype)
        estimator = jaxz.importance(log_target, sample_proposal, log_proposal)
        result = jax.jit(lambda key: jaxz.run(estimator, key, 4000))(jax.random.key(0))
        estimate = result.estimate
        assert estimate.log_z.dtype == dtype and result.state.log_weights.dtype == dtype
        assert abs(float(estimate.log_z) - exact) < 4.5 * float(estimate.log_z_stderr)
        assert 0 < estimate.log_z_stderr < 0.1
        assert estimate.status == jaxz.STATUS_OK and estimate.cost == 4000
        assert bool(result.state.done) and int(result.num_steps) == 0
        np.testing.assert_allclose(result.state.ess, jaxz.weights.ess(result.state.log_weights), rtol=1e-5)


def test_importance_z_hat_is_unbiased_over_500_runs():
    """E[Ẑ] = Z: the mean of Ẑ/Z over 500 independent runs of 10 draws is within 4
    standard errors (from the runs' spread) of 1, although log Ẑ is biased low."""
    log_target, sample_proposal, log_proposal, exact = _problem(jnp.float32)
    estimator = jaxz.importance(log_target, sample_proposal, log_proposal)
    keys = jax.random.split(jax.random.key(1), 500)
    log_z = np.asarray(jax.jit(jax.vmap(lambda key: jaxz.run(estimator, key, 10).estimate.log_z))(keys), float)
    ratio = np.exp(log_z - exact)
    assert abs(ratio.mean() - 1.0) < 4 * ratio.std(ddof=1) / np.sqrt(ratio.size)
    assert np.mean(log_z) < exact  # Jensen: with 10 draws the downward bias of log Ẑ shows


def test_importance_jit_equals_no_jit_vmap_equals_loop_and_same_key_gives_same_bits():
    log_target, sample_proposal, log_proposal, _ = _problem(jnp.float32)
    estimator = jaxz.importance(log_target, sample_proposal, log_proposal)
    key = jax.random.key(2)
    eager = jaxz.run(estimator, key, 64).estimate
    jitted = jax.jit(lambda k: jaxz.run(estimator, k, 64).estimate)
    first, second = jitted(key), jitted(key)
    np.testing.assert_allclose(eager.log_z, first.log_z, rtol=1e-6)
    assert np.asarray(first.log_z).tobytes() == np.asarray(second.log_z).tobytes()
    legacy = jitted(jax.random.PRNGKey(2))  # legacy keys work too: the same key bits, the same result
    assert np.asarray(legacy.log_z).tobytes() == np.asarray(first.log_z).tobytes()
    keys = jax.random.split(key, 3)  # vmap over runs equals a loop over them
    batched = jax.jit(jax.vmap(lambda k: jaxz.run(estimator, k, 64).estimate))(keys)
    np.testing.assert_allclose(batched.log_z, [jitted(k).log_z for k in keys], rtol=1e-6)


def test_importance_nan_target_gets_zero_weight_and_the_nonfinite_flag():
    log_target, sample_proposal, log_proposal, _ = _problem(jnp.float32)
    broken = lambda x: jnp.where(x[0] > 3.0, jnp.nan, log_target(x))  # noqa: E731
    result = _run(jaxz.importance(broken, sample_proposal, log_proposal), jax.random.key(3), 512)
    state, estimate = result.state, result.estimate
    samples = np.asarray(state.samples)
    assert np.all(np.isneginf(np.asarray(state.log_weights)[samples[:, 0] > 3.0]))
    assert np.any(samples[:, 0] > 3.0)
    assert np.isfinite(estimate.log_z) and estimate.status & jaxz.STATUS_NONFINITE


def test_importance_minus_inf_target_is_a_legal_zero_and_all_dead_is_degenerate():
    log_target, sample_proposal, log_proposal, _ = _problem(jnp.float32)
    half = lambda x: jnp.where(x[0] > 0.0, -jnp.inf, log_target(x))  # noqa: E731
    estimate = _run(jaxz.importance(half, sample_proposal, log_proposal), jax.random.key(4), 256).estimate
    assert np.isfinite(estimate.log_z) and estimate.status == jaxz.STATUS_OK
    dead = lambda x: -jnp.inf * jnp.ones_like(x[0])  # noqa: E731
    estimate = _run(jaxz.importance(dead, sample_proposal, log_proposal), jax.random.key(4), 256).estimate
    assert estimate.log_z == -jnp.inf and estimate.log_z_stderr == jnp.inf
    assert estimate.status & jaxz.STATUS_DEGENERATE


def test_importance_bad_arguments_raise_value_errors_naming_them():
    log_target, sample_proposal, log_proposal, _ = _problem(jnp.float32)
    estimator = jaxz.importance(log_target, sample_proposal, log_proposal)
    with pytest.raises(ValueError, match="num_samples"):
        estimator.init(jax.random.key(0), 0)
    with pytest.raises(ValueError, match="sample_proposal"):
        jaxz.importance(log_target, None, log_proposal)


def test_sir_draws_have_the_target_mean():
    """Resampled draws approximate f/Z: their mean is within 5 standard errors of μ,
    the standard error combining the resampling draws and the IS error (1/M + 1/ESS)."""
    with jax.enable_x64(True):
        log_target, sample_proposal, log_proposal, _ = _problem(jnp.float64)
        estimator = jaxz.importance(log_target, sample_proposal, log_proposal)
        state = jax.jit(estimator.init, static_argnums=1)(jax.random.key(5), 20_000)
        draws = np.asarray(jax.jit(jaxz.sir, static_argnums=2)(jax.random.key(6), state, 5000))
        assert draws.shape == (5000, 2)
        stderr = np.sqrt(np.diag(COV) * (1 / 5000 + 1 / float(state.ess)))
        np.testing.assert_array_less(np.abs(draws.mean(0) - MEAN), 5 * stderr)
