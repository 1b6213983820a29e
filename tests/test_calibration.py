"""Calibration of reported standard errors: a CI-sized subset of benchmarks/calibration.py.

Each row runs R = 400 independent runs (one jitted vmap over keys) on a model with an
exact log Z and asserts ratio = rms(reported s.e.) / rms error of log Ẑ about the exact
log Z ∈ [0.75, 1.33] (issue 8; the sd of log Ẑ until the s.e. held log Ẑ's bias, 2026-11-28),
or a s.e. that is nan in every run where the estimator has no valid one (by design).

Why R = 400 makes that band a real test: the sd of R normal draws has relative standard
error 1/sqrt(2(R − 1)) = 0.035 at R = 400 (the rms of the reported s.e. over R runs adds
less: it is itself an average). log 0.75 = −0.29 and log 1.33 = +0.29 are then about 8
standard errors from a calibrated ratio of 1 — a calibrated estimator fails with
negligible probability — while an error bar 1.5x off (|log ratio| = 0.41) lies ≥ 3
standard errors outside and fails with probability > 99%. The test also checks that the
row's bootstrap interval is that narrow, so a pass cannot come from noise alone.
Unbiasedness: for the estimators whose Ẑ is unbiased, mean Ẑ/Z is within 4.5 s.e.
(spread of the runs) of 1.
"""
import importlib.util
import pathlib

import numpy as np
import pytest
from conftest import OPTIMIZED
from scipy import stats

NUM_RUNS = 400
_PATH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "calibration.py"
_SPEC = importlib.util.spec_from_file_location("jaxz_benchmarks_calibration", _PATH)
calibration = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(calibration)

# (row, whether E[Ẑ] = Z holds for it, whether its s.e. is nan in every run by design)
ROWS = [
    (calibration.particle_filter_row("hmm", 100, "multinomial", 1.0), True, False),
    # Lee & Whiteley's genealogy estimator assumes multinomial resampling: with systematic
    # resampling at every step it reported 0.32 for a spread of 0.75 here (before issue 8);
    # the estimator must now report nan by design
    (calibration.particle_filter_row("hmm", 100, "systematic", 1.0), True, True),
    (calibration.smc_row("few", "adaptive", "multinomial", 0.5), False, False),  # adaptive: O(1/N) bias
    (calibration.smc_row("few", "fixed", "systematic", 1.0), True, True),
    # the tempered-SMC genealogy s.e. in the default selection (the adaptive row above is slow)
    (calibration.smc_row("few", "fixed", "multinomial", 0.5), True, False),
    (calibration.annealing_row("ais", 5), True, False),
    # RTS's batch-means s.e. (log Ẑ is consistent, not unbiased); tests/test_rts.py's 6 runs cannot resolve it
    (calibration.rts_gaussian_row(), False, False),
    (calibration.importance_row(1.5), True, False),
]


def test_sd_ratio_sampling_error_at_400_runs_leaves_the_band_eight_standard_errors_wide():
    relative = calibration.sd_relative_stderr(NUM_RUNS)
    assert relative == pytest.approx(0.0354, abs=1e-4)
    low, high = calibration.BAND
    assert min(-np.log(low), np.log(high)) / relative > 8


def test_summarize_passes_a_calibrated_error_bar_and_fails_one_twice_too_small():
    """Synthetic runs: log Ẑ ~ N(log Z, 0.3²) with a reported s.e. of 0.3 (calibrated), or
    of 0.15 (2x too small); all-nan s.e. is "nan by design"."""
    rng = np.random.default_rng(0)
    log_z = rng.normal(1.0, 0.3, NUM_RUNS)
    status = np.zeros(NUM_RUNS, int)
    good = calibration.summarize(log_z, np.full(NUM_RUNS, 0.3), status, 1.0)
    assert good["verdict"] == "ok" and good["ratio_interval"][0] < 1.0 < good["ratio_interval"][1]
    bad = calibration.summarize(log_z, np.full(NUM_RUNS, 0.15), status, 1.0)
    assert bad["ratio"] == pytest.approx(0.5, rel=0.1) and "too small" in bad["verdict"]
    assert calibration.summarize(log_z, np.full(NUM_RUNS, np.nan), status, 1.0)["verdict"] == "nan by design"


