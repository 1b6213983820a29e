"""Importance sampling from nested SMC's levels (``jaxz.estimators.nested_importance``) against
exact log Z: an integrable power-law singularity, where the levels give the proposal every
scale the posterior has, and a conjugate Gaussian; its fallback to the nested estimate and
its argument checks."""
import jax
import numpy as np
import pytest

import jaxz
from jaxz.estimators.nested import nested_smc
from jaxz.estimators.nested_importance import TOLERANCE, level_proposal, nested_importance


def _runs(path, sample, num_runs, seed=0, num_particles=500, **options):
    levels = nested_smc(path, waste_free=True, tolerance=TOLERANCE, record_levels=True)
    stage = nested_importance(path, **options)

    def one(key):
        key_draws, key_run, key_importance = jax.random.split(key, 3)
        nested = jaxz.run(levels, key_run, sample(key_draws, num_particles), max_steps=400)
        return nested.estimate, jaxz.run(stage, key_importance, nested).estimate

    return jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(seed), num_runs))


def test_power_law_singularity_from_the_levels_scales(power_law, assert_covered):
    """Down to |x_1| = 1e-8: the levels' Gaussians cover every decade, the weights stay
    bounded (k̂ < 0), and the error bar is a few hundredths of nested SMC's own."""
    with jax.enable_x64(True):
        path, sample, exact = power_law(1e-8)
        nested, refined = _runs(path, sample, 12)
    errors, stderr = assert_covered(refined, exact)
    assert np.mean(stderr) < 0.1 * np.mean(np.asarray(nested.log_z_stderr))
    assert np.sqrt(np.mean(errors**2)) < 0.02


def test_conjugate_gaussian_within_its_error_bars(conjugate_gaussian_3d, assert_covered):
    path, sample, exact = conjugate_gaussian_3d
    _, refined = _runs(path, sample, 12, seed=1)
    assert_covered(refined, exact)


def test_a_proposal_too_narrow_falls_back_to_the_nested_estimate_or_flags(power_law):
    """One level's Gaussian cannot cover a singularity's scales: the weights' tail flags the
    importance estimate, and the run keeps nested SMC's (or is flagged); never an unflagged
    run far off."""
    with jax.enable_x64(True):
        path, sample, exact = power_law(1e-8)
        nested, refined = _runs(path, sample, 6, seed=2, max_components=1)
    kept = np.asarray(refined.log_z) == np.asarray(nested.log_z)
    flagged = np.asarray(refined.status) != 0
    assert np.all(kept | flagged)
    errors = np.abs(np.asarray(refined.log_z) - exact)
    assert np.all(flagged | (errors <= 4 * np.asarray(refined.log_z_stderr)))


def test_arguments_are_checked(power_law):
    path, sample, _ = power_law(1e-4)
    plain = jaxz.run(nested_smc(path), jax.random.key(0), sample(jax.random.key(1), 100), max_steps=50)
    with pytest.raises(ValueError, match="record_levels"):
        level_proposal(plain.trace, plain.num_steps)
    with pytest.raises(ValueError, match="record_levels"):
        jaxz.run(nested_importance(path), jax.random.key(2), plain.estimate)
    with pytest.raises(ValueError, match="draws_per_particle"):
        nested_importance(path, draws_per_particle=0)
    with pytest.raises(ValueError, match="Path"):
        nested_importance(lambda x: 0.0)
