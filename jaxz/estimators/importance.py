"""Importance sampling of a normalizing constant, and sampling-importance-resampling.

With draws x_i ~ q (normalized) and weights w_i = f(x_i) / q(x_i),

    Ẑ = (1/n) Σ_i w_i,   E[Ẑ] = ∫ f = Z,

so log Ẑ = log-mean-exp of the log-weights (lecture: "IS with unnormalised
distributions"). Its delta-method standard error is sqrt(Var(w) / (n w̄²)), and
ESS = (Σ w)² / Σ w² measures how far q is from f/Z. All draws are made in ``init``:
the estimator has no steps (``num_steps = 0``) and its state is done at once.
SIR (``sir``) resamples the weighted draws into approximate draws of f/Z.
"""
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxz import _checks
from jaxz import resampling as _resampling
from jaxz import weights as _weights
from jaxz.base import STATUS_FEW_PARTICLES, Estimate, Estimator, freeze_when_done
from jaxz.estimators import _particles, _weight_checks
from jaxz.types import Array, ArrayTree, PRNGKey


class ImportanceState(NamedTuple):
    samples: ArrayTree  # leading axis = draws
    log_weights: Array  # (n,) log f(x_i) − log q(x_i); nan/+inf sanitized to −inf
    ess: Array  # Kong's ESS of the weights, in [0, n]
    done: Array
    status: Array


class ImportanceInfo(NamedTuple):
    ess: Array


def importance(log_target_fn: Callable, sample_proposal: Callable, log_proposal_fn: Callable) -> Estimator:
    """Importance sampling estimator of Z = ∫ f.

    log_target_fn(x) -> log f(x), unnormalized target, one particle.
    sample_proposal(rng_key) -> x, one exact draw of the proposal q.
    log_proposal_fn(x) -> log q(x), NORMALIZED proposal density.
    ``init(rng_key, num_samples)`` draws everything; ``finalize`` gives log Ẑ with a
    delta-method standard error whose second moment uses the weights' fitted Pareto tail
    (``jaxz.estimators._weight_checks.importance_stderr``); ``cost`` counts the draws. Status
    (``_weight_checks.low_ess_status``): STATUS_FEW_PARTICLES when the weights' ESS is
    below 2, STATUS_HEAVY_TAIL when their Pareto k̂ exceeds
    ``jaxz.weights.pareto_threshold(n)`` or a heavy tail cannot be ruled out; a single
    draw carries STATUS_FEW_PARTICLES (its s.e. is nan); STATUS_PRECISION_LOSS when the
    log densities are so large (float32 near 1e6) that their difference is rounding noise.
    """
    for name, fn in [("log_target_fn", log_target_fn), ("sample_proposal", sample_proposal),
                     ("log_proposal_fn", log_proposal_fn)]:
        if not callable(fn):
            raise ValueError(f"{name} must be callable, got {type(fn).__name__}")

    def init(rng_key: PRNGKey, num_samples: int) -> ImportanceState:
        num_samples = _particles.check_count("num_samples", num_samples)
        samples = jax.vmap(sample_proposal)(jax.random.split(rng_key, num_samples))
        one = _particles.first_particle(samples)
        _particles.check_scalar_function("log_target_fn", log_target_fn, one)
        _particles.check_scalar_function("log_proposal_fn", log_proposal_fn, one)
        log_target = jax.vmap(log_target_fn)(samples)
        log_proposal = jax.vmap(log_proposal_fn)(samples)
        # A zero of f is a zero weight even where q is also zero (−inf − −inf would be nan).
        log_weights = jnp.where(jnp.isneginf(log_target), -jnp.inf, log_target - log_proposal)
        log_weights, status = _weights.sanitize(log_weights)
        # float32 densities near 1e7: their difference is rounding noise (as in ais / smc)
        status = status | _particles.precision_status(log_target, log_proposal, log_weights=log_weights)
        return ImportanceState(samples, log_weights, _weights.ess(log_weights), jnp.bool_(True), status)

    @freeze_when_done
    def step(rng_key, state: ImportanceState):  # never runs: the state is done at init
        return state, ImportanceInfo(state.ess)

    def finalize(state: ImportanceState) -> Estimate:
        log_z = _weights.log_mean_exp(state.log_weights)
        stderr = _weight_checks.importance_stderr(state.log_weights)
        stderr = jnp.where(jnp.isneginf(log_z), jnp.inf, stderr)
        cost = jnp.asarray(state.log_weights.shape[0], state.log_weights.dtype)
        status = _weight_checks.low_ess_status(state.log_weights, state.status)
        status = _one_particle_status(state.log_weights, status)
        return _particles.make_estimate(log_z, stderr, cost, status)

    return Estimator(init, step, finalize, 0)


def _one_particle_status(log_weights, status):
    """STATUS_FEW_PARTICLES for a single draw: its ESS is 1 (below 2) and its s.e. is nan
    (one weight says nothing about the spread), so the estimate carries the flag."""
    if log_weights.shape[-1] == 1:
        return (status | STATUS_FEW_PARTICLES).astype(jnp.int32)
    return status


def sir(rng_key: PRNGKey, state: ImportanceState, num_draws: int | None = None,
        resampling: Callable | str = _resampling.multinomial) -> ArrayTree:
    """Sampling-importance-resampling: resample the weighted draws of ``state`` into
    ``num_draws`` (default: n) approximate draws of f/Z (consistent as n → ∞).
    ``resampling``: a function of ``jaxz.resampling`` or its name, as in the estimators.

    Raises ValueError for a ``num_draws`` that is not an integer >= 1, an unknown scheme,
    and a state whose weights are all zero (log weight −inf: there is nothing to resample)
    or hold a nan or +inf (a state not made by ``importance``, which sanitizes them); the
    weights are checked when concrete, i.e. outside ``jit``."""
    if num_draws is not None:
        num_draws = _checks.integer("num_draws", num_draws, what="draws to resample")
    resampling, _ = _particles.resampler(resampling)
    _resampling.check_log_weights(state.log_weights, name="state.log_weights")
    ancestors = resampling(rng_key, state.log_weights, num_draws)
    return _particles.take(state.samples, ancestors)


__all__ = ["ImportanceState", "ImportanceInfo", "importance", "sir"]
