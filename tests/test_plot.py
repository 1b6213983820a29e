"""jaxz.plot: figures with the expected panels, drawing exactly the valid trace."""
import sys
from typing import NamedTuple

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import jaxz  # noqa: E402
from jaxz import plot  # noqa: E402
from jaxz.estimators.smc import SMCInfo  # noqa: E402

MAX_STEPS = 10


def _smc_like_result(num_steps, seed=0):
    """A Result as jaxz.run returns it for adaptive SMC: the trace padded with zeros
    past ``num_steps`` (leading run axis when ``num_steps`` is an array)."""
    rng = np.random.default_rng(seed)
    num_steps = np.asarray(num_steps, np.int32)
    shape = num_steps.shape + (MAX_STEPS,)
    valid = np.arange(MAX_STEPS) < num_steps[..., None]
    beta = np.where(valid, np.minimum(1.0, (np.arange(MAX_STEPS) + 1) / num_steps[..., None]), 0.0)
    fields = [beta] + [np.where(valid, rng.uniform(0.3, 1.0, shape), 0.0) for _ in range(3)]
    trace = SMCInfo(beta=fields[0], ess=fields[1], resampled=valid, acceptance_rate=fields[2],
                    log_z_increment=fields[3], kernel_parameters=(), num_mcmc_steps=valid.astype(np.int32),
                    probe_transitions=np.zeros(shape, np.int32), log_density_evaluations=np.zeros(shape),
                    gradient_evaluations=np.zeros(shape))
    estimate = jaxz.Estimate(*(np.zeros(num_steps.shape) for _ in range(3)), np.zeros(num_steps.shape, np.int32))
    return jaxz.Result(estimate, None, trace, num_steps)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _axes(fig):
    return {ax.get_label(): ax for ax in fig.axes}


def test_trace_draws_one_panel_per_recorded_field_with_the_padding_cut():
    result = _smc_like_result(7)
    fig = plot.trace(result)
    axes = _axes(fig)
    assert list(axes) == ["beta", "ess", "acceptance_rate", "log_z_increment"]
    for name in ("beta", "ess", "acceptance_rate"):
        (line,) = axes[name].lines
        np.testing.assert_array_equal(line.get_xdata(), np.arange(1, 8))
        np.testing.assert_array_equal(line.get_ydata(), getattr(result.trace, name)[:7])
    heights = [bar.get_height() for bar in axes["log_z_increment"].patches]
    np.testing.assert_allclose(heights, result.trace.log_z_increment[:7])


def test_trace_of_vmapped_runs_overlays_each_run_at_its_own_length_or_draws_one():
    result = _smc_like_result([4, 7, 10])
    axes = _axes(plot.trace(result))
    assert [len(line.get_ydata()) for line in axes["beta"].lines] == [4, 7, 10]
    assert [line.get_ydata()[-1] for line in axes["beta"].lines] == [1.0, 1.0, 1.0]
    axes = _axes(plot.trace(result, run=1))
    (line,) = axes["ess"].lines
    np.testing.assert_array_equal(line.get_ydata(), result.trace.ess[1, :7])


def test_trace_without_drawable_fields_names_what_it_has():
    class Odd(NamedTuple):
        gamma: np.ndarray

    result = jaxz.Result(None, None, Odd(np.zeros((3, 4))), np.int32(3))
    with pytest.raises(ValueError, match="none of the fields.*gamma"):
        plot.trace(result)


def test_runs_summary_shows_the_pooled_estimate_error_bars_and_status_counts():
    rng = np.random.default_rng(1)
    log_z = rng.normal(-3.0, 0.2, 40)
    status = np.zeros(40, np.int32)
    status[:3] = jaxz.STATUS_FEW_PARTICLES
    status[3] = jaxz.STATUS_MAX_STEPS | jaxz.STATUS_STUCK
    estimate = jaxz.Estimate(log_z, np.full(40, 0.2), np.ones(40), status)
    fig = plot.runs(estimate, exact_log_z=-3.0)
    axes = _axes(fig)
    assert list(axes) == ["log_z", "runs", "status"]
    # The pooled line sits at the log of the mean Ẑ, computed here directly.
    pooled = np.log(np.mean(np.exp(log_z)))
    lines = [line.get_xdata()[0] for line in axes["log_z"].lines]
    np.testing.assert_allclose(lines, [pooled, -3.0], rtol=1e-6)
    counts = {tick.get_text(): bar.get_width()
              for tick, bar in zip(axes["status"].get_yticklabels(), axes["status"].patches)}
    assert counts == {"ok": 36, "NONFINITE": 0, "DEGENERATE": 0, "MAX_STEPS": 1, "FEW_PARTICLES": 3,
                      "PRECISION_LOSS": 0, "STDERR_UNRESOLVED": 0, "HEAVY_TAIL": 0, "RUNS_DISAGREE": 0, "STUCK": 1,
                      "FEW_CHAINS": 0, "COLLAPSED": 0, "PLATEAU": 0}
    # 36 ok runs and 4 flagged ones, each with its error bar.
    points = [len(container.lines[0].get_ydata()) for container in axes["runs"].containers]
    assert points == [36, 4]


def test_runs_summary_draws_the_pooled_estimate_with_a_95_percent_band_and_keeps_legends_off_the_data():
    rng = np.random.default_rng(2)
    log_z = rng.normal(-3.0, 0.3, 50)
    estimate = jaxz.Estimate(log_z, np.full(50, 0.3), np.ones(50), np.zeros(50, np.int32))
    fig = plot.runs(estimate)
    axes = _axes(fig)
    pooled = jaxz.combine_runs(estimate)
    expected = float(pooled.log_z) + np.array([-1.0, 1.0]) * plot.Z_95 * float(pooled.log_z_stderr)
    assert float(pooled.log_z_stderr) > 0
    for name, coordinate in (("log_z", 0), ("runs", 1)):
        (band,) = [patch for patch in axes[name].patches if patch.get_gid() == plot.POOLED_BAND]
        # the band's corners in data coordinates (Rectangle or Polygon, whichever matplotlib makes)
        corners = band.get_patch_transform().transform(band.get_path().vertices)[:, coordinate]
        np.testing.assert_allclose([corners.min(), corners.max()], expected, rtol=1e-6)
    fig.canvas.draw()
    for name in ("log_z", "runs"):  # each legend lies below its panel, not on the histogram or the runs
        legend = axes[name].get_legend().get_window_extent()
        assert legend.y1 <= axes[name].get_window_extent().y0


def test_runs_summary_needs_one_run_axis():
    estimate = jaxz.Estimate(np.float32(0.0), np.float32(0.1), np.float32(1.0), np.int32(0))
    with pytest.raises(ValueError, match="leading run axis"):
        plot.runs(estimate)


def test_plot_without_matplotlib_raises_an_import_error_saying_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        plot.trace(_smc_like_result(3))
