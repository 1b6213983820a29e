"""Stochastic-gradient annealed importance sampling (SGAIS; Cameron, Eggers & Kroon 2019).

The evidence of i.i.d. data factorizes into predictive terms, one per chunk D_k of the
stream:  log p(D) = Σ_k log p(D_k | D_<k)  (seed eq. 1). Each term is one short AIS run
from the current posterior p(θ | D_<k) to p(θ | D_≤k), annealing the chunk's likelihood
in λ from 0 to 1 (seed eq. 2, Algorithm 1):

    w_i ← w_i · p(D_k | θ_i)^{λ' − λ},   λ' chosen so that the ESS of the increments
                                          equals ``target_ess`` · M (a fraction of the particles,
                                          default 0.9),
    θ_i ← ``burn_in`` SGHMC steps (seed eqs. 3, §4) on the stochastic potential (seed eq. 4)
          U(θ) = −λ' log p(D_k | θ) − (n/|B|) Σ_{y ∈ B} log p(y | θ) − log p(θ),

with B a mini-batch drawn with replacement from the n observations seen before the
chunk, and p(D_k | D_<k) ≈ mean_i w_i. Cost per chunk does not grow with n: the chunk
and the mini-batch are the only data each gradient touches. For a stream, the
mini-batches come from a fixed-size reservoir (Vitter's Algorithm R, the seed's §5), so
memory stays bounded; ``stream`` drives it from a Python iterator.

The file follows the algorithm box: the chunk's stochastic potential (eq. 4,
``_chunk_potential``), one annealing step (lines 6-9, ``_annealing_step``), the annealing
loop of a chunk (lines 4-10, ``anneal_chunk``), the chunk's evidence factor (line 12 per
chunk, ``_close_chunk``), then the estimator that strings the chunks together (``sgais``)
and its streaming driver (``stream``). The SGHMC moves of line 9 are in ``_sghmc``.

Symbols of the seed → arguments: M → ``num_particles`` (default: from the positions),
ESS* → ``target_ess`` · M, α → ``alpha`` (friction), β̂ → ``noise_offset``, |B| →
``minibatch_size``. η: by default chosen from the particles (a step, whitened by the
potential's Hessian or the particles' variances, that holds the per-chunk mini-batch bias
m·η·tr(I₁)/(4α|B|) at ``max_chunk_bias``; see ``sgais``);
an explicit ``learning_rate`` gives the seed's η = learning_rate / n (n = n_before + λ·|D_k|
the observations absorbed).

Error sources (the seed's §7; derivations here, measurements in
``benchmarks/results/sgais_defaults.md`` and ``paper_repro/sgais_*.py``):

- First chunk: AIS/SMC from the prior, unbiased for Z, so log Ẑ is low by about
  Var(log Ẑ)/2. It dominates the error at small M.
- Later chunks: mini-batch gradient noise heats SGHMC. With η = lr/n and a gradient of
  covariance n² I₁/|B| (I₁ the per-observation Fisher information), the stationary
  variance grows by lr/(2α|B|) per unit of I₁, and integrating E[log p(D_k | θ)] over λ
  under the wider distribution gives a bias per chunk of about
  −m · lr · tr(I₁) / (4 α |B|)   (m = chunk size; n ≫ m; many annealing steps),
  independent of n, so it adds up linearly over the stream (neglected: n/(n+m) early
  on, and eq. (3)'s discretization, which widens the stationary distribution by
  1/(1 − lr/(2(2−α)))). On stiff data or features of large scale η·λmax(n I₁) can
  exceed eq. (3)'s stability limit (log Ẑ = −inf): the automatic step bounds both.
"""
import functools
import types
import warnings
from typing import Any, Callable, Iterable, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxz import _checks
from jaxz import resampling as _resampling
from jaxz import weights as _weights
from jaxz.base import STATUS_FEW_PARTICLES, STATUS_MAX_STEPS, Estimate, Estimator, Result, freeze_when_done
from jaxz.estimators import _particles, _sghmc, _weight_checks
from jaxz.estimators._streams import check_finite_rows as _check_finite_rows
from jaxz.estimators._streams import pad_rows as _pad_rows
from jaxz.estimators._streams import reservoir_update
from jaxz.schedules import next_temperature
from jaxz.types import Array


class SGAISState(NamedTuple):
    positions: Any  # particles θ_i, leading axis = particles
    # (M,) log w_i − log Ẑ: weights carried into the next chunk (zeros unless weighting="carried")
    log_weights: Array
    log_z: Array  # online log-evidence log p(D_≤k)
    log_z_variance: Array  # Σ_k of the chunks' delta-method variances of log mean w (a diagnostic, not an s.e.)
    data: Any  # offline: the whole data set, padded to whole chunks; streaming: ()
    reservoir: Any  # fixed-size sample of the data seen (leading axis = slots); () when unused
    num_seen: Array  # n: observations processed so far
    index: Array  # chunks processed so far
    done: Array
    status: Array
    cost: Array  # SGHMC steps summed over particles


