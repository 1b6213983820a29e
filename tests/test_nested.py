"""Nested sampling as SMC (``jaxz.estimators.nested.nested_smc``) against exact log Z:
a conjugate Gaussian, an integrable power-law singularity (where tempered SMC misses the
mass at small scales), a plateau (flagged), and its argument checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz.estimators.nested import MIN_SURVIVORS, constrained_path, nested_smc


def _runs(path, sample, num_particles, num_runs, seed=0, **options):
    estimator = nested_smc(path, **options)

    def one(key):
        key_draws, key_run = jax.random.split(key)
        result = jaxz.run(estimator, key_run, sample(key_draws, num_particles), max_steps=400)
        return result.estimate, result.num_steps

    return jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(seed), num_runs))


def test_conjugate_gaussian_within_its_error_bars(conjugate_gaussian_3d, assert_covered):
    """Prior N(0, I_3), likelihood N(y; x, 0.3² I): Z = N(y; 0, (1 + 0.3²) I)."""
    path, sample, exact = conjugate_gaussian_3d
    num_runs = 32
    estimates, num_levels = _runs(path, sample, 200, num_runs)
    assert_covered(estimates, exact)
    assert np.all(np.asarray(num_levels) > 5)


def test_waste_free_conjugate_gaussian_within_its_error_bars(conjugate_gaussian_3d, assert_covered):
    """Waste-free levels (40 chains of 25 states): the chain variance keeps the error bars
    honest on correlated particles, at about a tenth of the evaluations of moving every
    survivor 20+ times."""
    path, sample, exact = conjugate_gaussian_3d
    num_runs = 32
    estimates, _ = _runs(path, sample, 1000, num_runs, seed=3, waste_free=True, chain_length=25)
    assert_covered(estimates, exact)
    standard, _ = _runs(path, sample, 1000, 2, seed=3)
    assert np.mean(np.asarray(estimates.cost)) < 0.3 * np.mean(np.asarray(standard.cost))


def test_waste_free_settings_are_checked_and_few_chains_flagged():
    path = jaxz.paths.likelihood_tempering(lambda x: -0.5 * jnp.sum(x**2), lambda x: -jnp.sum(x**2),
                                           sample_prior=lambda key, n: jax.random.normal(key, (n, 2)))
    with pytest.raises(ValueError, match="waste_free"):
        nested_smc(path, chain_length=10)
    with pytest.raises(ValueError, match="chain_length"):
        nested_smc(path, waste_free=True, chain_length=1)
    draws = jax.random.normal(jax.random.key(1), (200, 2))
    with pytest.raises(ValueError, match="chain_length"):
        jaxz.run(nested_smc(path, waste_free=True, chain_length=30), jax.random.key(0), draws, max_steps=50)
    few = jaxz.run(nested_smc(path, waste_free=True, chain_length=50), jax.random.key(0), draws, max_steps=50)
    assert int(few.estimate.status) & jaxz.STATUS_FEW_CHAINS
    assert not int(few.estimate.status) & ~jaxz.STATUS_FEW_CHAINS


def test_power_law_singularity_reached_level_by_level(power_law, assert_covered):
    """Down to |x_1| = 1e-8 (float64): 27 halvings of the volume, each level's particles at
    its own scale; within the error bars where tempered SMC is 0.75 nats low."""
    with jax.enable_x64(True):
        path, sample, exact = power_law(1e-8)
        num_runs = 24
        estimates, num_levels = _runs(path, sample, 300, num_runs, seed=1)
        chained, _ = _runs(path, sample, 1000, 12, seed=4, waste_free=True)
    assert_covered(estimates, exact)
    assert_covered(chained, exact)
    assert np.all(np.asarray(num_levels) >= 20)


def test_float32_power_law_beyond_its_precision_is_flagged(power_law):
    """In float32 the tuned proposal's variance floor (ε × the mean variance) stops the moves
    in a slab ~1e-7 wide: those runs are flagged STUCK, never silently wrong."""
    path, sample, exact = power_law(1e-8)
    estimates, _ = _runs(path, sample, 300, 8, seed=2)
    errors = np.asarray(estimates.log_z) - exact
    stuck = (np.asarray(estimates.status) & jaxz.STATUS_STUCK) != 0
    assert np.all(stuck | (np.abs(errors) <= 3 * np.asarray(estimates.log_z_stderr))), (estimates, errors)
    assert stuck.any()


def test_constant_likelihood_is_flagged_as_a_plateau():
    """Every draw of the prior at one likelihood: no level can be set; Ẑ = L, PLATEAU, and an
    infinite s.e. (the draws cannot see a high region of prior mass below ~1/N)."""
    path = jaxz.paths.likelihood_tempering(lambda x: jnp.sum(jax.scipy.stats.norm.logpdf(x)), lambda x: 1.5,
                                           sample_prior=lambda key, n: jax.random.normal(key, (n, 2)))
    result = jaxz.run(nested_smc(path), jax.random.key(0), jax.random.normal(jax.random.key(1), (64, 2)),
                      max_steps=10)
    assert int(result.num_steps) == 1
    assert int(result.estimate.status) & jaxz.STATUS_PLATEAU
    assert np.isposinf(float(result.estimate.log_z_stderr))  # never an s.e. of exactly 0
    np.testing.assert_allclose(float(result.estimate.log_z), 1.5, rtol=1e-6)


def test_constrained_path_is_the_base_above_the_level():
    path = jaxz.paths.likelihood_tempering(lambda x: -0.5 * jnp.sum(x**2), lambda x: -jnp.sum(jnp.abs(x)))
    constrained, log_likelihood = constrained_path(path)
    x = jnp.array([0.5, -1.0])
    assert float(log_likelihood(x)) == pytest.approx(-1.5)
    assert float(constrained.log_density(x, -2.0)) == pytest.approx(-0.625)
    assert np.isneginf(float(constrained.log_density(x, -1.0)))


def test_arguments_are_checked():
    path = jaxz.paths.likelihood_tempering(lambda x: -0.5 * jnp.sum(x**2), lambda x: 0.0 * x[0],
                                           sample_prior=lambda key, n: jax.random.normal(key, (n, 1)))
    not_affine = path._replace(affine=False)
    with pytest.raises(ValueError, match="affine"):
        nested_smc(not_affine)
    with pytest.raises(ValueError, match="sample_base"):
        nested_smc(path._replace(sample_base=None))
    for bad in (0.0, 1.5, "half"):
        with pytest.raises(ValueError, match="survival"):
            nested_smc(path, survival=bad)
    with pytest.raises(ValueError, match="num_moves"):
        nested_smc(path, num_moves=2.5)
    with pytest.raises(ValueError, match="max_moves"):
        nested_smc(path, num_moves=20, max_moves=10)
    with pytest.raises(ValueError, match="kernel_of"):
        nested_smc(path, kernel_of=lambda constrained: "rwmh")
    with pytest.raises(ValueError, match="particles"):
        jaxz.run(nested_smc(path), jax.random.key(0), jnp.zeros((2 * MIN_SURVIVORS - 1, 1)), max_steps=5)


def test_moves_short_of_decorrelating_are_flagged_stuck():
    """With max_moves too small for the particles to decorrelate at most levels, the run is
    flagged STUCK (its levels were set from particles left near their ancestors)."""
    path = jaxz.paths.likelihood_tempering(lambda x: jnp.sum(jax.scipy.stats.norm.logpdf(x)),
                                           lambda x: -2.0 * jnp.sum((x - 1.0) ** 2),
                                           sample_prior=lambda key, n: jax.random.normal(key, (n, 4)))
    draws = jax.random.normal(jax.random.key(1), (100, 4))
    short = jaxz.run(nested_smc(path, num_moves=2, max_moves=2), jax.random.key(0), draws, max_steps=200)
    enough = jaxz.run(nested_smc(path), jax.random.key(0), draws, max_steps=200)
    assert int(short.estimate.status) & jaxz.STATUS_STUCK
    assert not int(enough.estimate.status) & jaxz.STATUS_STUCK
