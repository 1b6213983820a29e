"""The second bad-input audit: arguments that were read silently as something else (a
string as True, 2.5 as 2, an index past the processes as an empty block), or that gave a
confusing error (ZeroDivisionError, LAPACK's "Unsupported dtype float16", a reduction on
an empty array), now fail with a ValueError naming the argument and the accepted range;
traced values, which cannot be inspected, give a documented nan. Tiny inputs, no long
runs: the whole file runs in seconds."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz import diagnostics, reduction, sharding, weights
from jaxz.approx import mixture
from jaxz.estimators import mixture_importance
from jaxz.models import lgssm


def _normal(x):
    return -0.5 * jnp.sum(x**2)


def _path(dim=1, dtype=jnp.float32):
    return jaxz.paths.geometric(_normal, _normal, sample_base=lambda key, n: jax.random.normal(key, (n, dim), dtype))


def _runs(num_runs=4):
    log_z = jnp.linspace(-1.0, 1.0, num_runs)
    return jaxz.Estimate(log_z, jnp.full(num_runs, 0.1), jnp.ones(num_runs), jnp.zeros(num_runs, jnp.int32))


# --- 1. combine_runs(reciprocal=...) --------------------------------------------------------

@pytest.mark.parametrize("value", ["no", "False", 1, None])
def test_combine_runs_reads_reciprocal_only_as_a_bool(value):
    """reciprocal="no" pooled 1/Ẑ_r: any truthy object read as True."""
    with pytest.raises(ValueError, match="reciprocal must be a bool"):
        jaxz.combine_runs(_runs(), reciprocal=value)
    pooled = jaxz.combine_runs(_runs(), reciprocal=np.bool_(True))
    assert float(pooled.log_z) == float(jaxz.combine_runs(_runs(), reciprocal=True).log_z)


# --- 2. kernels.repeat --------------------------------------------------------------------

@pytest.mark.parametrize("value", [2.5, True, 0, "2", [2]])
def test_repeat_refuses_a_count_that_is_no_positive_integer(value):
    """repeat(k, 2.5) made 2 transitions and repeat(k, True) one."""
    kernel = jaxz.kernels.rwmh(_path(), 0.5)
    with pytest.raises(ValueError, match="num_steps must be an integer >= 1"):
        jaxz.kernels.repeat(kernel, value)
    assert jaxz.kernels.repeat(kernel, 3).num_transitions == 3


# --- 3. sharding.process_block --------------------------------------------------------------

@pytest.mark.parametrize("index,count,message", [(4, 4, r"process_index must be in \[0, 3\]"),
                                                 (-1, 4, "process_index must be an integer >= 0"),
                                                 (0, -2, "num_processes must be an integer >= 1"),
                                                 (0, 0, "num_processes must be an integer >= 1"),
                                                 (1.5, 4, "process_index must be an integer")])
def test_process_block_refuses_an_index_past_the_processes_and_a_count_below_one(index, count, message):
    """Index 5 of 4 processes was an empty block; a negative count a wrong one."""
    with pytest.raises(ValueError, match=message):
        sharding.process_block(np.arange(8), index, count)
    np.testing.assert_array_equal(sharding.process_block(np.arange(8), 3, 4), [6, 7])


# --- 4. weights -----------------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, -3, 2.5, True])
def test_pareto_threshold_needs_a_count_of_draws(value):
    with pytest.raises(ValueError, match="num_samples must be an integer >= 1"):
        weights.pareto_threshold(value)
    assert weights.pareto_threshold(100) == pytest.approx(0.5)


def test_stderr_with_log_bias_refuses_a_negative_stderr_and_is_nan_for_a_traced_one():
    with pytest.raises(ValueError, match="stderr must be >= 0"):
        weights.stderr_with_log_bias(-0.1)
    with pytest.raises(ValueError, match="stderr must be >= 0"):
        weights.stderr_with_log_bias(jnp.array([0.1, -jnp.inf]))
    out = jax.jit(weights.stderr_with_log_bias)(jnp.array([-0.1, 0.0, jnp.nan, jnp.inf]))
    assert np.isnan(out[0]) and out[1] == 0.0 and np.isnan(out[2]) and out[3] == np.inf
    assert float(weights.stderr_with_log_bias(2.0)) == pytest.approx(2.0 * np.sqrt(2.0))  # s √(1 + s²/4)


@pytest.mark.parametrize("bad", [jnp.inf, jnp.nan])
def test_hill_khat_refuses_a_plus_inf_or_nan_weight_instead_of_reading_the_lightest_tail(bad):
    """A +inf weight gave k̂ = −inf, the lightest tail there is."""
    log_weights = -jnp.arange(40.0)
    broken = log_weights.at[3].set(bad)
    with pytest.raises(ValueError, match="contain nan or \\+inf"):
        weights.hill_khat(broken)
    assert np.isnan(jax.jit(weights.hill_khat)(broken))
    # a masked slot is never read, and finite weights are as before
    masked = weights.hill_khat(broken, jnp.arange(40) != 3)
    assert float(masked) == float(weights.hill_khat(log_weights.at[3].set(-jnp.inf)))
    assert float(jax.jit(weights.hill_khat)(log_weights)) == float(weights.hill_khat(log_weights))


def test_student_t_factor_refuses_a_nan_degree_of_freedom():
    with pytest.raises(ValueError, match="nu .* got nan"):
        weights.student_t_factor(jnp.asarray(jnp.nan))
    assert np.isnan(jax.jit(weights.student_t_factor)(jnp.asarray(jnp.nan)))
    # t_3(0.975) = 3.182446
    assert float(weights.student_t_factor(jnp.asarray(3.0))) == pytest.approx(3.182446 / 1.959964, rel=1e-5)


# --- 5. diagnostics -------------------------------------------------------------------------

def test_autocorrelation_time_refuses_a_nan_chain_and_a_window_factor_below_zero():
    chain = jnp.sin(jnp.arange(64.0))
    with pytest.raises(ValueError, match="chain must be finite"):
        diagnostics.integrated_autocorrelation_time(chain.at[5].set(jnp.nan))
    for factor in (-1.0, 0.0, jnp.nan):
        with pytest.raises(ValueError, match="window_factor must be finite and > 0"):
            diagnostics.integrated_autocorrelation_time(chain, window_factor=factor)
    with pytest.raises(ValueError, match="at least 2 steps"):
        diagnostics.integrated_autocorrelation_time(chain[:1])
    # traced: nan, not τ(0) = 1 (a negative window) or a number from a nan chain
    tau = jax.jit(diagnostics.integrated_autocorrelation_time)
    assert np.isnan(tau(chain, -1.0)) and np.isnan(tau(chain.at[5].set(jnp.nan)))
    assert float(tau(chain, 5.0)) == float(diagnostics.integrated_autocorrelation_time(chain))


# --- 6. fit_mixture -------------------------------------------------------------------------

def _points(num=40):
    return jax.random.normal(jax.random.key(0), (num, 2))


def test_fit_mixture_refuses_more_components_than_slots_and_weights_all_minus_inf():
    """4 components in 2 slots fitted 2, silently; all −inf weights gave a nan mixture."""
    points, key = _points(), jax.random.key(1)
    with pytest.raises(ValueError, match=r"num_components must be in \[1, max_components\] = \[1, 2\]"):
        mixture.fit_mixture(key, points, jnp.zeros(40), 4, 2)
    for count in (0, 2.5, True):
        with pytest.raises(ValueError, match="num_components must be an integer >= 1"):
            mixture.fit_mixture(key, points, jnp.zeros(40), count, 2)
    for dead in (jnp.full(40, -jnp.inf), jnp.full(40, jnp.nan)):
        with pytest.raises(ValueError, match="log_weights are all -inf or nan"):
            mixture.fit_mixture(key, points, dead, 2, 2)
        with pytest.raises(ValueError, match="log_weights are all -inf or nan"):
            mixture.select_mixture(key, points, dead, (1, 2))
    with pytest.raises(ValueError, match="contain \\+inf"):
        mixture.fit_mixture(key, points, jnp.zeros(40).at[0].set(jnp.inf), 2, 2)
    with pytest.raises(ValueError, match="log_weights must have shape"):
        mixture.fit_mixture(key, points, jnp.zeros(39), 2, 2)


def test_fit_mixture_clips_a_traced_count_and_drops_components_without_points():
    points, key = _points(), jax.random.key(1)
    fit = jax.jit(lambda log_weights, count: mixture.fit_mixture(key, points, log_weights, count, 2, iterations=2))
    np.testing.assert_array_equal(fit(jnp.zeros(40), 4).means, fit(jnp.zeros(40), 2).means)  # clipped to 2 slots
    assert int(jnp.sum(jnp.isfinite(fit(jnp.zeros(40), 0).log_weights))) == 1  # clipped to one component
    assert np.all(np.isnan(fit(jnp.full(40, -jnp.inf), 2).log_weights))  # traced weights all −inf: nan
    # two components asked, one live point: one component (the documented drop)
    one_live = jnp.full(40, -jnp.inf).at[3].set(0.0)
    assert int(jnp.sum(jnp.isfinite(fit(one_live, 2).log_weights))) == 1


def test_fit_mixture_in_float64_raises_no_future_warning():
    """_seed_means scattered an int64 index into int32 (JAX: "will result in an error")."""
    with jax.enable_x64(True), warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        points = jax.random.normal(jax.random.key(0), (20, 2), jnp.float64)
        fitted = mixture.fit_mixture(jax.random.key(1), points, jnp.zeros(20, jnp.float64), 2, 2, iterations=2)
    assert fitted.means.dtype == jnp.float64


# --- 7. pmc_update and pmc_steps ------------------------------------------------------------

@pytest.mark.parametrize("step", [2.0, -1.0, 0.0, jnp.nan])
def test_pmc_update_refuses_a_step_outside_zero_one(step):
    """step 2 or −1 made covariances that are not positive definite (Cholesky diagonals 1e-19)."""
    points = _points()
    fitted = mixture.GaussianMixture(jnp.log(jnp.array([0.5, 0.5])), jnp.array([[-1.0, 0.0], [1.0, 0.0]]),
                                     jnp.stack([jnp.eye(2), jnp.eye(2)]))
    statistics = mixture.pmc_statistics(fitted, points, jnp.zeros(40))
    with pytest.raises(ValueError, match=r"step must be a number in \(0, 1\]"):
        mixture.pmc_update(fitted, statistics, step, 10.0)
    traced = jax.jit(mixture.pmc_update)(fitted, statistics, step, 10.0)
    assert np.all(np.isnan(traced.log_weights)) and np.all(np.isnan(traced.means))
    with pytest.raises(ValueError, match="prior_count must be finite and >= 0"):
        mixture.pmc_update(fitted, statistics, 0.5, -1.0)
    eager = mixture.pmc_update(fitted, statistics, 1.0, 10.0)
    np.testing.assert_array_equal(jax.jit(mixture.pmc_update)(fitted, statistics, 1.0, 10.0).means, eager.means)


def test_pmc_steps_beyond_the_pilot_batches_are_refused_not_skipped():
    """pmc_steps = 3 with 8 batches (2 pilot batches) re-fitted nothing, silently."""
    path = _path(2)
    particles = jax.random.normal(jax.random.key(0), (16, 2))
    with pytest.raises(ValueError, match=r"pmc_steps=3 needs 3 pilot batches .* importance_draws >= 12 x"):
        mixture_importance.importance_stage(path, jax.random.key(1), particles, jnp.zeros(16), 8, (1,), 3)


# --- 8. reduction axis ----------------------------------------------------------------------

@pytest.mark.parametrize("function", [reduction.sum, reduction.mean, reduction.cumsum, reduction.logsumexp])
@pytest.mark.parametrize("axis", [5, -2, 1.0, True, None])
def test_reductions_name_an_axis_out_of_range(function, axis):
    with pytest.raises(ValueError, match=r"axis must be an integer in \[-1, 0\]"):
        function(jnp.arange(5.0), axis=axis)
    np.testing.assert_array_equal(function(jnp.ones((2, 3)), axis=-2), function(jnp.ones((2, 3)), axis=0))


# --- 9 and 12. tuned kernels: no coordinates, half precision --------------------------------

@pytest.mark.parametrize("name", ["hmc", "mala", "rwmh"])
def test_tuned_kernels_refuse_a_position_without_coordinates_or_in_float16(name):
    """Draws of shape (n, 0) gave a ZeroDivisionError (the initial step d^(−1/4)); float16
    positions "x.dtype=float16 is not supported" from inside the step-size law."""
    kernel = getattr(jaxz.kernels, name)(_path())
    with pytest.raises(ValueError, match="the position has no coordinates"):
        kernel.init(jnp.zeros(0), 0.0)
    with pytest.raises(ValueError, match="float16, which the tuned kernels do not support"):
        kernel.init(jnp.zeros(2, jnp.float16), 0.0)
    assert kernel.init(jnp.zeros(2), 0.0).parameters.step_size.dtype == jnp.float32


# --- 10 and 12. kalman_log_likelihood -------------------------------------------------------

def test_kalman_log_likelihood_of_a_model_without_state_is_the_noise_density():
    """d_x = 0 raised numpy's "zero-size array to reduction operation" from the covariance
    check; the likelihood is then Σ_t log N(y_t; 0, R)."""
    empty = jnp.zeros((0, 0))
    params = lgssm.LGSSM(empty, jnp.zeros((1, 0)), empty, 0.5 * jnp.eye(1), jnp.zeros(0), empty)
    observations = jnp.array([[0.3], [-0.2]])
    exact = jax.scipy.stats.norm.logpdf(observations, 0.0, np.sqrt(0.5)).sum()
    assert float(lgssm.kalman_log_likelihood(params, observations)) == pytest.approx(float(exact), rel=1e-6)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_lgssm_refuses_half_precision_before_lapack_does(dtype):
    """LAPACK said "NotImplementedError: Unsupported dtype float16"."""
    params = lgssm.default(dtype=dtype)
    with pytest.raises(ValueError, match="transition is .*16, which is not supported"):
        lgssm.kalman_log_likelihood(params, jnp.zeros((2, 1), dtype))
    with pytest.raises(ValueError, match="not supported"):
        lgssm.particle_filter_callables(params)


# --- 11. NumPyro: Delta and param sites -----------------------------------------------------

def test_numpyro_refuses_a_delta_latent_site_and_an_unfixed_param():
    """A Delta latent gave log Z −17.8 for −1.16 (its log_prob is −inf off its point); a
    param site sat at its initial value, silently."""
    numpyro = pytest.importorskip("numpyro")
    dist, handlers = numpyro.distributions, numpyro.handlers

    def with_delta(y):
        x = numpyro.sample("x", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(numpyro.sample("d", dist.Delta(x)), 1.0), obs=y)

    def with_param(y):
        x = numpyro.sample("x", dist.Normal(numpyro.param("w", 0.5), 1.0))
        numpyro.sample("y", dist.Normal(x, 1.0), obs=y)

    y = jnp.asarray(1.0)
    with pytest.raises(ValueError, match="latent site 'd' is a Delta"):
        jaxz.numpyro.likelihood_tempering(with_delta, (y,))
    with pytest.raises(ValueError, match="site 'w' is a numpyro.param: .* numpyro.handlers.substitute"):
        jaxz.numpyro.likelihood_tempering(with_param, (y,))
    # fixed by the user: the prior is N(2, 1), not N(0.5, 1)
    fixed = jaxz.numpyro.likelihood_tempering(handlers.substitute(with_param, data={"w": 2.0}), (y,))
    assert float(fixed.log_prior(jnp.zeros(1))) == pytest.approx(float(dist.Normal(2.0, 1.0).log_prob(0.0)))
