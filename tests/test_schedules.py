"""Schedules: shapes and endpoints, validation, and the ESS-targeted adaptive step."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxz import schedules, weights


@pytest.mark.parametrize("make", [schedules.linear, schedules.geometric, schedules.sigmoidal])
def test_fixed_schedules_have_the_requested_length_and_run_from_zero_to_one(make):
    betas = make(17)
    assert betas.shape == (17,)
    assert betas[0] == 0.0 and betas[-1] == 1.0
    assert np.all(np.diff(betas) > 0)
    schedules.validate(betas)


def test_geometric_schedule_is_geometric_after_zero():
    betas = schedules.geometric(6, beta_min=1e-4)
    np.testing.assert_allclose(betas[2:] / betas[1:-1], 10.0, rtol=1e-12)


def test_sigmoidal_schedule_is_symmetric_about_one_half():
    betas = schedules.sigmoidal(11, delta=4.0)
    np.testing.assert_allclose(betas + betas[::-1], 1.0, atol=1e-12)


def test_salakhutdinov_murray_schedule_has_its_three_step_sizes():
    betas = schedules.salakhutdinov_murray()
    schedules.validate(betas)
    assert betas.shape == (500 + 4000 + 10001,)
    steps = np.diff(betas)
    np.testing.assert_allclose(steps[betas[:-1] < 0.5 - 1e-9], 1e-3, rtol=1e-6)
    np.testing.assert_allclose(steps[(betas[:-1] >= 0.5 - 1e-9) & (betas[:-1] < 0.9 - 1e-9)], 1e-4, rtol=1e-6)
    np.testing.assert_allclose(steps[betas[:-1] >= 0.9 - 1e-9], 1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "betas, fragment",
    [
        ([0.1, 0.5, 1.0], "start at 0"),
        ([0.0, 0.5, 0.9], "end at 1"),
        ([0.0, 0.6, 0.4, 1.0], "increasing"),
        ([0.0, 0.5, 0.5, 1.0], "increasing"),
        ([0.0], "at least 2"),
        ([[0.0, 1.0]], "1-D"),
        ([0.0, np.nan, 1.0], "finite"),
    ],
)
def test_validate_rejects_schedules_that_do_not_increase_from_zero_to_one(betas, fragment):
    with pytest.raises(ValueError, match="betas") as error:
        schedules.validate(betas)
    assert fragment in str(error.value)


@pytest.mark.parametrize("make, args", [(schedules.linear, (1,)), (schedules.geometric, (5, 0.0)),
                                        (schedules.sigmoidal, (5, -1.0))])
def test_bad_schedule_parameters_raise_value_errors(make, args):
    with pytest.raises(ValueError):
        make(*args)


def _gaussian_increments(positions):
    """f_β(x) ∝ exp(−β x²/2) on N(0,1) draws: log increment = −(β' − β) x²/2."""
    return lambda beta, beta_new: -(beta_new - beta) * positions**2 / 2.0


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_next_temperature_hits_the_target_conditional_ess(dtype):
    with jax.enable_x64(dtype == jnp.float64):
        positions = 3.0 * jax.random.normal(jax.random.key(0), (512,), dtype)
        log_weights = jnp.asarray(jax.random.normal(jax.random.key(1), (512,), dtype))
        increments = _gaussian_increments(positions)
        beta = jnp.asarray(0.0, dtype)
        solve = jax.jit(lambda w, b: schedules.next_temperature(w, lambda new: increments(b, new), b, 0.5))
        beta_new = solve(log_weights, beta)
        assert beta_new.dtype == dtype and 0.0 < beta_new < 1.0
        cess = weights.conditional_ess(log_weights, increments(beta, beta_new))
        np.testing.assert_allclose(cess, 0.5, atol=1e-3)


def test_next_temperature_takes_the_whole_step_when_the_ess_stays_above_target():
    positions = 0.01 * jax.random.normal(jax.random.key(0), (64,))
    increments = _gaussian_increments(positions)
    beta = jnp.asarray(0.3)
    beta_new = schedules.next_temperature(jnp.zeros(64), lambda new: increments(beta, new), beta, 0.5)
    assert beta_new == 1.0


def test_next_temperature_plain_ess_mode_hits_the_target_count_and_respects_masks():
    positions = 3.0 * jax.random.normal(jax.random.key(2), (256,))
    mask = jnp.arange(256) < 200
    increments = _gaussian_increments(jnp.where(mask, positions, 1e3))
    beta = jnp.asarray(0.0)
    log_weights = jnp.zeros(256)
    beta_new = schedules.next_temperature(log_weights, lambda new: increments(beta, new), beta, 100.0,
                                          conditional=False, mask=mask)
    ess = weights.ess(log_weights + increments(beta, beta_new), mask)
    np.testing.assert_allclose(ess, 100.0, rtol=2e-3)