class SGAISInfo(NamedTuple):
    log_z: Array  # online trace: log p(D_≤k) after this chunk
    log_z_increment: Array  # log p(D_k | D_<k)
    num_annealing_steps: Array  # intermediate distributions used for this chunk
    ess: Array  # ESS (count) of the weights at the end of the chunk (before any resampling after it)
    num_seen: Array
    num_moves: Array  # SGHMC steps per particle in this chunk (all annealing steps)
    step_size: Array  # the last move's step: the whitened h (automatic) or η = lr / n (explicit)


# --- options --------------------------------------------------------------------------------

class _Config(NamedTuple):
    num_particles: int | None  # None: taken from the positions at init
    chunk_size: int
    minibatch_size: int
    target_ess: float  # a fraction of the particles in (0, 1]; a legacy count when > 1
    learning_rate: float | None  # None: the step is chosen from the particles (see ``sgais``)
    alpha: float | None  # None: critical damping of the whitened dynamics (auto step only)
    noise_offset: float
    burn_in: int | None  # None: ceil(move_time / step) (auto step only)
    resample: str  # "never", "chunk" or "every_move"
    weighting: str  # "per_chunk" or "carried"
    max_annealing_steps: int
    max_chunk_bias: float  # nats: the mini-batch bias allowed per chunk (auto step)
    max_step: float  # largest whitened step h (auto step; the noise-free limit)
    move_time: float  # whitened time h × burn_in of one move (auto burn_in)
    max_burn_in: int  # cap on the auto burn_in
    reservoir_size: int | None  # slots of the mini-batch reservoir; None: all data seen


RESAMPLE_OPTIONS = ("never", "chunk", "every_move")
WEIGHTING_OPTIONS = ("per_chunk", "carried")
DEFAULTS = types.MappingProxyType(dict(
    num_particles=None, chunk_size=500, minibatch_size=500, target_ess=0.9, learning_rate=None, alpha=None,
    burn_in=None, resample="every_move", weighting="per_chunk", noise_offset=0.0, max_annealing_steps=1000,
    max_chunk_bias=0.05, max_step=0.3, move_time=4.0, max_burn_in=1000))
"""The keyword defaults shared by ``sgais`` and ``sgais_stream`` (read-only; ``reservoir_size``,
whose default differs between the two, is not among them). ``sgais_defaults()`` returns a copy."""


def sgais_defaults() -> dict:
    """The keyword defaults of ``jaxz.sgais`` and ``jaxz.sgais_stream`` (a fresh dict of
    option name → default; ``reservoir_size`` is None for ``sgais`` and 100,000 for
    ``sgais_stream``, so it is not listed). None means "chosen from the particles": M from
    the positions, the step, friction and burn-in of the automatic SGHMC move."""
    return dict(DEFAULTS)


def _count(name: str, value, minimum: int, what: str) -> int:
    """A count as a Python int, or a ValueError naming it (20.5, True, "5" are refused)."""
    return _checks.integer(name, value, minimum=minimum, what=what)


def _make_config(options: dict, reservoir_size) -> _Config:
    """Check the options of ``sgais`` (a ValueError naming the argument) and pack them."""
    unknown = set(options) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown sgais options: {sorted(unknown)}")
    o = {**DEFAULTS, **options}
    num_particles = None if o["num_particles"] is None else _count(
        "num_particles", o["num_particles"], 2, "or None: taken from the positions")
    chunk_size = _count("chunk_size", o["chunk_size"], 1, "rows per chunk, at most the number of observations")
    minibatch_size = _count("minibatch_size", o["minibatch_size"], 1, "rows per mini-batch")
    _check_target_ess(float(o["target_ess"]), num_particles)
    learning_rate = o["learning_rate"]
    if learning_rate is not None and not float(learning_rate) > 0.0:
        raise ValueError(f"learning_rate must be > 0 (or None: chosen from the particles), got {learning_rate}")
    alpha = o["alpha"]
    if alpha is not None and not 0.0 < float(alpha) <= 1.0:
        raise ValueError(f"alpha must be in (0, 1] (or None: critical damping), got {alpha}")
    # the friction the noise offset β̂ is taken from: α, else the seed's with an explicit learning rate; the
    # automatic step's critical damping min(2h, 1) leaves room for β̂ < 1 at its steps h ≤ max_step = 0.3
    friction = alpha if alpha is not None else (_sghmc.SEED_FRICTION if learning_rate is not None else 1.0)
    if not 0.0 <= float(o["noise_offset"]) < float(friction):
        raise ValueError(f"noise_offset must be in [0, {float(friction)}) (the friction alpha"
                         f"{'' if alpha is not None else ' it defaults to'}), got {o['noise_offset']}")
    burn_in = None if o["burn_in"] is None else _count("burn_in", o["burn_in"], 1,
                                                        "SGHMC steps per move, or None: from the step")
    max_annealing_steps = _count("max_annealing_steps", o["max_annealing_steps"], 1, "per chunk")
    if not float(o["max_chunk_bias"]) > 0.0:
        raise ValueError(f"max_chunk_bias must be > 0 (nats per chunk), got {o['max_chunk_bias']}")
    if not 0.0 < float(o["max_step"]) <= 1.0:
        raise ValueError(f"max_step must be in (0, 1], got {o['max_step']}")
    if not float(o["move_time"]) > 0.0:
        raise ValueError(f"move_time must be > 0, got {o['move_time']}")
    max_burn_in = _count("max_burn_in", o["max_burn_in"], 1, "cap on the automatic burn_in")
    if reservoir_size is not None:
        reservoir_size = _count("reservoir_size", reservoir_size, 1, "slots, or None: all data seen")
    resample = o["resample"]
    if isinstance(resample, bool):  # the historical flag: True = resample after a degenerate chunk
        resample = "chunk" if resample else "never"
    if resample not in RESAMPLE_OPTIONS:
        raise ValueError(f"resample must be False, True or one of {RESAMPLE_OPTIONS}, got {o['resample']!r}")
    if o["weighting"] not in WEIGHTING_OPTIONS:
        raise ValueError(f"weighting must be one of {WEIGHTING_OPTIONS}, got {o['weighting']!r}")
    return _Config(num_particles, chunk_size, minibatch_size, float(o["target_ess"]),
                   None if learning_rate is None else float(learning_rate), None if alpha is None else float(alpha),
                   float(o["noise_offset"]), burn_in, resample, o["weighting"], max_annealing_steps,
                   float(o["max_chunk_bias"]), float(o["max_step"]), float(o["move_time"]), max_burn_in,
                   reservoir_size)


