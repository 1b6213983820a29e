"""``jaxz.mixture_importance``: importance sampling from a Gaussian mixture fitted to a set
of weighted particles (population Monte Carlo's mixture adaptation, Cappé, Douc, Guillin,
Marin & Robert 2008, started from SMC's particles; the lecture notes' importance sampling
with unnormalised densities), and ``refine``, the rule by which a run keeps its estimate or
the particles' own. The importance stage of ``jaxz.evidence(method="auto")``."""
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxz import weights as _weights
from jaxz._status import STATUS_HEAVY_TAIL, STATUS_RUNS_DISAGREE
from jaxz.approx import mixture as _mixture
from jaxz.approx import scale_mixture as _scale_mixture
from jaxz.base import Estimate, Estimator
from jaxz.estimators import _particles, _weight_checks
from jaxz.types import Array

# The importance stage of method="auto" (see the module docstring). Draws per SMC particle:
IMPORTANCE_DRAWS_PER_PARTICLE = 64
# the share of draws from the prior (the path's base, f_0 / Z_0): a defensive mixture (Hesterberg 1995,
# Technometrics 37) whose weights are bounded by L(x) / DEFENSIVE_SHARE wherever the fitted mixture is thin
DEFENSIVE_SHARE = 0.1
# ... and the share of draws from the fitted mixture with every covariance scaled by WIDE_SCALE² (a mixture fitted
# to 1000 particles is a little too narrow in its tails, where the weights then grow until the prior caps them)
WIDE_SHARE = 0.1
WIDE_SCALE = 2.0
# ... and the share from kernels at every scale below the particles' spread, centred at the particles
# (``jaxz.approx.scale_mixture``): mass the particles' scale hides (a singular likelihood's) gets draws
FINE_SHARE = 0.1
MIXTURE_COMPONENTS = (1, 2, 4, 8, 16, 32)  # candidates, chosen by cross-validation (jaxz.approx.mixture)
PARTICLES_PER_COMPONENT_AND_COORDINATE = 5  # a candidate K needs K (d + 2) x this many particles
# The importance estimate replaces SMC's only where the two agree: |difference| beyond this many of their
# combined s.e.s flags STATUS_RUNS_DISAGREE (one of them has missed mass the other saw).
DISAGREEMENT = 4.0
# 1 + χ²(π ‖ q) read at SMC's particles over the same read from the draws: above this ratio, the particles hold
# mass the draws never reach (a funnel's neck) and the run is flagged. The ratio sits near 1 where the mixture
# covers the target and is orders of magnitude above where it does not, so the threshold is not delicate.
MOMENT_MISMATCH = 4.0
# With pmc_steps (``jaxz.evidence``'s option), the first PILOT_SHARE of the batches re-fit the mixture in that many
# population Monte Carlo steps (weights, means, covariances; ``jaxz.approx.mixture.pmc_update``), each moving
# PMC_STEP of the way toward the draws' reading where many effective draws stand behind a component; the rest are
# drawn from half the re-fitted and half the fitted mixture and estimate Z (off by default: see
# benchmarks/results/evidence_levers.md, last section).
PILOT_SHARE = 0.25
PMC_STEP = 0.9


def dimension(path):
    """Coordinates of one particle (all leaves of a draw of ``path.sample_base``), from shapes alone."""
    draw = jax.eval_shape(lambda key: path.sample_base(key, 1), jax.random.key(0))
    return sum(math.prod(leaf.shape[1:]) for leaf in jax.tree.leaves(draw))


def component_candidates(dimension, num_particles):
    """The mixture sizes the particles can support: K (d + 2) x 5 <= N."""
    budget = num_particles // PARTICLES_PER_COMPONENT_AND_COORDINATE
    return tuple(k for k in MIXTURE_COMPONENTS if k * (dimension + 2) <= budget)


class MixtureImportanceState(NamedTuple):
    particles: object  # the weighted particles the mixture is fitted to (leading axis = particles)
    log_weights: Array  # their normalized log weights
    log_z: Array
    log_z_stderr: Array
    status: Array
    cost: Array  # draws
    log_density_evaluations: Array  # f_1 and f_0 at every draw and at every particle
    done: Array


