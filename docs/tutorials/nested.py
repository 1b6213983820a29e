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
from jaxz.estimators.nested_importance import TOLERANCE, nested_importance  # noqa: E402

EPS = 1e-8
EXACT = math.log(1.0 - math.log(EPS))


def sample_prior(key, n):
    return jax.random.uniform(key, (n, 2), minval=-1.0, maxval=1.0)


path = jaxz.paths.likelihood_tempering(
    lambda x: jnp.where(jnp.all(jnp.abs(x) <= 1.0), -2.0 * jnp.log(2.0), -jnp.inf),
    lambda x: -jnp.log(jnp.maximum(jnp.abs(x[0]), EPS)), sample_prior=sample_prior)


def runs(estimator, num_particles, seed, then=None):
    """16 independent runs of ``estimator`` (and of the stage ``then`` on each run's result),
    vmapped in one compiled call: (estimates, levels, evaluations a run)."""
    def one(key):
        key_draws, key_run, key_then = jax.random.split(key, 3)
        result = jaxz.run(estimator, key_run, sample_prior(key_draws, num_particles), max_steps=1000)
        levels = result.num_steps
        if then is not None:
            result = jaxz.run(then, key_then, result)
        return result.estimate, levels, result.state.log_density_evaluations

    return jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(seed), 16))


def report(name, estimates, evaluations):
    errors = np.asarray(estimates.log_z) - EXACT
    stderr = np.asarray(estimates.log_z_stderr)
    statuses = sorted(set(jaxz.status_names(int(s)) for s in np.asarray(estimates.status)))
    print(f"{name}: {np.mean(evaluations):,.0f} evaluations a run, MSE {np.mean(errors**2):.2e}, "
          f"within 1.96 of their own s.e. {np.mean(np.abs(errors) <= 1.96 * stderr):.2f}, statuses {statuses}")
    assert np.all(np.asarray(estimates.status) == 0)
    return errors


# Nested SMC: 16 independent runs of 500 particles.
estimates, levels, evaluations = runs(nested_smc(path), 500, seed=0)
print(f"exact log Z {EXACT:.4f}; nested_smc's runs took {int(np.median(levels))} levels")
errors = report("nested_smc", estimates, evaluations)
print(f"  errors {np.round(errors, 3)}")
pooled = jaxz.combine_runs(estimates)
print(f"  pooled: {float(pooled.log_z):.4f} ± {float(pooled.log_z_stderr):.4f}")
assert abs(float(pooled.log_z) - EXACT) <= 3 * float(pooled.log_z_stderr)

# Waste-free levels (Dau & Chopin 2022): 40 chains of 50 states seeded from the survivors, every
# state kept; the error bar reads the chains' autocorrelation. About a tenth of the evaluations per level.
estimates, _, evaluations = runs(nested_smc(path, waste_free=True), 2000, seed=2)
report("waste-free, 2000 particles", estimates, evaluations)

# Importance sampling from the levels (jaxz.estimators.nested_importance): each level's particles give
# a Gaussian at that level's scale, weighted by its shell's mass, so the proposal has every scale the
# posterior has. The nested stage runs to a tolerance of 1e-5 so that the levels reach the singular core.
levels = nested_smc(path, waste_free=True, tolerance=TOLERANCE, record_levels=True)
estimates, _, evaluations = runs(levels, 1000, seed=3, then=nested_importance(path))
report("waste-free nested SMC + importance from its levels", estimates, evaluations)

# jaxz.evidence's default (tempered SMC and an importance stage) on the same path: flagged.
evidence = jaxz.evidence(path, jax.random.key(1), num_runs=4, num_particles=500, target_stderr=None)
print(f"jaxz.evidence: {float(evidence.log_z):.4f} ± {float(evidence.log_z_stderr):.4f}, "
      f"status {jaxz.status_names(evidence.status)}")
assert int(evidence.status) != 0 or abs(float(evidence.log_z) - EXACT) <= 3 * float(evidence.log_z_stderr)

# The same pipeline in one call: jaxz.evidence(method="nested") runs waste-free nested SMC and importance
# from its levels per run (1000 particles: 20 chains of 50 states), then pools and cross-checks the runs.
nested = jaxz.evidence(path, jax.random.key(2), method="nested", num_runs=4)
print(f"jaxz.evidence(method='nested'): {float(nested.log_z):.4f} ± {float(nested.log_z_stderr):.4f} "
      f"(exact {EXACT:.4f}), status {jaxz.status_names(nested.status)}, "
      f"{nested.num_evaluations / 4:,.0f} evaluations a run")
assert int(nested.status) == 0 and abs(float(nested.log_z) - EXACT) <= 3 * float(nested.log_z_stderr)