def _check_target_ess(target_ess: float, num_particles: int | None) -> None:
    """target_ess ∈ (0, 1] is a fraction of the particles; > 1 is the legacy absolute count
    (in (1, num_particles]), accepted unchanged. The two ranges do not overlap."""
    if not target_ess > 0.0:
        raise ValueError(f"target_ess must be a fraction of the particles in (0, 1] (or a legacy count in "
                         f"(1, num_particles]), got {target_ess}")
    if target_ess > 1.0 and num_particles is not None and target_ess > num_particles:
        raise ValueError(f"target_ess must be a fraction of the particles in (0, 1] (or a legacy count in "
                         f"(1, num_particles] = (1, {num_particles}]), got {target_ess}")


def _target_count(target_ess: float, num_particles: int) -> float:
    """The ESS target as a particle count (Alg. 1's ESS*)."""
    return target_ess * num_particles if target_ess <= 1.0 else target_ess


def _check_data(data, chunk_size: int) -> int:
    """The number of observations N of ``data``, after checking that a chunk fits in it and
    that no row holds a nan (a nan row would zero every particle's weight). The nan check
    needs concrete values: it runs in ``init`` and, for ``jaxz.run``, in the step count
    (``num_chunks``), which ``jaxz.run`` reads before it traces ``init``."""
    num_rows = _particles.num_particles_of(data, "data", "observation")
    if chunk_size > num_rows:
        raise ValueError(f"chunk_size must be in [1, N] = [1, {num_rows}] (the number of observations), "
                         f"got {chunk_size}")
    _check_finite_rows(data)
    return num_rows


# --- the chunk's stochastic potential (seed eq. 4) ------------------------------------------

def _chunk_potential(log_prior_fn: Callable, log_likelihood_fn: Callable, config: _Config, unravel, chunk,
                     num_valid, pool, pool_size, num_seen, dtype) -> _sghmc.ChunkPotential:
    """The stochastic potential U of chunk D_k (seed eq. 4) on flat parameters (``unravel``
    maps them to θ): the chunk's rows past ``num_valid`` are masked, mini-batches come from
    the first ``pool_size`` rows of ``pool`` (the earlier observations, n = ``num_seen``)."""
    chunk_mask = jnp.arange(config.chunk_size) < num_valid
    # Seed eq. (4): (n/|B|) Σ_B log p(y|θ), B drawn with replacement from the n earlier rows,
    # estimates log p(D_<k | θ). When the pool of earlier rows fits in one mini-batch it is
    # used whole instead (each row weighted n/pool_size: exact, no gradient noise, same cost).
    exact_pool = pool_size <= config.minibatch_size
    slots = jnp.arange(config.minibatch_size)
    row_weight = jnp.where(
        exact_pool, jnp.where(slots < pool_size, num_seen.astype(dtype) / jnp.maximum(pool_size, 1), 0.0),
        num_seen.astype(dtype) / config.minibatch_size).astype(dtype)

    def draw_batch(rng_key):
        rows = jax.random.randint(rng_key, (config.minibatch_size,), 0, jnp.maximum(pool_size, 1))
        rows = jnp.where(exact_pool, slots, rows)
        return jax.tree.map(lambda leaf: leaf[rows], pool)

    def chunk_log_likelihood(flat_theta):
        values = jax.vmap(log_likelihood_fn, in_axes=(None, 0))(unravel(flat_theta), chunk)
        return jnp.sum(jnp.where(chunk_mask, values, 0.0)).astype(dtype)

    def potential(flat_theta, lam, batch):  # seed eq. (4)
        theta = unravel(flat_theta)
        batch_values = jax.vmap(log_likelihood_fn, in_axes=(None, 0))(theta, batch)
        return -(lam * chunk_log_likelihood(flat_theta) + jnp.sum(row_weight * batch_values)
                 + log_prior_fn(theta)).astype(dtype)

    def gradient_at(flat_theta, lam, rng_key):
        gradient = jax.grad(potential)(flat_theta, lam, draw_batch(rng_key))
        return jnp.where(jnp.isfinite(gradient), gradient, 0.0)  # a broken density must not poison θ

    return _sghmc.ChunkPotential(potential, gradient_at, draw_batch, chunk_log_likelihood, num_seen, num_valid,
                                 ~exact_pool, dtype)


