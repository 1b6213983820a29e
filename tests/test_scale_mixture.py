"""Kernels at every scale (jaxz.approx.scale_mixture) and the plateau flag of tempered SMC."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

import jaxz
from jaxz.approx import scale_mixture


@pytest.mark.parametrize("dim", [1, 2, 5, 20])
def test_kernel_integrates_to_one(dim):
    """The radial integral of the kernel's density over log-spaced radii (1e-14 to 10) is 1."""
    log_r = np.linspace(math.log(1e-14), math.log(10.0), 400001)
    with jax.enable_x64(True):
        log_kernel = np.asarray(scale_mixture._log_kernel(jnp.asarray(np.exp(2 * log_r)), dim, 1e-6, 0.1))
    surface = 2 * math.pi ** (dim / 2) / special.gamma(dim / 2)
    mass = np.trapezoid(np.exp(log_kernel + dim * log_r) * surface, log_r)
    assert mass == pytest.approx(1.0, abs=1e-3)  # the step at r = 0.1 costs the trapezoid rule ~1e-4


@pytest.mark.parametrize("dim", [1, 3])
def test_draws_follow_the_density(dim):
    """Radii of draws around one centre: the fraction within r against the density's radial
    integral (log-spaced r), to 4 binomial sd."""
    points = jnp.zeros((1, dim))
    mixture = scale_mixture.fit(points, jnp.zeros(1), jnp.zeros(1), smallest=1e-6, largest=0.1)
    mixture = mixture._replace(scale=jnp.ones(dim))
    num = 100_000
    radii = np.linalg.norm(np.asarray(scale_mixture.sample(mixture, jax.random.key(dim), num)), axis=-1)
    grid = np.exp(np.linspace(math.log(1e-12), math.log(5.0), 20001))
    on_axis = np.zeros((grid.size, dim))
    on_axis[:, 0] = grid
    density = np.exp(np.asarray(scale_mixture.log_density(mixture, jnp.asarray(on_axis, jnp.float32)), np.float64))
    radial = 2 * math.pi ** (dim / 2) / special.gamma(dim / 2) * grid ** (dim - 1) * density
    cumulative = np.concatenate([[0.0], np.cumsum(0.5 * (radial[1:] + radial[:-1]) * np.diff(grid))])
    for r in (1e-5, 1e-4, 1e-3, 1e-2, 0.05):
        expected = np.interp(r, grid, cumulative)
        assert abs(np.mean(radii <= r) - expected) < 4 * math.sqrt(expected * (1 - expected) / num) + 1e-3


def _box_path(log_likelihood):
    log_prior = lambda x: jnp.where(jnp.all(jnp.abs(x) <= 1.0), -2 * math.log(2.0), -jnp.inf)  # noqa: E731
    sample = lambda key, n: jax.random.uniform(key, (n, 2), minval=-1.0, maxval=1.0)  # noqa: E731
    return jaxz.paths.likelihood_tempering(log_prior, log_likelihood, sample_prior=sample)


def test_a_likelihood_constant_on_every_particle_is_flagged_plateau():
    """L = 1e8 on a disc of prior mass 1e-6, 1 elsewhere: no prior draw lands on it, every weight is
    equal, log Ẑ = 0 against 4.6 with an s.e. of ~0: STATUS_PLATEAU. A Gaussian likelihood is not."""
    plateau = _box_path(lambda x: jnp.where(jnp.sum((x - 0.3) ** 2) < 4e-6 / math.pi, math.log(1e8), 0.0))
    gaussian = _box_path(lambda x: -0.5 * jnp.sum(((x - 0.2) / 0.3) ** 2))
    for path, flagged in ((plateau, True), (gaussian, False)):
        estimator = jaxz.smc(path, jaxz.kernels.rwmh(path))
        positions = path.sample_base(jax.random.key(0), 200)
        estimate = jaxz.run(estimator, jax.random.key(1), positions, max_steps=100).estimate
        assert bool(int(estimate.status) & jaxz.STATUS_PLATEAU) == flagged, jaxz.status_names(estimate.status)
