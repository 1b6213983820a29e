"""The genealogy standard error (Lee & Whiteley 2018 with a lag, jaxz.estimators._genealogy)
never reports an s.e. of exactly 0 for a random estimate: below its own noise it is nan
with STATUS_STDERR_UNRESOLVED (issue 23), and likewise where the model's factors reach back
further than any window the genealogy keeps. Bad input of twisted_smc: float32 potentials too
large to resolve, log potentials of the wrong length, a bandwidth that is not a count."""
import importlib.util
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz import weights
from jaxz.estimators import _genealogy
from jaxz.models import ising

_PATH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "calibration.py"
_SPEC = importlib.util.spec_from_file_location("jaxz_benchmarks_calibration", _PATH)
calibration = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(calibration)


def _neutral_genealogies(num_runs, num_particles, num_events, seed=0):
    """``num_runs`` genealogies after ``num_events`` multinomial resamplings of equal
    weights (neutral drift: Ẑ is exact, every term of the asymptotic variance is 0)."""
    uniform = jnp.full((num_particles,), -jnp.log(num_particles), jnp.float64)

    def one(key):
        def body(genealogy, key):
            ancestors = jaxz.resampling.multinomial(key, uniform)
            return _genealogy.resample(genealogy, uniform, ancestors, jnp.bool_(True)), None

        start = _genealogy.init(num_particles, _genealogy.default_lag(num_particles), jnp.float64)
        genealogy, _ = jax.lax.scan(body, start, jax.random.split(key, num_events))
        variance, noise, *_ = _genealogy.lagged_estimate(genealogy, uniform)
        reported, _ = _genealogy.log_variance(genealogy, uniform)
        return variance, noise, reported

    return jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(seed), num_runs))


def test_neutral_drift_estimate_is_centred_on_zero_its_noise_matches_its_spread_and_it_is_never_reported_as_zero():
    """Equal weights resampled 60 times with N = 64 (λ = 8): σ̂² (Lee & Whiteley, lagged)
    is unbiased for 0, so about half the runs are negative — formerly clipped to an s.e.
    of exactly 0. The noise estimate sqrt(Σ_q (log F_q)²) matches the run-to-run sd of σ̂²
    (600 runs: the sd's relative s.e. is 1/sqrt(2·599) = 2.9%, accepted within 6 of them),
    and every estimate below NOISE_MULTIPLE × noise is reported as nan, never as 0."""
    with jax.enable_x64(True):
        variance, noise, reported = (np.asarray(a) for a in _neutral_genealogies(600, 64, 60))
    sd = variance.std(ddof=1)
    assert abs(variance.mean()) < 4 * sd / np.sqrt(variance.size), (variance.mean(), sd)
    assert 0.3 < np.mean(variance < 0) < 0.7
    rms_noise = np.sqrt(np.mean(noise**2))
    assert abs(rms_noise / sd - 1) < 6 / np.sqrt(2 * 599), (rms_noise, sd)
    below = variance < _genealogy.NOISE_MULTIPLE * noise
    assert np.all(np.isnan(reported[below]))
    np.testing.assert_allclose(reported[~below], variance[~below])
    assert not np.any(reported == 0.0)


def test_the_lag0_variance_sums_each_blocks_delta_method_variance():
    """``local_variance`` = Σ over the blocks between resampling events (the last ending at
    the final weights) of −log(r (1 − Σ W²)), the weights of each block normalized."""
    num_particles, dtype = 50, jnp.float64
    log_r = np.log(num_particles / (num_particles - 1.0))
    rng = np.random.default_rng(3)
    with jax.enable_x64(True):
        genealogy = _genealogy.init(num_particles, 8, dtype)
        expected = 0.0
        for event, resampled in enumerate([True, False, True, True, False]):
            log_weights = weights.normalize(jnp.asarray(rng.normal(0.0, 0.7, num_particles), dtype))
            ancestors = jaxz.resampling.multinomial(jax.random.key(event), log_weights)
            genealogy = _genealogy.resample(genealogy, log_weights, ancestors, jnp.bool_(resampled))
            if resampled:
                expected -= log_r + np.log1p(-np.sum(np.exp(2 * np.asarray(log_weights))))
        final = weights.normalize(jnp.asarray(rng.normal(0.0, 0.7, num_particles), dtype))
        expected -= log_r + np.log1p(-np.sum(np.exp(2 * np.asarray(final))))
        np.testing.assert_allclose(float(_genealogy.local_variance(genealogy, final)), expected, rtol=1e-12)