# --- one chunk: adaptive annealing with SGHMC moves (Alg. 1 lines 4-10) ----------------------

class _Annealing(NamedTuple):
    """The carry of a chunk's annealing loop (Alg. 1 lines 5-10)."""
    flat: Array  # (M, d) the particles θ_i, flattened
    log_weights: Array  # (M,) log w_i
    lam: Array  # λ: how much of the chunk's likelihood is absorbed
    num_steps: Array  # annealing steps taken (intermediate distributions)
    log_z_increment: Array  # the log mean weights banked at the resamplings before each move
    status: Array
    rng_key: Array
    num_moves: Array  # SGHMC steps per particle, summed over the annealing steps
    step_size: Array  # the last move's step


def _next_lambda(log_likelihoods, lam, target_count: float):
    """Alg. 1 lines 6-7: λ' = λ + Δ, Δ ∈ (0, 1 − λ] such that the ESS of the increments
    ω_i = p(D_k | θ_i)^Δ alone (not the carried weights: eq. 2's schedule) is ESS*."""
    if target_count <= 1.0:  # ESS ≥ 1 always: the whole chunk in one step, no annealing (seed Fig. 6)
        return jnp.ones_like(lam)
    return next_temperature(jnp.zeros_like(log_likelihoods), lambda lam_new: (lam_new - lam) * log_likelihoods,
                            lam, target_count, conditional=False)


def _resample_before_move(rng_key, flat, log_weights):
    """The optional step of the seed's §3 before line 9: θ ~ w (systematic), then
    w_i ← mean_j w_j. Returns (flat, log_weights, log mean w banked into p̂(D_k | D_<k),
    status). The weights are ESS-targeted (line 6), so only a collapse below 2 effective
    particles is flagged (STATUS_FEW_PARTICLES, as ``jaxz.smc`` does)."""
    step_log_mean = _weights.log_mean_exp(log_weights)
    collapsed = (_weights.ess(log_weights) < _particles.MIN_EFFECTIVE_PARTICLES) & (log_weights.shape[0] > 1)
    status = jnp.where(collapsed, STATUS_FEW_PARTICLES, 0).astype(jnp.int32)
    flat = flat[_resampling.systematic(rng_key, log_weights)]
    # a dead population (all w = 0) stays dead: Ẑ is already −inf
    log_weights = jnp.where(jnp.isfinite(step_log_mean), jnp.zeros_like(log_weights), log_weights)
    return flat, log_weights, step_log_mean, status


def _annealing_step(chunk: _sghmc.ChunkPotential, move: Callable, carry: _Annealing, *, target_count: float,
                    resample_every_move: bool) -> _Annealing:
    """One pass of Alg. 1's inner loop: choose λ' (lines 6-7), reweight (line 8), optionally
    resample (§3), move every particle by SGHMC at λ' (line 9)."""
    # one key per use: with partitionable threefry, fold_in(k, 1) is split(k, n)[1], the move's own sub-key
    rng_key, key_move, key_select = jax.random.split(carry.rng_key, 3)
    flat, lam, log_z_increment = carry.flat, carry.lam, carry.log_z_increment
    log_likelihoods = jax.vmap(chunk.chunk_log_likelihood)(flat)  # log p(D_k | θ_i)
    lam_new = _next_lambda(log_likelihoods, lam, target_count)
    increments, status = _weights.sanitize((lam_new - lam) * log_likelihoods)
    log_weights = carry.log_weights + increments  # line 8
    status = carry.status | status
    population = (flat, log_weights)  # the weighted particles at λ' (read by the automatic metric)
    if resample_every_move:
        flat, log_weights, step_log_mean, resample_status = _resample_before_move(key_select, flat, log_weights)
        log_z_increment = log_z_increment + step_log_mean
        status = status | resample_status
    flat, num_moves, step_size = move(chunk, key_move, flat, lam_new, population)  # line 9
    return _Annealing(flat, log_weights, lam_new, carry.num_steps + 1, log_z_increment, status, rng_key,
                      carry.num_moves + num_moves, step_size.astype(chunk.dtype))


def anneal_chunk(rng_key, chunk: _sghmc.ChunkPotential, move: Callable, flat, log_weights, *, target_count: float,
                 resample_every_move: bool, max_annealing_steps: int) -> _Annealing:
    """Alg. 1 lines 4-10 for chunk D_k: from λ = 0, annealing steps until λ = 1 or
    ``max_annealing_steps`` (then λ < 1 is returned and the caller flags STATUS_MAX_STEPS).

    chunk: its stochastic potential (``_chunk_potential``); move(chunk, key, flat, λ,
    population) -> (flat, steps per particle, step): line 9 (``_sghmc.seed_move`` or
    ``auto_move``); flat (M, d) the particles; log_weights (M,) the weights they start with
    (zeros: line 2's w_i ← 1); target_count: ESS* as a count."""
    dtype = chunk.dtype

    def unfinished(carry: _Annealing):
        return (carry.lam < 1.0) & (carry.num_steps < max_annealing_steps)

    step = functools.partial(_annealing_step, chunk, move, target_count=target_count,
                             resample_every_move=resample_every_move)
    start = _Annealing(flat, log_weights, jnp.zeros((), dtype), jnp.int32(0), jnp.zeros((), dtype), jnp.int32(0),
                       rng_key, jnp.int32(0), jnp.zeros((), dtype))
    return jax.lax.while_loop(unfinished, step, start)


