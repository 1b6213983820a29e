"""The bad-input audit of the public weight utilities (findings S11, S12, C10, C12):
resampling nan or all-zero weights, the delta-method s.e. of nan weights, sir's scheme
names and the resamplers' output size. Each case used to give a silent answer (uniform
draws, an s.e. of exactly 0, an empty array) or an error that did not name the argument;
now it is a ValueError naming it (concrete input) or a nan. Tiny inputs: runs in seconds."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz import resampling, weights

SCHEMES = sorted(resampling.SCHEMES)


def _normal_1d(x):
    return -0.5 * jnp.sum(x**2) - 0.5 * x.shape[-1] * jnp.log(2 * jnp.pi).astype(x.dtype)


def _importance_state(num_samples=8):
    estimator = jaxz.importance(_normal_1d, lambda key: jax.random.normal(key, (1,)), _normal_1d)
    return jax.jit(estimator.init, static_argnums=1)(jax.random.key(0), num_samples)


# --- S11: resampling nan or all-zero weights --------------------------------------------------

@pytest.mark.parametrize("name", SCHEMES)
@pytest.mark.parametrize("bad,message", [(jnp.nan, "log_weights contain nan"),
                                         (jnp.inf, r"log_weights contain .*\+inf")])
def test_resampling_refuses_concrete_nan_or_plus_inf_log_weights(name, bad, message):
    """[nan, −1, …, −7] drew 10,000 indices uniformly (~1,250 per slot) instead of ∝ e^{−i}:
    normalize reads a nan (or +inf) total as 'every weight zero' and falls back to uniform."""
    log_weights = (-jnp.arange(8.0)).at[0].set(bad)
    with pytest.raises(ValueError, match=message):
        resampling.SCHEMES[name](jax.random.key(0), log_weights, 100)


@pytest.mark.parametrize("name", SCHEMES)
def test_resampling_refuses_concrete_log_weights_that_are_all_minus_inf_but_not_traced_or_masked_nan(name):
    """All weights zero: the draws were arbitrary indices (uniform), with no error. Masked slots
    are padding, never read: a nan there is no error. Traced weights cannot be inspected: under
    jit / vmap nothing is raised (the estimators sanitize their weights and flag the run)."""
    scheme = resampling.SCHEMES[name]
    with pytest.raises(ValueError, match="log_weights are all -inf"):
        scheme(jax.random.key(0), jnp.full(3, -jnp.inf))
    with pytest.raises(ValueError, match="log_weights are all -inf"):  # the only live weight masked out
        scheme(jax.random.key(0), jnp.array([-jnp.inf, 0.0, -jnp.inf]), mask=jnp.array([True, False, True]))
    ancestors = scheme(jax.random.key(0), jnp.array([0.0, -1.0, jnp.nan]), 50, jnp.array([True, True, False]))
    assert ancestors.shape == (50,) and not np.any(np.asarray(ancestors) == 2)
    nan_weights = (-jnp.arange(4.0)).at[0].set(jnp.nan)
    assert jax.jit(scheme, static_argnums=2)(jax.random.key(0), nan_weights, 5).shape == (5,)
    batch = jnp.stack([nan_weights, jnp.full(4, -jnp.inf), jnp.zeros(4)])
    assert jax.vmap(lambda key, log_weights: scheme(key, log_weights, 5))(jax.random.split(jax.random.key(0), 3),
                                                                          batch).shape == (3, 5)


def test_sir_refuses_a_state_with_nan_log_weights():
    """A state built by hand (importance's own init sanitizes nan to −inf) with a nan weight:
    sir resampled it uniformly, with no error, whatever the scheme."""
    state = _importance_state()
    broken = state._replace(log_weights=state.log_weights.at[0].set(jnp.nan))
    with pytest.raises(ValueError, match="state.log_weights contain nan"):
        jaxz.sir(jax.random.key(1), broken)
    with pytest.raises(ValueError, match="state.log_weights contain nan"):
        jaxz.sir(jax.random.key(1), broken, resampling=lambda key, log_weights, num: jnp.zeros(num, jnp.int32))


# --- S12: the delta-method s.e. of nan weights ----------------------------------------------------

@pytest.mark.parametrize("function", [weights.stderr_log_mean_exp, weights.stderr_log_mean_exp_pareto])
@pytest.mark.parametrize("size", [3, 40])  # 40: the Pareto variant fits a tail (M = 8 ≥ 4)
@pytest.mark.parametrize("bad", [jnp.nan, jnp.inf])
def test_stderr_of_log_mean_exp_is_nan_not_zero_for_nan_or_plus_inf_weights(function, size, bad):
    """[0, nan, 1]: log_mean_exp is nan (+inf for a +inf weight) but its s.e. was exactly 0.0,
    a claim of an exact estimate. The s.e. is now nan, under jit too; finite weights unchanged."""
    log_weights = jnp.linspace(-3.0, 1.0, size).at[1].set(bad)
    assert np.isnan(function(log_weights))
    assert np.isnan(jax.jit(function)(log_weights))
    assert np.isnan(function(log_weights, jnp.ones(size, bool)))
    clean = jnp.linspace(-3.0, 1.0, size)
    assert np.isfinite(function(clean)) and function(clean) > 0
    # a masked slot is never read; all weights zero is still inf, a single weight nan
    mask = jnp.arange(size) != 1
    np.testing.assert_allclose(function(log_weights, mask), function(clean, mask), rtol=1e-6)
    assert function(jnp.full(size, -jnp.inf)) == jnp.inf
    assert np.isnan(function(jnp.array([0.0])))


def test_log_normal_ess_is_nan_for_nan_or_plus_inf_weights():
    """The sibling that read a nan weight as a dead slot: 40 log-weights with one nan gave an
    ESS of 14.4, as plausible as any, where log_mean_exp of the same weights is nan."""
    log_weights = jnp.linspace(-3.0, 0.0, 40)
    assert np.isfinite(weights.log_normal_ess(log_weights))
    assert np.isnan(weights.log_normal_ess(log_weights.at[5].set(jnp.nan)))
    assert np.isnan(weights.log_normal_ess(log_weights.at[5].set(jnp.inf)))
    assert np.isfinite(weights.log_normal_ess(log_weights.at[5].set(jnp.nan), jnp.arange(40) != 5))


# --- C10: sir takes a scheme's name ------------------------------------------------------------------

@pytest.mark.parametrize("name", SCHEMES)
def test_sir_accepts_a_resampling_scheme_by_name_as_the_estimators_do(name):
    """resampling="systematic" raised "'str' object is not callable"; the estimators take names.
    By name and by function the draws are the same."""
    state = _importance_state()
    by_name = jaxz.sir(jax.random.key(1), state, 6, resampling=name)
    by_function = jaxz.sir(jax.random.key(1), state, 6, resampling=resampling.SCHEMES[name])
    np.testing.assert_array_equal(by_name, by_function)
    assert by_name.shape == (6, 1)


def test_sir_refuses_an_unknown_scheme_name_naming_resampling():
    with pytest.raises(ValueError, match="resampling must be one of"):
        jaxz.sir(jax.random.key(1), _importance_state(), resampling="sytematic")


# --- C12: the resamplers' output size --------------------------------------------------------------

@pytest.mark.parametrize("name", SCHEMES)
@pytest.mark.parametrize("value", [2.5, -1, "3", True, jnp.array([2, 3])])
def test_resampling_refuses_a_num_samples_that_is_no_non_negative_integer(name, value):
    """2.5 gave "Shapes must be 1D sequences of concrete values of integer type"; −1 silently
    returned an empty array."""
    with pytest.raises(ValueError, match="num_samples must be an integer >= 0"):
        resampling.SCHEMES[name](jax.random.key(0), jnp.zeros(3), value)


@pytest.mark.parametrize("name", SCHEMES)
def test_resampling_num_samples_must_be_a_static_int_and_zero_is_an_empty_draw(name):
    """The count sets the output's shape: a traced one gave a raw shape error. 0 is documented
    as the empty draw; numpy and concrete JAX integers count as ints."""
    scheme = resampling.SCHEMES[name]
    with pytest.raises(ValueError, match="num_samples must be a Python int"):
        jax.jit(scheme)(jax.random.key(0), jnp.zeros(3), 4)
    empty = scheme(jax.random.key(0), jnp.zeros(3), 0)
    assert empty.shape == (0,) and empty.dtype == jnp.int32
    assert scheme(jax.random.key(0), jnp.zeros(3), np.int64(4)).shape == (4,)
    assert scheme(jax.random.key(0), jnp.zeros(3), jnp.int32(4)).shape == (4,)
