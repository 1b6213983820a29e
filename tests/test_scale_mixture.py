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
def test_kernel_integrates_to_one_and_matches_the_scale_integral(dim):
    """The closed form (incomplete gamma) against the radial integral of the density (1 to 1e-9) and
    against the log-uniform scale integral done numerically; both independent of the closed form."""
    smallest, largest = 1e-6, 0.1
    log_r = np.linspace(math.log(1e-14), math.log(10.0), 100001)
    with jax.enable_x64(True):
        log_kernel = np.asarray(scale_mixture._log_kernel(jnp.asarray(np.exp(2 * log_r)), dim, smallest, largest))
        surface = 2 * math.pi ** (dim / 2) / special.gamma(dim / 2)
        mass = np.trapezoid(np.exp(log_kernel + dim * log_r) * surface, log_r)
        assert mass == pytest.approx(1.0, abs=1e-6)
        log_s = np.linspace(math.log(smallest), math.log(largest), 100001)
        for u in (1e-12, 1e-4, 1e-2):
            scales = np.exp(log_s)
            direct = np.trapezoid((2 * math.pi * scales ** 2) ** (-dim / 2) * np.exp(-u / (2 * scales ** 2)),
                                  log_s) / math.log(largest / smallest)
            closed = float(scale_mixture._log_kernel(jnp.asarray(u), dim, smallest, largest))
            assert closed == pytest.approx(math.log(direct), abs=1e-6)


def test_draws_follow_the_density():
    """Radii of 1-d draws around one centre: the fraction within r against the density's integral
    over [−r, r] (log-spaced r), to 4 binomial sd."""
    points = jnp.zeros((1, 1))
    mixture = scale_mixture.fit(points, jnp.zeros(1), jnp.zeros(1), smallest=1e-6, largest=0.1)
    mixture = mixture._replace(scale=jnp.ones(1))
    num = 100_000
    radii = np.abs(np.asarray(scale_mixture.sample(mixture, jax.random.key(0), num))[:, 0])
    grid = np.exp(np.linspace(math.log(1e-12), math.log(5.0), 20001))
    density = np.exp(np.asarray(scale_mixture.log_density(mixture, jnp.asarray(grid[:, None]))))
    cumulative = 2 * np.concatenate([[0.0], np.cumsum(0.5 * (density[1:] + density[:-1]) * np.diff(grid))])
    for r in (1e-5, 1e-4, 1e-3, 1e-2, 0.1):
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