class _ChunkEnd(NamedTuple):
    log_z: Array  # log p̂(D_≤k)
    log_z_increment: Array  # log p̂(D_k | D_<k)
    log_weights: Array  # (M,) log w_i − log mean_j w_j: relative to the new Ẑ
    ess: Array  # ESS (a count) of the weights at the chunk's end
    variance: Array  # the delta-method variance of log mean w (a diagnostic)
    status: Array


def _close_chunk(annealed: _Annealing, log_z_before) -> _ChunkEnd:
    """The chunk's evidence factor: p̂(D_k | D_<k) = mean_i w_i (line 12 read after each
    chunk) times the means banked at resamplings before the moves. The weights enter
    relative to Ẑ, so the factor is log mean_i w_i; they leave relative to the new Ẑ."""
    log_weights = annealed.log_weights
    status = annealed.status | jnp.where(annealed.lam < 1.0, STATUS_MAX_STEPS, 0).astype(jnp.int32)
    end = _weights.log_mean_exp(log_weights)
    log_z_increment = annealed.log_z_increment + end
    stderr = _weights.stderr_log_mean_exp(log_weights)
    ess = _weights.ess(log_weights)
    log_z = log_z_before + log_z_increment
    status = status | _particles.degenerate_status(log_z)
    status = _weight_checks.low_ess_status(log_weights, status)  # a chunk resting on one particle
    log_weights = log_weights - jnp.where(jnp.isfinite(end), end, 0.0)  # keep w relative to Ẑ (line 12)
    return _ChunkEnd(log_z, log_z_increment, log_weights, ess, stderr**2, status)


def _weights_for_next_chunk(rng_key, flat, log_weights, ess, target_count: float, config: _Config):
    """What the next chunk starts from. resample="chunk" (not in the seed): resample by w
    where the chunk's ESS fell below ESS* (``jaxz.resampling.resample_if_needed`` on the
    count), then w_i ← mean_j w_j; weighting="per_chunk": w_i ← 1 whatever happened."""
    if config.resample == "chunk":
        resampled = _resampling.resample_if_needed(rng_key, log_weights, _resampling.systematic, target_count,
                                                   reference_count=1, ess=ess)
        flat = flat[resampled.ancestors]
        log_weights = jnp.where(resampled.resampled, jnp.zeros_like(log_weights), log_weights)  # relative to Ẑ
    if config.weighting == "per_chunk":
        log_weights = jnp.zeros_like(log_weights)
    return flat, log_weights


# --- the estimator: chunk after chunk ---------------------------------------------------------

def _move(config: _Config) -> Callable:
    """Line 9's SGHMC move: preconditioned from the particles (``learning_rate=None``) or
    the seed's eq. (3) with η = lr / n."""
    c = config
    if c.learning_rate is None:
        return functools.partial(_sghmc.auto_move, minibatch_size=c.minibatch_size, alpha=c.alpha,
                                 noise_offset=c.noise_offset, burn_in=c.burn_in, max_chunk_bias=c.max_chunk_bias,
                                 max_step=c.max_step, move_time=c.move_time, max_burn_in=c.max_burn_in)
    return functools.partial(_sghmc.seed_move, learning_rate=c.learning_rate, alpha=c.alpha,
                             noise_offset=c.noise_offset, burn_in=c.burn_in)


