"""A tqdm progress bar for ``jaxz.run(..., progress=True)``, fed from inside ``jit``.

The protocol: after each step the bar shows whichever of these the estimator reports,
read by name (an estimator opts in by naming its fields so; nothing else is needed):

    beta             ``Info.beta``, else ``State.beta``          the current inverse temperature
    ess              ``Info.ess``                                as the estimator reports it
                                                                 (a fraction for smc, a count for sgais)
    acceptance_rate  ``Info.acceptance_rate``                    of the step's MCMC moves
    log_z            ``State.log_z``, else ``Info.log_z``, else  log Ẑ so far
                     ``estimator.finalize(state).log_z``

Only fields that are scalars per run are shown. The values reach the host through one
``jax.debug.callback`` per step, wrapped in a ``jax.custom_batching.custom_vmap``
whose batching rule hands the callback the whole batch at once: under ``vmap`` (any
number of nested levels) there is one callback per step and one bar, not one per run
(a plain ``debug.callback`` would be unrolled into one host call per run). The bar then
shows how many runs have finished and aggregates over those still going: the smallest
β and ESS (the laggard), the mean acceptance rate and log Ẑ. A bar opens when a run starts (step
0) and closes when every run has finished.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

FIELDS = ("beta", "ess", "acceptance_rate", "log_z")
_LABELS = {"beta": "β", "ess": "ess", "acceptance_rate": "acc", "log_z": "log Ẑ"}
_AGGREGATE = {"beta": np.min, "ess": np.min, "acceptance_rate": np.mean, "log_z": np.mean}


def tqdm_class():
    """tqdm's bar class, or None (with a warning) when tqdm is not installed."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        warnings.warn("progress=True needs tqdm (pip install tqdm, or the 'repro' extra); running without a bar",
                      stacklevel=3)
        return None
    return tqdm


def fields(estimator, new_state, info) -> dict[str, Any]:
    """The protocol's fields that this estimator reports, as per-run scalars (at trace time)."""
    found = {}
    for name in FIELDS:
        if name == "log_z":
            value = getattr(new_state, "log_z", getattr(info, "log_z", None))
            if value is None:
                value = estimator.finalize(new_state).log_z
        elif name == "beta":
            value = getattr(info, "beta", getattr(new_state, "beta", None))
        else:
            value = getattr(info, name, None)
        if value is not None and jnp.ndim(value) == 0 and jnp.issubdtype(jnp.result_type(value), jnp.number):
            found[name] = jax.lax.stop_gradient(jnp.asarray(value, jnp.float32))
    return found


class Bar:
    """Host side: one tqdm bar per execution of the traced loop.

    ``total`` is the static number of steps (None for an adaptive loop, which shows a
    count and its cap instead). Called with arrays of any batch shape (one entry per run).
    """

    def __init__(self, tqdm, total: int | None, cap: int | None, desc: str):
        self._tqdm = tqdm
        self._total = total
        self._cap = cap
        self._desc = desc
        self.bar = None

    def __call__(self, step, active, finished, values: dict) -> None:
        step = np.ravel(np.asarray(step))
        active = np.ravel(np.asarray(active))
        finished = np.ravel(np.asarray(finished))
        num_runs = step.size
        if not active.any():  # a batched loop's idle lanes only (cannot happen in lockstep, kept safe)
            return
        current = int(step[active].max()) + 1  # active runs move in lockstep: they share the step
        if current == 1 or self.bar is None:  # a new execution starts: drop a stale bar
            self.close()
            desc = self._desc if self._cap is None else f"{self._desc} (cap {self._cap})"
            self.bar = self._tqdm(total=self._total, desc=desc, unit="step", leave=True)
        shown = []
        if num_runs > 1:  # runs finished so far, then the aggregates over the runs still going
            shown.append(f"done={int(finished.sum())}/{num_runs}")
        for name, value in values.items():
            value = np.ravel(np.asarray(value))[active]
            shown.append(f"{_LABELS[name]}={float(_AGGREGATE[name](value)):.4g}")
        self.bar.set_postfix_str(", ".join(shown), refresh=False)
        self.bar.update(current - self.bar.n)
        if finished.all():
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def reporter(bar: Bar) -> Callable:
    """``report(step, active, finished, values)`` to call inside the traced loop body."""

    @custom_vmap
    def report(step, active, finished, values):
        jax.debug.callback(bar, step, active, finished, values)
        return step

    @report.def_vmap
    def report_batched(axis_size, in_batched, step, active, finished, values):
        # Broadcast what is not batched and report the whole batch in one call: an outer
        # vmap batches this rule in turn, adding its axis in front (arrays of any rank).
        def full(leaf, batched):
            return leaf if batched else jnp.broadcast_to(leaf, (axis_size,) + jnp.shape(leaf))

        args = jax.tree.map(full, (step, active, finished, values), tuple(in_batched))
        return report(*args), True

    return report
