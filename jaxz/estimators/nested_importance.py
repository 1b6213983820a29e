"""Importance sampling after nested SMC from a Gaussian per level: the levels' own scales as a
proposal (the idea of importance sampling within the likelihood's nested bounds, as in
nautilus, Lange 2023, with the bounds read from the levels of
``jaxz.estimators.nested.nested_smc`` rather than learned).

A nested-SMC run with ``record_levels=True`` leaves, per level t, its particles' mean μ_t and
covariance Σ_t (draws of the base restricted to log L > ℓ_{t−1}) and the mass m_t of its shell.
The proposal is

    q = (1 − b − a) Σ_t π_t N(μ_t, Σ_t) + b Σ_t π_t N(μ_t, WIDE_SCALE² Σ_t) + a f_0 / Z_0,

π_t ∝ m_t over the ``max_components`` heaviest shells, a = DEFENSIVE_SHARE (the base, so that
every weight is bounded by L / a), b = WIDE_SHARE. Where the likelihood's mass sits at many
scales at once (a power-law singularity: equal mass on every decade of |x_1|), the levels
are at all those scales, so q is too, and the weights w = f_1 / q stay bounded where no
single Gaussian mixture fitted to the posterior's particles, nor a random walk at their
spread, reaches (benchmarks/results/evidence_suite_hard.md, jaxz_nested_importance rows).

Ẑ = mean w over the draws is unbiased given q (the lecture notes' importance sampling with
unnormalized densities), its s.e. the delta method with the weights' fitted Pareto tail
(``jaxz.importance``'s), its flags STATUS_HEAVY_TAIL and STATUS_FEW_PARTICLES. The run's
estimate is then ``jaxz.estimators.mixture_importance.refine``'s rule: the importance
estimate where it is unflagged, else nested SMC's, and STATUS_RUNS_DISAGREE where the two
disagree beyond their error bars.

The mass above the last level is q's blind spot: only the last level's Gaussian covers it.
Below a singularity's last level, w grows like the likelihood; run the nested stage to a
``tolerance`` of about 1e-5 (``TOLERANCE``) rather than its default 1e-3 (the coverage of
both on a radial singularity: docs/changelog.md, nested importance).
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxz import _checks
from jaxz import weights as _weights
from jaxz.approx import mixture as _mixture
from jaxz.base import Estimate, Estimator, Result
from jaxz.estimators import _particles, _weight_checks
from jaxz.estimators.mixture_importance import refine
from jaxz.estimators.nested import NestedInfo
from jaxz.estimators.nested_moves import flat_positions
from jaxz.paths import Path
from jaxz.types import Array

DEFENSIVE_SHARE = 0.1
WIDE_SHARE = 0.1
WIDE_SCALE = 2.0
# The levels kept as components (the heaviest shells): a singularity reached over many decades has a hundred or
# more levels, every one of them carrying mass, and each left out leaves its scale to the wide and prior parts.
MAX_COMPONENTS = 256
# Draws per nested particle. More would spread the nested stage's cost, but with four times as many the runs'
# spread outgrew their s.e. (docs/changelog.md, nested importance: not yet explained); kept here until it is.
DRAWS_PER_PARTICLE = 32
TOLERANCE = 1e-5  # the nested stage's stopping tolerance this stage is meant for (module docstring)


class NestedImportanceState(NamedTuple):
    proposal: _mixture.GaussianMixture  # the levels' Gaussians
    nested_log_likelihood: Array  # (N,) the nested run's last log L: its shape is the batch size
    estimate: Estimate  # the nested run's own, then the refined one
    log_density_evaluations: Array  # the nested run's, then with the draws
    done: Array
    draws: object  # (N, ...) the last batch of draws of q (before the step: the nested run's last particles)
    draw_log_weights: Array  # (N,) their normalized log weights: weighted draws of f_1 / Z (before: uniform)


class NestedImportanceInfo(NamedTuple):
    pareto_k: Array  # Pareto k̂ of the importance weights
    ess: Array  # their effective sample size
    num_components: Array  # levels with mass in the proposal
    importance: Estimate  # the draws' own estimate, before ``refine`` weighs it against the nested run's


def level_proposal(trace: NestedInfo, num_levels, max_components: int = MAX_COMPONENTS) -> _mixture.GaussianMixture:
    """The Gaussian mixture Σ_t π_t N(μ_t, Σ_t) over the ``max_components`` heaviest of the
    first ``num_levels`` levels of a nested-SMC trace (``jaxz.run(...).trace`` of a run with
    ``record_levels=True``), π_t ∝ the shell's mass."""
    if trace.mean.ndim != 2 or trace.mean.shape[-1] == 0:
        raise ValueError("level_proposal needs the trace of nested_smc(..., record_levels=True): this trace "
                         "has no per-level means and covariances")
    valid = jnp.arange(trace.log_mass.shape[0]) < num_levels
    log_mass = jnp.where(valid & jnp.isfinite(trace.log_mass), trace.log_mass, -jnp.inf)
    top, index = jax.lax.top_k(log_mass, min(max_components, log_mass.shape[0]))
    return _mixture.GaussianMixture(top - jax.nn.logsumexp(top), trace.mean[index], trace.cholesky[index])