def _build(log_prior_fn: Callable, log_likelihood_fn: Callable, config: _Config):
    """(process_chunk, finalize): the per-chunk transition shared by the offline estimator
    and the streaming driver, and the Estimate of a state."""
    move = _move(config)

    def process_chunk(rng_key, state: SGAISState, chunk, num_valid, pool, pool_size):
        """Chunk D_k (its first ``num_valid`` rows; mini-batches from the first ``pool_size``
        rows of ``pool``): anneal, close, and add it to the reservoir."""
        dtype = state.log_z.dtype
        key_anneal, key_reservoir, key_resample = jax.random.split(rng_key, 3)
        num_valid = jnp.asarray(num_valid, jnp.int32)
        template = jax.tree.map(lambda leaf: leaf[0], state.positions)
        _, unravel = ravel_pytree(template)
        flat = jax.vmap(lambda theta: ravel_pytree(theta)[0])(state.positions).astype(dtype)
        num_particles = flat.shape[0]
        target_count = _target_count(config.target_ess, num_particles)
        potential = _chunk_potential(log_prior_fn, log_likelihood_fn, config, unravel, chunk, num_valid, pool,
                                     jnp.asarray(pool_size, jnp.int32), state.num_seen, dtype)
        # line 2 sets w_i ← 1 once per run ("carried"); "per_chunk" restarts every chunk from w_i = 1
        log_weights = state.log_weights if config.weighting == "carried" else jnp.zeros_like(state.log_weights)
        annealed = anneal_chunk(key_anneal, potential, move, flat, log_weights, target_count=target_count,
                                resample_every_move=config.resample == "every_move",
                                max_annealing_steps=config.max_annealing_steps)
        end = _close_chunk(annealed, state.log_z)
        flat, log_weights = _weights_for_next_chunk(key_resample, annealed.flat, end.log_weights, end.ess,
                                                    target_count, config)
        reservoir = state.reservoir
        if jax.tree.leaves(reservoir):  # the seed's §5: the chunk's rows enter the reservoir (Algorithm R)
            reservoir = reservoir_update(key_reservoir, reservoir, state.num_seen, chunk, num_valid)
        num_seen = state.num_seen + num_valid
        new_state = state._replace(
            positions=jax.vmap(unravel)(flat), log_weights=log_weights, log_z=end.log_z,
            log_z_variance=state.log_z_variance + end.variance, reservoir=reservoir, num_seen=num_seen,
            index=state.index + 1, status=state.status | end.status,
            cost=state.cost + (annealed.num_moves * num_particles).astype(dtype),
        )
        info = SGAISInfo(end.log_z, end.log_z_increment, annealed.num_steps, end.ess, num_seen, annealed.num_moves,
                         annealed.step_size)
        return new_state, info

    def finalize(state: SGAISState) -> Estimate:
        # nan by design (see ``sgais``): the chunks' delta-method variances ignore the
        # dependence between chunks and under-report the spread of log Ẑ
        stderr = jnp.full_like(state.log_z, jnp.nan)
        return Estimate(state.log_z, stderr.astype(state.log_z.dtype), state.cost,
                        state.status | _particles.degenerate_status(state.log_z))

    return process_chunk, finalize


def _check_functions(log_prior_fn, log_likelihood_fn, positions, datum) -> None:
    one = _particles.first_particle(positions)
    _particles.check_scalar_function("log_prior_fn", log_prior_fn, one)
    _particles.check_scalar_function("log_likelihood_fn", log_likelihood_fn, one, datum)


def _initial_state(positions, config: _Config, data, reservoir) -> SGAISState:
    found = _particles.num_particles_of(positions)
    if config.num_particles is not None and found != config.num_particles:
        raise ValueError(f"positions must hold num_particles = {config.num_particles} particles, got {found} "
                         "(or leave num_particles=None: it is taken from the positions)")
    if found < 2:
        raise ValueError(f"positions must hold at least 2 particles, got {found}")
    _check_target_ess(config.target_ess, found)
    dtype = _particles.float_dtype(positions)
    zero = jnp.zeros((), dtype)
    return SGAISState(positions, jnp.zeros((found,), dtype), zero, zero, data, reservoir, jnp.int32(0),
                      jnp.int32(0), jnp.bool_(False), jnp.int32(0), zero)


