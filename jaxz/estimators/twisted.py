"""Twisted sequential Monte Carlo for graphical models (Lindsten, Helske & Vihola,
NeurIPS 2018), with the non-twisted SMC of Naesseth, Lindsten & Schön (2014) as the
special case ψ ≡ 1: one engine, SMC-Base and SMC-Twist.

The variables x_1..x_T of a factor graph are added one per step, targeting the
twisted intermediate densities γ^ψ_t = ψ_t γ_t (seed eqs. 4-5); the model
(``jaxz.SequentialGraphModel``) supplies, for step t, either

* discrete variables: the log potentials log γ^ψ_{t}(x_{1:t−1}, k) − log γ^ψ_{t−1}(x_{1:t−1})
  for every value k. The sampler is then fully adapted (seed §2.2): the resampling
  weights look one step ahead, ν^i ∝ W^i Σ_k exp(potential^i_k), the new variable is
  drawn from the locally optimal proposal (eq. 2) ∝ exp(potential^i_k), and every
  resampled particle has the same weight;
* or a proposal and weight function: x_t ~ q_t(· | x_{1:t−1}) with log ω_t (Alg. 1, 2c).

Resampling happens when the ESS of the resampling weights falls below
``resample_ess``·N (1.0: every step, as the seed does for the Ising and LDA models;
0: never — sequential importance sampling). Between events weights are carried, so

    Ẑ = ∏_t Σ_i W_{t−1}^i ω_t^i        (W normalized; = ∏_t (1/N) Σ_i w̃_t^i of Alg. 1)

is unbiased for Z whichever events occur, and exact under the optimal twist of
Prop. 1 with full adaptation.
"""
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import resampling as _resampling
from jaxz import weights as _weights
from jaxz.base import Estimate, Estimator, SequentialGraphModel, freeze_when_done
from jaxz.estimators import _genealogy, _particles
from jaxz.types import Array


class TwistedSMCState(NamedTuple):
    particles: Any  # model states, leading axis = particles
    log_weights: Array  # normalized log W_t
    log_z: Array  # log Ẑ_t
    index: Array  # t: variables added so far
    genealogy: _genealogy.Genealogy  # lagged ancestors (genealogy variance estimate)
    # The genealogy estimate reads the weights and genealogy as they stood after the last
    # weighting: a fully adapted step resamples after weighting, and that resampling adds
    # nothing to Ẑ's variance (Lee & Whiteley's final weights).
    estimate_view: Any
    min_ess: Array  # smallest ESS (as a count) of the resampling weights met so far
    done: Array
    status: Array
    cost: Array


class TwistedSMCInfo(NamedTuple):
    ess: Array  # ESS fraction of the resampling weights at this step
    resampled: Array
    log_z_increment: Array


class _Weighted(NamedTuple):
    """What one step of Alg. 1 leaves behind (see ``twisted_smc``'s ``step``)."""
    particles: Any
    log_weights: Array  # normalized log W_t
    log_z_increment: Array  # log Σ_i W_{t−1}^i ω_t^i
    genealogy: _genealogy.Genealogy
    estimate_view: Any  # (log weights, genealogy) as the genealogy estimate reads them
    resampled: Array
    ess: Array  # ESS (a count) of the resampling weights
    status: Array


def _fully_adapted_step(model: SequentialGraphModel, resample, keys, state, t) -> _Weighted:
    """Discrete variables, fully adapted (seed §2.2): resampling weights that look one step
    ahead, ν^i ∝ W^i Σ_k exp(potential^i_k) (step 2a), then x_t from the locally optimal
    proposal (eq. 2) ∝ exp(potential_k) (step 2b); every resampled particle has the same
    weight (step 2c), and Ẑ_t/Ẑ_{t−1} = Σ_i W^i Σ_k exp(potential^i_k)."""
    log_potentials, status = _weights.sanitize(jax.vmap(model.log_potentials, in_axes=(0, None))(state.particles, t))
    # potentials so large that their rounding error exceeds a tenth of a nat (float32
    # near 1e6, e.g. an Ising coupling of 1e6) leave the weights and Ẑ as noise
    status = status | _particles.precision_status(log_potentials,
                                                  log_weights=state.log_weights[:, None] + log_potentials)
    log_predictive = jax.nn.logsumexp(log_potentials, axis=-1)
    unnormalized = state.log_weights + jnp.where(jnp.isneginf(log_predictive), -jnp.inf, log_predictive)
    log_z_increment = _weights.logsumexp(unnormalized)
    weighted = _weights.normalize(unnormalized)  # ν
    # all particles are the same empty state before the first variable: no resampling
    resampled = resample(weighted, t > 0)
    genealogy = _genealogy.resample(state.genealogy, weighted, resampled.ancestors, resampled.resampled)
    parents = _particles.take(state.particles, resampled.ancestors)
    values = jax.vmap(jax.random.categorical)(keys, log_potentials[resampled.ancestors]).astype(jnp.int32)
    particles = jax.vmap(model.assign, in_axes=(0, None, 0))(parents, t, values)
    return _Weighted(particles, resampled.log_weights, log_z_increment, genealogy, (weighted, state.genealogy),
                     resampled.resampled, resampled.ess, status)


