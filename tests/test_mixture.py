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


def _importance_draws(proposal, target, key, num):
    draws = mixture.sample(proposal, key, num)
    return draws, mixture.log_density(target, draws) - mixture.log_density(proposal, draws)


def test_full_pmc_step_is_the_importance_weighted_moments_batched_or_not():
    chol = jnp.stack([0.5 * jnp.eye(2), jnp.eye(2)])
    target = mixture.GaussianMixture(jnp.log(jnp.asarray([0.3, 0.7])), jnp.asarray([[-3.0, 0.0], [3.0, 1.0]]), chol)
    proposal = target._replace(log_weights=jnp.log(jnp.asarray([0.6, 0.4])), cholesky=1.5 * chol,
                               means=target.means + 0.2)
    draws, log_w = _importance_draws(proposal, target, jax.random.key(5), 6000)
    updated = mixture.pmc_update(proposal, mixture.pmc_statistics(proposal, draws, log_w + 3.0), 1.0, 0.0)
    # step 1 and no prior count: the Rao-Blackwellised PMC update itself (Cappé et al. 2008, §3), in numpy
    x, w = np.asarray(draws, np.float64), np.exp(np.asarray(log_w, np.float64))
    joint = np.stack([np.exp(np.asarray(proposal.log_weights[k])) * stats.multivariate_normal.pdf(
        x, np.asarray(proposal.means[k]), np.asarray(chol[k] @ chol[k].T) * 2.25) for k in range(2)], 1)
    u = w[:, None] * joint / joint.sum(1, keepdims=True)
    np.testing.assert_allclose(np.exp(updated.log_weights), u.sum(0) / u.sum(), rtol=1e-4)
    for k in range(2):
        mean = u[:, k] @ x / u[:, k].sum()
        covariance = (u[:, k, None] * (x - mean)).T @ (x - mean) / u[:, k].sum()
        np.testing.assert_allclose(updated.means[k], mean, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(updated.cholesky[k] @ updated.cholesky[k].T, covariance, rtol=1e-3, atol=1e-5)
    # statistics of two batches on their own scales, combined by pmc_update, are the same step
    halves = [mixture.pmc_statistics(proposal, draws[i::2], log_w[i::2] + 10.0 * i) for i in range(2)]
    halves[1] = halves[1]._replace(log_scale=halves[1].log_scale - 10.0)
    batched = mixture.pmc_update(proposal, jax.tree.map(lambda *leaves: jnp.stack(leaves), *halves), 1.0, 0.0)
    for leaf, expected in zip(batched, updated):
        np.testing.assert_allclose(leaf, expected, rtol=1e-4, atol=1e-5)


def test_pmc_step_restores_a_starved_component_and_counts_the_fit_as_prior_draws():
    chol = jnp.stack([0.5 * jnp.eye(2), jnp.eye(2)])
    target = mixture.GaussianMixture(jnp.log(jnp.asarray([0.3, 0.7])), jnp.asarray([[-3.0, 0.0], [3.0, 1.0]]), chol)
    # the left component too narrow and too light: what SMC's particles leave when a mode is under-sampled
    starved = target._replace(log_weights=jnp.log(jnp.asarray([0.02, 0.98])),
                              cholesky=jnp.stack([0.2 * jnp.eye(2), jnp.eye(2)]))
    defensive = starved._replace(log_weights=jnp.log(jnp.asarray([0.5, 0.5])), cholesky=3.0 * chol)
    draws, log_w = _importance_draws(defensive, target, jax.random.key(6), 20000)
    # draws of a broad proposal, with the starved mixture's responsibilities: the pilot's wide and prior draws
    updated = mixture.pmc_update(starved, mixture.pmc_statistics(starved, draws, log_w), 1.0, 0.0)
    sds = np.sqrt(np.diagonal(np.einsum("kij,klj->kil", updated.cholesky, updated.cholesky), axis1=1, axis2=2))
    np.testing.assert_allclose(np.exp(updated.log_weights), [0.3, 0.7], atol=0.03)
    # 0.2 -> about 0.46: one step (the starved component's responsibilities give its far tail to the other one)
    np.testing.assert_allclose(sds[0], [0.5, 0.5], rtol=0.15)
    # a prior count far above the draws' effective number keeps the fitted component
    held = mixture.pmc_update(starved, mixture.pmc_statistics(starved, draws, log_w), 1.0, 1e12)
    np.testing.assert_allclose(held.cholesky[0], starved.cholesky[0], atol=1e-6)
    np.testing.assert_allclose(held.means[0], starved.means[0], atol=1e-6)