class MixtureImportanceInfo(NamedTuple):
    pareto_k: Array  # Pareto k̂ of the importance weights
    num_components: Array  # components of the fitted mixture
    mismatch: Array  # the particles hold mass the draws never reach (see MOMENT_MISMATCH)


def mixture_importance(path, *, num_batches: int = IMPORTANCE_DRAWS_PER_PARTICLE, candidates=None,
                       pmc_steps: int = 0) -> Estimator:
    """Importance sampling from a mixture fitted to weighted particles of f_1 / Z.

    ``init(rng_key, particles, log_weights)``; one step draws ``num_batches`` batches of as
    many draws as there are particles and weighs them (``importance_stage``); the Info says
    the fitted mixture's size, the weights' Pareto k̂ and the moment mismatch. candidates:
    the component counts to choose from by cross-validation (default: those the particles
    support, ``component_candidates``). Ẑ is unbiased given the particles."""

    def init(rng_key, particles, log_weights) -> MixtureImportanceState:
        dtype = log_weights.dtype
        nan = jnp.full((), jnp.nan, dtype)
        return MixtureImportanceState(particles, log_weights, nan, nan, jnp.int32(0), jnp.zeros((), dtype),
                                      jnp.zeros((), dtype), jnp.bool_(False))

    def step(rng_key, state: MixtureImportanceState):
        num_particles = state.log_weights.shape[0]
        chosen = candidates
        if chosen is None:
            chosen = component_candidates(dimension(path), num_particles)
        log_z, stderr, status, pareto_k, num_components, mismatch = importance_stage(
            path, rng_key, state.particles, state.log_weights, num_batches, chosen, pmc_steps)
        dtype = state.log_weights.dtype
        draws = jnp.asarray(num_batches * num_particles, dtype)
        evaluations = jnp.asarray(2.0 * (num_batches + 1) * num_particles, dtype)
        new_state = state._replace(log_z=log_z, log_z_stderr=stderr, status=status, cost=draws,
                                   log_density_evaluations=evaluations, done=jnp.bool_(True))
        return new_state, MixtureImportanceInfo(pareto_k, num_components.astype(jnp.int32), mismatch)

    def finalize(state: MixtureImportanceState) -> Estimate:
        return Estimate(state.log_z, state.log_z_stderr, state.cost, state.status)

    return Estimator(init, step, finalize, 1)


