"""Annealing schedules 0 = β_0 < β_1 < ... < β_K = 1, and the adaptive step.

Fixed schedules are plain arrays; ``validate`` checks one. ``next_temperature``
chooses the next β adaptively by bisection inside ``lax.while_loop``.
"""
import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks
from jaxz import weights as _weights
from jaxz._status import STATUS_FEW_PARTICLES, STATUS_NONFINITE, STATUS_OK
from jaxz.types import Array


def validate(betas, name: str = "betas"):
    """Check a schedule is increasing from 0 to 1; return it as a numpy array.

    A traced schedule (built inside ``jit`` / ``vmap``, e.g. to sweep over schedules)
    can only be checked for its shape; it is returned as it is.
    """
    if isinstance(betas, jax.core.Tracer):
        if betas.ndim != 1 or betas.shape[0] < 2:
            raise ValueError(f"{name} must be a 1-D schedule with at least 2 entries, got shape {betas.shape}")
        return betas
    betas = np.asarray(betas)
    if betas.ndim != 1 or betas.shape[0] < 2:
        raise ValueError(f"{name} must be a 1-D schedule with at least 2 entries, got shape {betas.shape}")
    if not np.all(np.isfinite(betas)):
        raise ValueError(f"{name} must be finite")
    if betas[0] != 0.0 or betas[-1] != 1.0:
        raise ValueError(f"{name} must start at 0 and end at 1, got {betas[0]} and {betas[-1]}")
    if np.any(np.diff(betas) <= 0):
        raise ValueError(f"{name} must be strictly increasing from 0 to 1")
    return betas


def linear(num_temperatures: int) -> np.ndarray:
    """``num_temperatures`` equally spaced values from 0 to 1."""
    _check_count(num_temperatures)
    return np.linspace(0.0, 1.0, num_temperatures)


def geometric(num_temperatures: int, beta_min: float = 1e-4) -> np.ndarray:
    """0, then ``num_temperatures - 1`` geometrically spaced values from ``beta_min`` to 1
    (so at least 3: 0, ``beta_min`` and 1)."""
    _check_count(num_temperatures, minimum=3)
    if not 0.0 < beta_min < 1.0:
        raise ValueError(f"beta_min must be in (0, 1), got {beta_min}")
    return np.concatenate([[0.0], np.geomspace(beta_min, 1.0, num_temperatures - 1)])


def sigmoidal(num_temperatures: int, delta: float = 4.0) -> np.ndarray:
    """The sigmoidal schedule of Grosse, Maddison & Salakhutdinov (2013):
    β̃_t = σ(δ (2t/T − 1)), rescaled so that β_0 = 0 and β_T = 1."""
    _check_count(num_temperatures)
    if delta <= 0:
        raise ValueError(f"delta must be > 0, got {delta}")
    t = np.linspace(-delta, delta, num_temperatures)
    raw = 1.0 / (1.0 + np.exp(-t))
    return (raw - raw[0]) / (raw[-1] - raw[0])


def salakhutdinov_murray() -> np.ndarray:
    """The piecewise-linear schedule of Salakhutdinov & Murray (2008):
    steps of 1e-3 on [0, 0.5], 1e-4 on [0.5, 0.9], 1e-5 on [0.9, 1] (14,501 values)."""
    return np.concatenate(
        [
            np.linspace(0.0, 0.5, 501)[:-1],
            np.linspace(0.5, 0.9, 4001)[:-1],
            np.linspace(0.9, 1.0, 10001),
        ]
    )


def _check_count(num_temperatures: int, minimum: int = 2) -> None:
    _checks.integer("num_temperatures", num_temperatures, minimum, "the length of the schedule, ends included")


# next_temperature's bisection: the smallest step, the relative precision of the bracket
# on the log step, and the iteration cap (its defaults; read by bisection_iterations).
TOLERANCE = 1e-12
RELATIVE_TOLERANCE = 1e-3
MAX_ITERATIONS = 60


