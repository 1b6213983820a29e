"""Finite-state HMM (jaxz.models.hmm): the forward algorithm against brute-force
enumeration of every state path, the simulator against the transition matrix, and the
bootstrap particle filter's Ẑ unbiased for the exact likelihood."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import logsumexp

import jaxz
from jaxz.models import hmm


def _brute_force_log_likelihood(params, observations):
    """log Σ over all K^T state paths of π_{x_1} Π A_{x_{t−1} x_t} Π g(y_t | x_t)."""
    log_initial = np.asarray(params.log_initial, np.float64)
    log_transition = np.asarray(params.log_transition, np.float64)
    log_g = np.stack([np.asarray(hmm.log_emission(params, y), np.float64) for y in observations])  # (T, K)
    num_steps, num_states = log_g.shape
    terms = []
    for path in itertools.product(range(num_states), repeat=num_steps):
        path = np.array(path)
        terms.append(log_initial[path[0]] + log_transition[path[:-1], path[1:]].sum()
                     + log_g[np.arange(num_steps), path].sum())
    return logsumexp(terms)


def _categorical_model(dtype):
    emission = hmm.categorical_emission([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]], dtype)
    return hmm.hmm([0.4, 0.6], [[0.9, 0.1], [0.25, 0.75]], emission)


def test_forward_algorithm_matches_brute_force_enumeration_gaussian_and_categorical():
    with jax.enable_x64(True):
        gaussian = hmm.three_state(jnp.float64)
        _, y = hmm.simulate(jax.random.key(0), gaussian, 6)  # 3^6 = 729 paths
        np.testing.assert_allclose(float(jax.jit(hmm.exact_log_likelihood)(gaussian, y)),
                                   _brute_force_log_likelihood(gaussian, np.asarray(y)), rtol=1e-12)
        categorical = _categorical_model(jnp.float64)
        _, y = hmm.simulate(jax.random.key(1), categorical, 10)  # 2^10 paths
        assert y.dtype == jnp.int32
        np.testing.assert_allclose(float(jax.jit(hmm.exact_log_likelihood)(categorical, y)),
                                   _brute_force_log_likelihood(categorical, np.asarray(y)), rtol=1e-12)


def test_forward_algorithm_stays_finite_and_accurate_in_float32_on_a_long_series():
    """T = 3000: log p ≈ −5000, far below float32's exp range; the log-space forward pass
    agrees with float64 to float32 round-off accumulated over T steps."""
    with jax.enable_x64(True):
        params64 = hmm.three_state(jnp.float64)
        _, y = hmm.simulate(jax.random.key(2), params64, 3000)
        exact64 = float(hmm.exact_log_likelihood(params64, y))
        value32 = hmm.exact_log_likelihood(hmm.three_state(jnp.float32), y.astype(jnp.float32))
    assert value32.dtype == jnp.float32 and np.isfinite(float(value32))
    assert abs(float(value32) - exact64) < 1e-4 * abs(exact64), (float(value32), exact64)


def test_simulated_transition_frequencies_match_the_transition_matrix():
    """One chain of 20,000 steps: the empirical transition frequencies out of each state
    are within 5 binomial standard errors of A, and the Gaussian emissions' per-state
    means within 5 s.e. of μ."""
    params = hmm.three_state(jnp.float32)
    states, y = jax.jit(hmm.simulate, static_argnums=2)(jax.random.key(3), params, 20_000)
    states, y = np.asarray(states), np.asarray(y)
    transition = np.exp(np.asarray(params.log_transition, np.float64))
    counts = np.zeros((3, 3))
    np.add.at(counts, (states[:-1], states[1:]), 1)
    visits = counts.sum(axis=1, keepdims=True)
    stderr = np.sqrt(transition * (1 - transition) / visits)
    assert np.all(np.abs(counts / visits - transition) < 5 * stderr), counts / visits
    for k, mean in enumerate([-2.0, 0.0, 2.0]):
        draws = y[states == k]
        assert abs(draws.mean() - mean) < 5 * 1.0 / np.sqrt(draws.size)


def test_particle_filter_z_hat_is_unbiased_for_the_forward_likelihood():
    """E[Ẑ] = p(y_{1:T}) (Del Moral 2004): over 400 runs of 50 particles (multinomial
    resampling at ESS < N/2), mean Ẑ/Z is within 4 standard errors (spread of runs) of 1,
    with categorical emissions (tests/test_calibration.py runs the Gaussian model)."""
    params = _categorical_model(jnp.float32)
    _, y = hmm.simulate(jax.random.key(5), params, 25)
    exact = float(hmm.exact_log_likelihood(params, y))
    estimator = jaxz.particle_filter(*hmm.particle_filter_callables(params), resampling="multinomial")
    run = jax.jit(jax.vmap(lambda key: jaxz.run(estimator, key, 50, y).estimate))
    estimate = run(jax.random.split(jax.random.key(6), 400))
    ratio = np.exp(np.asarray(estimate.log_z, np.float64) - exact)
    assert abs(ratio.mean() - 1.0) < 4 * ratio.std(ddof=1) / np.sqrt(ratio.size), ratio.mean()
    assert np.all(np.asarray(estimate.status) & jaxz.STATUS_NONFINITE == 0)


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: hmm.hmm([0.5, 0.5], [[0.9, 0.1], [0.2, 0.7]], hmm.gaussian_emission([0, 1], [1, 1])), "transition"),
        (lambda: hmm.hmm([0.5, 0.6], [[0.9, 0.1], [0.2, 0.8]], hmm.gaussian_emission([0, 1], [1, 1])), "initial"),
        (lambda: hmm.hmm([0.5, 0.5], [[1.0]], hmm.gaussian_emission([0, 1], [1, 1])), "transition"),
        (lambda: hmm.hmm([0.5, 0.5], np.eye(2), hmm.gaussian_emission([0, 1, 2], [1, 1, 1])), "emission"),
        (lambda: hmm.hmm([0.5, 0.5], np.eye(2), "gaussian"), "emission"),
        (lambda: hmm.gaussian_emission([0, 1], [1, 0]), "scales"),
        (lambda: hmm.gaussian_emission([0, 1], [1]), "scales"),
        (lambda: hmm.categorical_emission([[0.5, 0.6], [0.5, 0.5]]), "probs"),
        (lambda: hmm.categorical_emission([0.5, 0.5]), "probs"),
    ],
)
def test_hmm_constructors_reject_bad_arguments_naming_them(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_float64_model_keeps_float64_through_simulate_likelihood_and_filter():
    with jax.enable_x64(True):
        params = hmm.three_state(jnp.float64)
        _, y = hmm.simulate(jax.random.key(7), params, 10)
        assert y.dtype == jnp.float64
        assert hmm.exact_log_likelihood(params, y).dtype == jnp.float64
        estimator = jaxz.particle_filter(*hmm.particle_filter_callables(params))
        assert jax.jit(lambda k: jaxz.run(estimator, k, 20, y))(jax.random.key(8)).estimate.log_z.dtype == jnp.float64