def importance_stage(path, rng_key, particles, log_weights, num_batches, candidates, pmc_steps=0):
    """Importance sampling from a Gaussian mixture fitted to SMC's weighted particles.

    q = (1 − a − b − c) Σ_k a_k N(μ_k, Σ_k) + b Σ_k a_k N(μ_k, 4 Σ_k) + c q_s + a f_0 / Z_0
    (a = DEFENSIVE_SHARE, b = WIDE_SHARE, c = FINE_SHARE), the mixture fitted by
    ``jaxz.approx.mixture.select_mixture``, q_s kernels at every scale below the particles'
    spread centred at them (``jaxz.approx.scale_mixture``); ``num_batches`` batches of as many draws as there
    are particles, each weighted w = f_1(x) / q(x), so Ẑ = mean w is unbiased for Z given the
    particles (lecture notes, "IS with unnormalised distributions"). With ``pmc_steps``, the
    first PILOT_SHARE of the batches only re-fit the mixture, in that many population Monte
    Carlo steps (``jaxz.approx.mixture.pmc_update``: weights, means and covariances from the
    weighted draws, each fitted component counted as its share of SMC's effective
    particles), so that a mode SMC's particles hold too little of, or fit too narrowly, gets
    its mass and width back; the other batches, drawn from q with its mixture half re-fitted
    and half as fitted (a step that loses a mode costs at most a factor of 2 in the
    weights), estimate Z (unbiased given the particles and the pilot). Returns (log Ẑ, s.e.,
    status, Pareto k̂, number of components, mismatch): the s.e. and flags of
    ``jaxz.importance`` (delta method with the weights' fitted Pareto tail; STATUS_HEAVY_TAIL
    or STATUS_FEW_PARTICLES for a heavy tail or too few effective draws)."""
    pilot_batches = int(num_batches * PILOT_SHARE)
    if pmc_steps > pilot_batches:  # each PMC step needs a batch of its own: more steps would silently be none
        raise ValueError(f"pmc_steps={pmc_steps} needs {pmc_steps} pilot batches (one per step), and the pilot is the "
                         f"first {PILOT_SHARE:.0%} of the importance stage's {num_batches} batches of num_particles "
                         f"draws ({pilot_batches} batches): pass importance_draws >= "
                         f"{math.ceil(pmc_steps / PILOT_SHARE)} x num_particles, or pmc_steps <= {pilot_batches}")
    _, unravel = ravel_pytree(_particles.first_particle(particles))
    flatten = jax.vmap(lambda particle: ravel_pytree(particle)[0])
    points = flatten(particles)
    num = points.shape[0]
    key_fit, key_draw = jax.random.split(rng_key)
    mixture, num_components = _mixture.select_mixture(key_fit, points, log_weights, candidates)
    log_target_particles = _particles.log_densities(path, particles, 1.0)
    fine = _scale_mixture.fit(points, log_weights, log_target_particles)
    keys = jax.random.split(key_draw, num_batches)
    num_pilot = int(num_batches * PILOT_SHARE) // pmc_steps * pmc_steps if pmc_steps else 0
    proposal = mixture
    if num_pilot:
        for step_keys in jnp.split(keys[:num_pilot], pmc_steps):
            def pilot(key, proposal=proposal):  # one batch of draws and the statistics of a PMC step
                draws, log_w, _ = _batch(path, proposal, fine, key, num, flatten, unravel)
                return _mixture.pmc_statistics(proposal, draws, log_w)

            statistics = jax.lax.map(pilot, step_keys)
            proposal = _mixture.pmc_update(proposal, statistics, PMC_STEP, _weights.ess(log_weights))
        # half the re-fitted mixture, half the fitted one: w ≤ 2 f / q_fitted, a step cannot lose a mode
        proposal = jax.tree.map(lambda *leaves: jnp.concatenate(leaves), proposal, mixture)
        proposal = proposal._replace(log_weights=proposal.log_weights - jnp.log(2.0))
    log_w, log_w_smooth = jax.lax.map(lambda key: _batch(path, proposal, fine, key, num, flatten, unravel)[1:],
                                      keys[num_pilot:])
    log_w, status = _weights.sanitize(log_w.reshape(-1))
    log_z = _weights.log_mean_exp(log_w)
    # E_π[w'/Z] = 1 + χ²(π ‖ q'), q' the proposal without its kernels at the particles (which would read
    # the particles themselves as covered): read at SMC's particles (draws of π) and from q's draws as
    # E_q[w' w] / Z². Mass the mixture cannot reach shows in the particles' reading only
    parts = _proposal_parts(path, proposal, fine, points, particles)
    log_moment_particles = jax.nn.logsumexp(jax.nn.log_softmax(log_weights)
                                            + _log_weights(log_target_particles, parts, smooth=True) - log_z)
    # the same draws as log_w: their nan weights were flagged there (STATUS_NONFINITE), zero here too
    log_moment_draws = _weights.log_mean_exp(log_w + _weights.sanitize(log_w_smooth.reshape(-1))[0] - 2.0 * log_z)
    mismatch = log_moment_particles - log_moment_draws > math.log(MOMENT_MISMATCH)
    stderr = _particles.reported_stderr(log_z, _weight_checks.importance_stderr(log_w))
    status = _weight_checks.low_ess_status(log_w, status)
    return log_z, stderr, status, _weights.pareto_khat(log_w), num_components, mismatch


def _shares(smooth=False):
    """log shares of the proposal's parts: the mixture, its wide copy, the fine kernels, the prior
    (``smooth``: without the fine kernels, renormalized)."""
    shares = jnp.asarray([1.0 - DEFENSIVE_SHARE - WIDE_SHARE - FINE_SHARE, WIDE_SHARE, FINE_SHARE, DEFENSIVE_SHARE])
    if smooth:
        shares = shares.at[2].set(0.0) / (1.0 - FINE_SHARE)
    return jnp.log(shares)


