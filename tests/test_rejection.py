"""Rejection sampling: Ẑ = acceptance rate · c · Z_q against the exact log Z, its
unbiasedness, exactness of the accepted draws (KS test), envelope violations."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import jaxz

LOG_SCALE = 2.0  # f(x) = e² exp(−(x − 1)² / (2 · 0.5²)): log Z = 2 + ½ log(2π · 0.25)
EXACT_LOG_Z = LOG_SCALE + 0.5 * np.log(2 * np.pi * 0.25)
# q = N(0, 2²). log f − log q = 2 − 2(x − 1)² + x²/8 + ½ log 8π is maximal at x* = 16/15:
X_STAR = 16.0 / 15.0
LOG_C = LOG_SCALE - 2 * (X_STAR - 1) ** 2 + X_STAR**2 / 8 + 0.5 * np.log(8 * np.pi)


def _run(estimator, key, num_proposals):
    return jax.jit(lambda k: jaxz.run(estimator, k, num_proposals))(key)


def _log_target(x):
    return LOG_SCALE - 2.0 * (x - 1.0) ** 2


def _sample_proposal(dtype):
    return lambda key: 2.0 * jax.random.normal(key, (), dtype)


def _log_proposal(x):  # normalized N(0, 4)
    return -x**2 / 8.0 - 0.5 * jnp.log(8.0 * jnp.pi)


def _log_proposal_unnormalized(x):  # exp(−x²/8), Z_q = sqrt(8π)
    return -x**2 / 8.0


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("normalized", [True, False])
def test_rejection_log_z_within_its_stderr_of_exact(dtype, normalized):
    with jax.enable_x64(dtype == jnp.float64):
        if normalized:
            estimator = jaxz.rejection(_log_target, _sample_proposal(dtype), _log_proposal, LOG_C)
        else:
            estimator = jaxz.rejection(_log_target, _sample_proposal(dtype), _log_proposal_unnormalized,
                                       LOG_C - 0.5 * np.log(8 * np.pi), log_z_proposal=0.5 * np.log(8 * np.pi))
        result = jax.jit(lambda key: jaxz.run(estimator, key, 4000))(jax.random.key(0))
        estimate = result.estimate
        assert estimate.log_z.dtype == dtype
        assert abs(float(estimate.log_z) - EXACT_LOG_Z) < 4.5 * float(estimate.log_z_stderr)
        assert estimate.status == jaxz.STATUS_OK and estimate.cost == 4000 and int(result.num_steps) == 0
        assert int(result.state.num_violations) == 0


def test_rejection_z_hat_is_unbiased_over_500_runs():
    """Ẑ = (accepted / n) c Z_q has E[Ẑ] = Z exactly (binomial count)."""
    estimator = jaxz.rejection(_log_target, _sample_proposal(jnp.float32), _log_proposal, LOG_C)
    keys = jax.random.split(jax.random.key(1), 500)
    log_z = jax.jit(jax.vmap(lambda key: jaxz.run(estimator, key, 20).estimate.log_z))(keys)
    ratio = np.exp(np.asarray(log_z, float) - EXACT_LOG_Z)  # −inf (no acceptance) counts as 0
    assert abs(ratio.mean() - 1.0) < 4 * ratio.std(ddof=1) / np.sqrt(ratio.size)


def test_rejection_accepted_draws_are_exact_draws_of_the_target():
    """Kolmogorov–Smirnov test of the accepted draws against N(1, 0.5²), and the
    acceptance rate against Z / (c Z_q)."""
    with jax.enable_x64(True):
        estimator = jaxz.rejection(_log_target, _sample_proposal(jnp.float64), _log_proposal, LOG_C)
        state = jax.jit(estimator.init, static_argnums=1)(jax.random.key(2), 20_000)
        accepted = np.asarray(state.samples)[np.asarray(state.accepted)]
        assert stats.kstest(accepted, stats.norm(1.0, 0.5).cdf).pvalue > 1e-3
        rate = np.exp(EXACT_LOG_Z - LOG_C)
        assert abs(accepted.size / 20_000 - rate) < 4.5 * np.sqrt(rate * (1 - rate) / 20_000)


def test_rejection_flags_a_violated_envelope():
    """An envelope c too small by a factor e is seen (f > c q at some draws): the
    violations are counted and STATUS_NONFINITE is raised."""
    estimator = jaxz.rejection(_log_target, _sample_proposal(jnp.float32), _log_proposal, LOG_C - 1.0)
    result = _run(estimator, jax.random.key(3), 2000)
    assert int(result.state.num_violations) > 0
    assert result.estimate.status & jaxz.STATUS_NONFINITE


def test_rejection_nan_target_is_rejected_and_flagged_and_all_dead_is_degenerate():
    broken = lambda x: jnp.where(x > 2.0, jnp.nan, _log_target(x))  # noqa: E731
    estimator = jaxz.rejection(broken, _sample_proposal(jnp.float32), _log_proposal, LOG_C)
    result = _run(estimator, jax.random.key(4), 1000)
    samples = np.asarray(result.state.samples)
    assert not np.any(np.asarray(result.state.accepted)[samples > 2.0])
    assert np.isfinite(result.estimate.log_z) and result.estimate.status & jaxz.STATUS_NONFINITE
    dead = lambda x: -jnp.inf * jnp.ones_like(x)  # noqa: E731
    estimate = _run(jaxz.rejection(dead, _sample_proposal(jnp.float32), _log_proposal, LOG_C),
                    jax.random.key(4), 100).estimate
    assert estimate.log_z == -jnp.inf and estimate.log_z_stderr == jnp.inf
    assert estimate.status & jaxz.STATUS_DEGENERATE and not estimate.status & jaxz.STATUS_NONFINITE


def test_rejection_bad_arguments_raise_value_errors_naming_them():
    sample = _sample_proposal(jnp.float32)
    with pytest.raises(ValueError, match="num_proposals"):
        jaxz.rejection(_log_target, sample, _log_proposal, LOG_C).init(jax.random.key(0), 0)
    with pytest.raises(ValueError, match="log_envelope_scale"):
        jaxz.rejection(_log_target, sample, _log_proposal, np.nan)
    with pytest.raises(ValueError, match="log_envelope_scale"):
        jaxz.rejection(_log_target, sample, _log_proposal, np.zeros(2))
    with pytest.raises(ValueError, match="log_target_fn"):
        jaxz.rejection(3.0, sample, _log_proposal, LOG_C)


def test_rejection_jit_equals_no_jit_and_same_key_gives_same_bits():
    estimator = jaxz.rejection(_log_target, _sample_proposal(jnp.float32), _log_proposal, LOG_C)
    key = jax.random.key(5)
    eager = jaxz.run(estimator, key, 256)
    jitted = jax.jit(lambda k: jaxz.run(estimator, k, 256))
    first, second = jitted(key), jitted(key)
    np.testing.assert_array_equal(eager.state.accepted, first.state.accepted)
    np.testing.assert_allclose(eager.estimate.log_z, first.estimate.log_z, rtol=1e-6)
    assert np.asarray(first.estimate.log_z).tobytes() == np.asarray(second.estimate.log_z).tobytes()