def _proposal_step(model: SequentialGraphModel, resample, keys, state, t) -> _Weighted:
    """Alg. 1 step 2 with a proposal: (a) resample by W_{t−1} (never before the first
    variable), (b) propose x_t ~ q_t(· | x_{1:t−1}), (c) weight by ω_t."""
    resampled = resample(state.log_weights, t > 0)
    genealogy = _genealogy.resample(state.genealogy, state.log_weights, resampled.ancestors, resampled.resampled)
    parents = _particles.take(state.particles, resampled.ancestors)
    particles, log_omega = jax.vmap(model.propose, in_axes=(0, 0, None))(keys, parents, t)
    log_omega, status = _weights.sanitize(jnp.asarray(log_omega, resampled.log_weights.dtype))
    status = status | _particles.precision_status(log_omega, log_weights=resampled.log_weights + log_omega)
    unnormalized = resampled.log_weights + log_omega
    log_z_increment = _weights.logsumexp(unnormalized)
    log_weights = _weights.normalize(unnormalized)
    return _Weighted(particles, log_weights, log_z_increment, genealogy, (log_weights, genealogy),
                     resampled.resampled, resampled.ess, status)


def twisted_smc(
    model: SequentialGraphModel,
    *,
    resample_ess: float = 1.0,
    resampling: Callable | str = "multinomial",
    particle_sharding=None,
) -> Estimator:
    """SMC over the variables of ``model`` (a ``jaxz.SequentialGraphModel``); SMC-Twist
    when the model was built with a twist, SMC-Base otherwise.

    resample_ess: resample when ESS < resample_ess · N (``jaxz.resampling.resample_if_needed``);
        1.0 resamples every step, 0.0 never (sequential importance sampling).
    resampling: a function of ``jaxz.resampling`` or its name.
    particle_sharding: None, or a ``jax.sharding.Sharding`` of the particle axis that the
        particles created in ``init`` are laid out with (see ``jaxz.sharding``).
    ``init(rng_key, num_particles)``; one step per variable, ``model.num_steps`` in all
    (``jaxz.run(estimator, key, num_particles)`` scans them). ``Estimate.cost`` counts
    proposals (particles × variables).

    The standard error is the genealogy estimator (see ``jaxz.smc``), read from the
    resampling weights ν ∝ W·Σ_k exp(potential_k) and the genealogy before that step's
    resampling (Lee & Whiteley at the generation before the last, with φ = the last
    predictive weight: the same Ẑ). Where that estimate is below its own noise, or where
    its noise drowns the variance the weights show step by step (``_genealogy.drowned``:
    a good twist resampled at every step, whose variance is far smaller than the neutral
    drift of the genealogy, or SMC-Base on a lattice whose variance comes from dependence
    over many generations), the run carries STATUS_STDERR_UNRESOLVED (with a nan s.e. in
    the first case; in the second the s.e. is kept for pooling): pool runs with
    ``jaxz.combine_runs``. A run that never resampled is importance sampling from the
    twisted proposal, and under ESS-triggered resampling (``resample_ess < 1``) the runs
    left unresampled are those whose weights' tail looks light; their s.e. extrapolates the
    tail from a shape half an sd above the fitted Pareto k̂
    (``_weight_checks.importance_stderr``).
    Where the model's ``bandwidth`` exceeds the N/8 generations the genealogy keeps and
    the run resampled at all, N is too small for the model (N ≥ 8 × bandwidth is needed,
    and not always enough) and every run is flagged STATUS_COLLAPSED, a flag
    ``jaxz.combine_runs`` keeps; within it, the lag the genealogy estimate reads reaches
    the bandwidth, so that no dependence the model is known to have is truncated
    (``_particles.genealogy_estimate``). STATUS_FEW_PARTICLES flags a run whose ESS fell
    below 2, STATUS_HEAVY_TAIL final weights too heavy-tailed for their s.e., and
    potentials whose float rounding exceeds 0.1 nat set STATUS_PRECISION_LOSS. Coverage
    of all of these: ``benchmarks/results/calibration.md``.
    """
    _check_model(model)
    try:
        resample_ess = float(resample_ess)
    except (TypeError, ValueError):
        raise ValueError(f"resample_ess must be a number in [0, 1] (0: never resample), got {resample_ess!r}") from None
    if not 0.0 <= resample_ess <= 1.0:
        raise ValueError(f"resample_ess must be in [0, 1] (0: never resample), got {resample_ess}")
    resampling, genealogy_valid = _particles.resampler(resampling)
    num_variables = int(model.num_steps)
    weigh = _fully_adapted_step if model.num_values is not None else _proposal_step

    def init(rng_key, num_particles) -> TwistedSMCState:
        num_particles = _particles.check_count("num_particles", num_particles)
        particles = jax.tree.map(
            lambda leaf: jnp.broadcast_to(jnp.asarray(leaf), (num_particles,) + jnp.shape(leaf)), model.initial_state
        )
        particles = _particles.constrain(particles, particle_sharding)
        dtype = _weight_dtype(model)
        uniform = jnp.full((num_particles,), -jnp.log(num_particles), dtype)
        genealogy = _genealogy.init(num_particles, _genealogy.default_lag(num_particles), dtype)
        return TwistedSMCState(
            particles, uniform, jnp.zeros((), dtype), jnp.int32(0), genealogy, (uniform, genealogy),
            jnp.asarray(num_particles, dtype), jnp.bool_(num_variables == 0), jnp.int32(0), jnp.zeros((), dtype),
        )

    @freeze_when_done
    def step(rng_key, state: TwistedSMCState):
        key_resample, key_propose = jax.random.split(rng_key)
        t = state.index
        num_particles = state.log_weights.shape[0]

        def resample(log_weights, allowed):  # step 2a where the ESS of the (normalized) weights is low
            return _resampling.resample_if_needed(key_resample, log_weights, resampling, resample_ess, allowed=allowed)

        out = weigh(model, resample, jax.random.split(key_propose, num_particles), state, t)
        log_z = state.log_z + out.log_z_increment
        index = t + 1
        new_state = TwistedSMCState(
            out.particles, out.log_weights, log_z, index, out.genealogy, out.estimate_view,
            jnp.minimum(state.min_ess, out.ess), (index >= num_variables) | jnp.isneginf(log_z),
            state.status | out.status, state.cost + num_particles,
        )
        return new_state, TwistedSMCInfo(out.ess / num_particles, out.resampled, out.log_z_increment)

    def finalize(state: TwistedSMCState) -> Estimate:
        log_weights, genealogy = state.estimate_view
        final_ess = _weights.ess(log_weights)
        return _particles.genealogy_estimate(
            state.log_z, log_weights, genealogy, genealogy_valid, jnp.minimum(state.min_ess, final_ess), state.cost,
            state.status, bandwidth=model.bandwidth, resampling_steps=state.index - 1,  # none before x_1
        )

    return Estimator(init, step, finalize, num_variables)


