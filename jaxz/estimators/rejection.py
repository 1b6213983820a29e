"""Rejection sampling from an envelope, with an unbiased estimate of Z.

With an envelope c·q(x) ≥ f(x), where q may be unnormalized with known normalizer
Z_q and ``sample_proposal`` draws from q/Z_q: draw x ~ q/Z_q, u ~ U(0, 1), accept when
u < f(x) / (c q(x)). Accepted draws are exact draws of f/Z, and

    P(accept) = ∫ f(x)/(c q(x)) · q(x)/Z_q dx = Z / (c Z_q),

so Ẑ = (accepted / proposed) · c · Z_q is unbiased (lecture: "Rejection sampling",
unnormalised case). The acceptance count is binomial, so the standard error of
log Ẑ is sqrt((1 − p̂) / (n p̂)) by the delta method.

Envelope violations. A draw with f(x) > c q(x) proves the envelope wrong; it cannot
be detected at construction (f and q are arbitrary functions), so it is detected
where it happens: such a draw is accepted (probability min(1, f/cq)), counted in
``state.num_violations``, and the estimate carries STATUS_NONFINITE, the flag for
"a density broke the estimator's assumptions": both the draws and Ẑ are then biased.
"""
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxz import weights as _weights
from jaxz.base import STATUS_NONFINITE, STATUS_OK, Estimate, Estimator, freeze_when_done
from jaxz.estimators import _particles
from jaxz.types import Array, ArrayTree, PRNGKey


class RejectionState(NamedTuple):
    samples: ArrayTree  # all proposals, leading axis = proposals
    accepted: Array  # (n,) bool: the accepted ones are exact draws of f/Z
    log_acceptance: Array  # (n,) log min(1, f/(c q)); −inf for a zero (or nan) of f
    num_violations: Array  # draws with f > c q
    done: Array
    status: Array


class RejectionInfo(NamedTuple):
    acceptance_rate: Array


def rejection(log_target_fn: Callable, sample_proposal: Callable, log_proposal_fn: Callable,
              log_envelope_scale, *, log_z_proposal=0.0) -> Estimator:
    """Rejection sampler and estimator of Z = ∫ f.

    log_target_fn(x) -> log f(x), unnormalized target, one particle.
    sample_proposal(rng_key) -> x, one draw of q/Z_q.
    log_proposal_fn(x) -> log q(x) (unnormalized if ``log_z_proposal`` ≠ 0).
    log_envelope_scale: log c, with c·q ≥ f everywhere.
    log_z_proposal: log Z_q (0 for a normalized q).
    ``init(rng_key, num_proposals)``; the exact draws are ``state.samples[state.accepted]``
    (outside ``jit``: their number is random).
    """
    for name, fn in [("log_target_fn", log_target_fn), ("sample_proposal", sample_proposal),
                     ("log_proposal_fn", log_proposal_fn)]:
        if not callable(fn):
            raise ValueError(f"{name} must be callable, got {type(fn).__name__}")
    for name, value in [("log_envelope_scale", log_envelope_scale), ("log_z_proposal", log_z_proposal)]:
        if jnp.ndim(value) != 0 or not jnp.isfinite(value):
            raise ValueError(f"{name} must be a finite scalar (a log), got {value}")

    def init(rng_key: PRNGKey, num_proposals: int) -> RejectionState:
        num_proposals = _particles.check_count("num_proposals", num_proposals)
        key_propose, key_accept = jax.random.split(rng_key)
        samples = jax.vmap(sample_proposal)(jax.random.split(key_propose, num_proposals))
        # a (1,)-shaped log density would broadcast against the (n,) uniforms to (n, n)
        one = _particles.first_particle(samples)
        _particles.check_scalar_function("log_target_fn", log_target_fn, one)
        _particles.check_scalar_function("log_proposal_fn", log_proposal_fn, one)
        log_target = jax.vmap(log_target_fn)(samples)
        log_envelope = jax.vmap(log_proposal_fn)(samples) + log_envelope_scale
        log_ratio = jnp.where(jnp.isneginf(log_target), -jnp.inf, log_target - log_envelope)
        log_ratio, status = _weights.sanitize(log_ratio)
        violated = log_ratio > 0.0
        log_acceptance = jnp.minimum(log_ratio, 0.0)
        uniforms = jax.random.uniform(key_accept, (num_proposals,), dtype=log_acceptance.dtype)
        accepted = jnp.log(uniforms) < log_acceptance
        num_violations = jnp.sum(violated).astype(jnp.int32)
        status = status | jnp.where(num_violations > 0, STATUS_NONFINITE, STATUS_OK).astype(jnp.int32)
        return RejectionState(samples, accepted, log_acceptance, num_violations, jnp.bool_(True), status)

    @freeze_when_done
    def step(rng_key, state: RejectionState):  # never runs: the state is done at init
        return state, RejectionInfo(jnp.mean(state.accepted))

    def finalize(state: RejectionState) -> Estimate:
        dtype = state.log_acceptance.dtype
        num_proposals = jnp.asarray(state.accepted.shape[0], dtype)
        num_accepted = jnp.sum(state.accepted).astype(dtype)
        rate = num_accepted / num_proposals
        # Ẑ = p̂ · c · Z_q
        log_z = jnp.log(rate) + jnp.asarray(log_envelope_scale, dtype) + jnp.asarray(log_z_proposal, dtype)
        # the delta method's spread of log p̂; make_estimate adds its bias and makes it inf
        # (STATUS_DEGENERATE) where nothing was accepted (log Ẑ = −inf)
        spread = jnp.sqrt((1.0 - rate) / jnp.maximum(num_accepted, 1.0))
        return _particles.make_estimate(log_z, spread.astype(dtype), num_proposals, state.status)

    return Estimator(init, step, finalize, 0)


__all__ = ["RejectionState", "RejectionInfo", "rejection"]
