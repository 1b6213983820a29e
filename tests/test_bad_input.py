"""Bad densities and bad arguments: zero weights and flags, never a silent NaN;
ValueErrors that name the argument."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz


def _estimators(path, kernel):
    return {
        "ais": (jaxz.ais(path, kernel, jaxz.schedules.linear(5)), None),
        "smc": (jaxz.smc(path, kernel, target_ess=0.5), 50),
        "smc_fixed": (jaxz.smc(path, kernel, betas=jaxz.schedules.linear(5)), None),
    }


@pytest.mark.parametrize("name", ["ais", "smc", "smc_fixed"])
def test_nan_density_gets_zero_weight_and_raises_nonfinite_flag(gaussian, name):
    """A target that is NaN on half the space: those particles get zero weight, the
    estimate stays finite (the other half carries it) and STATUS_NONFINITE is set."""

    def log_target(x):
        return jnp.where(x[0] > 0.0, jnp.nan, gaussian.log_target(x))

    path = jaxz.paths.geometric(gaussian.log_base, log_target)
    estimator, max_steps = _estimators(path, jaxz.kernels.rwmh(path, 0.3))[name]
    estimate = jaxz.run(estimator, jax.random.key(0), gaussian.base_draws(jax.random.key(1), 256),
                        max_steps=max_steps).estimate
    assert np.isfinite(estimate.log_z)
    assert estimate.status & jaxz.STATUS_NONFINITE
    assert not estimate.status & jaxz.STATUS_DEGENERATE


@pytest.mark.parametrize("name", ["ais", "smc", "smc_fixed"])
def test_all_weights_dead_gives_minus_inf_and_degenerate_flag(gaussian, name):
    path = jaxz.paths.geometric(gaussian.log_base, lambda x: -jnp.inf * jnp.ones_like(x[0]))
    estimator, max_steps = _estimators(path, jaxz.kernels.rwmh(path, 0.3))[name]
    estimate = jaxz.run(estimator, jax.random.key(0), gaussian.base_draws(jax.random.key(1), 64),
                        max_steps=max_steps).estimate
    assert estimate.log_z == -jnp.inf
    assert estimate.status & jaxz.STATUS_DEGENERATE
    assert estimate.log_z_stderr == jnp.inf


def test_all_nan_target_is_degenerate_and_flagged_not_nan(gaussian):
    path = jaxz.paths.geometric(gaussian.log_base, lambda x: jnp.nan * x[0])
    estimate = jaxz.run(jaxz.smc(path, jaxz.kernels.rwmh(path, 0.3), target_ess=0.5), jax.random.key(0),
                        gaussian.base_draws(jax.random.key(1), 64), max_steps=20).estimate
    assert estimate.log_z == -jnp.inf
    assert estimate.status & jaxz.STATUS_NONFINITE and estimate.status & jaxz.STATUS_DEGENERATE


def test_adaptive_loop_hitting_max_steps_sets_flag(gaussian):
    path = gaussian.path()
    estimator = jaxz.smc(path, jaxz.kernels.rwmh(path, 0.3), target_ess=0.99)
    result = jaxz.run(estimator, jax.random.key(0), gaussian.base_draws(jax.random.key(1), 64), max_steps=2)
    assert int(result.num_steps) == 2
    assert result.estimate.status & jaxz.STATUS_MAX_STEPS
    finished = jaxz.run(estimator, jax.random.key(0), gaussian.base_draws(jax.random.key(1), 64), max_steps=500)
    assert not finished.estimate.status & jaxz.STATUS_MAX_STEPS


def test_adaptive_estimator_without_max_steps_is_refused(gaussian):
    path = gaussian.path()
    with pytest.raises(ValueError, match="max_steps"):
        jaxz.run(jaxz.smc(path, jaxz.kernels.rwmh(path, 0.3)), jax.random.key(0),
                 gaussian.base_draws(jax.random.key(1), 8))


@pytest.mark.parametrize("argument,value", [("target_ess", 1.5), ("target_ess", 0.0), ("resample_ess", -0.1),
                                            ("resample_ess", 2.0), ("num_mcmc_steps", 0), ("resampling", "bogus")])
def test_smc_rejects_bad_arguments_at_construction(gaussian, argument, value):
    path = gaussian.path()
    with pytest.raises(ValueError, match=argument):
        jaxz.smc(path, jaxz.kernels.rwmh(path, 0.3), **{argument: value})


@pytest.mark.parametrize("betas", [[0.0, 0.6, 0.3, 1.0], [0.0, 0.5], [0.2, 1.0], [[0.0, 1.0]]])
def test_smc_rejects_schedules_not_increasing_from_0_to_1(gaussian, betas):
    path = gaussian.path()
    with pytest.raises(ValueError, match="betas"):
        jaxz.smc(path, jaxz.kernels.rwmh(path, 0.3), betas=betas)


def test_zero_particles_and_mismatched_shapes_are_refused(gaussian):
    path = gaussian.path()
    estimator = jaxz.ais(path, jaxz.kernels.rwmh(path, 0.3), jaxz.schedules.linear(3))
    with pytest.raises(ValueError, match="positions.*at least one particle"):
        jaxz.run(estimator, jax.random.key(0), jnp.zeros((0, 2)))
    with pytest.raises(ValueError, match="positions.*leading"):
        jaxz.run(estimator, jax.random.key(0), {"a": jnp.zeros((4, 2)), "b": jnp.zeros((5,))})


@pytest.mark.parametrize("factory,argument", [
    (lambda p: jaxz.kernels.hmc(p, -0.1, 5), "step_size"),
    (lambda p: jaxz.kernels.hmc(p, 0.1, 0), "num_integration_steps"),
    (lambda p: jaxz.kernels.mala(p, 0.0), "step_size"),
    (lambda p: jaxz.kernels.rwmh(p, -1.0), "scale"),
    (lambda p: jaxz.kernels.slice(p, 0.0), "width"),
    (lambda p: jaxz.kernels.repeat(jaxz.kernels.rwmh(p, 1.0), 0), "num_steps"),
])
def test_kernels_reject_bad_parameters(gaussian, factory, argument):
    with pytest.raises(ValueError, match=argument):
        factory(gaussian.path())
