"""Plots of a run and of many runs (matplotlib, an optional dependency).

``trace(result)`` draws what a run's trace holds, one panel per field: the β schedule,
the ESS, the acceptance rate of the MCMC moves and the log Ẑ increments (and the running
log Ẑ where the estimator records one). ``runs(estimate)`` summarizes vmapped runs: the
distribution of log Ẑ with the pooled estimate (``jaxz.combine_runs``), each run's
log Ẑ with its reported standard error, and the status flags raised.

Both return a ``matplotlib.figure.Figure`` (made with ``pyplot.subplots``, so it shows
in notebooks; call ``fig.savefig(...)`` in scripts). Each panel's ``Axes`` carries a
label (``ax.get_label()``): the trace field it draws, or "log_z", "runs", "status".
"""
from __future__ import annotations

import numpy as np

from jaxz._status import STATUS_NAMES as _STATUS_NAMES
from jaxz.base import Estimate, Result
from jaxz.pooling import combine_runs

# Trace fields drawn by ``trace``, in panel order, with their axis labels.
TRACE_FIELDS = {
    "beta": "β",
    "ess": "ESS",
    "acceptance_rate": "acceptance rate",
    "log_z_increment": "log Ẑ increment",
    "log_z": "log Ẑ so far",
}
Z_95 = 1.96  # the pooled band: pooled log Ẑ ± 1.96 pooled s.e. (95% under the normal approximation)
POOLED_BAND = "pooled_band"  # the gid of that band's patch on the "log_z" and "runs" panels
# one bar per status bit, by cause (jaxz.status_names)
STATUS_NAMES = dict(sorted(_STATUS_NAMES.items()))


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError("jaxz.plot needs matplotlib: pip install matplotlib "
                          "(it comes with jaxz's 'repro' extra: pip install 'jaxz[repro]')") from error
    return plt


def trace(result: Result, run: int | tuple | None = None, *, max_runs: int = 50):
    """Draw a run's trace: one panel per field it records, against the step.

    Panels, for whichever fields the estimator's Info has (scalar per step): ``beta``
    (the schedule: fixed, adaptive or two-pass), ``ess`` (as the estimator reports it: a
    fraction of the particles for smc and the particle filter, a count for ais and
    sgais), ``acceptance_rate``, ``log_z_increment`` (log Ẑ_{t+1}/Ẑ_t, as bars for one
    run) and ``log_z`` (the running estimate of sgais and rts). The padding of an
    adaptive run is cut (``Result.valid_trace``).

    Args:
        result: what ``jaxz.run`` returned, for one run or vmapped over runs.
        run: for a vmapped Result, the run to draw (an int, or a tuple for nested
            vmaps); None overlays up to ``max_runs`` runs (thin lines, one per run).
        max_runs: how many runs to overlay when ``run`` is None.

    Returns:
        The matplotlib Figure, its Axes labelled by field name.
    """
    plt = _pyplot()
    valid = result.valid_trace(run) if run is not None or np.ndim(result.num_steps) == 0 else result.valid_trace()
    runs_drawn = valid[:max_runs] if isinstance(valid, list) else [valid]
    first = runs_drawn[0]
    names = [name for name in TRACE_FIELDS
             if hasattr(first, name) and np.ndim(getattr(first, name)) == 1]
    if not names:
        fields = list(first._fields) if hasattr(first, "_fields") else type(first).__name__
        raise ValueError(f"the trace has none of the fields jaxz.plot.trace draws {list(TRACE_FIELDS)}; "
                         f"it has {fields}")
    fig, axes = plt.subplots(len(names), 1, sharex=True, squeeze=False, figsize=(6.4, 1.9 * len(names) + 0.6))
    axes = axes[:, 0]
    overlay = len(runs_drawn) > 1
    for ax, name in zip(axes, names):
        ax.set_label(name)
        ax.set_ylabel(TRACE_FIELDS[name])
        for one in runs_drawn:
            values = np.asarray(getattr(one, name), dtype=float)
            steps = np.arange(1, values.shape[0] + 1)
            if name == "log_z_increment" and not overlay:
                ax.bar(steps, values, width=0.8, color="C0")
            else:
                ax.plot(steps, values, "-" if overlay else ".-", color="C0",
                        alpha=0.35 if overlay else 1.0, linewidth=0.8 if overlay else 1.2)
        if name == "beta":
            ax.set_ylim(-0.03, 1.03)
    axes[-1].set_xlabel("step")
    count = f"{len(runs_drawn)} runs" if overlay else ("one run" if run is None else f"run {run}")
    axes[0].set_title(f"trace ({count})")
    fig.tight_layout()
    return fig


