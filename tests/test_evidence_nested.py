"""``jaxz.evidence(..., method="nested")``: waste-free nested SMC, then importance sampling from
its levels, on a target whose mass sits on every scale at once (prior uniform on [−1, 1]²,
L(x) = 1 / max(|x₁|, ε), log Z = log(1 − log ε) exactly): the pooled estimate within 4 of
its s.e., each run's within 4 of its own, the posterior's share of |x₁| < 0.01 against its
closed form, the second call reusing the compiled programs, and the argument checks."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz

EPS = 1e-8
EXACT = float(np.log(1.0 - np.log(EPS)))
# P(|x₁| < 0.01) under the posterior: the mass below ε (2ε · 1/ε = 2) plus 2 log(0.01 / ε), over 2 (1 − log ε)
SMALL = 0.01
SMALL_SHARE = (2.0 + 2.0 * np.log(SMALL / EPS)) / (2.0 * (1.0 - np.log(EPS)))


def singular_path():
    def log_prior(x):
        return jnp.where(jnp.all(jnp.abs(x) <= 1.0), -2.0 * jnp.log(2.0), -jnp.inf)

    def log_likelihood(x):
        return -jnp.log(jnp.maximum(jnp.abs(x[0]), EPS))

    def sample(key, num):
        return jax.random.uniform(key, (num, 2), minval=-1.0, maxval=1.0)

    return jaxz.paths.likelihood_tempering(log_prior, log_likelihood, sample_prior=sample)


def test_nested_evidence_on_a_singularity_and_its_posterior():
    with jax.enable_x64(True):  # float32 cannot resolve |x₁| ~ ε beside x₂ ~ 1: see the float32 test below
        check_singularity(singular_path())


def check_singularity(path):
    # 10 chains of 50 states a level (the fewest that are not flagged), 4 runs
    result = jaxz.evidence(path, jax.random.key(3), method="nested", num_runs=4, num_particles=500)
    assert int(result.status) == 0, jaxz.status_names(result.status)
    assert abs(float(result.log_z) - EXACT) < 4.0 * float(result.log_z_stderr)
    assert 0.0 < float(result.log_z_stderr) < 0.05
    runs = np.asarray(result.runs.log_z, np.float64)
    assert np.all(np.abs(runs - EXACT) < 4.0 * np.asarray(result.runs.log_z_stderr))
    # the levels' importance stage ran, and is what each run reports
    assert np.all(np.asarray(result.num_components) > 0)
    np.testing.assert_array_equal(np.asarray(result.importance_runs.log_z), runs)
    assert set(result.phase_seconds) == {"trace", "nested", "pool"}
    assert result.num_gradient_evaluations == 0 and result.num_evaluations > 4 * 500 * 32
    draws = np.asarray(result.posterior_draws(jax.random.key(4), 4000)).reshape(-1, 2)
    share = np.mean(np.abs(draws[:, 0]) < SMALL)
    # resampled from 4 x 500 weighted draws (ESS about 0.7 of them): binomial s.d. about 0.012
    assert abs(share - SMALL_SHARE) < 0.05, (share, SMALL_SHARE)
    again = jaxz.evidence(path, jax.random.key(5), method="nested", num_runs=4, num_particles=500)
    assert again.compile_seconds < 1.0 and again.phase_seconds["nested"]["compile"] == 0.0


def test_nested_evidence_in_float32_flags_the_scales_it_cannot_resolve():
    """In float32 the moves' variances are floored at float32's ε times their mean, so the
    levels cannot follow |x₁| down to 10⁻⁸: every run says so (STATUS_STUCK) instead of
    reporting a log Z it did not reach."""
    result = jaxz.evidence(singular_path(), jax.random.key(3), method="nested", num_runs=4, num_particles=500,
                           target_stderr=None)
    assert np.all(np.asarray(result.runs.status) & jaxz.STATUS_STUCK), jaxz.status_names(result.status)


@pytest.mark.parametrize("kwargs, match", [
    (dict(importance=False), "nested SMC and its importance stage together"),
    (dict(pmc_steps=2), "pmc_steps"),
    (dict(target_ess=0.5), "nested_smc"),
    (dict(record_levels=False), "record_levels is chosen"),
    (dict(survival=1.5), "survival"),
])
def test_nested_evidence_refuses_what_it_cannot_honour(kwargs, match):
    with pytest.raises(ValueError, match=match):
        jaxz.evidence(singular_path(), jax.random.key(0), method="nested", **kwargs)


def test_nested_evidence_needs_a_likelihood_path():
    def log_density(x, beta):
        return -0.5 * jnp.sum(x ** 2) / (1.0 + beta)

    path = jaxz.paths.Path(log_density, jnp.zeros(()), lambda key, num: jax.random.normal(key, (num, 2)))
    with pytest.raises(ValueError, match="affine"):
        jaxz.evidence(path, jax.random.key(0), method="nested")