def sgais(
    log_prior_fn: Callable,
    log_likelihood_fn: Callable,
    *,
    num_particles: int | None = None,
    chunk_size: int = 500,
    minibatch_size: int = 500,
    target_ess: float = 0.9,
    learning_rate: float | None = None,
    alpha: float | None = None,
    burn_in: int | None = None,
    resample: bool | str = "every_move",
    weighting: str = "per_chunk",
    noise_offset: float = 0.0,
    max_annealing_steps: int = 1000,
    max_chunk_bias: float = 0.05,
    max_step: float = 0.3,
    move_time: float = 4.0,
    max_burn_in: int = 1000,
    reservoir_size: int | None = None,
) -> Estimator:
    """SGAIS over a data set, one ``step`` per chunk; ``Info.log_z`` is the online trace.

    log_prior_fn(θ) -> scalar: normalized log prior (Z_0 = 1).
    log_likelihood_fn(θ, datum) -> scalar: log p(y | θ) for ONE observation; ``datum`` is
        one row of ``data`` (a pytree whose leaves share the leading axis N, no nan).
    init(rng_key, positions, data): ``positions`` are prior draws (leading axis: particles).
    num_particles: None (default) takes M from the positions; an int must match them.
    chunk_size, minibatch_size: rows per chunk D_k (at most N; a last partial chunk is
        masked) and per mini-batch B (seed eq. 4).
    target_ess: ESS* of every reweighting (Alg. 1 line 6) as a fraction of the particles,
        in (0, 1] (default 0.9). A value ≤ 1/M takes each chunk in one step, with no
        annealing (the seed's Fig. 6 point 0.1 M). Values > 1 are read as the legacy
        absolute count (in (1, M]; the seed's 5 of 10): the ranges do not overlap. A chunk
        that moves the posterior far loses log Ẑ to the SMC's variance (low by about Var/2,
        Jensen); with ESS fraction ρ the schedule of eq. (2) takes steps ∝ 1/√(1/ρ − 1) and
        Var ∝ √(1/ρ − 1) (steps times each step's χ² = 1/ρ − 1), so 0.9 takes ~2.7x the
        steps of the seed's 0.5 for a third of its variance
        (``benchmarks/results/sgais_defaults.md``).
    learning_rate: None (default): the SGHMC moves of line 9 are set from the particles
        (``_sghmc.auto_move``): a whitened metric (the inverse of the potential's mean
        Hessian for d ≤ 256, the weighted particle variances above), BAOAB integration
        (Leimkuhler & Matthews 2013) of the seed's Langevin dynamics (§4), a step h that
        is stable (h√λ_max(H_z) ≤ 1, at most ``max_step``) and holds the per-chunk
        mini-batch bias m·h²·tr(H_z)/(4α|B|) (below) at ``max_chunk_bias`` nats, friction
        α = 2h (critical damping), and burn_in = ⌈``move_time`` / h⌉ ≤ ``max_burn_in``.
        A number: the seed's eq. (3) with η = learning_rate / n (n the rows absorbed),
        unpreconditioned, α = ``alpha`` or 0.2, ``burn_in`` or 20 (the seed's §6.1
        settings with ``target_ess=0.5``, ``resample=False``).
    alpha, noise_offset: SGHMC friction α per step and gradient-noise estimate β̂ (0 ≤ β̂ < α).
    weighting: "per_chunk" (default) sets w_i ← 1 at the start of every chunk and multiplies
        the chunks' means, log Ẑ = Σ_k log mean_i w_ik (each chunk an AIS run from the
        previous chunk's particles, taken as equally weighted). "carried" follows Alg. 1
        as written: w_i ← 1 once (line 2), increments accumulate across chunks, and the
        estimate is the mean of the accumulated weights (line 12); without resampling these
        degenerate over chunks (the annealing targets the ESS of the increments only, line 6).
    resample: "every_move" (default): before every SGHMC move (the optional step of §3
        before line 9), resample θ by w (systematic) and set w_i ← mean_j w_j; the two
        weightings then coincide, and a chunk ends on equally weighted particles, so
        "per_chunk" discards no weights. False / "never": the seed's default (the weights
        left at a chunk's end are then dropped by "per_chunk", a bias). True or "chunk":
        after a chunk whose weights' ESS fell below ESS* (not in the seed), then
        w_i ← mean_j w_j.
    max_annealing_steps: cap per chunk (STATUS_MAX_STEPS when hit).
    reservoir_size: None draws mini-batches from all data seen; an int draws them from a
        reservoir of that many slots (what ``stream`` does), so both give the same bits.
        While the earlier rows fit in one mini-batch they are used whole (no noise).

    ``cost`` counts SGHMC steps summed over particles. ``log_z_stderr`` is nan by design:
    every chunk reweights the same particles, moved by SGHMC from the previous chunk's
    population, so the chunks' log mean w are dependent and no single-run standard error
    is known for the product (the sum of the chunks' delta-method variances,
    ``state.log_z_variance``, kept as a diagnostic, under-reports the run-to-run spread;
    ``benchmarks/calibration.py``). Pool independent runs with ``jaxz.combine_runs`` for
    an error bar; it does not see the bias of SGHMC either (no Metropolis correction).
    Status: STATUS_FEW_PARTICLES where a reweighting left fewer than 2 effective particles,
    STATUS_HEAVY_TAIL where a chunk's final weights are too heavy-tailed
    (``_weight_checks.low_ess_status``), STATUS_NONFINITE for a nan likelihood (zero
    weight), STATUS_MAX_STEPS, STATUS_DEGENERATE. A nan in ``data`` is a ValueError
    wherever the data are concrete (``init``, and ``jaxz.run`` before it traces ``init``);
    data passed traced (e.g. as an argument of ``jit``) cannot be read, and a nan row
    then zeroes every weight: log Ẑ = −inf with STATUS_NONFINITE and STATUS_DEGENERATE.
    Error sources: see the module docstring.
    """
    config = _make_config(dict(num_particles=num_particles, chunk_size=chunk_size, minibatch_size=minibatch_size,
                               target_ess=target_ess, learning_rate=learning_rate, alpha=alpha, burn_in=burn_in,
                               resample=resample, weighting=weighting, noise_offset=noise_offset,
                               max_annealing_steps=max_annealing_steps, max_chunk_bias=max_chunk_bias,
                               max_step=max_step, move_time=move_time, max_burn_in=max_burn_in), reservoir_size)
    process_chunk, finalize = _build(log_prior_fn, log_likelihood_fn, config)

    def num_chunks(positions, data) -> int:
        # jaxz.run reads the step count before it traces init: the data are still concrete here
        return -(-_check_data(data, config.chunk_size) // config.chunk_size)

    def init(rng_key, positions, data) -> SGAISState:
        num_rows = _check_data(data, config.chunk_size)
        _check_functions(log_prior_fn, log_likelihood_fn, positions, jax.tree.map(lambda leaf: leaf[0], data))
        num_padded = -(-num_rows // config.chunk_size) * config.chunk_size  # whole chunks
        padded = _pad_rows(jax.tree.map(jnp.asarray, data), num_padded)
        reservoir = ()
        if config.reservoir_size is not None:
            reservoir = jax.tree.map(lambda leaf: jnp.zeros((config.reservoir_size,) + leaf.shape[1:], leaf.dtype),
                                     data)
        return _initial_state(positions, config, (padded, jnp.int32(num_rows)), reservoir)

    @freeze_when_done
    def step(rng_key, state: SGAISState):
        padded, num_rows = state.data
        start = state.index * config.chunk_size
        chunk = jax.tree.map(lambda leaf: jax.lax.dynamic_slice_in_dim(leaf, start, config.chunk_size, axis=0),
                             padded)
        num_valid = jnp.minimum(num_rows - start, config.chunk_size)
        if jax.tree.leaves(state.reservoir):
            pool = state.reservoir
            pool_size = jnp.minimum(state.num_seen, jax.tree.leaves(pool)[0].shape[0])
        else:  # every observation seen so far: the first num_seen rows
            pool, pool_size = padded, state.num_seen
        new_state, info = process_chunk(rng_key, state, chunk, num_valid, pool, pool_size)
        num_padded_chunks = jax.tree.leaves(padded)[0].shape[0] // config.chunk_size
        return new_state._replace(done=new_state.index >= num_padded_chunks), info

    return Estimator(init, step, finalize, num_chunks)


def _progress_bar(progress: bool, total: int | None):
    """A tqdm bar over chunks, or None (progress off, or tqdm not installed)."""
    if not progress:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm ships with the [repro] and [bench] extras, not the core
        warnings.warn("progress=True needs tqdm (pip install tqdm); streaming without a progress bar")
        return None
    return tqdm(total=total, desc="sgais", unit="chunk")


def stream(
    log_prior_fn: Callable,
    log_likelihood_fn: Callable,
    rng_key,
    positions,
    chunks: Iterable,
    *,
    reservoir_size: int = 100_000,
    progress: bool = True,
    total: int | None = None,
    callback: Callable | None = None,
    **options,
) -> Result:
    """Run SGAIS over a stream: ``chunks`` is an iterable of data pytrees (leading axis at
    most ``chunk_size``; a short chunk is padded and masked; no nan).

    Mini-batches come from a reservoir of ``reservoir_size`` slots (Algorithm R, the seed's
    §5), so memory is bounded however long the stream. The per-chunk step is jitted once
    (fixed shapes). Keys follow ``jaxz.run``, so the result equals ``jaxz.run(sgais(...,
    reservoir_size=reservoir_size), rng_key, positions, data)`` on the concatenated chunks.
    ``options`` are those of ``sgais`` (``sgais_defaults()``). Returns a ``jaxz.Result``
    whose trace stacks the per-chunk Info (``trace.log_z`` is the online log-evidence).
    ``callback(index, info)``, if given, is called on the host after each chunk has
    finished (for online use of the running evidence, or timing).
    """
    if reservoir_size is None:
        raise ValueError("reservoir_size must be an integer >= 1 (slots) for a stream, got None")
    config = _make_config(dict(options), reservoir_size)
    process_chunk, finalize = _build(log_prior_fn, log_likelihood_fn, config)
    slots = config.reservoir_size

    @jax.jit
    def chunk_step(rng_key, state, chunk, num_valid):
        pool_size = jnp.minimum(state.num_seen, slots)
        return process_chunk(rng_key, state, chunk, num_valid, state.reservoir, pool_size)

    init_key, loop_key = jax.random.split(rng_key)
    del init_key  # kept so the chunk keys match jaxz.run's
    keys = jax.random.split(loop_key, 1024)  # split is prefix-consistent: grown by doubling

    bar = _progress_bar(progress, total)
    state, infos = None, []
    for index, chunk in enumerate(chunks):
        num_valid = _particles.num_particles_of(chunk, "chunk", "observation")
        if not 1 <= num_valid <= config.chunk_size:
            raise ValueError(f"each chunk must hold 1 to chunk_size = {config.chunk_size} rows, got {num_valid}")
        _check_finite_rows(chunk, "chunk")
        chunk = _pad_rows(jax.tree.map(jnp.asarray, chunk), config.chunk_size)
        if state is None:
            reservoir = jax.tree.map(lambda leaf: jnp.zeros((slots,) + leaf.shape[1:], leaf.dtype), chunk)
            state = _initial_state(positions, config, (), reservoir)
        if index >= keys.shape[0]:
            keys = jax.random.split(loop_key, 2 * keys.shape[0])
        state, info = chunk_step(keys[index], state, chunk, jnp.int32(num_valid))
        infos.append(info)
        if callback is not None:
            callback(index, jax.block_until_ready(info))
        if bar is not None:
            bar.update(1)
            bar.set_postfix(log_z=f"{float(info.log_z):.2f}", steps=int(info.num_annealing_steps))
    if bar is not None:
        bar.close()
    if state is None:
        raise ValueError("chunks must yield at least one chunk")
    state = state._replace(done=jnp.bool_(True))
    trace = jax.tree.map(lambda *leaves: jnp.stack(leaves), *infos)
    return Result(finalize(state), state, trace, jnp.int32(len(infos)))


__all__ = ["sgais", "stream", "sgais_defaults", "DEFAULTS", "reservoir_update", "SGAISState", "SGAISInfo"]