def runs(estimate: Estimate, *, exact_log_z: float | None = None):
    """Summarize vmapped runs: log Ẑ across runs, each run with its error bar, flags.

    Three panels: "log_z", a histogram of the runs' log Ẑ with the pooled estimate of
    ``jaxz.combine_runs`` (the log of the mean Ẑ) and its band ± 1.96 pooled standard
    errors (from the spread; the recommended error bar), the exact value when given, and a
    legend (below the panel, off the data) comparing the observed sd of log Ẑ with the
    root-mean-square reported s.e. (a calibrated estimator has them close); "runs", each
    run's log Ẑ ± its reported s.e. with the same pooled band, flagged runs in red;
    "status", how many runs raised each status flag.

    Args:
        estimate: an ``Estimate`` whose fields have one leading run axis (from
            ``jax.vmap`` over keys).
        exact_log_z: the true log Z, drawn as a line when known.

    Returns:
        The matplotlib Figure, its Axes labelled "log_z", "runs" and "status".
    """
    plt = _pyplot()
    log_z = np.asarray(estimate.log_z, dtype=float)
    if log_z.ndim != 1:
        raise ValueError(f"estimate must have one leading run axis (vmap over keys), got log_z of shape {log_z.shape}")
    stderr = np.asarray(estimate.log_z_stderr, dtype=float)
    status = np.asarray(estimate.status, dtype=np.int64)
    pooled = combine_runs(estimate)
    pooled_log_z, pooled_stderr = float(pooled.log_z), float(pooled.log_z_stderr)
    finite = np.isfinite(log_z)

    fig, (ax_hist, ax_runs, ax_status) = plt.subplots(1, 3, figsize=(13.0, 3.6),
                                                      gridspec_kw={"width_ratios": [3, 3, 2]})
    ax_hist.set_label("log_z")
    ax_runs.set_label("runs")
    ax_status.set_label("status")

    sd = float(np.std(log_z[finite], ddof=1)) if finite.sum() > 1 else float("nan")
    reported = stderr[finite & np.isfinite(stderr)]
    rms = float(np.sqrt(np.mean(reported**2))) if reported.size else float("nan")
    if finite.any():
        ax_hist.hist(log_z[finite], bins=min(30, max(5, int(np.sqrt(finite.sum())))), color="C0", alpha=0.6,
                     label=f"{int(finite.sum())} runs: sd {sd:.3g}, rms reported s.e. {rms:.3g}")
    half_width = Z_95 * pooled_stderr
    ax_hist.axvline(pooled_log_z, color="C1", label=f"pooled log Ẑ {pooled_log_z:.4g} (s.e. {pooled_stderr:.2g})")
    if np.isfinite(pooled_stderr):  # the pooled estimate's 95% band
        ax_hist.axvspan(pooled_log_z - half_width, pooled_log_z + half_width, color="C1", alpha=0.3,
                        label=f"pooled ± {Z_95} s.e.", gid=POOLED_BAND)  # over the bars, which show through
    if exact_log_z is not None:
        ax_hist.axvline(float(exact_log_z), color="k", linestyle="--", label=f"exact {float(exact_log_z):.4g}")
    ax_hist.set_xlabel("log Ẑ")
    ax_hist.set_ylabel("runs")
    # below the panel, not on the histogram it describes
    ax_hist.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.22), frameon=False)

    index = np.arange(log_z.shape[0])
    flagged = status != 0
    for mask, color, label in ((~flagged, "C0", "status ok"), (flagged, "C3", "flagged")):
        if mask.any():
            ax_runs.errorbar(index[mask], log_z[mask], yerr=np.where(np.isfinite(stderr[mask]), stderr[mask], 0.0),
                             fmt="o", markersize=3, color=color, linewidth=0.8, label=label)
    ax_runs.axhline(pooled_log_z, color="C1", linewidth=0.8, label=f"pooled ± {Z_95} s.e.")
    if np.isfinite(pooled_stderr):  # the same band as on the histogram
        ax_runs.axhspan(pooled_log_z - half_width, pooled_log_z + half_width, color="C1", alpha=0.25, zorder=0,
                        gid=POOLED_BAND)
    if exact_log_z is not None:
        ax_runs.axhline(float(exact_log_z), color="k", linestyle="--")
    ax_runs.set_xlabel("run")
    ax_runs.set_ylabel("log Ẑ ± reported s.e.")
    ax_runs.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.22), frameon=False, ncol=3)

    names = ["ok"] + list(STATUS_NAMES.values())
    counts = [int(np.sum(status == 0))] + [int(np.sum(status & bit != 0)) for bit in STATUS_NAMES]
    ax_status.barh(names, counts, color=["C2"] + ["C3"] * len(STATUS_NAMES))
    ax_status.invert_yaxis()
    ax_status.set_xlabel("runs")
    ax_status.set_title("status flags")
    fig.tight_layout()
    return fig