def test_a_variance_the_genealogy_noise_drowns_is_flagged_unresolved():
    """Fully adapted SMC-Base on the calibration table's 4 × 4 grid (free boundary, J = 0.4,
    fields N(0, 0.3²)), N = 100, resampling at every step, 300 runs: the lag-0 variance
    (about 0.004) is a tenth of σ̂²'s noise (about 0.03; log Ẑ's spread 0.15), so σ̂² is
    mostly the genealogy's neutral drift. Before ``_genealogy.drowned`` 55 % of the runs
    reported an s.e. at status 0, 5x that spread (coverage 0.997 over 2,000 runs); now at
    least 99 % carry STATUS_STDERR_UNRESOLVED (a finite s.e. kept for combine_runs where
    σ̂² is positive) and the few unflagged lie within 3 s.e. A bootstrap filter on the
    3-state HMM (T = 60, N = 100, resampling at every step; its s.e. holds: calibration.md)
    is flagged in no run: its lag-0 variance is 0.65 of the noise or more."""
    model, log_z = calibration.lattice_model()
    estimator = jaxz.twisted_smc(model, resampling="multinomial")
    keys = jax.random.split(jax.random.key(11), 300)
    estimate = jax.jit(jax.vmap(lambda key: jaxz.run(estimator, key, 100).estimate))(keys)
    stderr, status = np.asarray(estimate.log_z_stderr), np.asarray(estimate.status)
    unresolved = (status & jaxz.STATUS_STDERR_UNRESOLVED) != 0
    assert np.mean(unresolved) >= 0.99, np.mean(unresolved)
    assert np.any(unresolved & np.isfinite(stderr)) and np.all(unresolved[np.isnan(stderr)])
    kept = status == 0
    assert np.all(np.abs(np.asarray(estimate.log_z)[kept] - log_z) <= 3 * stderr[kept])
    problem = calibration.particle_filter_row("hmm", 100, "multinomial", 1.0).build()
    filtered = jax.jit(jax.vmap(problem.run))(jax.random.split(jax.random.key(12), 100))
    assert not np.any(np.asarray(filtered.status) & jaxz.STATUS_STDERR_UNRESOLVED)
    assert np.all(np.isfinite(np.asarray(filtered.log_z_stderr)))


def _grid(side, coupling, dtype=jnp.float32, seed=0):
    field = np.random.default_rng(seed).uniform(-1, 1, (side, side))
    return ising.periodic_lattice(jnp.asarray(field, dtype), coupling)


def test_twisted_smc_never_reports_a_zero_stderr_with_status_zero():
    """Fully adapted SMC-Base on a 4 × 4 periodic Ising model, resampling every step, 100
    runs of N = 64: before the noise check 40-50 % of such runs reported s.e. = 0.0 with
    status 0. Now every status-0 run has a finite, positive s.e.; every nan s.e. carries
    STATUS_LOW_ESS or STATUS_STDERR_UNRESOLVED."""
    model = _grid(4, 0.4)
    log_z = float(ising.exact_log_z(model))
    # bandwidth unknown: the lattice's wrap-around edges (12 steps) reach past the 8
    # generations N = 64 keeps, which would leave every s.e. unresolved (next test)
    sequential = ising.sequential_model(model)._replace(bandwidth=None)
    estimator = jaxz.twisted_smc(sequential, resampling="multinomial")
    keys = jax.random.split(jax.random.key(1), 100)
    estimate = jax.jit(jax.vmap(lambda key: jaxz.run(estimator, key, 64).estimate))(keys)
    stderr, status = np.asarray(estimate.log_z_stderr), np.asarray(estimate.status)
    assert np.all(np.isfinite(np.asarray(estimate.log_z)))
    assert not np.any(stderr == 0.0)
    assert np.all(np.isfinite(stderr[status == 0])) and np.all(stderr[status == 0] > 0)
    assert np.all(status[np.isnan(stderr)] & (jaxz.STATUS_LOW_ESS | jaxz.STATUS_STDERR_UNRESOLVED))
    # the flags are the estimate's, not the model's: log Ẑ itself stays unbiased (E Ẑ/Z = 1)
    ratio = np.exp(np.asarray(estimate.log_z, np.float64) - log_z)
    assert abs(ratio.mean() - 1) < 4 * ratio.std(ddof=1) / np.sqrt(ratio.size)