def test_coverage_counts_zero_stderr_and_unflagged_nonfinite_runs_as_misses():
    """Coverage is the per-run promise: a calibrated error bar covers about 95 %; an s.e. of
    exactly 0, or a non-finite log Ẑ with status 0, is a miss beyond 3 s.e.; flagged runs
    are not judged."""
    rng = np.random.default_rng(1)
    log_z = rng.normal(1.0, 0.3, 4000)
    status = np.zeros(4000, int)
    good = calibration.coverage(log_z, np.full(4000, 0.3), status, 1.0)
    assert good["coverage_verdict"] == "ok" and abs(good["coverage"] - 0.95) < 0.015
    # half the error bars 0: the rms ratio can look fine, coverage cannot
    stderr = np.where(np.arange(4000) % 2 == 0, 0.0, 0.42)
    bad = calibration.coverage(log_z, stderr, status, 1.0)
    assert bad["coverage_verdict"] == "fails" and bad["beyond_3"] >= 0.5 and bad["fraction_stderr_zero"] == 0.5
    flagged = calibration.coverage(np.where(status == 0, -np.inf, 0.0), np.full(4000, 0.3), status, 1.0)
    assert flagged["beyond_3"] == 1.0
    status[::2] = 8  # flagged runs are left out of coverage, counted in fraction_flagged
    flagged_far = np.where(status == 8, 50.0, log_z)
    assert calibration.coverage(flagged_far, np.full(4000, 0.3), status, 1.0)["coverage_verdict"] == "ok"


# the nan-by-design rows are also covered by tests/test_error_bars.py: slow here (CI time)
_SLOW = {"systematic"}
PARAMS = [pytest.param(row, unbiased, nan_by_design, id=row.name,
                       marks=[pytest.mark.slow] if any(word in row.name for word in _SLOW) else [])
          for row, unbiased, nan_by_design in ROWS]


def _coverage_within_band(result) -> None:
    """The per-run promise (issue 23), read from the runs judged (unflagged, finite s.e.):
    the row's coverage is consistent with COVERAGE_BAND and its fraction beyond 3 s.e. with
    MAX_BEYOND_3, each at a one-sided binomial level of 1e-3 (400 runs resolve a coverage to
    ±0.011: a fixed band at 0.98 would fail a calibrated row at 0.975 one time in three). A
    row its estimator flags almost wholly reads "flagged by design" and must have no judged
    run beyond 3 s.e."""
    if result["coverage_verdict"].startswith("flagged by design"):
        assert result["beyond_3"] == 0.0 or np.isnan(result["beyond_3"]), result
        return
    judged = result["runs_judged"]
    assert judged >= 50, result  # else the coverage says nothing: the row must be flagged by design
    low, high = calibration.COVERAGE_BAND
    within = round(result["coverage"] * judged)
    assert stats.binom.cdf(within, judged, low) > 1e-3, (result["coverage"], judged)
    assert stats.binom.sf(within - 1, judged, high) > 1e-3, (result["coverage"], judged)
    beyond = round(result["beyond_3"] * judged)
    assert stats.binom.sf(beyond - 1, judged, calibration.MAX_BEYOND_3) > 1e-3, (result["beyond_3"], judged)


def test_coverage_check_of_the_rows_fails_an_error_bar_too_small_or_too_large():
    """_coverage_within_band on synthetic rows of 400 runs, log Ẑ ~ N(log Z, 0.3²): passes an
    s.e. of 0.3, fails 0.2 (expected coverage 0.81, 4.6 % beyond 3) and 0.6 (coverage 0.9999)."""
    rng = np.random.default_rng(2)
    log_z, status = rng.normal(1.0, 0.3, NUM_RUNS), np.zeros(NUM_RUNS, int)
    _coverage_within_band(calibration.coverage(log_z, np.full(NUM_RUNS, 0.3), status, 1.0))
    for wrong in (0.2, 0.6):
        with pytest.raises(AssertionError):
            _coverage_within_band(calibration.coverage(log_z, np.full(NUM_RUNS, wrong), status, 1.0))


