"""Exact log Z of the test models against brute force: grid integration in low
dimension, the N × N Gaussian marginal, the stacked joint Gaussian of a state-space model."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxz.models import gaussian, lgssm, logistic, mixture, nlssm, regression


def _grid_log_integral(log_fn, low, high, num=801):
    """log ∫∫ f over a square by the trapezoid rule (the integrands are smooth and
    vanish at the edges, so the error is far below the tolerances used)."""
    axis = np.linspace(low, high, num)
    xx, yy = np.meshgrid(axis, axis, indexing="ij")
    points = jnp.asarray(np.stack([xx.ravel(), yy.ravel()], axis=1))
    values = np.asarray(jax.jit(jax.vmap(log_fn))(points)).reshape(num, num)
    top = values.max()
    integral = np.trapezoid(np.trapezoid(np.exp(values - top), axis, axis=1), axis)
    return np.log(integral) + top


def test_gaussian_exact_log_z_matches_grid_integration():
    with jax.enable_x64(True):
        mean, cov = jnp.array([0.5, -1.0]), jnp.array([[1.0, 0.6], [0.6, 0.8]])
        brute = _grid_log_integral(lambda x: gaussian.log_density(x, mean, cov, 1.7), -9, 9)
        np.testing.assert_allclose(gaussian.exact_log_z(cov, 1.7), brute, atol=1e-8)
        np.testing.assert_allclose(gaussian.log_normal(jnp.zeros(2), mean, cov),
                                   stats.multivariate_normal(mean, cov).logpdf(np.zeros(2)), atol=1e-10)
        np.testing.assert_allclose(gaussian.log_standard_normal(jnp.ones(3)), stats.norm.logpdf(np.ones(3)).sum())


def test_gaussian_draws_have_the_target_mean():
    mean, cov = jnp.array([0.5, -1.0]), jnp.array([[1.0, 0.6], [0.6, 0.8]])
    draws = np.asarray(gaussian.sample(jax.random.key(0), mean, cov, (20_000,)))
    assert draws.shape == (20_000, 2)
    np.testing.assert_array_less(np.abs(draws.mean(0) - mean), 4.5 * np.sqrt(np.diag(cov) / 20_000))
    np.testing.assert_allclose(np.cov(draws.T), cov, atol=0.05)
    assert gaussian.sample_standard_normal(jax.random.key(0), 3, (5,)).shape == (5, 3)


def test_mixture_exact_log_z_matches_grid_integration_and_draws_pick_components_by_mass():
    with jax.enable_x64(True):
        weights, means, scales = mixture.well_separated(dim=2, separation=8.0)
        params = jnp.asarray(weights), jnp.asarray(means), jnp.asarray(scales)
        brute = _grid_log_integral(lambda x: mixture.log_density(x, *params), -12, 12, 1201)
        np.testing.assert_allclose(mixture.exact_log_z(*params), brute, atol=1e-7)
        draws = np.asarray(mixture.sample(jax.random.key(1), *params, (10_000,)))
        masses = weights * 2 * np.pi * scales**2
        first = masses[0] / masses.sum()
        observed = np.mean(draws[:, 0] < 0)
        assert abs(observed - first) < 4.5 * np.sqrt(first * (1 - first) / 10_000)


def test_regression_evidence_matches_the_full_gaussian_marginal_and_grid_integration():
    with jax.enable_x64(True):
        data, _ = regression.generate(jax.random.key(0), 30, 2, prior_scale=1.5, noise_scale=0.7)
        exact = regression.exact_log_evidence(data, prior_scale=1.5, noise_scale=0.7)
        inputs, targets = map(np.asarray, data)
        marginal_cov = 0.7**2 * np.eye(30) + 1.5**2 * inputs @ inputs.T
        np.testing.assert_allclose(exact, stats.multivariate_normal(np.zeros(30), marginal_cov).logpdf(targets),
                                   atol=1e-9)

        def log_joint(theta):
            return regression.log_prior(theta, 1.5) + regression.total_log_likelihood(theta, data, 0.7)

        mean, cov = regression.posterior(data, 1.5, 0.7)
        half_width = 10 * float(np.sqrt(np.max(np.diag(cov))))
        shifted = lambda u: log_joint(u + mean)  # noqa: E731  (grid centred on the posterior mean)
        np.testing.assert_allclose(exact, _grid_log_integral(shifted, -half_width, half_width), atol=1e-6)


def test_regression_per_datum_likelihood_sums_to_the_total_and_prior_is_normalized():
    with jax.enable_x64(True):
        data, theta = jax.jit(regression.generate, static_argnums=(1, 2))(jax.random.key(1), 10, 3)
        per_datum = jax.vmap(regression.log_likelihood, in_axes=(None, 0))(theta, data)
        np.testing.assert_allclose(per_datum.sum(), regression.total_log_likelihood(theta, data), rtol=1e-12)
        np.testing.assert_allclose(regression.log_prior(theta, 2.0), stats.norm(0, 2.0).logpdf(theta).sum())
        assert regression.sample_prior(jax.random.key(0), 3, (4,)).shape == (4, 3)


def _brute_force_lgssm_log_likelihood(params, observations):
    """Stack x_{1:T} into one Gaussian (covariances from the recursion) and evaluate
    log N(y_{1:T}; (I ⊗ C) m, (I ⊗ C) Σ (I ⊗ C)ᵀ + I ⊗ R)."""
    A, C, Q, R, m0, P0 = (np.asarray(p) for p in params)
    steps, dx = observations.shape[0], A.shape[0]
    means, covs = [m0], [P0]
    for _ in range(1, steps):
        means.append(A @ means[-1])
        covs.append(A @ covs[-1] @ A.T + Q)
    joint = np.zeros((steps * dx, steps * dx))
    for s in range(steps):
        for t in range(s, steps):
            block = np.linalg.matrix_power(A, t - s) @ covs[s]  # Cov(x_t, x_s)
            joint[t * dx:(t + 1) * dx, s * dx:(s + 1) * dx] = block
            joint[s * dx:(s + 1) * dx, t * dx:(t + 1) * dx] = block.T
    big_c = np.kron(np.eye(steps), C)
    mean = big_c @ np.concatenate(means)
    cov = big_c @ joint @ big_c.T + np.kron(np.eye(steps), R)
    return stats.multivariate_normal(mean, cov).logpdf(np.asarray(observations).ravel())


@pytest.mark.parametrize("dim_observation", [1, 2])
def test_kalman_log_likelihood_matches_the_joint_gaussian_marginal(dim_observation):
    with jax.enable_x64(True):
        params = lgssm.default(2, dim_observation)
        params = params._replace(initial_mean=jnp.array([1.0, -0.5]))
        states, observations = jax.jit(lgssm.simulate, static_argnums=2)(jax.random.key(2), params, 8)
        assert states.shape == (8, 2) and observations.shape == (8, dim_observation)
        np.testing.assert_allclose(jax.jit(lgssm.kalman_log_likelihood)(params, observations),
                                   _brute_force_lgssm_log_likelihood(params, observations), atol=1e-9)


def test_lgssm_particle_callables_match_the_model_densities():
    with jax.enable_x64(True):
        params = lgssm.default(2, 1)
        sample_initial, sample_transition, log_observation = lgssm.particle_filter_callables(params)
        x = sample_initial(jax.random.key(0))
        assert x.shape == (2,) and sample_transition(jax.random.key(1), x).shape == (2,)
        y = jnp.array([0.3])
        np.testing.assert_allclose(log_observation(x, y), stats.norm(x[0], np.sqrt(0.5)).logpdf(0.3))


def test_nlssm_simulator_and_callables_follow_the_model_equations():
    with jax.enable_x64(True):
        states, observations = jax.jit(nlssm.simulate, static_argnums=1)(jax.random.key(0), 50)
        assert states.shape == observations.shape == (50,)
        # y_t − x_t²/20 ~ N(0, 1): a 4.5-sigma check on its mean and variance
        residual = np.asarray(observations - states**2 / 20)
        assert abs(residual.mean()) < 4.5 / np.sqrt(50) and 0.4 < residual.var() < 1.9
        first = nlssm.sample_initial(jax.random.key(1))
        second = nlssm.sample_transition(jax.random.key(2), first)
        assert int(first.t) == 1 and int(second.t) == 2
        mean = nlssm.transition_mean(first.x, jnp.int32(2))
        expected = first.x / 2 + 25 * first.x / (1 + first.x**2) + 8 * np.cos(2.4)
        np.testing.assert_allclose(mean, expected, rtol=1e-12)
        np.testing.assert_allclose(nlssm.log_observation(second, 1.0),
                                   stats.norm(second.x**2 / 20, 1.0).logpdf(1.0), rtol=1e-12)


def test_logistic_likelihood_is_a_normalized_softmax_and_sums_over_data():
    with jax.enable_x64(True):
        data, theta = jax.jit(logistic.generate, static_argnums=(1, 2, 3))(jax.random.key(0), 40, 3, 4)
        assert theta.shape == (4, 4) and data[1].dtype == jnp.int32
        per_datum = jax.vmap(logistic.log_likelihood, in_axes=(None, 0))(theta, data)
        np.testing.assert_allclose(per_datum.sum(), logistic.total_log_likelihood(theta, data), rtol=1e-12)
        x = data[0][0]
        all_labels = jax.vmap(logistic.log_likelihood, in_axes=(None, (None, 0)))(theta, (x, jnp.arange(4)))
        total = np.exp(np.asarray(all_labels)).sum()
        np.testing.assert_allclose(total, 1.0, rtol=1e-12)
        np.testing.assert_allclose(logistic.log_prior(theta, 0.5), stats.norm(0, 0.5).logpdf(theta).sum())