def test_twisted_smc_reads_the_genealogy_at_a_lag_that_reaches_the_bandwidth():
    """A 4 × 4 periodic lattice in raster order (bandwidth 12) at N = 128 keeps λ_max = 16
    generations (lags 4, 8, 16). With the bandwidth known, every run's s.e. is read at lag
    16, the one that reaches it: equal to the unknown-bandwidth estimate where lag 16 keeps
    MIN_FAMILIES families (it is chosen then too), different where it does not (a shorter
    lag, which truncates the wrap-around dependence, was chosen)."""
    sequential = ising.sequential_model(_grid(4, 0.4407))
    assert sequential.bandwidth == 12
    keys = jax.random.split(jax.random.key(5), 32)
    runs = {}
    for known in (True, False):
        estimator = jaxz.twisted_smc(sequential if known else sequential._replace(bandwidth=None),
                                     resampling="multinomial")
        runs[known] = jax.jit(jax.vmap(lambda key: jaxz.run(estimator, key, 128)))(keys)  # noqa: B023
    np.testing.assert_array_equal(runs[True].estimate.log_z, runs[False].estimate.log_z)
    log_weights, genealogy = runs[True].state.estimate_view
    families = np.asarray(jax.vmap(lambda w, lineage: 1.0 / _genealogy._family_concentration(w, lineage[:, 16]))(
        log_weights, genealogy.lineage))
    known, unknown = (np.asarray(runs[k].estimate.log_z_stderr) for k in (True, False))
    kept = families >= _genealogy.MIN_FAMILIES
    np.testing.assert_array_equal(known[kept], unknown[kept])
    shorter = ~kept & np.isfinite(known) & np.isfinite(unknown)
    assert np.sum(shorter) >= 2 and np.all(known[shorter] != unknown[shorter])


@pytest.mark.slow  # CI time: see pyproject.toml
def test_twisted_smc_leaves_the_stderr_unresolved_where_a_factor_reaches_past_the_genealogy_window():
    """SMC-Base on a 6 × 6 periodic Ising lattice in raster order: the wrap-around edges join
    spins 30 steps apart (``bandwidth``). At N = 64 the genealogy keeps λ_max = 8
    generations, so no window it reads holds that dependence (on the 8 × 8 lattice, N = 64:
    σ̂ ≈ 0.5 in every run against a spread of log Ẑ of 1.7, 37 % of 400 runs beyond 3 s.e.
    with status 0): every run reports a nan s.e. with STATUS_STDERR_UNRESOLVED and the same
    log Ẑ as with the bandwidth unknown. At N = 256 (λ_max = 32 ≥ 30) the s.e. is read at
    lag 32, the one candidate that reaches the bandwidth, also in the runs whose families
    there are fewer than MIN_FAMILIES, where the bandwidth unknown reads a shorter lag
    (on the 8 × 8 lattice at N = 1024 the shorter lags covered 0.739, lag ≥ 56 0.847)."""
    sequential = ising.sequential_model(_grid(6, 0.4407))
    assert sequential.bandwidth == 30
    keys = jax.random.split(jax.random.key(3), 16)

    def estimates(model, num_particles):
        estimator = jaxz.twisted_smc(model, resampling="multinomial")
        return jax.jit(jax.vmap(lambda key: jaxz.run(estimator, key, num_particles).estimate))(keys)

    known, unknown = estimates(sequential, 64), estimates(sequential._replace(bandwidth=None), 64)
    np.testing.assert_array_equal(known.log_z, unknown.log_z)
    assert np.all(np.isnan(known.log_z_stderr))
    assert np.all(np.asarray(known.status) & jaxz.STATUS_STDERR_UNRESOLVED)
    assert np.sum(np.isfinite(unknown.log_z_stderr)) >= 8  # what it used to report
    estimator = jaxz.twisted_smc(sequential, resampling="multinomial")
    runs = jax.jit(jax.vmap(lambda key: jaxz.run(estimator, key, 256)))(keys)
    wide, wide_unknown = runs.estimate, estimates(sequential._replace(bandwidth=None), 256)
    np.testing.assert_array_equal(wide.log_z, wide_unknown.log_z)
    log_weights, genealogy = runs.state.estimate_view
    assert np.all(np.asarray(genealogy.generation) > 32)  # lag 32 truncates: the choice matters
    families = jax.vmap(lambda w, lineage: 1.0 / _genealogy._family_concentration(w, lineage[:, 32]))(
        log_weights, genealogy.lineage)
    kept = np.asarray(families) >= _genealogy.MIN_FAMILIES  # lag 32 usable either way: the same s.e.
    np.testing.assert_array_equal(np.asarray(wide.log_z_stderr)[kept], np.asarray(wide_unknown.log_z_stderr)[kept])
    shorter = ~kept & np.isfinite(wide.log_z_stderr) & np.isfinite(wide_unknown.log_z_stderr)
    assert np.sum(shorter) >= 4 and np.all(np.asarray(wide.log_z_stderr)[shorter] != np.asarray(
        wide_unknown.log_z_stderr)[shorter])