def _wide(mixture):
    """The proposal's wide part: the mixture with every covariance WIDE_SCALE² times larger."""
    return mixture._replace(cholesky=WIDE_SCALE * mixture.cholesky)


def _proposal_parts(path, mixture, fine, flat, positions):
    """The (n, 4) log densities of the proposal's parts (flat: raveled points; positions: the
    same as the path's pytrees)."""
    log_base = _particles.log_densities(path, positions, 0.0) - path.log_z0
    log_base = jnp.where(jnp.isnan(log_base), -jnp.inf, log_base)
    return jnp.stack([_mixture.log_density(mixture, flat), _mixture.log_density(_wide(mixture), flat),
                      _scale_mixture.log_density(fine, flat), log_base], axis=-1)


def _log_weights(log_target, parts, smooth=False):
    """log f_1(x) − log q(x); a zero of f_1 is a zero weight even where q vanishes too (−inf − −inf
    would be nan)."""
    log_proposal = jax.nn.logsumexp(_shares(smooth) + parts, axis=-1)
    return jnp.where(jnp.isneginf(log_target), -jnp.inf, log_target - log_proposal)


def _batch(path, mixture, fine, key, num, flatten, unravel):
    """``num`` draws from q (flat, (num, d)), their log importance weights, and the same for q
    without the fine kernels."""
    key_choice, key_mixture, key_wide, key_fine, key_base = jax.random.split(key, 5)
    source = jax.random.categorical(key_choice, _shares(), shape=(num,))[:, None]
    draws = jnp.select([source == 0, source == 1, source == 2],
                       [_mixture.sample(mixture, key_mixture, num), _mixture.sample(_wide(mixture), key_wide, num),
                        _scale_mixture.sample(fine, key_fine, num)], flatten(path.sample_base(key_base, num)))
    positions = jax.vmap(unravel)(draws)
    log_target = _particles.log_densities(path, positions, 1.0)
    parts = _proposal_parts(path, mixture, fine, draws, positions)
    return draws, _log_weights(log_target, parts), _log_weights(log_target, parts, smooth=True)


def refine(smc_estimate, importance_estimate, mismatch=False):
    """The run's estimate: the importance stage's where it is unflagged with a finite
    s.e. and no ``mismatch``, else SMC's; SMC's flags either way, plus STATUS_RUNS_DISAGREE
    where the two disagree by more than DISAGREEMENT combined s.e.s (or a flagged importance
    estimate lies more than DISAGREEMENT of SMC's s.e.s above SMC's), and STATUS_HEAVY_TAIL on
    a mismatch (the particles see mass the mixture's draws do not reach; SMC's own estimate
    is then suspect too, so the flag stays)."""
    log_z, stderr, status = importance_estimate
    usable = (status == 0) & jnp.isfinite(stderr) & jnp.isfinite(log_z) & ~mismatch
    gap = jnp.abs(log_z - smc_estimate.log_z) / jnp.sqrt(stderr ** 2 + smc_estimate.log_z_stderr ** 2)
    disagree = usable & (gap > DISAGREEMENT)  # nan (no SMC s.e.) compares False
    # A heavy-tailed importance estimate lies low more often than high (its mean rests on draws it rarely
    # makes), so one far above SMC's found mass SMC's particles did not hold (a singular likelihood's)
    found_more = ~usable & jnp.isfinite(log_z) & (log_z - smc_estimate.log_z > DISAGREEMENT * smc_estimate.log_z_stderr)
    disagree = disagree | found_more
    status = (smc_estimate.status | jnp.where(disagree, STATUS_RUNS_DISAGREE, 0)
              | jnp.where(mismatch, STATUS_HEAVY_TAIL, 0))
    return smc_estimate._replace(
        log_z=jnp.where(usable, log_z, smc_estimate.log_z),
        log_z_stderr=jnp.where(usable, stderr, smc_estimate.log_z_stderr),
        status=jnp.asarray(status).astype(jnp.int32))


__all__ = ["mixture_importance", "MixtureImportanceState", "MixtureImportanceInfo", "importance_stage", "refine",
           "component_candidates", "dimension", "IMPORTANCE_DRAWS_PER_PARTICLE", "MIXTURE_COMPONENTS", "DISAGREEMENT",
           "MOMENT_MISMATCH"]
