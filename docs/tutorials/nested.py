"""Nested sampling as SMC on a likelihood with an integrable singularity, against an exact log Z.

Prior uniform on [−1, 1]², L(x) = 1 / max(|x₁|, 10⁻⁸): Z = 1 − log 10⁻⁸ (log Z = 2.9663). The
posterior puts equal mass on every decade of |x₁| from 10⁻⁸ to 1. Tempered SMC's moves, tuned to
the particles' overall spread, do not reach the small scales, and jaxz.evidence flags its runs.
nested_smc's levels of L shrink the particles' spread decade by decade.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)  # float32's tuned covariance cannot follow scales below ~1e-4 of the widest

import jaxz  # noqa: E402
from jaxz.estimators.nested import nested_smc  # noqa: E402

EPS = 1e-8
EXACT = math.log(1.0 - math.log(EPS))


def sample_prior(key, n):
    return jax.random.uniform(key, (n, 2), minval=-1.0, maxval=1.0)


path = jaxz.paths.likelihood_tempering(
    lambda x: jnp.where(jnp.all(jnp.abs(x) <= 1.0), -2.0 * jnp.log(2.0), -jnp.inf),
    lambda x: -jnp.log(jnp.maximum(jnp.abs(x[0]), EPS)), sample_prior=sample_prior)

# Nested SMC: 16 independent runs of 500 particles, vmapped in one compiled call.
estimator = nested_smc(path)


def one_run(key):
    key_draws, key_run = jax.random.split(key)
    result = jaxz.run(estimator, key_run, sample_prior(key_draws, 500), max_steps=1000)
    return result.estimate, result.num_steps, result.state.log_density_evaluations


estimates, levels, standard_evaluations = jax.jit(jax.vmap(one_run))(jax.random.split(jax.random.key(0), 16))
errors = np.asarray(estimates.log_z) - EXACT
stderr = np.asarray(estimates.log_z_stderr)
print(f"exact log Z {EXACT:.4f}; nested_smc, 16 runs of {int(np.median(levels))} levels, "
      f"{np.mean(standard_evaluations):,.0f} evaluations a run, MSE {np.mean(errors**2):.4f}:")
print(f"  errors {np.round(errors, 3)}")
print(f"  within 1.96 of their own s.e.: {np.mean(np.abs(errors) <= 1.96 * stderr):.2f}; "
      f"statuses {sorted(set(jaxz.status_names(int(s)) for s in np.asarray(estimates.status)))}")
pooled = jaxz.combine_runs(estimates)
print(f"  pooled: {float(pooled.log_z):.4f} ± {float(pooled.log_z_stderr):.4f}")
assert abs(float(pooled.log_z) - EXACT) <= 3 * float(pooled.log_z_stderr)
assert np.all(np.asarray(estimates.status) == 0)

# Waste-free levels (Dau & Chopin 2022): 40 chains of 50 states seeded from the survivors, every
# state kept; the error bar reads the chains' autocorrelation. About a tenth of the evaluations per level.
chained = nested_smc(path, waste_free=True)


def one_chained_run(key):
    key_draws, key_run = jax.random.split(key)
    result = jaxz.run(chained, key_run, sample_prior(key_draws, 2000), max_steps=1000)
    return result.estimate, result.state.log_density_evaluations


chained_estimates, evaluations = jax.jit(jax.vmap(one_chained_run))(jax.random.split(jax.random.key(2), 16))
chained_errors = np.asarray(chained_estimates.log_z) - EXACT
print(f"waste-free, 16 runs of 2000 particles: {np.mean(evaluations):,.0f} evaluations a run; "
      f"MSE {np.mean(chained_errors**2):.4f}; within 1.96 s.e.: "
      f"{np.mean(np.abs(chained_errors) <= 1.96 * np.asarray(chained_estimates.log_z_stderr)):.2f}")
assert np.all(np.asarray(chained_estimates.status) == 0)

# Importance sampling from the levels (jaxz.estimators.nested_importance): each level's particles give
# a Gaussian at that level's scale, weighted by its shell's mass, so the proposal has every scale the
# posterior has. The nested stage runs to a tolerance of 1e-5 so that the levels reach the singular core.
from jaxz.estimators.nested_importance import TOLERANCE, nested_importance  # noqa: E402

levels = nested_smc(path, waste_free=True, tolerance=TOLERANCE, record_levels=True)
stage = nested_importance(path)


def one_importance_run(key):
    key_draws, key_run, key_importance = jax.random.split(key, 3)
    nested = jaxz.run(levels, key_run, sample_prior(key_draws, 1000), max_steps=1000)
    result = jaxz.run(stage, key_importance, nested)
    return result.estimate, result.state.log_density_evaluations


refined, refined_evaluations = jax.jit(jax.vmap(one_importance_run))(jax.random.split(jax.random.key(3), 16))
refined_errors = np.asarray(refined.log_z) - EXACT
print(f"nested + importance, 16 runs: {np.mean(refined_evaluations):,.0f} evaluations a run; "
      f"MSE {np.mean(refined_errors**2):.2e}; within 1.96 s.e.: "
      f"{np.mean(np.abs(refined_errors) <= 1.96 * np.asarray(refined.log_z_stderr)):.2f}")
assert np.all(np.asarray(refined.status) == 0)

# jaxz.evidence's default (tempered SMC and an importance stage) on the same path: flagged.
evidence = jaxz.evidence(path, jax.random.key(1), num_runs=4, num_particles=500, target_stderr=None)
print(f"jaxz.evidence: {float(evidence.log_z):.4f} ± {float(evidence.log_z_stderr):.4f}, "
      f"status {jaxz.status_names(evidence.status)}")
assert int(evidence.status) != 0 or abs(float(evidence.log_z) - EXACT) <= 3 * float(evidence.log_z_stderr)