def test_twisted_smc_leaves_the_stderr_unresolved_past_the_bandwidth_also_when_it_resamples_seldom():
    """The same 6 × 6 lattice (bandwidth 30) at N = 64 (λ_max = 8) with ESS-triggered
    resampling: its runs resample a few times, all within the genealogy's reach, so no lag
    truncates anything, yet on the critical 8 × 8 lattice such runs (SMC-Base, 3-7
    resamplings) covered 0.744 with 13 % beyond 3 s.e. and status 0, and their own σ̂, families
    and final ESS all ran against their error (the runs that missed most mass looked the most
    certain). Every run that resampled now reports a nan s.e. with STATUS_STDERR_UNRESOLVED
    and STATUS_LOW_ESS (too few particles for the model; ``combine_runs`` keeps that flag)
    and the same log Ẑ; a run that never resampled (importance sampling, no genealogy) keeps
    its delta-method s.e., with STATUS_LOW_ESS all the same (N < 8 × bandwidth)."""
    sequential = ising.sequential_model(_grid(6, 0.4407))
    keys = jax.random.split(jax.random.key(4), 64)

    def estimates(model, resample_ess=0.5):
        estimator = jaxz.twisted_smc(model, resample_ess=resample_ess, resampling="multinomial")
        return jax.jit(jax.vmap(lambda key: jaxz.run(estimator, key, 64)))(keys)

    known, unknown = estimates(sequential), estimates(sequential._replace(bandwidth=None))
    np.testing.assert_array_equal(known.estimate.log_z, unknown.estimate.log_z)
    generations = np.asarray(known.state.estimate_view[1].generation)
    resampled = generations > 0
    seldom = resampled & (generations <= _genealogy.default_lag(64))
    assert np.sum(seldom) >= 8  # the case the rule now covers: resampled, all within the window
    assert np.sum(np.isfinite(np.asarray(unknown.estimate.log_z_stderr)[seldom])) >= 8  # what it used to report
    stderr, status = np.asarray(known.estimate.log_z_stderr), np.asarray(known.estimate.status)
    assert np.all(np.isnan(stderr[resampled])) and np.all(status[resampled] & jaxz.STATUS_STDERR_UNRESOLVED)
    # too few particles for the model: flagged, and pooling them keeps the flag
    assert np.all(status[resampled] & jaxz.STATUS_LOW_ESS)
    clean = np.asarray(unknown.estimate.status) == 0  # runs that nothing else flags
    assert np.sum(clean & resampled) >= 8
    pick = lambda estimate: jax.tree.map(lambda leaf: leaf[clean], estimate)  # noqa: E731
    assert jaxz.combine_runs(pick(known.estimate)).status & jaxz.STATUS_LOW_ESS
    assert jaxz.combine_runs(pick(unknown.estimate)).status == 0
    # here every run resampled; never resampling (SIS) keeps the importance-sampling s.e., flagged
    never, never_unknown = estimates(sequential, 0.0), estimates(sequential._replace(bandwidth=None), 0.0)
    assert np.all(np.asarray(never.state.estimate_view[1].generation) == 0)
    assert np.all(np.isfinite(np.asarray(never.estimate.log_z_stderr)))
    np.testing.assert_array_equal(never.estimate.log_z_stderr, never_unknown.estimate.log_z_stderr)
    assert np.all(np.asarray(never.estimate.status) & jaxz.STATUS_LOW_ESS)
    assert not np.all(np.asarray(never_unknown.estimate.status) & jaxz.STATUS_LOW_ESS)