def next_temperature(
    log_weights: Array,
    log_increment_fn: Callable[[Array], Array],
    beta: Array,
    target: float,
    *,
    conditional: bool = True,
    mask: Array | None = None,
    tolerance: float = TOLERANCE,
    relative_tolerance: float = RELATIVE_TOLERANCE,
    max_iterations: int = MAX_ITERATIONS,
    return_status: bool = False,
):
    """The next inverse temperature β' ∈ (β, 1] whose reweighting keeps ESS at ``target``.

    ``log_increment_fn(beta_new)`` returns the per-particle log incremental weights
    log f_{β'}(x_i) − log f_β(x_i). With ``conditional=True`` the criterion is the
    conditional ESS fraction (``target`` in (0, 1]); otherwise it is the plain ESS of
    the reweighted particles, as a count (``target`` in (0, n]). If even β' = 1 keeps
    the criterion above ``target``, the whole remaining step is taken. The step β' − β is
    bisected on a log scale inside a ``lax.while_loop``, from ``tolerance`` (or the dtype's
    resolution at β) to 1 − β, until the bracket is narrower than a factor
    1 + ``relative_tolerance``.

    With ``return_status=True`` returns ``(beta_new, status)``: STATUS_NONFINITE when an
    increment at β' was nan (zero-weighted), STATUS_FEW_PARTICLES when even the smallest
    step (``tolerance``) drops the criterion below ``target`` — the particles carry no
    usable information about the next temperature.
    """
    if not isinstance(beta, jax.core.Tracer) and not np.all((np.asarray(beta) >= 0.0) & (np.asarray(beta) <= 1.0)):
        raise ValueError(f"beta must be in [0, 1] (the current inverse temperature), got {beta}")
    beta = jnp.asarray(beta)
    num_slots = jnp.shape(log_weights)[-1] if jnp.ndim(log_weights) else 0
    if num_slots == 0:
        raise ValueError(f"log_weights must have at least one entry, got shape {jnp.shape(log_weights)}")
    if not isinstance(target, jax.core.Tracer):
        upper = 1.0 if conditional else float(num_slots)
        if not 0.0 < float(target) <= upper:
            kind = "a conditional ESS fraction" if conditional else "an ESS count"
            raise ValueError(f"target must be in (0, {upper:g}] ({kind}), got {target}")

    def criterion(beta_new):
        log_increments, _ = _weights.sanitize(log_increment_fn(beta_new))
        if conditional:
            return _weights.conditional_ess(log_weights, log_increments, mask)
        return _weights.ess(log_weights + log_increments, mask)

    one = jnp.ones_like(beta)
    dtype = jnp.result_type(beta, float)
    remaining = one - beta
    # The step Δ = β' − β is bisected on a log scale, between the smallest step that
    # still changes β in the working dtype and the whole remaining step, to a relative
    # precision of ``relative_tolerance``: a posterior 10⁸ times narrower than its base
    # needs a first step near 10⁻⁹, which an absolute bracket could not resolve.
    smallest = jnp.maximum(jnp.asarray(tolerance, dtype), 8 * jnp.finfo(dtype).eps * jnp.abs(beta))
    smallest = jnp.minimum(smallest, remaining)
    tiny = jnp.finfo(dtype).tiny

    def cond(carry):
        low, high, i = carry
        return (high - low > jnp.log1p(relative_tolerance)) & (i < max_iterations)

    def body(carry):
        low, high, i = carry
        middle = 0.5 * (low + high)
        above = criterion(beta + jnp.exp(middle)) >= target
        return jnp.where(above, middle, low), jnp.where(above, high, middle), i + 1

    log_low = jnp.log(jnp.maximum(smallest, tiny))
    log_high = jnp.log(jnp.maximum(remaining, tiny))
    log_step, _, _ = jax.lax.while_loop(cond, body, (log_low, log_high, jnp.int32(0)))
    # Always move forward by at least the smallest step, so the loop makes progress.
    proposal = jnp.minimum(beta + jnp.maximum(jnp.exp(log_step), smallest), one)
    beta_new = jnp.where(criterion(one) >= target, one, proposal)
    if not return_status:
        return beta_new
    increments = log_increment_fn(beta_new)
    status = jnp.where(jnp.any(jnp.isnan(increments)), STATUS_NONFINITE, STATUS_OK)
    status = status | jnp.where(criterion(beta_new) < target, STATUS_FEW_PARTICLES, STATUS_OK)
    return beta_new, status.astype(jnp.int32)


def bisection_iterations(beta: Array, dtype, *, tolerance: float = TOLERANCE,
                         relative_tolerance: float = RELATIVE_TOLERANCE, max_iterations: int = MAX_ITERATIONS):
    """Iterations ``next_temperature``'s bisection takes from β: each halves a bracket of
    log step sizes, whichever half is kept, so the count depends on β alone:
    ⌈log₂(width / log(1 + relative_tolerance))⌉ for the width log(1 − β) − log(smallest
    step), capped at ``max_iterations``. Each iteration evaluates the densities once."""
    finfo = jnp.finfo(dtype)
    remaining = 1.0 - beta
    smallest = jnp.minimum(jnp.maximum(tolerance, 8 * finfo.eps * jnp.abs(beta)), remaining)
    width = jnp.log(jnp.maximum(remaining, finfo.tiny)) - jnp.log(jnp.maximum(smallest, finfo.tiny))
    resolution = math.log1p(relative_tolerance)
    iterations = jnp.ceil(jnp.log2(jnp.maximum(width, resolution) / resolution))
    return jnp.minimum(iterations, max_iterations)


__all__ = ["validate", "linear", "geometric", "sigmoidal", "salakhutdinov_murray", "next_temperature",
           "bisection_iterations"]