def _weight_dtype(model: SequentialGraphModel):
    """The floating dtype of the weights: that of the model's log potentials (discrete)
    or log weights (propose), so a particle may hold its variables as small integers
    (e.g. int8 spins) and still run in the model's float32 or float64."""
    state = model.initial_state
    if model.num_values is not None:
        dtype = jax.eval_shape(model.log_potentials, state, jnp.int32(0)).dtype
    else:
        dtype = jax.eval_shape(model.propose, jax.random.key(0), state, jnp.int32(0))[1].dtype
    return dtype if jnp.issubdtype(dtype, jnp.floating) else _particles.float_dtype(state)


def _check_model(model) -> None:
    if not isinstance(model, SequentialGraphModel):
        raise ValueError(f"model must be a jaxz.SequentialGraphModel, got {type(model).__name__}")
    if int(model.num_steps) < 1:
        raise ValueError(f"model.num_steps must be >= 1, got {model.num_steps}")
    bandwidth = model.bandwidth
    if bandwidth is not None and (isinstance(bandwidth, bool) or not isinstance(bandwidth, (int, np.integer))
                                  or bandwidth < 0):
        raise ValueError(f"model.bandwidth must be None or an integer >= 0, got {bandwidth!r}")
    discrete = model.num_values is not None
    if discrete:
        if int(model.num_values) < 1:
            raise ValueError(f"model.num_values must be >= 1, got {model.num_values}")
        if not callable(model.log_potentials) or not callable(model.assign):
            raise ValueError("a discrete model (num_values set) needs callable log_potentials and assign")
        if model.propose is not None:
            raise ValueError("a discrete model (num_values set) must not also set propose")
        try:
            shape = jax.eval_shape(model.log_potentials, model.initial_state, jnp.int32(0)).shape
        except (TypeError, ValueError, IndexError) as error:
            raise ValueError(f"model.log_potentials failed on model.initial_state: {error}") from error
        if tuple(shape) != (int(model.num_values),):
            raise ValueError(f"model.log_potentials must return one log potential per value, shape "
                             f"(num_values,) = ({int(model.num_values)},), got shape {tuple(shape)}")
    elif not callable(model.propose):
        raise ValueError("model needs either num_values with log_potentials and assign, or a callable propose")


__all__ = ["twisted_smc", "TwistedSMCState", "TwistedSMCInfo"]
