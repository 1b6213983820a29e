"""The bad-input audit of SGAIS: counts that used to be truncated silently, a nan row that
reached the weights because ``jaxz.run`` traces ``init``, status bits by cause, and flagged
runs whose flag did not reach ``jaxz.combine_runs``'s pool. Tiny problems: seconds."""
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz.estimators.sgais import DEFAULTS
from jaxz.models import streaming

LOG_PRIOR, LOG_LIKELIHOOD = streaming.linear_log_prior, streaming.linear_log_likelihood
# the cheapest run: the seed's move with one SGHMC step, each chunk in one reweighting
CHEAP = dict(num_particles=4, chunk_size=30, minibatch_size=20, target_ess=0.1, learning_rate=0.1, burn_in=1)


def _problem(num_rows=60):
    data, _ = streaming.linear_regression_data(jax.random.key(0), num_rows)
    return data, streaming.linear_sample_prior(jax.random.key(1), 4)


@pytest.mark.parametrize("name, value", [("num_particles", 20.5), ("chunk_size", 200.5), ("minibatch_size", 99.5),
                                         ("burn_in", 10.5), ("max_annealing_steps", 10.5), ("max_burn_in", 10.5),
                                         ("reservoir_size", 150.5), ("num_particles", True), ("chunk_size", True),
                                         ("burn_in", False), ("reservoir_size", True)])
def test_sgais_counts_refuse_fractions_and_booleans_naming_the_argument(name, value):
    """int(20.5) = 20 and int(True) = 1 had been taken silently: a count must be an integer."""
    with pytest.raises(ValueError, match=f"{name} must be an integer"):
        jaxz.sgais(LOG_PRIOR, LOG_LIKELIHOOD, **{name: value})


@pytest.mark.parametrize("value", [150.5, True, None])
def test_sgais_stream_reservoir_size_must_be_a_whole_number_of_slots(value):
    data, positions = _problem()
    with pytest.raises(ValueError, match="reservoir_size must be an integer"):
        jaxz.sgais_stream(LOG_PRIOR, LOG_LIKELIHOOD, jax.random.key(0), positions, [data], reservoir_size=value,
                          progress=False, **CHEAP)


def test_sgais_nan_row_is_a_value_error_under_jaxz_run_and_flagged_where_the_data_are_traced():
    """jaxz.run compiles init, where the data are tracers: the nan check now also runs on
    the step count, which jaxz.run reads while the data are concrete (eagerly, and under
    jit with the data closed over). Data passed traced cannot be read: the nan row then
    zeroes every weight, log Ẑ = −inf with STATUS_NONFINITE and STATUS_DEGENERATE."""
    data, positions = _problem()
    broken = (data[0].at[17, 2].set(jnp.nan), data[1])
    estimator = jaxz.sgais(LOG_PRIOR, LOG_LIKELIHOOD, **CHEAP)
    with pytest.raises(ValueError, match=r"data must not contain nan; rows with nan: \[17\]"):
        jaxz.run(estimator, jax.random.key(2), positions, broken)
    with pytest.raises(ValueError, match="data must not contain nan"):
        jax.jit(lambda key: jaxz.run(estimator, key, positions, broken))(jax.random.key(2))
    traced = jax.jit(lambda key, rows: jaxz.run(estimator, key, positions, rows).estimate)(jax.random.key(2), broken)
    assert np.isneginf(float(traced.log_z))
    assert int(traced.status) & jaxz.STATUS_NONFINITE and int(traced.status) & jaxz.STATUS_DEGENERATE


def test_sgais_collapsed_reweighting_sets_few_particles_not_every_low_ess_bit():
    """target_ess ≤ 1/M reweights by a whole chunk at once: the first chunk's weights,
    importance sampling from the prior, collapse below 2 effective particles before the
    move's resampling. That is STATUS_FEW_PARTICLES; setting STATUS_LOW_ESS (their mask)
    had raised all six causes."""
    data, positions = _problem()
    options = dict(CHEAP, resample="every_move")
    status = int(jaxz.run(jaxz.sgais(LOG_PRIOR, LOG_LIKELIHOOD, **options), jax.random.key(2), positions,
                          data).estimate.status)
    assert status & jaxz.STATUS_LOW_ESS == jaxz.STATUS_FEW_PARTICLES, jaxz.status_names(status)


def test_sgais_defaults_are_readable_and_match_the_signatures():
    """jaxz.sgais_defaults() is the public copy of the defaults (benchmarks read it) and
    agrees with both signatures; the module's DEFAULTS is read-only."""
    defaults = jaxz.sgais_defaults()
    for function in (jaxz.sgais, jaxz.sgais_stream):
        signature = inspect.signature(function).parameters
        for name, value in defaults.items():
            if name in signature:
                assert signature[name].default == value, (function.__name__, name)
    assert set(defaults) - set(inspect.signature(jaxz.sgais).parameters) == set()
    defaults["chunk_size"] = 1  # a copy: the estimator's defaults stay
    assert jaxz.sgais_defaults()["chunk_size"] == 500
    with pytest.raises(TypeError):
        DEFAULTS["chunk_size"] = 1
    assert dict(DEFAULTS) == jaxz.sgais_defaults()


def _runs(log_z, status):
    log_z = jnp.asarray(log_z, jnp.float32)
    return jaxz.Estimate(log_z, jnp.full(log_z.shape, jnp.nan), jnp.ones(log_z.shape), jnp.asarray(status, jnp.int32))


def test_combine_runs_carries_the_flag_of_half_the_runs_even_where_they_lie_low():
    """Four SGAIS runs (nan s.e. by design), two flagged: the flagged ones lie low, so they
    hold a small share of Σ_r Ẑ_r and the share rule alone dropped their flag, leaving a
    pool 3.5 s.e. off at status 0. Half the runs flagged is the configuration, not a rare
    run: the pool carries their own bits (not the whole STATUS_LOW_ESS mask). One flagged
    run of four, low, is still a rare draw whose spread the pool reads."""
    few = jaxz.STATUS_FEW_PARTICLES
    pooled = jaxz.combine_runs(_runs([0.0, 0.3, -3.0, -4.0], [0, 0, few, few | jaxz.STATUS_MAX_STEPS]))
    assert int(pooled.status) == few | jaxz.STATUS_MAX_STEPS
    one = jaxz.combine_runs(_runs([0.0, 0.3, 0.1, -4.0], [0, 0, 0, few]))
    assert int(one.status) & jaxz.STATUS_LOW_ESS == 0
    # a broken (nan) run does not count among the runs the flag is weighed against: 2 of 4, not of 5
    broken = jaxz.combine_runs(_runs([0.0, 0.1, 0.2, jnp.nan, -4.0], [0, few, 0, 0, few]))
    assert int(broken.status) == few | jaxz.STATUS_NONFINITE