@pytest.mark.parametrize("bandwidth", [-1, 2.5, True, "3"])
def test_twisted_smc_rejects_a_bandwidth_that_is_not_a_count(bandwidth):
    model = ising.sequential_model(_grid(2, 0.4))._replace(bandwidth=bandwidth)
    with pytest.raises(ValueError, match="model.bandwidth must be None or an integer >= 0"):
        jaxz.twisted_smc(model)


def test_twisted_smc_flags_float32_potentials_too_large_to_resolve():
    """An Ising coupling of 1e6 in float32: log potentials near 4e6 carry a rounding error
    of about 0.5 nat each, so the weights and log Ẑ are noise: STATUS_PRECISION_LOSS
    (formerly a silent, finite answer with status 0). The same model at J = 0.4 is clean."""
    field = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (3, 3)), jnp.float32)

    @jax.jit
    def status_of(coupling):
        estimator = jaxz.twisted_smc(ising.sequential_model(ising.periodic_lattice(field, coupling)))
        return jaxz.run(estimator, jax.random.key(0), 16).estimate.status

    huge, mild = (int(status_of(jnp.float32(coupling))) for coupling in (1e6, 0.4))
    assert huge & jaxz.STATUS_PRECISION_LOSS
    assert not mild & jaxz.STATUS_PRECISION_LOSS


def test_twisted_smc_rejects_log_potentials_of_the_wrong_length():
    """log_potentials returning 3 values for num_values = 2 (formerly: the third value
    silently entered the predictive weight and the proposal could draw a value 2)."""
    good = ising.sequential_model(_grid(2, 0.4))
    longer = good._replace(log_potentials=lambda state, t: jnp.zeros(3))
    with pytest.raises(ValueError, match=r"log_potentials must return .*\(2,\).*got shape \(3,\)"):
        jaxz.twisted_smc(longer)
    with pytest.raises(ValueError, match=r"got shape \(\)"):
        jaxz.twisted_smc(good._replace(log_potentials=lambda state, t: jnp.float32(0.0)))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_student_t_factor_matches_the_t_quantile_and_is_one_without_noise(dtype):
    """The widening of the genealogy s.e.: t_ν(0.975)/z(0.975) by bisection on the
    incomplete beta function, against scipy's quantile (ν clipped to [1, 10⁶]); a σ̂² with
    no noise (no resampling: importance sampling) has ν = ∞ and factor 1."""
    from scipy import stats

    with jax.enable_x64(dtype == jnp.float64):
        nus = np.array([0.2, 1.0, 1.7, 2.0, 4.5, 12.0, 80.0, 3e3, 1e8])
        factor = np.asarray(jax.jit(weights.student_t_factor)(jnp.asarray(nus, dtype)))
        assert factor.dtype == dtype
        expected = stats.t.ppf(0.975, np.clip(nus, 1, 1e6)) / weights.Z_975
        np.testing.assert_allclose(factor, expected, rtol=5e-4 if dtype == jnp.float32 else 2e-6)
        nu = _genealogy.degrees_of_freedom(jnp.asarray([0.3, 0.3], dtype), jnp.asarray([0.0, 0.15], dtype))
        np.testing.assert_allclose(np.asarray(nu), [np.inf, 8.0], rtol=1e-5)
        assert float(weights.student_t_factor(nu)[0]) == 1.0
