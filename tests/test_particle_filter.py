"""Bootstrap particle filter: log Ẑ against the exact Kalman log-likelihood (LGSSM) and a
fine-grid forward algorithm (NLSSM), unbiasedness of Ẑ, resampling triggers, bad input."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import logsumexp

import jaxz
from jaxz.models import lgssm, nlssm


@pytest.fixture(scope="module")
def linear_gaussian():
    with jax.enable_x64(True):
        params = lgssm.default(2, 1)
        _, observations = jax.jit(lgssm.simulate, static_argnums=2)(jax.random.key(0), params, 10)
        exact = float(jax.jit(lgssm.kalman_log_likelihood)(params, observations))
    # numpy leaves: each test casts them to its own dtype
    return jax.tree.map(np.asarray, params), np.asarray(observations), exact


def _cast(params, observations, dtype=jnp.float32):
    return jax.tree.map(lambda leaf: jnp.asarray(leaf, dtype), params), jnp.asarray(observations, dtype)


def _run_jitted(estimator, key, num_particles, observations):
    return jax.jit(lambda k, obs: jaxz.run(estimator, k, num_particles, obs))(key, observations)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_particle_filter_log_z_within_its_stderr_of_the_kalman_log_likelihood(linear_gaussian, dtype):
    params, observations, exact = linear_gaussian
    with jax.enable_x64(dtype == jnp.float64):
        params, observations = _cast(params, observations, dtype)
        estimator = jaxz.particle_filter(*lgssm.particle_filter_callables(params))
        result = jax.jit(lambda key: jaxz.run(estimator, key, 1000, observations))(jax.random.key(1))
        estimate = result.estimate
        assert estimate.log_z.dtype == dtype
        assert abs(float(estimate.log_z) - exact) < 4.5 * float(estimate.log_z_stderr)
        assert 0 < estimate.log_z_stderr < 0.5
        assert estimate.status == jaxz.STATUS_OK and estimate.cost == 1000 * 10
        assert int(result.num_steps) == 10 and bool(result.state.done)
        np.testing.assert_allclose(jnp.sum(result.trace.log_z_increment), estimate.log_z, rtol=1e-5)


def test_particle_filter_likelihood_estimate_is_unbiased_over_500_runs(linear_gaussian):
    """E[Ẑ] = p(y_{1:T}) (Del Moral): the mean of Ẑ/Z over 500 runs of 100 particles is
    within 4 standard errors (from the runs' spread) of 1."""
    params, observations, exact = linear_gaussian
    with jax.enable_x64(True):
        params, observations = _cast(params, observations, jnp.float64)
        # multinomial resampling: the scheme the unbiasedness proof is usually written for
        # (the default, systematic, is checked in the single-run test above)
        estimator = jaxz.particle_filter(*lgssm.particle_filter_callables(params), resampling="multinomial")
        keys = jax.random.split(jax.random.key(2), 500)
        log_z = jax.jit(jax.vmap(lambda key: jaxz.run(estimator, key, 100, observations).estimate.log_z))(keys)
        ratio = np.exp(np.asarray(log_z) - exact)
        assert abs(ratio.mean() - 1.0) < 4 * ratio.std(ddof=1) / np.sqrt(ratio.size)


def _grid_log_likelihood(observations, num=801, half_width=40.0):
    """The NLSSM forward algorithm on a fine grid (step 0.1; doubling the grid changes
    the result by < 1e-9): a near-exact log p(y_{1:T})."""
    x = np.linspace(-half_width, half_width, num)
    log_step = np.log(x[1] - x[0])

    def log_normal(z, mean, var):
        return -0.5 * (z - mean) ** 2 / var - 0.5 * np.log(2 * np.pi * var)

    log_alpha = log_normal(x, 0.0, nlssm.INITIAL_VAR) + log_normal(observations[0], x**2 / 20, nlssm.OBSERVATION_VAR)
    total = logsumexp(log_alpha) + log_step
    log_alpha -= logsumexp(log_alpha)
    for t in range(2, observations.shape[0] + 1):
        mean = 0.5 * x + 25 * x / (1 + x**2) + 8 * np.cos(1.2 * t)
        log_predictive = logsumexp(log_alpha[:, None] + log_normal(x[None, :], mean[:, None], nlssm.TRANSITION_VAR),
                                   axis=0)
        log_alpha = log_predictive + log_normal(observations[t - 1], x**2 / 20, nlssm.OBSERVATION_VAR)
        total += logsumexp(log_alpha) + log_step
        log_alpha -= logsumexp(log_alpha)
    return total


def test_particle_filter_on_the_lecture_nlssm_matches_the_grid_likelihood():
    with jax.enable_x64(True):
        _, observations = jax.jit(nlssm.simulate, static_argnums=1)(jax.random.key(7), 15)
        reference = _grid_log_likelihood(np.asarray(observations))
        estimator = jaxz.particle_filter(nlssm.sample_initial, nlssm.sample_transition, nlssm.log_observation)
        estimate = jax.jit(lambda key: jaxz.run(estimator, key, 2000, observations).estimate)(jax.random.key(3))
        # bounded too, so that an inflated s.e. cannot pass: twice the spread of log Ẑ (sd 0.213 over 200 runs)
        assert abs(float(estimate.log_z) - reference) < 4.5 * float(estimate.log_z_stderr) < 4.5 * 2 * 0.213
        assert estimate.status == jaxz.STATUS_OK


def test_resample_ess_one_resamples_every_step_and_tiny_never(linear_gaussian):
    params, observations = _cast(*linear_gaussian[:2])
    callables = lgssm.particle_filter_callables(params)
    always = _run_jitted(jaxz.particle_filter(*callables, resample_ess=1.0), jax.random.key(4), 64, observations)
    assert int(always.state.genealogy.generation) == 10 - 1  # every step but the first
    np.testing.assert_array_equal(always.trace.resampled, [False] + [True] * 9)
    never = _run_jitted(jaxz.particle_filter(*callables, resample_ess=1e-9), jax.random.key(4), 64, observations)
    assert int(never.state.genealogy.generation) == 0


@pytest.mark.slow  # CI time (default selection under ~10 minutes on 2 cores)
def test_particle_filter_jit_equals_no_jit_and_same_key_gives_same_bits(linear_gaussian):
    params, observations = _cast(*linear_gaussian[:2])
    estimator = jaxz.particle_filter(*lgssm.particle_filter_callables(params))
    key = jax.random.key(5)
    eager = jaxz.run(estimator, key, 32, observations).estimate
    jitted = jax.jit(lambda k: jaxz.run(estimator, k, 32, observations).estimate)
    first, second = jitted(key), jitted(key)
    np.testing.assert_allclose(eager.log_z, first.log_z, rtol=1e-5)
    assert np.asarray(first.log_z).tobytes() == np.asarray(second.log_z).tobytes()


def test_particle_filter_nan_observation_density_is_zero_weighted_and_flagged(linear_gaussian):
    params, observations = _cast(*linear_gaussian[:2])
    sample_initial, sample_transition, log_observation = lgssm.particle_filter_callables(params)
    broken = lambda x, y: jnp.where(x[0] > 1.5, jnp.nan, log_observation(x, y))  # noqa: E731
    estimate = _run_jitted(jaxz.particle_filter(sample_initial, sample_transition, broken), jax.random.key(6), 256,
                           observations).estimate
    assert np.isfinite(estimate.log_z) and estimate.status & jaxz.STATUS_NONFINITE
    dead = lambda x, y: -jnp.inf * jnp.ones_like(x[0])  # noqa: E731
    estimate = _run_jitted(jaxz.particle_filter(sample_initial, sample_transition, dead), jax.random.key(6), 64,
                           observations).estimate
    assert estimate.log_z == -jnp.inf and estimate.log_z_stderr == jnp.inf
    assert estimate.status & jaxz.STATUS_DEGENERATE


def test_particle_filter_bad_arguments_raise_value_errors_naming_them(linear_gaussian):
    params, observations = _cast(*linear_gaussian[:2])
    callables = lgssm.particle_filter_callables(params)
    for bad in [0.0, 1.5, -0.1]:
        with pytest.raises(ValueError, match="resample_ess"):
            jaxz.particle_filter(*callables, resample_ess=bad)
    with pytest.raises(ValueError, match="resampling"):
        jaxz.particle_filter(*callables, resampling="bogus")
    estimator = jaxz.particle_filter(*callables)
    with pytest.raises(ValueError, match="num_particles"):
        estimator.init(jax.random.key(0), 0, observations)
    with pytest.raises(ValueError, match="observations"):
        estimator.init(jax.random.key(0), 8, (observations, observations[:5]))
    with pytest.raises(ValueError, match="observations"):
        jaxz.run(estimator, jax.random.key(0), 8, observations[:0])