@pytest.mark.parametrize("row, unbiased, nan_by_design", PARAMS)
def test_reported_stderr_within_band_of_observed_spread_over_400_runs(row, unbiased, nan_by_design):
    # the RTS row's time is its runs, which an optimized compile halves; the other rows' time is their compile
    options = OPTIMIZED if row.estimator == "rts" else None
    result = calibration.evaluate(row, NUM_RUNS, seed=1, compiler_options=options)
    assert result["runs_nonfinite_log_z"] == 0
    # a row whose s.e. turned nan in every run would otherwise skip every check of it
    assert (result["verdict"] == "nan by design") == nan_by_design, result["verdict"]
    if not nan_by_design:
        _coverage_within_band(result)
        low, high = result["ratio_interval"]
        assert np.log(high / low) < 0.35, result["ratio_interval"]  # the run count resolves the band
        # against the rms error about the exact log Z: the s.e. holds log Ẑ's bias, which the
        # sd leaves out (the HMM filter at N = 100: mean error −0.3 at a spread of 0.8)
        assert calibration.BAND[0] <= result["ratio_rmse"] <= calibration.BAND[1], (
            f"rms s.e. {result['rms_stderr']:.3f} vs sd {result['sd_log_z']:.3f}, mean error "
            f"{result['mean_error']:.3f}: {result['verdict']}"
        )
    if unbiased:
        assert abs(result["mean_z_ratio_zscore"]) < 4.5, (result["mean_z_ratio"], result["mean_z_ratio_stderr"])


def test_a_row_whose_runs_are_nearly_all_flagged_reads_flagged_by_design_unless_a_kept_run_is_far_off():
    """AIS with 5 temperatures flags 99.55 % of its runs: the 9 it keeps of 2,000 cannot read a
    coverage. "flagged by design" needs at least FLAGGED_BY_DESIGN flagged and none of the kept
    runs beyond 3 s.e.; one kept run at 5 s.e. fails the row, and 95 % flagged is judged as usual."""
    status = np.full(2000, 8)
    status[:3] = 0
    log_z = np.ones(2000)
    log_z[0] = 1.7  # 2.3 s.e.: outside 1.96, inside 3
    kept = calibration.coverage(log_z, np.full(2000, 0.3), status, 1.0)
    assert kept["coverage_verdict"].startswith("flagged by design") and kept["runs_judged"] == 3
    log_z[0] = 2.5  # 5 s.e.
    assert calibration.coverage(log_z, np.full(2000, 0.3), status, 1.0)["coverage_verdict"] == "fails"
    status[:100] = 0  # 95 % flagged: judged as usual (99 of 100 kept runs within 1.96 s.e.: over-covering)
    log_z[0] = 1.7
    assert calibration.coverage(log_z, np.full(2000, 0.3), status, 1.0)["coverage_verdict"] == "fails"
    # every run flagged (pools of runs too small for their model): refused, not nan
    every = calibration.coverage(log_z, np.full(2000, 0.3), np.full(2000, 8), 1.0)
    assert every["coverage_verdict"] == "flagged by design (0 runs judged)" and every["runs_judged"] == 0
    no_stderr = calibration.coverage(log_z, np.full(2000, np.nan), np.full(2000, 8), 1.0)
    assert no_stderr["coverage_verdict"] == "nan by design"


def test_summarize_reads_a_row_with_one_finite_stderr():
    """AIS on the 20-d shells left one run of 400 with a finite s.e.: the bootstrap of the
    ratio had no finite value and the whole benchmark stopped with an IndexError. Now
    the ratio and its interval are nan and the verdict says how many s.e.s were finite."""
    log_z = np.array([0.1, -0.2, 0.05, 0.3])
    stderr = np.array([0.2, np.nan, np.nan, np.nan])
    status = np.array([0, 8, 8, 8])
    out = calibration.summarize(log_z, stderr, status, 0.0)
    assert np.isnan(out["ratio"]) and np.all(np.isnan(out["ratio_interval"]))
    assert out["verdict"] == "1 finite s.e." and out["rms_stderr"] == pytest.approx(0.2)
