"""jaxz.approx.mixture: weighted EM and the cross-validated choice of components,
against mixtures whose parameters and densities are known."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxz.approx import mixture


def _two_blobs(key, num, weights=(0.3, 0.7), centre=3.0, scale=(0.5, 1.0)):
    key_pick, key_noise = jax.random.split(key)
    pick = jax.random.uniform(key_pick, (num,)) < weights[0]
    noise = jax.random.normal(key_noise, (num, 2))
    first = jnp.asarray([-centre, 0.0]) + scale[0] * noise
    second = jnp.asarray([centre, 1.0]) + scale[1] * noise
    return jnp.where(pick[:, None], first, second)


def test_log_density_is_the_mixture_of_gaussians():
    rng = np.random.default_rng(0)
    chol = np.stack([np.linalg.cholesky(a @ a.T + np.eye(3)) for a in rng.normal(size=(2, 3, 3))])
    fitted = mixture.GaussianMixture(jnp.log(jnp.asarray([0.25, 0.75, 0.0])), jnp.asarray(rng.normal(size=(3, 3))),
                                     jnp.asarray(np.concatenate([chol, np.eye(3)[None]])))
    points = rng.normal(size=(50, 3))
    expected = np.log(0.25 * stats.multivariate_normal.pdf(points, fitted.means[0], chol[0] @ chol[0].T)
                      + 0.75 * stats.multivariate_normal.pdf(points, fitted.means[1], chol[1] @ chol[1].T))
    np.testing.assert_allclose(mixture.log_density(fitted, jnp.asarray(points)), expected, rtol=1e-5)
    draws = mixture.sample(fitted, jax.random.key(0), 40000)
    # the unused slot (weight 0) is never drawn: the mean is the two components'
    mean = 0.25 * fitted.means[0] + 0.75 * fitted.means[1]
    np.testing.assert_allclose(np.mean(draws, 0), mean, atol=5 * 2.5 / np.sqrt(40000))


def test_weighted_em_recovers_two_components_within_their_standard_errors():
    num = 4000
    points = _two_blobs(jax.random.key(1), num)
    fitted = mixture.fit_mixture(jax.random.key(2), points, jnp.zeros(num), jnp.asarray(2), 4)
    used = np.flatnonzero(np.isfinite(np.asarray(fitted.log_weights)))
    assert used.size == 2  # the two slots beyond num_components stay empty
    order = used[np.argsort(np.asarray(fitted.means[used, 0]))]
    weights = np.exp(np.asarray(fitted.log_weights))[order]
    means = np.asarray(fitted.means)[order]
    sds = np.sqrt(np.diagonal(np.einsum("kij,klj->kil", fitted.cholesky, fitted.cholesky), axis1=1, axis2=2))[order]
    assert np.sum(weights) == pytest.approx(1.0, rel=1e-5)
    assert abs(weights[0] - 0.3) < 4 * np.sqrt(0.3 * 0.7 / num)
    for k, (centre, scale, share) in enumerate([((-3.0, 0.0), 0.5, 0.3), ((3.0, 1.0), 1.0, 0.7)]):
        np.testing.assert_allclose(means[k], centre, atol=4 * scale / np.sqrt(share * num))
        np.testing.assert_allclose(sds[k], scale, rtol=4 / np.sqrt(2 * share * num))


def test_weights_act_as_repeated_points():
    points = _two_blobs(jax.random.key(3), 600)
    log_weights = jnp.where(points[:, 0] < 0, jnp.log(3.0), 0.0)  # triple the left blob
    weighted = mixture.fit_mixture(jax.random.key(4), points, log_weights, jnp.asarray(2), 2)
    left = np.asarray(points[:, 0] < 0)
    repeated = jnp.concatenate([points, points[left], points[left]])
    plain = mixture.fit_mixture(jax.random.key(4), repeated, jnp.zeros(repeated.shape[0]), jnp.asarray(2), 2)
    sort = lambda m: np.asarray(m.means)[np.argsort(np.asarray(m.means[:, 0]))]  # noqa: E731
    np.testing.assert_allclose(sort(weighted), sort(plain), atol=1e-4)


def test_cross_validation_picks_one_component_for_a_gaussian_and_more_for_two_blobs():
    gaussian = jax.random.normal(jax.random.key(5), (1000, 2)) @ jnp.asarray([[1.0, 0.5], [0.0, 0.3]])
    _, chosen = mixture.select_mixture(jax.random.key(6), gaussian, jnp.zeros(1000), (1, 2, 4, 8))
    assert int(chosen) == 1
    blobs = _two_blobs(jax.random.key(7), 1000, scale=(0.1, 0.1))
    fitted, chosen = mixture.select_mixture(jax.random.key(8), blobs, jnp.zeros(1000), (1, 2, 4, 8))
    assert int(chosen) >= 2
    # every blob carries its share of the fitted mass
    left = jnp.exp(fitted.log_weights) @ (fitted.means[:, 0] < 0)
    assert abs(float(left) - 0.3) < 4 * np.sqrt(0.21 / 1000)


def test_duplicated_points_leave_finite_densities():
    points = jnp.repeat(jax.random.normal(jax.random.key(9), (10, 3)), 50, axis=0)
    fitted = mixture.fit_mixture(jax.random.key(10), points, jnp.zeros(500), jnp.asarray(8), 8)
    assert np.all(np.isfinite(mixture.log_density(fitted, points)))
    assert np.all(np.isfinite(mixture.sample(fitted, jax.random.key(11), 100)))
