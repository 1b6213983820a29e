"""Error bars users can trust: calibrated where one exists, nan by design where none
does, pooled runs as the recommended error bar, and flags where a run cannot be trusted."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz.kernels.base import from_transition


class ExactGaussianPath:
    """Base N(0, I_d) (normalized) and target exp(−|x − μ|²/(2σ²)): every f_β is Gaussian,
    with precision λ_β = (1 − β) + β/σ² and mean β μ/(σ² λ_β), so a kernel can draw from
    f_β exactly — a perfect mixer that isolates the estimator from the kernel."""

    def __init__(self, dim=2, scale=0.3, shift=1.0):
        self.dim, self.scale, self.mean = dim, scale, np.full(dim, shift)
        self.log_z = 0.5 * dim * np.log(2 * np.pi * scale**2)

    def path(self):
        dim, scale, mean = self.dim, self.scale, self.mean

        def log_base(x):
            return -0.5 * jnp.sum(x**2) - 0.5 * dim * jnp.log(2 * jnp.pi)

        def log_target(x):
            return -0.5 * jnp.sum((x - mean) ** 2) / scale**2

        def sample_base(key, num):
            return jax.random.normal(key, (num, dim))

        return jaxz.paths.geometric(log_base, log_target, sample_base=sample_base)

    def exact_kernel(self):
        scale, mean = self.scale, self.mean

        def transition(key, x, beta):
            precision = (1.0 - beta) + beta / scale**2
            centre = beta * mean / scale**2 / precision
            return centre + jax.random.normal(key, x.shape, x.dtype) / jnp.sqrt(precision), 1.0

        return from_transition(transition)


def _runs(estimator, problem, num_runs, num_particles, max_steps=None, seed=0):
    @jax.jit
    @jax.vmap
    def one(key):
        key_init, key_run = jax.random.split(key)
        return jaxz.run(estimator, key_run, jax.random.normal(key_init, (num_particles, problem.dim)),
                        max_steps=max_steps)

    return one(jax.random.split(jax.random.key(seed), num_runs))


def _mean_ratio(log_z, exact):
    ratio = np.exp(np.asarray(log_z, np.float64) - exact)
    return ratio.mean(), ratio.std(ddof=1) / np.sqrt(ratio.size)


@pytest.mark.slow  # CI time: see pyproject.toml
def test_combine_runs_pools_z_hats_and_its_stderr_matches_the_spread_of_pooled_means():
    """combine_runs gives log of the mean of the runs' Ẑ, the delta-method s.e. of that
    mean (Student-t widened), summed cost and OR-ed status; over 200 groups of 50 AIS runs
    the rms of its s.e. is within [0.75, 1.33] of the observed sd of the pooled log Ẑ, and
    pooled by 8 its ±1.96 s.e. covers about 95 % of the groups."""
    problem = ExactGaussianPath()
    path = problem.path()
    estimator = jaxz.ais(path, problem.exact_kernel(), jaxz.schedules.linear(4))
    estimate = _runs(estimator, problem, 200 * 50, 16).estimate
    pooled = jax.vmap(jaxz.combine_runs)(jax.tree.map(lambda leaf: leaf.reshape(200, 50), estimate))
    first = jax.tree.map(lambda leaf: leaf[:50], estimate)
    np.testing.assert_allclose(pooled.log_z[0], jax.nn.logsumexp(first.log_z) - np.log(50), rtol=1e-5)
    assert pooled.cost[0] == np.sum(first.cost)
    ratio = np.sqrt(np.mean(np.asarray(pooled.log_z_stderr) ** 2)) / np.std(np.asarray(pooled.log_z), ddof=1)
    assert 0.75 < ratio < 1.33, ratio
    mean, stderr = _mean_ratio(pooled.log_z, problem.log_z)
    assert abs(mean - 1.0) < 4 * stderr
    # the promise run by run, pooled as jaxz.evidence does (8 runs): without the Student-t
    # widening (t_7(0.975)/1.96 = 1.21) coverage was 0.897 with 2.3 % beyond 3 s.e.
    eights = jax.vmap(jaxz.combine_runs)(jax.tree.map(lambda leaf: leaf.reshape(1250, 8), estimate))
    error = np.abs(np.asarray(eights.log_z, np.float64) - problem.log_z)
    stderr = np.asarray(eights.log_z_stderr, np.float64)
    coverage, beyond = np.mean(error <= 1.96 * stderr), np.mean(error > 3 * stderr)
    assert 0.925 < coverage < 0.975 and beyond < 0.02, (coverage, beyond)  # binomial sd of coverage: 0.006


def test_combine_runs_leaves_out_a_nan_run_and_ors_status_bits():
    estimate = jaxz.Estimate(jnp.array([0.0, jnp.log(3.0), jnp.nan]), jnp.zeros(3), jnp.ones(3),
                             jnp.array([0, jaxz.STATUS_LOW_ESS, 0], jnp.int32))
    pooled = jaxz.combine_runs(estimate)
    np.testing.assert_allclose(pooled.log_z, np.log(2.0), rtol=1e-6)
    assert pooled.status & jaxz.STATUS_NONFINITE and pooled.status & jaxz.STATUS_LOW_ESS
    with pytest.raises(ValueError, match="leading run axis"):
        jaxz.combine_runs(jaxz.Estimate(jnp.zeros(()), jnp.zeros(()), jnp.zeros(()), jnp.int32(0)))


def test_combine_runs_keeps_a_runs_low_ess_only_where_the_flagged_runs_hold_half_the_mean():
    """A run's STATUS_LOW_ESS reaches the pool only where the flagged runs hold half of
    Σ_r Ẑ_r or more: one flagged run among 200 (of weight 1/200) does not flag the pool,
    the same run holding 3/4 of the mean does, and so does a pool whose runs are all
    flagged. The other bits are still OR-ed."""
    log_z = jnp.zeros(200)
    status = jnp.zeros(200, jnp.int32).at[7].set(jaxz.STATUS_LOW_ESS)
    pooled = jaxz.combine_runs(jaxz.Estimate(log_z, jnp.full(200, 0.1), jnp.ones(200), status))
    assert pooled.status == 0
    dominant = log_z.at[7].set(jnp.log(3 * 199.0))  # Ẑ_7 = 3 × the other 199 together: a share of 3/4
    assert jaxz.combine_runs(jaxz.Estimate(dominant, jnp.full(200, 0.1), jnp.ones(200), status)).status \
        & jaxz.STATUS_LOW_ESS
    everywhere = jnp.full(200, jaxz.STATUS_LOW_ESS | jaxz.STATUS_MAX_STEPS, jnp.int32)
    assert jaxz.combine_runs(jaxz.Estimate(log_z, jnp.full(200, 0.1), jnp.ones(200), everywhere)).status \
        == jaxz.STATUS_LOW_ESS | jaxz.STATUS_MAX_STEPS
    other = status.at[7].set(jaxz.STATUS_MAX_STEPS)
    assert jaxz.combine_runs(jaxz.Estimate(log_z, jnp.full(200, 0.1), jnp.ones(200), other)).status \
        == jaxz.STATUS_MAX_STEPS


def test_combine_runs_reciprocal_pools_one_over_z_as_raise_needs():
    """RAISE's 1/Ẑ is the unbiased quantity: reciprocal=True pools 1/Ẑ_r, and R runs of N
    particles give exactly RAISE's estimate from all R·N reverse weights (log Z_0 − log of
    their mean); pooling Ẑ_r instead would be biased upward whatever R. By hand: runs of
    log Ẑ 0 and log 3 pool to −log((1 + 1/3)/2); a +inf run (1/Ẑ = 0) counts."""
    pair = jaxz.Estimate(jnp.array([0.0, jnp.log(3.0)]), jnp.zeros(2), jnp.ones(2), jnp.zeros(2, jnp.int32))
    np.testing.assert_allclose(jaxz.combine_runs(pair, reciprocal=True).log_z, -np.log(2.0 / 3.0), rtol=1e-6)
    np.testing.assert_allclose(jaxz.combine_runs(pair).log_z, np.log(2.0), rtol=1e-6)
    with_inf = pair._replace(log_z=jnp.array([0.0, jnp.inf]))
    pooled = jaxz.combine_runs(with_inf, reciprocal=True)
    np.testing.assert_allclose(pooled.log_z, np.log(2.0), rtol=1e-6)
    assert not pooled.status & jaxz.STATUS_NONFINITE
    problem = ExactGaussianPath()
    path = problem.path()
    estimator = jaxz.raise_(path, problem.exact_kernel(), jaxz.schedules.linear(6))

    @jax.jit
    @jax.vmap
    def one(key):
        key_init, key_run = jax.random.split(key)
        start = problem.mean + problem.scale * jax.random.normal(key_init, (32, problem.dim))
        return jaxz.run(estimator, key_run, start)

    results = one(jax.random.split(jax.random.key(4), 5))
    every_weight = np.asarray(results.state.log_weights, np.float64).ravel()
    one_run = float(path.log_z0) - (np.logaddexp.reduce(every_weight) - np.log(every_weight.size))
    np.testing.assert_allclose(jaxz.combine_runs(results.estimate, reciprocal=True).log_z, one_run, rtol=1e-5)


@pytest.mark.parametrize("scheme", [pytest.param("systematic", marks=pytest.mark.slow),
                                    pytest.param("stratified", marks=pytest.mark.slow), "residual"])
def test_non_multinomial_schemes_report_nan_stderr_once_they_resample(scheme):
    """The genealogy estimator needs conditionally independent offspring: other schemes
    give nan by design (not a number that is 4x too small), and a finite s.e. only when
    no resampling happened (then it is the importance-sampling delta method)."""
    problem = ExactGaussianPath()
    path = problem.path()
    kernel = problem.exact_kernel()
    resampled = jaxz.run(jaxz.smc(path, kernel, betas=jaxz.schedules.linear(8), resample_ess=1.0, resampling=scheme),
                         jax.random.key(0), jax.random.normal(jax.random.key(1), (64, 2)))
    assert int(resampled.state.genealogy.generation) > 0 and np.isnan(resampled.estimate.log_z_stderr)
    never = jaxz.run(jaxz.smc(path, kernel, betas=jaxz.schedules.linear(8), resample_ess=1e-6, resampling=scheme),
                     jax.random.key(0), jax.random.normal(jax.random.key(1), (64, 2)))
    assert int(never.state.genealogy.generation) == 0 and np.isfinite(never.estimate.log_z_stderr)


def test_a_run_that_never_resampled_reports_the_importance_sampling_stderr():
    """With no resampling a particle method is importance sampling: its s.e. is never below
    jaxz.importance's on the same weights (the second moment's upper tail from the fitted
    Pareto tail), and is the one read from the tail shape k̂ + sd(k̂)/2 (such runs are those
    whose tail looks lighter than it is; ``_weight_checks.importance_stderr``). SMC-Twist on a
    4 × 4 lattice, never resampling (N = 256, 32 runs): in runs whose fitted tail adds to the
    sample variance the s.e. is that one (the genealogy's delta method alone was smaller
    there: SMC-Twist on 8 × 8 at N = 1024 with resample_ess = 0.5 covered 0.82 of its
    never-resampled runs, 4.1 % beyond 3 s.e.)."""
    from jaxz.models import ising
    field = 0.8 * jax.random.normal(jax.random.key(3), (4, 4))
    model = ising.periodic_lattice(field, 0.4407)
    estimator = jaxz.twisted_smc(ising.sequential_model(model, jaxz.approx.loopy_bp(model)), resample_ess=0.0)
    results = jax.jit(jax.vmap(lambda key: jaxz.run(estimator, key, 256)))(jax.random.split(jax.random.key(5), 32))
    assert np.all(np.asarray(results.state.genealogy.generation) == 0)
    log_weights = results.state.log_weights
    def bias_added(stderr):
        return np.asarray(jaxz.weights.stderr_with_log_bias(jax.vmap(stderr)(log_weights)))

    importance = bias_added(jaxz.weights.stderr_log_mean_exp_pareto)
    upper = bias_added(lambda w: jaxz.weights.stderr_log_mean_exp_pareto(w, shape_margin=0.5, max_shape=0.7))
    plain = bias_added(jaxz.weights.stderr_log_mean_exp)
    reported = np.asarray(results.estimate.log_z_stderr)
    # a tail too heavy for any s.e. (Pareto k̂ > 0.7): nan, and the run is flagged
    resolved = np.isfinite(reported)
    assert np.all(np.asarray(results.estimate.status)[~resolved] != 0)
    tailed = resolved & (importance > 1.02 * plain)  # where the fitted tail adds to the sample variance
    assert tailed.sum() >= 3, (importance, plain)  # else this test would not test it
    np.testing.assert_allclose(reported[tailed], upper[tailed], rtol=1e-4)
    assert np.all(upper[tailed] > 1.02 * importance[tailed])  # the half sd widens them
    assert np.all(reported[resolved] >= importance[resolved] * (1 - 1e-4))


@pytest.mark.parametrize("resample_ess", [
    pytest.param(0.5, marks=pytest.mark.slow),
    # issue 23 (open): resampling every step with exact moves, the genealogy variance is far below its
    # own drift noise; with only non-positive estimates refused (NOISE_MULTIPLE = 0) some unflagged runs
    # carry a noise-sized s.e. and fall beyond 3 of it. Strict: should it start to pass, the xfail goes
    pytest.param(1.0, marks=pytest.mark.xfail(strict=True, reason="noise-dominated genealogy s.e., issue 23")),
])
def test_multinomial_smc_stderr_is_calibrated_with_a_perfect_kernel(resample_ess):
    """Fixed schedule, exact moves, multinomial resampling: over the unflagged of 400 runs
    the rms reported s.e. is within [0.75, 1.33] of the observed sd of log Ẑ (an sd from 400 runs has
    ~3.5% relative error, so the band is not at risk from sampling noise)."""
    problem = ExactGaussianPath(dim=3, scale=0.2)
    path = problem.path()
    estimator = jaxz.smc(path, problem.exact_kernel(), betas=jaxz.schedules.geometric(12, 1e-2),
                         resample_ess=resample_ess)
    estimate = _runs(estimator, problem, 400, 128).estimate
    # runs whose genealogy estimate is below its own noise report nan with STATUS_STDERR_UNRESOLVED
    # (issue 23); the others carry the error bar
    trusted = np.asarray(estimate.status) == 0
    stderr = np.asarray(estimate.log_z_stderr)
    assert np.all(np.isfinite(stderr[trusted])) and np.all(np.isnan(stderr) <= ~trusted)
    assert not np.any(stderr == 0.0)
    # With exact moves the variance is small against the genealogy's neutral-drift noise:
    # at resample_ess = 1.0 most runs are flagged (measured: 97% of 400), the few left
    # hold their error bar; at 0.5 the rms ratio is checked on the unflagged runs.
    log_z = np.asarray(estimate.log_z)
    errors = np.abs(log_z - problem.log_z)[trusted]
    assert np.all(errors <= 3 * stderr[trusted]), errors / stderr[trusted]
    if resample_ess < 1.0:
        ratio = np.sqrt(np.mean(stderr[trusted] ** 2)) / log_z[trusted].std(ddof=1)
        assert trusted.mean() > 0.5 and 0.75 < ratio < 1.33, (ratio, trusted.mean())


@pytest.mark.slow  # CI time: run with pytest -m slow
def test_adaptive_schedule_is_biased_at_small_n_and_two_pass_is_not():
    """With a perfect kernel the only bias left is the schedule's: one adaptive pass gives
    E[Ẑ/Z] well below 1 at N = 50 (the schedule is tuned on the same particles), the
    two-pass schedule (pilot on independent draws) gives E[Ẑ/Z] = 1 within 4 s.e.
    (measured: 0.83 ± 0.01 adaptive at d = 20, N = 50, ~11 stages)."""
    problem = ExactGaussianPath(dim=20, scale=0.3)
    path = problem.path()
    kernel = problem.exact_kernel()
    adaptive = _runs(jaxz.smc(path, kernel, target_ess=0.5), problem, 2000, 50, max_steps=60)
    two_pass = _runs(jaxz.smc(path, kernel, target_ess=0.5, schedule="two_pass"), problem, 2000, 50, max_steps=60)
    mean, stderr = _mean_ratio(two_pass.estimate.log_z, problem.log_z)
    assert abs(mean - 1.0) < 4 * stderr, (mean, stderr)
    mean_adaptive, stderr_adaptive = _mean_ratio(adaptive.estimate.log_z, problem.log_z)
    assert mean_adaptive < 1.0 - 4 * stderr_adaptive, (mean_adaptive, stderr_adaptive)
    # the pilot's cost is counted
    assert np.mean(two_pass.estimate.cost) > 1.5 * np.mean(adaptive.estimate.cost)


def test_two_pass_needs_a_base_sampler_and_no_fixed_betas(gaussian):
    path = gaussian.path()  # no sample_base
    kernel = jaxz.kernels.rwmh(path, 0.5)
    with pytest.raises(ValueError, match="sample_base"):
        jaxz.smc(path, kernel, schedule="two_pass")
    with pytest.raises(ValueError, match="betas=None"):
        jaxz.smc(ExactGaussianPath().path(), kernel, betas=[0.0, 1.0], schedule="two_pass")
    with pytest.raises(ValueError, match="schedule"):
        jaxz.smc(path, kernel, schedule="fast")


@pytest.mark.slow  # CI time: run with pytest -m slow
def test_smc_whose_kernel_cannot_follow_a_narrow_target_is_flagged_low_ess():
    """−1e4 Σ(x − 1)² from a standard-normal base (exact log Z −12.1) with an HMC step 50x
    the posterior width: log Ẑ is off by hundreds of nats while the genealogy s.e.
    is a few nats (or inf, or nan: unresolved). The collapsed genealogy flags it; a tuned kernel
    (test_tuning.py::test_the_issue_13_example_needs_no_step_size) gets it right."""
    dim, strength = 3, 1e4

    def log_base(x):
        return -0.5 * jnp.sum(x**2) - 0.5 * dim * jnp.log(2 * jnp.pi)

    path = jaxz.paths.geometric(log_base, lambda x: -strength * jnp.sum((x - 1.0) ** 2))
    estimator = jaxz.smc(path, jaxz.kernels.hmc(path, 0.5, 5))
    estimate = jax.jit(jax.vmap(lambda key: jaxz.run(
        estimator, key, jax.random.normal(jax.random.fold_in(key, 1), (100, dim)), max_steps=300).estimate
    ))(jax.random.split(jax.random.key(0), 4))
    exact = dim * 0.5 * np.log(np.pi / strength)
    stderr = np.asarray(estimate.log_z_stderr)
    assert np.all((np.abs(np.asarray(estimate.log_z) - exact) > 10 * stderr) | ~np.isfinite(stderr))
    assert np.all(np.asarray(estimate.status) & jaxz.STATUS_LOW_ESS)


def test_ais_on_densities_offset_by_1e30_is_flagged_precision_loss():
    """log f ≈ 1e30 in float32: every increment is a difference of two numbers whose
    rounding error is ~1e23 nats. The run says so instead of returning log Ẑ = 0 with
    s.e. 0 and status 0."""

    def log_base(x):
        return -0.5 * jnp.sum(x**2) + 1e30

    path = jaxz.paths.geometric(log_base, lambda x: -2.0 * jnp.sum(x**2) + 1e30)
    estimate = jaxz.run(jaxz.ais(path, jaxz.kernels.rwmh(path, 0.5), jaxz.schedules.linear(10)),
                        jax.random.key(0), jax.random.normal(jax.random.key(1), (100, 2))).estimate
    assert estimate.status & jaxz.STATUS_PRECISION_LOSS


def test_importance_sampling_resting_on_one_weight_is_flagged_low_ess():
    """A proposal 30 standard deviations from the target: one draw carries all the weight."""
    estimate = jaxz.run(jaxz.importance(lambda x: -0.5 * ((x - 30.0) / 0.1) ** 2,
                                        lambda key: jax.random.normal(key),
                                        lambda x: -0.5 * x**2 - 0.5 * jnp.log(2 * jnp.pi)),
                        jax.random.key(0), 1000).estimate
    assert estimate.status & jaxz.STATUS_LOW_ESS


@pytest.mark.slow  # CI time: run with pytest -m slow
def test_rts_whose_kernel_never_accepts_is_flagged_instead_of_reporting_stderr_zero(gaussian):
    path = gaussian.path()
    frozen = from_transition(lambda key, x, beta: (x, 0.0))
    estimate = jaxz.run(jaxz.rts(path, frozen, jaxz.schedules.linear(5), num_sweeps=100, initial_iterations=0),
                        jax.random.key(0), gaussian.base_draws(jax.random.key(1), 10)).estimate
    assert estimate.status & jaxz.STATUS_LOW_ESS
    moving = jaxz.run(jaxz.rts(path, jaxz.kernels.rwmh(path, 0.5), jaxz.schedules.linear(5), num_sweeps=100,
                               initial_iterations=0),
                      jax.random.key(0), gaussian.base_draws(jax.random.key(1), 10)).estimate
    assert not moving.status & jaxz.STATUS_LOW_ESS


def test_next_temperature_reports_nan_increments_and_refuses_a_target_out_of_range():
    log_weights = jnp.zeros(10)
    beta, status = jaxz.schedules.next_temperature(log_weights, lambda b: b * jnp.full(10, jnp.nan), 0.0, 0.5,
                                                   return_status=True)
    assert status & jaxz.STATUS_NONFINITE and status & jaxz.STATUS_LOW_ESS
    with pytest.raises(ValueError, match="target must be in"):
        jaxz.schedules.next_temperature(log_weights, lambda b: b * jnp.ones(10), 0.0, 2.0)
    with pytest.raises(ValueError, match="target must be in"):
        jaxz.schedules.next_temperature(log_weights, lambda b: b * jnp.ones(10), 0.0, 11.0, conditional=False)


def test_float32_densities_near_1e10_flag_precision_loss_in_adaptive_smc():
    """Log-likelihoods of ~1e10 in float32: the conditional ESS computed from their
    differences is noise (the step jumps to β = 1 with CESS reported 1)."""
    path = jaxz.paths.likelihood_tempering(lambda x: -0.5 * jnp.sum(x**2) - jnp.log(2 * jnp.pi),
                                           lambda x: -1e10 - jnp.sum(x**2))
    estimate = jaxz.run(jaxz.smc(path, jaxz.kernels.rwmh(path, 0.5)), jax.random.key(0),
                        jax.random.normal(jax.random.key(1), (64, 2)), max_steps=50).estimate
    assert estimate.status & jaxz.STATUS_PRECISION_LOSS


@pytest.mark.slow  # CI time: run with pytest -m slow
def test_target_ess_and_betas_can_be_traced_to_sweep_them_under_vmap():
    problem = ExactGaussianPath()
    path, kernel = problem.path(), problem.exact_kernel()
    positions = jax.random.normal(jax.random.key(1), (256, 2))

    def by_target(target):
        return jaxz.run(jaxz.smc(path, kernel, target_ess=target), jax.random.key(0), positions, max_steps=50)

    result = jax.jit(jax.vmap(by_target))(jnp.array([0.2, 0.5, 0.9]))
    steps = np.asarray(result.num_steps)
    assert steps[0] < steps[1] < steps[2]
    looped = by_target(0.5)
    np.testing.assert_allclose(result.estimate.log_z[1], looped.estimate.log_z, rtol=1e-5)

    schedules = jnp.stack([jnp.linspace(0.0, 1.0, 6), jnp.linspace(0.0, 1.0, 6) ** 3])
    by_betas = jax.jit(jax.vmap(lambda b: jaxz.run(jaxz.ais(path, kernel, b), jax.random.key(0), positions).estimate))
    estimates = by_betas(schedules)
    direct = jaxz.run(jaxz.ais(path, kernel, np.linspace(0.0, 1.0, 6) ** 3), jax.random.key(0), positions).estimate
    np.testing.assert_allclose(estimates.log_z[1], direct.log_z, rtol=1e-5)


def test_confusing_errors_now_name_the_argument(gaussian):
    path = gaussian.path()
    kernel = jaxz.kernels.rwmh(path, 0.5)
    positions = gaussian.base_draws(jax.random.key(0), 8)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="max_steps"):
        jaxz.run(jaxz.smc(path, kernel), key, positions, max_steps=0)
    with pytest.raises(ValueError, match="inverse_mass_matrix"):
        jaxz.run(jaxz.ais(path, jaxz.kernels.hmc(path, 0.1, 3, inverse_mass_matrix=jnp.ones(3)),
                          jaxz.schedules.linear(3)), key, positions)
    with pytest.raises(ValueError, match="step_size"):
        jaxz.kernels.tempered_hmc(path, jaxz.schedules.linear(5), jnp.full(3, 0.1), 3)
    with pytest.raises(ValueError, match=r"rbm\.b"):
        jaxz.models.rbm.exact_log_z(jaxz.models.rbm.RBM(jnp.zeros((3, 2)), jnp.zeros(3), jnp.zeros(3)))
    with pytest.raises(ValueError, match="binary"):
        jaxz.models.rbm.base_rate(np.array([[0.0, 0.5]]))
    with pytest.raises(ValueError, match="pair"):
        jaxz.run(jaxz.ais(path, from_transition(lambda k, x, b: x), jaxz.schedules.linear(3)), key, positions)
    for bad_target in (lambda x: None, lambda x: x):
        with pytest.raises(ValueError, match="path.log_density"):
            jaxz.run(jaxz.ais(jaxz.paths.geometric(gaussian.log_base, bad_target), kernel, jaxz.schedules.linear(3)),
                     key, positions)
    with pytest.raises(ValueError, match="log_weights"):
        jaxz.weights.ess(jnp.zeros(0))
    with pytest.raises(ValueError, match="log_weights"):
        jaxz.resampling.systematic(key, jnp.zeros(0))
    with pytest.raises(ValueError, match="mask"):
        jaxz.resampling.systematic(key, jnp.zeros(4), mask=jnp.zeros(4, bool))
    with pytest.raises(ValueError, match="log_z0"):
        jaxz.paths.geometric(gaussian.log_base, gaussian.log_target, log_z0=float("nan"))
    with pytest.raises(ValueError, match="log_observation"):
        pf = jaxz.particle_filter(lambda k: jnp.zeros(2), lambda k, x: x, lambda x, y: x)
        jaxz.run(pf, key, 8, jnp.zeros((3, 2)))


def test_stderr_of_one_weight_is_nan_not_zero():
    assert np.isnan(jaxz.weights.stderr_log_mean_exp(jnp.zeros(1)))
    assert np.isinf(jaxz.weights.stderr_log_mean_exp(jnp.full(3, -jnp.inf)))


def test_a_traced_nan_log_z0_is_flagged_nonfinite(gaussian):
    def one(log_z0):
        path = jaxz.paths.Path(gaussian.path().log_density, log_z0)
        return jaxz.run(jaxz.ais(path, jaxz.kernels.rwmh(path, 0.5), jaxz.schedules.linear(3)), jax.random.key(0),
                        gaussian.base_draws(jax.random.key(1), 16)).estimate

    estimate = jax.jit(one)(jnp.float32(jnp.nan))
    assert estimate.status & jaxz.STATUS_NONFINITE


def test_genealogy_within_the_lag_is_exactly_lee_whiteley():
    """With m ≤ λ resampling events nothing is lagged: σ̂² = −log(r^{m+1} U_0), U_0 read
    from the Eves (Lee & Whiteley 2018), computed here directly from the ancestor draws.
    (Mild weights keep ≥ MIN_FAMILIES Eve families, so the longest lag is the one read.)"""
    from jaxz.estimators import _genealogy

    num_particles, num_events = 200, 5
    key = jax.random.key(3)
    genealogy = _genealogy.init(num_particles, 8, jnp.float32)
    eve = np.arange(num_particles)
    for _ in range(num_events):
        key, k_weights, k_draw = jax.random.split(key, 3)
        log_weights = jax.nn.log_softmax(0.3 * jax.random.normal(k_weights, (num_particles,)))
        ancestors = jaxz.resampling.multinomial(k_draw, log_weights)
        genealogy = _genealogy.resample(genealogy, log_weights, ancestors, jnp.bool_(True))
        eve = eve[np.asarray(ancestors)]
    final = jax.nn.log_softmax(0.3 * jax.random.normal(key, (num_particles,)))
    variance, *_ = _genealogy.lagged_estimate(genealogy, final)  # as computed, before the noise check
    per_eve = np.bincount(eve, weights=np.exp(np.asarray(final, np.float64)), minlength=num_particles)
    ratio = num_particles / (num_particles - 1)
    expected = -np.log(ratio ** (num_events + 1) * (1 - np.sum(per_eve**2)))
    np.testing.assert_allclose(float(variance), expected, rtol=1e-4)


def test_lagged_genealogy_stderr_matches_the_spread_beyond_one_nat_on_a_long_hmm():
    """A bootstrap filter over 400 steps with 64 particles has a spread of log Ẑ well
    above 1 nat, where the unlagged estimator saturates (V ≤ 1: every lineage has
    coalesced); the fixed-lag estimator still matches the spread of independent runs.
    At that spread log Ẑ is also ~s²/2 below log Z on average (E[Ẑ] = Z): the error bar
    holds the bias (``jaxz.weights.stderr_with_log_bias``), so it is compared with the
    root mean square error about the exact log-likelihood (forward algorithm). Without the
    bias term the same runs covered 0.80 with 3.1 % beyond 3 s.e. (all on the low side).
    Band: the ratio of rms s.e. to the rms error of 300 runs has a sampling error of about
    6%, so [0.75, 1.35] is > 4 of those; coverage ≥ 0.90 and at most 2 % beyond 3 s.e."""
    from jaxz.models import hmm

    params = hmm.three_state()
    _, observations = hmm.simulate(jax.random.key(0), params, 400)
    exact = float(hmm.exact_log_likelihood(params, observations))
    pf = jaxz.particle_filter(*hmm.particle_filter_callables(params), resample_ess=1.0)
    estimates = jax.jit(jax.vmap(lambda k: jaxz.run(pf, k, 64, observations).estimate))(
        jax.random.split(jax.random.key(1), 300))
    log_z, stderr = np.asarray(estimates.log_z), np.asarray(estimates.log_z_stderr)
    trusted = (np.asarray(estimates.status) & (jaxz.STATUS_LOW_ESS | jaxz.STATUS_STDERR_UNRESOLVED)) == 0
    assert trusted.mean() > 0.8 and np.all(np.isfinite(stderr[trusted]))
    errors = log_z[trusted] - exact
    spread = errors.std()
    assert spread > 1.2
    ratio = np.sqrt(np.mean(stderr[trusted] ** 2)) / np.sqrt(np.mean(errors**2))
    assert 0.75 < ratio < 1.35, (ratio, spread)
    z = np.abs(errors) / stderr[trusted]
    assert np.mean(z <= 1.96) >= 0.90 and np.mean(z > 3) <= 0.02, (np.mean(z <= 1.96), np.mean(z > 3))
    print(f"lagged genealogy: rms s.e. / rms error = {ratio:.3f}, sd = {spread:.2f}, trusted {trusted.mean():.2f}")


@pytest.mark.slow  # CI time: run with pytest -m slow
def test_sgais_reports_nan_stderr_by_design_and_pooled_runs_give_the_error_bar():
    """SGAIS's chunks reweight the same particles: the sum of their delta-method variances
    was 0.47x the spread, so the single-run s.e. is nan; combine_runs pools runs."""
    from jaxz.models import streaming

    data, _ = streaming.linear_regression_data(jax.random.key(0), 400)
    estimator = jaxz.sgais(streaming.linear_log_prior, streaming.linear_log_likelihood, chunk_size=100,
                           num_particles=10, target_ess=5.0, burn_in=5)
    positions = streaming.linear_sample_prior(jax.random.key(1), 10)
    estimates = jax.jit(jax.vmap(lambda key: jaxz.run(estimator, key, positions, data).estimate))(
        jax.random.split(jax.random.key(2), 4))
    assert np.all(np.isnan(estimates.log_z_stderr)) and np.all(np.isfinite(estimates.log_z))
    pooled = jaxz.combine_runs(estimates)
    assert np.isfinite(pooled.log_z_stderr) and pooled.log_z_stderr > 0


def test_combine_runs_averages_the_spread_with_the_runs_own_error_bars():
    """Where every run reports its own s.e., combine_runs averages the pooled variance read
    from the runs' spread with the one read from their own error bars, Σ Ẑ_r² V_r / (Σ Ẑ_r)².
    Exactly log-normal runs, σ = 0.7, each reporting its exact s.e. (20,000 pools of 8):
    1.6 % of pools lay beyond 3 s.e. from the spread alone, under 1 % with the average.
    Equal runs with one s.e. s (spread 0): the pooled s.e. is that of V/8 averaged with 0."""
    sigma = 0.7
    log_z = -0.5 * sigma**2 + sigma * jax.random.normal(jax.random.key(3), (20_000, 8))
    own = jnp.full_like(log_z, jaxz.weights.stderr_with_log_bias(jnp.float32(sigma)))

    def promise(stderr):
        pooled = jax.vmap(jaxz.combine_runs)(jaxz.Estimate(log_z, stderr, jnp.ones_like(log_z),
                                                           jnp.zeros(log_z.shape, jnp.int32)))
        error, reported = np.abs(np.asarray(pooled.log_z)), np.asarray(pooled.log_z_stderr)
        return np.mean(error <= 1.96 * reported), np.mean(error > 3 * reported)

    spread_only, averaged = promise(jnp.full_like(log_z, jnp.nan)), promise(own)
    assert spread_only[1] > 0.013 and averaged[1] < 0.01, (spread_only, averaged)
    assert 0.94 < averaged[0] < 0.96, averaged
    equal = jaxz.Estimate(jnp.zeros(8), jnp.full((8,), 0.5), jnp.ones(8), jnp.zeros(8, jnp.int32))
    raw = 2.0 * (np.sqrt(1.0 + 0.25) - 1.0)  # s² before the bias term
    within = -np.log1p(-(1.0 - np.exp(-raw)) / 8)
    expected = np.sqrt(0.5 * within)
    np.testing.assert_allclose(jaxz.combine_runs(equal).log_z_stderr,
                               np.sqrt(expected**2 + expected**4 / 4), rtol=1e-5)


def test_combine_runs_reads_a_missing_own_error_bar_from_the_other_runs():
    """A run without an s.e. of its own (a genealogy too short to read) no longer drops the
    pool's own-error-bar half: where at least half the runs have one, their Σ Ẑ_r² V_r stands
    for all R (the runs are draws of one estimator). Equal runs, spread 0: one nan s.e. in 8
    gives the bar of 8 runs that all report it; 5 nan s.e. in 8 leave the spread alone (0)."""
    def pooled(stderr):
        stderr = jnp.asarray(stderr, jnp.float32)
        return float(jaxz.combine_runs(jaxz.Estimate(jnp.zeros(8), stderr, jnp.ones(8),
                                                     jnp.zeros(8, jnp.int32))).log_z_stderr)

    every = pooled([0.5] * 8)
    assert every > 0.1
    np.testing.assert_allclose(pooled([0.5] * 7 + [np.nan]), every, rtol=1e-5)
    np.testing.assert_allclose(pooled([0.5] * 4 + [np.nan] * 4), every, rtol=1e-5)
    assert pooled([0.5] * 3 + [np.nan] * 5) < 1e-3 * every


def test_combine_runs_covers_log_normal_runs_spread_by_a_nat():
    """Runs whose log Ẑ is normal, N(−σ²/2, σ²) with σ = 1.1 (E[Ẑ] = Z = 1, the SMC limit),
    pooled by 8: the delta-method s.e. alone covered 0.87 with 4.6 % beyond 3 s.e. (the pools
    that missed a large Ẑ_r read both their mean and their spread low); with the log-normal
    s.e. of their upper spread about 0.92 / 2.6 %. A run far below the others (log Ẑ skewed
    left: Ẑ light-tailed, AIS with few rungs) widens the bar far less than the full spread
    of log Ẑ would."""
    sigma = 1.1
    log_z = -0.5 * sigma**2 + sigma * jax.random.normal(jax.random.key(3), (20_000, 8))
    runs = jaxz.Estimate(log_z, jnp.full_like(log_z, jnp.nan), jnp.ones_like(log_z),
                         jnp.zeros(log_z.shape, jnp.int32))
    pooled = jax.vmap(jaxz.combine_runs)(runs)
    error, stderr = np.abs(np.asarray(pooled.log_z)), np.asarray(pooled.log_z_stderr)
    coverage, beyond = np.mean(error <= 1.96 * stderr), np.mean(error > 3 * stderr)
    assert 0.905 < coverage < 0.935 and beyond < 0.035, (coverage, beyond)  # binomial sd 0.002
    weights = np.exp(np.asarray(log_z, np.float64) - np.asarray(log_z).max(1, keepdims=True))
    widen = 2.3646 / 1.96  # t_7(0.975) / 1.96
    delta = np.sqrt(weights.var(1, ddof=1) / 8) / weights.mean(1) * widen
    assert np.mean(error <= 1.96 * delta) < 0.89
    low_run = np.array([0.0] * 7 + [-3.0])
    skewed = jaxz.Estimate(jnp.asarray(low_run), jnp.zeros(8), jnp.ones(8), jnp.zeros(8, jnp.int32))
    spread = low_run.var(ddof=1)
    full = np.sqrt(spread / 8 + spread**2 / 14) * widen
    assert jaxz.combine_runs(skewed).log_z_stderr < 0.5 * full
