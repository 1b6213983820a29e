"""The bad-input audit of issue 23 (item 5) and the error messages of issue 27 (item 4):
every case that used to give a silent NaN or a finite, wrong number with status 0 is
now a ValueError naming the argument and the accepted range, or a documented flag.
Tiny problems, mostly jit-free paths: the whole file runs in seconds."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz.models import gaussian as gaussian_model
from jaxz.estimators import _particles
from jaxz.models import gpc, hmm, lgssm, rbm, regression


def _normal_1d(x):
    return -0.5 * jnp.sum(x**2) - 0.5 * x.shape[-1] * jnp.log(2 * jnp.pi).astype(x.dtype)


def _estimate(log_z, stderr=None, cost=None, status=None, dtype=jnp.float32):
    log_z = jnp.asarray(log_z, dtype)
    return jaxz.Estimate(log_z, jnp.full(log_z.shape, 0.1, dtype) if stderr is None else stderr,
                         jnp.ones(log_z.shape, dtype) if cost is None else cost,
                         jnp.zeros(log_z.shape, jnp.int32) if status is None else status)


# --- importance, rejection, sir -----------------------------------------------------------

def test_importance_flags_precision_loss_of_float32_densities_near_1e7():
    """log f ≈ 1e7 in float32: eps · |log f| ≈ 1.2 nats of rounding in every weight."""
    def status(offset):
        estimator = jaxz.importance(lambda x: offset + _normal_1d(x), lambda key: jax.random.normal(key, (1,)),
                                    lambda x: _normal_1d(x) + offset)
        return jaxz.run(estimator, jax.random.key(0), 64).estimate.status

    flagged, plain = jax.jit(jax.vmap(status))(jnp.array([1e7, 0.0], jnp.float32))
    assert flagged & jaxz.STATUS_PRECISION_LOSS
    assert not plain & jaxz.STATUS_PRECISION_LOSS


def test_precision_loss_counts_only_the_particles_that_carry_weight():
    """The README's NumPyro example (a HalfNormal scale) was flagged PRECISION_LOSS by
    a few prior draws with σ near 0, log f_1 near −1e6 in float32 and weight e^{−1e6}:
    their rounding enters log Ẑ with that weight. Read under the weights, they no longer
    flag the run; every particle near 1e7 still does, and one carrying half the weight."""
    log_f = jnp.zeros(64, jnp.float32)
    dead = log_f.at[:3].set(-2e6)  # three particles at −2e6: 0.24 nats of rounding, weight e^{−2e6}
    heavy = jnp.full(64, -1e7, jnp.float32)
    one = log_f.at[0].set(-1e7)  # one particle at −1e7 (1.2 nats of rounding) ...
    half = jnp.full(64, -jnp.inf, jnp.float32).at[:2].set(0.0)  # ... carrying half the weight
    check = _particles.precision_status
    assert check(dead) & jaxz.STATUS_PRECISION_LOSS  # the any-particle reading
    assert not check(dead, log_weights=dead) & jaxz.STATUS_PRECISION_LOSS
    assert check(heavy, log_weights=heavy) & jaxz.STATUS_PRECISION_LOSS
    assert check(one, log_weights=half) & jaxz.STATUS_PRECISION_LOSS
    assert not check(jnp.full(4, -jnp.inf), log_weights=jnp.full(4, -jnp.inf)) & jaxz.STATUS_PRECISION_LOSS


def test_rejection_refuses_a_log_density_that_is_not_a_scalar():
    """A (1,)-shaped log f broadcast against the (n,) uniforms to (n, n): 8.94 vs 0.45."""
    estimator = jaxz.rejection(lambda x: _normal_1d(x)[None], lambda key: jax.random.normal(key, (1,)),
                               _normal_1d, 0.0)
    with pytest.raises(ValueError, match="log_target_fn must return a floating scalar"):
        estimator.init(jax.random.key(0), 16)


def test_sir_refuses_a_negative_count_and_a_state_with_all_weights_zero():
    estimator = jaxz.importance(lambda x: _normal_1d(x), lambda key: jax.random.normal(key, (1,)), _normal_1d)
    state = jax.jit(estimator.init, static_argnums=1)(jax.random.key(0), 8)
    with pytest.raises(ValueError, match="num_draws must be an integer >= 1"):
        jaxz.sir(jax.random.key(1), state, -3)
    dead = state._replace(log_weights=jnp.full_like(state.log_weights, -jnp.inf))
    with pytest.raises(ValueError, match="all -inf"):
        jaxz.sir(jax.random.key(1), dead)
    assert jax.tree.leaves(jaxz.sir(jax.random.key(1), state, 5))[0].shape == (5, 1)


@pytest.mark.parametrize("value", ["a", "3", [2], 2.5, 0, True])
def test_a_count_that_is_no_positive_integer_is_refused_by_name(value):
    """``max_mcmc_steps="a"`` used to answer with int()'s "invalid literal for int()",
    a list with a TypeError, "3" with "got 3" as if it were the number (None is the default)."""
    path = jaxz.paths.geometric(lambda x: -0.5 * jnp.sum(x**2), lambda x: -0.5 * jnp.sum(x**2))
    with pytest.raises(ValueError, match="max_mcmc_steps must be an integer >= 1, got"):
        jaxz.smc(path, jaxz.kernels.hmc(path), waste_free=True, max_mcmc_steps=value)


def test_importance_ais_and_raise_with_one_particle_are_flagged_low_ess(gaussian):
    """One draw: ESS 1 and a nan s.e. The docstrings promise STATUS_LOW_ESS."""
    importance = jaxz.importance(gaussian.log_target, lambda key: jax.random.normal(key, (2,)), gaussian.log_base)
    path = gaussian.path()

    @jax.jit
    def statuses(key, one_position):
        kernel, betas = jaxz.kernels.rwmh(path, 0.5), jaxz.schedules.linear(2)
        return [jaxz.run(importance, key, 1).estimate.status, jaxz.run(importance, key, 64).estimate.status,
                jaxz.run(jaxz.ais(path, kernel, betas), key, one_position).estimate.status,
                jaxz.run(jaxz.raise_(path, kernel, betas), key, one_position).estimate.status]

    one, many, ais, raise_ = statuses(jax.random.key(0), gaussian.base_draws(jax.random.key(1), 1))
    assert one & jaxz.STATUS_LOW_ESS and ais & jaxz.STATUS_LOW_ESS and raise_ & jaxz.STATUS_LOW_ESS
    assert not many & jaxz.STATUS_LOW_ESS


# --- kernels --------------------------------------------------------------------------------

@pytest.mark.parametrize("matrix,message", [([[1.0, 0.5], [0.0, 1.0]], "symmetric"),
                                            ([[1.0, 0.0], [0.0, -1.0]], "positive definite"),
                                            ([1.0, -1.0], "> 0"), ([1.0, np.nan], "> 0")])
def test_hmc_refuses_an_inverse_mass_matrix_that_is_not_symmetric_positive_definite(gaussian, matrix, message):
    """AIS with such a matrix gave −0.92 against log Z = 0.44, status 0."""
    with pytest.raises(ValueError, match=f"inverse_mass_matrix.*{message}"):
        jaxz.kernels.hmc(gaussian.path(), 0.1, 5, jnp.asarray(matrix))
    with pytest.raises(ValueError, match="inverse_mass_matrix"):
        jaxz.kernels.hmc(gaussian.path(), inverse_mass_matrix=jnp.asarray(matrix))


def test_rwmh_refuses_a_zero_scale_vector(gaussian):
    """A zero proposal scale accepts every move and never moves."""
    with pytest.raises(ValueError, match="scale must be finite and > 0"):
        jaxz.kernels.rwmh(gaussian.path(), jnp.zeros(2))
    with pytest.raises(ValueError, match="scale must be finite and > 0"):
        jaxz.kernels.rwmh(gaussian.path(), jnp.array([0.3, 0.0]))


@pytest.mark.parametrize("build,argument", [
    (lambda path, model: jaxz.kernels.hmc(path, 0.1, 2.5), "num_integration_steps"),
    (lambda path, model: jaxz.rts(path, jaxz.kernels.rwmh(path, 0.5), [0.0, 1.0], num_sweeps=10.5), "num_sweeps"),
    (lambda path, model: jaxz.arm(model, 10.5), "num_particles"),
    (lambda path, model: jaxz.arm(model, 10, max_generate=1.5), "max_generate"),
    (lambda path, model: jaxz.sharding.mesh(1.5), "num_devices"),
    (lambda path, model: jaxz.schedules.linear(4.5), "num_temperatures"),
    (lambda path, model: regression.generate(jax.random.key(0), 10, 2, noise_scale=-1.0), "noise_scale"),
])
def test_non_integer_counts_and_negative_scales_are_refused_not_truncated(gaussian, build, argument):
    model = rbm.sequential_model(rbm.RBM(jnp.zeros((3, 2)), jnp.zeros(3), jnp.zeros(2)))
    with pytest.raises(ValueError, match=argument):
        build(gaussian.path(), model)


# --- RTS ----------------------------------------------------------------------------------------

def _tiny_rts(scale, num_sweeps):
    path = jaxz.paths.geometric(_normal_1d, lambda x: -0.5 * jnp.sum((x - 1.0) ** 2) / 0.25,
                                sample_base=lambda key, n: jax.random.normal(key, (n, 1)))
    estimator = jaxz.rts(path, jaxz.kernels.rwmh(path, scale), jaxz.schedules.linear(3), num_sweeps=num_sweeps,
                         initial_iterations=0, num_batches=4)
    return jaxz.run(estimator, jax.random.key(0), path.sample_base(jax.random.key(1), 16)).estimate


def test_rts_flags_chains_frozen_by_a_tiny_step_and_a_single_sweep():
    """A kernel whose moves are all accepted but tiny (hmc(step_size=1e-8); here a
    random walk of scale 1e-8, vmapped with a healthy one) leaves the chains where they
    started: the batch means see no spread (s.e. 0) while every move counts as accepted.
    One sweep is one batch (s.e. nan). Both are STATUS_LOW_ESS; chains that move are not."""
    frozen, moving = jax.jit(jax.vmap(lambda scale: _tiny_rts(scale, 20).status))(jnp.array([1e-8, 1.0]))
    assert frozen & jaxz.STATUS_LOW_ESS
    assert not moving & jaxz.STATUS_LOW_ESS
    assert jax.jit(lambda: _tiny_rts(1.0, 1).status)() & jaxz.STATUS_LOW_ESS


def test_rts_estimates_refuses_a_bad_alpha_and_a_state_without_sweeps():
    path = jaxz.paths.geometric(_normal_1d, _normal_1d)
    estimator = jaxz.rts(path, jaxz.kernels.rwmh(path, 0.5), [0.0, 1.0], num_sweeps=4, initial_iterations=0)
    state = jax.jit(estimator.init)(jax.random.key(0), jax.random.normal(jax.random.key(1), (4, 1)))
    with pytest.raises(ValueError, match="no sweep of the long run"):
        jaxz.rts_estimates(state)
    with pytest.raises(ValueError, match=r"alpha must be in \(0, 1\]"):
        jaxz.rts_estimates(state, alpha=-1.0)


# --- paths and schedules --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["ais", "smc", pytest.param("smc_fixed", marks=pytest.mark.slow),
                                  pytest.param("smc_waste_free", marks=pytest.mark.slow)])  # slow: CI time
def test_a_target_with_mass_outside_the_base_support_is_flagged(name):
    """U(0, 1) base, N(0, 1) target: every f_β below 1 lives on (0, 1), so the ladder
    sees only that part of Z (log Ẑ ≈ log 0.34 instead of 0). The last move, at β = 1,
    takes particles outside (0, 1), where f_0 (and f_{β_{K−1}}) = 0: STATUS_NONFINITE
    (smc was silent: −0.158 with status 0 where log Z = 0.919). With a U(−10, 10) base
    (log Z_0 = log 20 − log 20 = 0, normalized) it is not flagged."""
    def status(center, half_width):
        def log_base(x):
            inside = jnp.all(jnp.abs(x - center) < half_width)
            return jnp.where(inside, -jnp.log(2.0 * half_width) * x.shape[-1], -jnp.inf)

        def sample_base(key, n):
            return jax.random.uniform(key, (n, 1), minval=center - half_width, maxval=center + half_width)

        path = jaxz.paths.geometric(log_base, _normal_1d, sample_base=sample_base)
        kernel = jaxz.kernels.rwmh(path, 0.5)
        estimator = {"ais": lambda: jaxz.ais(path, kernel, jaxz.schedules.linear(4)),
                     "smc": lambda: jaxz.smc(path, kernel),
                     "smc_fixed": lambda: jaxz.smc(path, kernel, betas=jaxz.schedules.linear(4)),
                     "smc_waste_free": lambda: jaxz.smc(path, kernel, waste_free=True)}[name]()
        positions = sample_base(jax.random.key(1), 200)
        return jaxz.run(estimator, jax.random.key(0), positions, max_steps=40).estimate.status

    narrow, wide = jax.jit(jax.vmap(status))(jnp.array([0.5, 0.0]), jnp.array([0.5, 10.0]))
    assert narrow & jaxz.STATUS_NONFINITE
    assert not wide & jaxz.STATUS_NONFINITE


def test_geometric_path_refuses_a_vector_log_z0(gaussian):
    """log_z0 of shape (2,) gave a log_z of shape (2,)."""
    with pytest.raises(ValueError, match="log_z0 must be a scalar"):
        jaxz.paths.geometric(gaussian.log_base, gaussian.log_target, log_z0=jnp.zeros(2))


def test_geometric_schedule_needs_three_temperatures_to_end_at_one():
    """geometric(2) was [0, 1e-4]: it never reached the target."""
    with pytest.raises(ValueError, match="num_temperatures must be an integer >= 3"):
        jaxz.schedules.geometric(2)
    assert jaxz.schedules.geometric(3)[-1] == 1.0


def test_next_temperature_refuses_beta_outside_the_unit_interval():
    with pytest.raises(ValueError, match=r"beta must be in \[0, 1\]"):
        jaxz.schedules.next_temperature(jnp.zeros(4), lambda beta: jnp.zeros(4), -0.5, 0.5)


def test_ais_with_a_traced_schedule_that_does_not_increase_gives_flagged_nan(gaussian):
    """A schedule swept under vmap cannot be checked at construction: the bad one gives
    log Ẑ = nan with STATUS_NONFINITE; the good one is untouched."""
    path = gaussian.path()
    kernel = jaxz.kernels.rwmh(path, 0.5)
    positions = gaussian.base_draws(jax.random.key(1), 32)

    def one(betas):
        return jaxz.run(jaxz.ais(path, kernel, betas), jax.random.key(0), positions).estimate

    estimates = jax.jit(jax.vmap(one))(jnp.array([[0.0, 0.3, 0.6, 1.0], [0.0, 0.6, 0.3, 1.0]]))
    assert np.isfinite(estimates.log_z[0]) and not estimates.status[0] & jaxz.STATUS_NONFINITE
    assert np.isnan(estimates.log_z[1]) and estimates.status[1] & jaxz.STATUS_NONFINITE


# --- combine_runs ---------------------------------------------------------------------------------------

def test_combine_runs_leaves_out_an_infinite_run_checks_lengths_and_pools_float16_in_float32():
    pooled = jaxz.combine_runs(_estimate([0.0, jnp.inf, 0.1, -0.1]))
    assert np.isfinite(pooled.log_z) and pooled.log_z_stderr > 0  # was +inf with s.e. 0
    assert pooled.status & jaxz.STATUS_NONFINITE
    with pytest.raises(ValueError, match="estimate.cost must have the leading run axis"):
        jaxz.combine_runs(_estimate([0.0, 0.1], cost=jnp.ones(3)))
    half = jaxz.combine_runs(_estimate(1e-3 * jnp.arange(8.0), cost=jnp.full(8, 3e4, jnp.float16),
                                       dtype=jnp.float16))
    assert half.log_z.dtype == jnp.float32 and half.log_z_stderr > 0  # float16 rounded it to 0
    assert np.isfinite(half.cost) and half.cost == pytest.approx(2.4e5, rel=1e-3)  # float16 overflowed


def test_combine_runs_of_one_run_is_flagged_low_ess():
    """One run has no spread: the s.e. is nan, flagged (it was nan with status 0)."""
    pooled = jaxz.combine_runs(_estimate([0.3]))
    assert np.isnan(pooled.log_z_stderr) and pooled.status & jaxz.STATUS_LOW_ESS


# --- MBAR ------------------------------------------------------------------------------------------------

def test_mbar_refuses_complex_potentials():
    u_kn = jnp.array([[0.0, 1.0], [1.0, 0.0]]) + 0.5j
    with pytest.raises(ValueError, match="u_kn must be real"):
        jaxz.mbar(u_kn, [1, 1])


# --- models -----------------------------------------------------------------------------------------------

def test_regression_evidence_is_stable_in_float32_on_large_data():
    """N = 2·10⁴, float32: yᵀy − bᵀ(λI + XᵀX)⁻¹b cancels two numbers of size 10⁴ (it was
    0.14 nats off, 10x the rounding of the result). Now the error is that rounding,
    eps · |log p|. Reference: the textbook formula in NumPy float64."""
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(20_000, 5)) + 3.0  # a large common mean: XᵀX ill-conditioned
    targets = inputs @ rng.normal(size=5) + rng.normal(size=20_000)
    gram = np.eye(5) + inputs.T @ inputs  # σ = τ = 1
    projection = inputs.T @ targets
    exact = (-0.5 * 20_000 * np.log(2 * np.pi) - 0.5 * np.linalg.slogdet(gram)[1]
             - 0.5 * (targets @ targets - projection @ np.linalg.solve(gram, projection)))
    low = float(regression.exact_log_evidence((jnp.asarray(inputs, jnp.float32), jnp.asarray(targets, jnp.float32))))
    assert abs(low - exact) < 4 * np.finfo(np.float32).eps * abs(exact)


@pytest.mark.parametrize("kwargs,argument", [({"noise_scale": -1.0}, "noise_scale"),
                                             ({"prior_scale": 0.0}, "prior_scale"), ({"nan": True}, "data")])
def test_regression_refuses_non_positive_scales_and_nan_data(kwargs, argument):
    (inputs, targets), _ = regression.generate(jax.random.key(0), 20, 2)
    if kwargs.pop("nan", False):
        targets = targets.at[3].set(jnp.nan)
    with pytest.raises(ValueError, match=argument):
        regression.exact_log_evidence((inputs, targets), **kwargs)


def test_hmm_refuses_out_of_range_categorical_and_nan_gaussian_observations():
    categorical = hmm.hmm([0.5, 0.5], [[0.9, 0.1], [0.1, 0.9]], hmm.categorical_emission([[0.7, 0.3], [0.2, 0.8]]))
    with pytest.raises(ValueError, match=r"observations must be integers in \[0, 1\]"):
        hmm.exact_log_likelihood(categorical, jnp.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"observations must be integers in \[0, 1\]"):
        hmm.exact_log_likelihood(categorical, jnp.array([0, -1]))
    assert np.all(np.isneginf(hmm.log_emission(categorical, 2)))  # traced use: probability 0, not wrapped
    gaussian_hmm = hmm.three_state()
    with pytest.raises(ValueError, match="observations must be finite"):
        hmm.exact_log_likelihood(gaussian_hmm, jnp.array([0.1, jnp.nan]))


@pytest.mark.parametrize("field,value,message", [
    ("observation_cov", [[1.0, 0.3], [0.0, 1.0]], "observation_cov must be symmetric"),
    ("transition_cov", [[-1.0, 0.0], [0.0, -1.0]], "transition_cov must be positive definite"),
])
def test_lgssm_refuses_covariances_that_are_not_symmetric_positive_definite(field, value, message):
    params = lgssm.default(2, 2)._replace(**{field: jnp.asarray(value)})
    observations = jnp.zeros((3, 2))
    with pytest.raises(ValueError, match=message):
        lgssm.kalman_log_likelihood(params, observations)
    with pytest.raises(ValueError, match=message):
        lgssm.particle_filter_callables(params)


def test_kalman_log_likelihood_refuses_nan_observations():
    with pytest.raises(ValueError, match="observations must be finite"):
        lgssm.kalman_log_likelihood(lgssm.default(), jnp.array([[0.1], [jnp.nan]]))


def test_rbm_exact_log_z_refuses_nan_parameters():
    with pytest.raises(ValueError, match="rbm.W must be finite"):
        rbm.exact_log_z(rbm.RBM(jnp.full((3, 2), jnp.nan), jnp.zeros(3), jnp.zeros(2)))


def test_gpc_probit_refuses_nan_inputs():
    with pytest.raises(ValueError, match="inputs must be finite"):
        gpc.probit(jnp.array([[0.0], [jnp.nan]]), jnp.array([1, -1]), amplitude=1.0, lengthscale=1.0)


def test_gaussian_exact_log_z_refuses_a_covariance_that_is_not_positive_definite():
    with pytest.raises(ValueError, match="cov must be positive definite"):
        gaussian_model.exact_log_z(jnp.array([[1.0, 2.0], [2.0, 1.0]]))


# --- issue 27, item 4: the messages at init ------------------------------------------------------------------

def test_a_particle_count_passed_as_positions_says_to_pass_sample_base(gaussian):
    path = gaussian.path()
    with pytest.raises(ValueError, match=r"path.sample_base\(key, n\)"):
        jaxz.ais(path, jaxz.kernels.rwmh(path, 0.5), jaxz.schedules.linear(3)).init(jax.random.key(0), 100)


def test_positions_of_the_wrong_rank_give_a_value_error_not_an_index_error(gaussian):
    """(n,) positions for a path on (d,) particles: a raw JAX IndexError before."""
    sampled = jaxz.paths.geometric(gaussian.log_base, gaussian.log_target,
                                   sample_base=lambda key, n: jax.random.normal(key, (n, 2)))
    with pytest.raises(ValueError, match=r"positions must have shape \(num_particles, ...\).*\('n', 2\)"):
        jaxz.ais(sampled, jaxz.kernels.rwmh(sampled, 0.5), jaxz.schedules.linear(3)).init(
            jax.random.key(0), jnp.zeros(8))
    path = jaxz.paths.geometric(lambda x: _normal_1d(x[None]) + x[1], gaussian.log_target)
    with pytest.raises(ValueError, match="wrong rank"):
        jaxz.ais(path, jaxz.kernels.rwmh(path, 0.5), jaxz.schedules.linear(3)).init(jax.random.key(0), jnp.zeros(8))


# --- the second audit (this file's cases after issue 23's list) -----------------------------

def test_a_log_z_whose_own_rounding_exceeds_a_tenth_of_a_nat_is_flagged_precision_loss(gaussian):
    """AIS in float32 with log Z_0 = 1e7: log Ẑ − 1e7 read 0.0 for the true 0.45 (its s.e.
    0.09: 5 s.e. off) at status 0, the sum's rounding (an ulp of 1e7 is 1) lost in the
    output. Any particle method's log Ẑ beyond ~1e6 in float32 is now flagged; the same
    path without the offset is not."""
    def status(log_z0):
        path = jaxz.paths.geometric(gaussian.log_base, gaussian.log_target, log_z0=log_z0)
        estimator = jaxz.ais(path, jaxz.kernels.rwmh(path, 0.5), jaxz.schedules.linear(20))
        return jaxz.run(estimator, jax.random.key(0), gaussian.base_draws(jax.random.key(1), 256)).estimate.status

    flagged, plain = jax.jit(jax.vmap(status))(jnp.array([1e7, 0.0], jnp.float32))
    assert flagged & jaxz.STATUS_PRECISION_LOSS
    assert not plain & jaxz.STATUS_PRECISION_LOSS


def test_mbar_flags_float32_potentials_whose_rounding_exceeds_a_tenth_of_a_nat():
    """Two harmonic states, the second offset by 1e6 in float32: its potentials keep x² only
    to 0.06, and f₁ came back 14 s.e. off at status 0 in the audit. Flagged now; the same
    states without the offset are not, and read f₁ = log 2 within 3 s.e."""
    x = np.concatenate([np.random.default_rng(0).normal(0, 1, 2000), np.random.default_rng(1).normal(0, 0.5, 2000)])
    harmonic = 0.5 * np.array([[1.0], [4.0]]) * x**2
    offset = jaxz.mbar(jnp.asarray(harmonic + [[0.0], [1e6]], jnp.float32), [2000, 2000]).info
    result = jaxz.mbar(jnp.asarray(harmonic, jnp.float32), [2000, 2000])
    f, stderr, plain = result.free_energies, result.stderr, result.info
    assert offset.status & jaxz.STATUS_PRECISION_LOSS
    assert plain.status == 0 and abs(float(f[1]) - np.log(2.0)) < 3 * float(stderr[1])


def test_particle_methods_with_one_particle_are_flagged_low_ess():
    """A particle filter with N = 1 read −224.6 for an exact −30.6 with only
    STATUS_STDERR_UNRESOLVED, documented as "log Ẑ is fine"; ARM with one particle had
    status 0 (two particles: STATUS_LOW_ESS). One particle is an ESS of 1: both flagged."""
    model = lgssm.default(2, 1)
    _, observations = lgssm.simulate(jax.random.key(3), model, 20)
    filter_ = jaxz.particle_filter(*lgssm.particle_filter_callables(model))
    one, many = (jaxz.run(filter_, jax.random.key(0), n, observations).estimate.status for n in (1, 256))
    assert one & jaxz.STATUS_LOW_ESS and not many & jaxz.STATUS_LOW_ESS
    weights = 0.5 * jax.random.normal(jax.random.key(4), (6, 3))
    tiny = rbm.sequential_model(rbm.RBM(weights, jnp.zeros(6), jnp.zeros(3)), gibbs_sweeps=1)
    one, two = (jaxz.run(jaxz.arm(tiny, n), jax.random.key(0)).estimate.status for n in (1, 2))
    assert one & jaxz.STATUS_LOW_ESS and two & jaxz.STATUS_LOW_ESS


def test_a_particle_run_that_never_resampled_is_flagged_when_its_log_weights_spread_too_far():
    """Sequential importance sampling at N = 64, below the 100 draws a Pareto fit of the
    tail needs: 100 steps x_t ~ N(0, 1) weighted by exp(0.2 (x_t² − 1)) (log Z = 100 (−0.2 −
    ½ log 0.6) = 5.54; the weights' relative variance 1.34^100): log w spreads by 2.8 nats.
    Kish's ESS reads only the draws: 39 % of 200 runs were unflagged, 86 % of those beyond
    3 s.e. The bulk's spread (log-normal ESS below 2) now flags a run that never resampled:
    99 % of them; resampling at every step (the genealogy reads the variance) is not judged
    by its last weights' spread."""
    steps, c = 100, 0.2

    def propose(key, x, t):
        value = jax.random.normal(key, (), x.dtype)
        return x.at[t].set(value), c * (value**2 - 1.0)

    model = jaxz.SequentialGraphModel(steps, jnp.zeros(steps, jnp.float32), propose=propose)
    keys = jax.random.split(jax.random.key(0), 200)
    never, always = (jax.jit(jax.vmap(lambda key: jaxz.run(jaxz.twisted_smc(model, resample_ess=ess),  # noqa: B023
                                                           key, 64).estimate))(keys) for ess in (0.0, 1.0))
    assert np.mean(np.asarray(never.status) & jaxz.STATUS_LOW_ESS > 0) >= 0.95
    exact = steps * (-c - 0.5 * np.log(1 - 2 * c))
    kept = (np.asarray(always.status) == 0) & np.isfinite(np.asarray(always.log_z_stderr))
    assert np.sum(kept) >= 100  # the resampling runs keep their s.e. ...
    z = np.abs(np.asarray(always.log_z)[kept] - exact) / np.asarray(always.log_z_stderr)[kept]
    assert np.mean(z > 3) < 0.05  # ... and it holds


@pytest.mark.parametrize("build", [
    lambda: jaxz.twisted_smc(jaxz.SequentialGraphModel(2, jnp.zeros(2), propose=lambda k, x, t: (x, 0.0)),
                             resample_ess="x"),
    lambda: jaxz.smc(jaxz.paths.geometric(_normal_1d, _normal_1d), None, resample_ess="x"),
])
def test_a_resample_threshold_that_is_no_number_is_refused_by_name(build):
    """resample_ess="x" read "could not convert string to float: 'x'"."""
    with pytest.raises(ValueError, match="resample_ess must be a number"):
        build()