def nested_importance(path: Path, *, draws_per_particle: int = DRAWS_PER_PARTICLE,
                      max_components: int = MAX_COMPONENTS) -> Estimator:
    """Importance sampling from the levels of a nested-SMC run (module docstring).

    ``init(rng_key, nested: jaxz.base.Result)`` takes a ``jaxz.run`` result of
    ``nested_smc(path, record_levels=True)`` (best with ``tolerance=TOLERANCE``) on the same
    ``path``; one step draws ``draws_per_particle`` batches of as many draws as the run had
    particles; ``finalize`` gives the refined Estimate, its cost the nested run's plus the
    draws. ``log_density_evaluations`` in the state counts both (a point's f̄_0 and L as one);
    ``draws`` and ``draw_log_weights`` hold the last batch of draws with their normalized
    weights, weighted draws of the posterior f_1 / Z."""
    if not isinstance(path, Path) or path.sample_base is None:
        raise ValueError("nested_importance needs the jaxz.paths.Path of the nested run, with sample_base")
    draws_per_particle = _checks.integer("draws_per_particle", draws_per_particle)
    max_components = _checks.integer("max_components", max_components)
    shares = jnp.log(jnp.asarray([1.0 - WIDE_SHARE - DEFENSIVE_SHARE, WIDE_SHARE, DEFENSIVE_SHARE]))

    def init(rng_key, nested: Result) -> NestedImportanceState:
        if not isinstance(nested, Result) or not isinstance(nested.trace, NestedInfo):
            raise ValueError("nested_importance's init takes the jaxz.run result of "
                             "nested_smc(..., record_levels=True)")
        proposal = level_proposal(nested.trace, nested.num_steps, max_components)
        num = nested.state.log_likelihood.shape[0]
        uniform = jnp.full((num,), -jnp.log(num), nested.state.log_likelihood.dtype)
        return NestedImportanceState(proposal, nested.state.log_likelihood, nested.estimate,
                                     nested.state.log_density_evaluations, jnp.bool_(False),
                                     nested.state.kernel_states.position, uniform)

    def batch(narrow, wide, unravel, num, key):
        """``num`` draws of q and their log weights log f_1 − log q."""
        key_choice, key_narrow, key_wide, key_base = jax.random.split(key, 4)
        source = jax.random.categorical(key_choice, shares, shape=(num,))[:, None]
        base = flat_positions(path.sample_base(key_base, num))
        flat = jnp.select([source == 0, source == 1],
                          [_mixture.sample(narrow, key_narrow, num), _mixture.sample(wide, key_wide, num)], base)
        positions = jax.vmap(unravel)(flat)
        log_base = _particles.log_densities(path, positions, 0.0) - path.log_z0
        parts = jnp.stack([_mixture.log_density(narrow, flat), _mixture.log_density(wide, flat),
                           jnp.where(jnp.isnan(log_base), -jnp.inf, log_base)], axis=-1)
        log_target = _particles.log_densities(path, positions, 1.0)
        return positions, jnp.where(jnp.isneginf(log_target), -jnp.inf,
                                    log_target - jax.nn.logsumexp(shares + parts, axis=-1))

    def step(rng_key, state: NestedImportanceState):
        num = state.nested_log_likelihood.shape[0]
        dtype = state.proposal.means.dtype
        shapes = jax.eval_shape(lambda key: path.sample_base(key, 1), jax.random.key(0))
        _, unravel = ravel_pytree(jax.tree.map(lambda leaf: jnp.zeros(leaf.shape[1:], leaf.dtype), shapes))
        wide = state.proposal._replace(cholesky=WIDE_SCALE * state.proposal.cholesky)
        positions, log_w = jax.lax.map(lambda key: batch(state.proposal, wide, unravel, num, key),
                                       jax.random.split(rng_key, draws_per_particle))
        last_draws = jax.tree.map(lambda leaf, old: leaf[-1].astype(old.dtype), positions, state.draws)
        last_log_w = _weights.sanitize(log_w[-1].astype(dtype))[0]
        log_w, status = _weights.sanitize(log_w.reshape(-1).astype(dtype))
        log_z = _weights.log_mean_exp(log_w) + jnp.zeros((), dtype)
        stderr = _particles.reported_stderr(log_z, _weight_checks.importance_stderr(log_w))
        status = _weight_checks.low_ess_status(log_w, status)
        draws = jnp.asarray(draws_per_particle * num, dtype)
        own = Estimate(log_z, stderr, state.estimate.cost + draws, status.astype(jnp.int32))
        refined = refine(state.estimate, (log_z, stderr, status))._replace(cost=state.estimate.cost + draws)
        new_state = state._replace(estimate=refined, log_density_evaluations=state.log_density_evaluations + draws,
                                   done=jnp.bool_(True), draws=last_draws,
                                   draw_log_weights=_weights.normalize(last_log_w))
        used = jnp.sum(jnp.isfinite(state.proposal.log_weights))
        return new_state, NestedImportanceInfo(_weights.pareto_khat(log_w), _weights.ess(_weights.normalize(log_w)),
                                               used.astype(jnp.int32), own)

    def finalize(state: NestedImportanceState) -> Estimate:
        return state.estimate

    return Estimator(init, step, finalize, 1)


__all__ = ["nested_importance", "level_proposal", "NestedImportanceState", "NestedImportanceInfo", "TOLERANCE",
           "MAX_COMPONENTS", "DRAWS_PER_PARTICLE", "DEFENSIVE_SHARE", "WIDE_SHARE", "WIDE_SCALE"]
