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
mini-batches come from a fixed-size reservoir (Vitter's Algorithm R), so memory stays
bounded; ``stream`` drives it from a Python iterator.

Symbols of the seed → arguments: M → ``num_particles`` (default: from the positions),
ESS* → ``target_ess`` · M, α → ``alpha`` (friction), β̂ → ``noise_offset``, |B| →
``minibatch_size``. η: by default chosen from the particles (a step, whitened by the
potential's Hessian or the particles' variances, that holds the per-chunk mini-batch bias
m·η·tr(I₁)/(4α|B|) at ``max_chunk_bias``; see ``sgais``);
an explicit ``learning_rate`` gives the seed's η = learning_rate / n (n = n_before + λ·|D_k|
the observations absorbed).
"""
import functools
import warnings
from typing import Any, Callable, Iterable, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxz import resampling as _resampling
from jaxz import weights as _weights
from jaxz.base import STATUS_LOW_ESS, STATUS_MAX_STEPS, Estimate, Estimator, Result, freeze_when_done
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


RESAMPLE_OPTIONS = ("never", "chunk", "every_move")
WEIGHTING_OPTIONS = ("per_chunk", "carried")
DEFAULTS = dict(num_particles=None, chunk_size=500, minibatch_size=500, target_ess=0.9, learning_rate=None,
                alpha=None, burn_in=None, resample="every_move", weighting="per_chunk", noise_offset=0.0,
                max_annealing_steps=1000, max_chunk_bias=0.05, max_step=0.3, move_time=4.0, max_burn_in=1000)


def _make_config(options: dict, reservoir_size) -> _Config:
    """Check the options of ``sgais`` (a ValueError naming the argument) and pack them."""
    unknown = set(options) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown sgais options: {sorted(unknown)}")
    o = {**DEFAULTS, **options}
    num_particles = None if o["num_particles"] is None else int(o["num_particles"])
    if num_particles is not None and num_particles < 2:
        raise ValueError(f"num_particles must be >= 2 (or None: taken from the positions), got {num_particles}")
    if int(o["chunk_size"]) < 1:
        raise ValueError(f"chunk_size must be >= 1 (and at most the number of observations), got {o['chunk_size']}")
    if int(o["minibatch_size"]) < 1:
        raise ValueError(f"minibatch_size must be >= 1, got {o['minibatch_size']}")
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
    if o["burn_in"] is not None and int(o["burn_in"]) < 1:
        raise ValueError(f"burn_in must be >= 1 (or None: from the step), got {o['burn_in']}")
    if int(o["max_annealing_steps"]) < 1:
        raise ValueError(f"max_annealing_steps must be >= 1, got {o['max_annealing_steps']}")
    if not float(o["max_chunk_bias"]) > 0.0:
        raise ValueError(f"max_chunk_bias must be > 0 (nats per chunk), got {o['max_chunk_bias']}")
    if not 0.0 < float(o["max_step"]) <= 1.0:
        raise ValueError(f"max_step must be in (0, 1], got {o['max_step']}")
    if not float(o["move_time"]) > 0.0:
        raise ValueError(f"move_time must be > 0, got {o['move_time']}")
    if int(o["max_burn_in"]) < 1:
        raise ValueError(f"max_burn_in must be >= 1, got {o['max_burn_in']}")
    if reservoir_size is not None and int(reservoir_size) < 1:
        raise ValueError(f"reservoir_size must be >= 1 or None, got {reservoir_size}")
    resample = o["resample"]
    if isinstance(resample, bool):  # the historical flag: True = resample after a degenerate chunk
        resample = "chunk" if resample else "never"
    if resample not in RESAMPLE_OPTIONS:
        raise ValueError(f"resample must be False, True or one of {RESAMPLE_OPTIONS}, got {o['resample']!r}")
    if o["weighting"] not in WEIGHTING_OPTIONS:
        raise ValueError(f"weighting must be one of {WEIGHTING_OPTIONS}, got {o['weighting']!r}")
    return _Config(num_particles, int(o["chunk_size"]), int(o["minibatch_size"]), float(o["target_ess"]),
                   None if learning_rate is None else float(learning_rate), None if alpha is None else float(alpha),
                   float(o["noise_offset"]), None if o["burn_in"] is None else int(o["burn_in"]), resample,
                   o["weighting"], int(o["max_annealing_steps"]), float(o["max_chunk_bias"]), float(o["max_step"]),
                   float(o["move_time"]), int(o["max_burn_in"]))


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


def _build(log_prior_fn: Callable, log_likelihood_fn: Callable, config: _Config):
    """The per-chunk transition shared by the offline estimator and the streaming driver."""
    c = config
    if c.learning_rate is None:  # line 9, preconditioned by the weighted particles' scale at λ'
        move = functools.partial(_sghmc.auto_move, minibatch_size=c.minibatch_size, alpha=c.alpha,
                                 noise_offset=c.noise_offset, burn_in=c.burn_in, max_chunk_bias=c.max_chunk_bias,
                                 max_step=c.max_step, move_time=c.move_time, max_burn_in=c.max_burn_in)
    else:  # line 9: the seed's eq. (3), η = lr / n
        move = functools.partial(_sghmc.seed_move, learning_rate=c.learning_rate, alpha=c.alpha,
                                 noise_offset=c.noise_offset, burn_in=c.burn_in)

    def process_chunk(rng_key, state: SGAISState, chunk, num_valid, pool, pool_size):
        """One chunk: adaptive annealing of p(D_k | θ)^λ with SGHMC moves (seed Alg. 1)."""
        dtype = state.log_z.dtype
        key_anneal, key_reservoir, key_resample = jax.random.split(rng_key, 3)
        num_valid = jnp.asarray(num_valid, jnp.int32)
        n_before = state.num_seen
        n_after = n_before + num_valid
        pool_size = jnp.asarray(pool_size, jnp.int32)

        template = jax.tree.map(lambda leaf: leaf[0], state.positions)
        _, unravel = ravel_pytree(template)
        flat = jax.vmap(lambda theta: ravel_pytree(theta)[0])(state.positions).astype(dtype)
        num_particles = flat.shape[0]
        target_count = _target_count(c.target_ess, num_particles)
        chunk_potential = _chunk_potential(log_prior_fn, log_likelihood_fn, c, unravel, chunk, num_valid, pool,
                                           pool_size, n_before, dtype)

        def cond(carry):
            lam, count = carry[2], carry[3]
            return (lam < 1.0) & (count < c.max_annealing_steps)

        def body(carry):
            flat, log_weights, lam, count, log_z_increment, status, key, moves, _ = carry  # _: the last step size
            # one key per use: with partitionable threefry, fold_in(k, 1) is split(k, n)[1], the move's own sub-key
            key, key_move, key_select = jax.random.split(key, 3)
            log_likelihoods = jax.vmap(chunk_potential.chunk_log_likelihood)(flat)

            def log_increment_fn(lam_new):
                return (lam_new - lam) * log_likelihoods

            if target_count <= 1.0:  # ESS ≥ 1 always: the whole chunk in one step, no annealing (seed Fig. 6)
                lam_new = jnp.ones_like(lam)
            else:  # line 6: Δ such that ESS(Δ) of the increments ω_i = p(D_k|θ_i)^Δ is ESS* (a count)
                lam_new = next_temperature(
                    jnp.zeros_like(log_weights), log_increment_fn, lam, target_count, conditional=False
                )
            increments, increment_status = _weights.sanitize(log_increment_fn(lam_new))
            log_weights = log_weights + increments  # line 8
            status = status | increment_status
            population = (flat, log_weights)  # the weighted particles at λ' (read by the auto scale)
            if c.resample == "every_move":  # §3, optional before line 9: θ ~ w, then w_i ← mean_j w_j
                step_log_mean = _weights.log_mean_exp(log_weights)
                log_z_increment = log_z_increment + step_log_mean
                # a step's weights are ESS-targeted (line 6): flag only a collapse below 2
                # effective particles, as jaxz.smc does (their Pareto tail is not an estimate's)
                collapsed = _weights.ess(log_weights) < _particles.MIN_EFFECTIVE_PARTICLES
                status = jnp.where(collapsed & (num_particles > 1), status | STATUS_LOW_ESS, status)
                flat = flat[_resampling.systematic(key_select, log_weights)]
                # a dead population (all w = 0) stays dead: Ẑ is already −inf
                log_weights = jnp.where(jnp.isfinite(step_log_mean), jnp.zeros_like(log_weights), log_weights)
            flat, num_moves, used_step = move(chunk_potential, key_move, flat, lam_new, population)  # line 9
            return (flat, log_weights, lam_new, count + 1, log_z_increment, status, key, moves + num_moves,
                    used_step.astype(dtype))

        # line 2 sets w_i ← 1 once per run ("carried"); "per_chunk" restarts every chunk from w_i = 1
        log_weights = state.log_weights if c.weighting == "carried" else jnp.zeros_like(state.log_weights)
        start = (flat, log_weights, jnp.zeros((), dtype), jnp.int32(0), jnp.zeros((), dtype), jnp.int32(0),
                 key_anneal, jnp.int32(0), jnp.zeros((), dtype))
        flat, log_weights, lam, num_steps, log_z_increment, status, _, moves, used_step = jax.lax.while_loop(
            cond, body, start)
        status = status | jnp.where(lam < 1.0, STATUS_MAX_STEPS, 0).astype(jnp.int32)

        # p(D_k | D_<k) ≈ mean_i w_i / mean_i w_i(before the chunk); log_weights are relative to Ẑ, so
        # the chunk's factor is log mean_i w_i (times the means banked at every_move resamplings)
        end = _weights.log_mean_exp(log_weights)
        log_z_increment = log_z_increment + end
        stderr = _weights.stderr_log_mean_exp(log_weights)
        ess = _weights.ess(log_weights)
        log_z = state.log_z + log_z_increment
        status = status | _particles.degenerate_status(log_z)
        status = _weight_checks.low_ess_status(log_weights, status)  # a chunk resting on one particle
        log_weights = log_weights - jnp.where(jnp.isfinite(end), end, 0.0)  # keep w relative to Ẑ (line 12)

        if c.resample == "chunk":  # optional: resample after a chunk whose weights have degenerated
            low = ess < target_count
            ancestors = jnp.where(low, _resampling.systematic(key_resample, log_weights),
                                  jnp.arange(num_particles, dtype=jnp.int32))
            flat = flat[ancestors]
            log_weights = jnp.where(low, jnp.zeros_like(log_weights), log_weights)  # w_i ← mean_j w_j
        if c.weighting == "per_chunk":
            log_weights = jnp.zeros_like(log_weights)
        positions = jax.vmap(unravel)(flat)

        reservoir = state.reservoir
        if jax.tree.leaves(reservoir):
            reservoir = reservoir_update(key_reservoir, reservoir, n_before, chunk, num_valid)

        new_state = state._replace(
            positions=positions, log_weights=log_weights, log_z=log_z, log_z_variance=state.log_z_variance + stderr**2,
            reservoir=reservoir, num_seen=n_after, index=state.index + 1, status=state.status | status,
            cost=state.cost + (moves * num_particles).astype(dtype),
        )
        info = SGAISInfo(log_z, log_z_increment, num_steps, ess, n_after, moves, used_step)
        return new_state, info

    def finalize(state: SGAISState) -> Estimate:
        # nan by design (see the docstring): the chunks' delta-method variances ignore the
        # dependence between chunks and under-report (0.47x the spread, benchmarks/calibration.py).
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
        one row of ``data`` (a pytree whose leaves share the leading axis N).
    init(rng_key, positions, data): ``positions`` are prior draws (leading axis: particles).
    num_particles: None (default) takes M from the positions; an int must match them.
    target_ess: ESS* of every reweighting (Alg. 1 line 6) as a fraction of the particles,
        in (0, 1] (default 0.9: ESS* = 0.9 M, so it follows M). A value ≤ 1/M takes each chunk
        in one step, with no annealing (the seed's Fig. 6 point 0.1 M). Values > 1 are read
        as the legacy absolute count (in (1, M]; the seed's 5 of 10 = 0.5): the two ranges
        do not overlap, so old calls keep their meaning. Why 0.9 and not the seed's 0.5: the
        chunks that move the posterior far (the first ones; exact gradients there, no
        mini-batch) lose log Ẑ to the SMC's variance (log Ẑ low by about Var/2, Jensen), and
        with a fixed ESS fraction ρ the schedule of eq. (2) takes steps ∝ 1/√(1/ρ − 1) while
        Var ∝ √(1/ρ − 1) (the step count times each step's χ² = 1/ρ − 1): 0.9 takes ~2.7x
        the steps of 0.5 and a third of its variance. Measured on 4-class logistic regression
        (44 parameters, 100 particles, 1,000 rows in two chunks, 6 runs each, against
        importance sampling): −0.122 % ± 0.057 (sd) at 0.5, −0.040 % ± 0.050 at 0.8,
        −0.016 % ± 0.023 at 0.9; a step of 0.15 instead of 0.3 (−0.135 %) or moves twice as
        long (−0.087 %) did not help, so it is the schedule, not the SGHMC discretization
        (the seed's §7.3.1, Fig. 6: a higher ESS* adds steps, mostly on the early chunks).

    The SGHMC moves (line 9). With ``learning_rate=None`` (default) nothing is hand-set:

    - metric: each move runs on z with θ = A z (mass M⁻¹ = A Aᵀ), where the posterior has
      unit scale at any n and any data scale (features on scales 0.2 to 3 give a potential
      10³ times stiffer in some directions than in others; whitened, one step serves them
      all). For d ≤ 256, M⁻¹ is the inverse of the potential's mean Hessian at λ over 4
      particles (a constant Riemannian metric, Girolami & Calderhead 2011; eigenvalues
      floored at the particles' spread along each eigenvector, so a flat or non-convex
      direction takes the spread); above, the diagonal of the weighted particle variances
      (``jaxz.kernels.tuning.weighted_covariance``). The diagonal alone fails on correlated
      posteriors: on 4-class logistic regression (d = 44) it left tr(H_z) ≈ 960 and
      λ_max/λ_min ≈ 220 at n = 1,000 (the softmax's contrasts against its prior-only
      direction), a bias-limited step of 0.0005 and moves capped short of the posterior:
      −1.35 ± 0.4 nats on the first noisy chunk (4 runs of 40 particles), about −0.5 with
      the dense metric (27 runs over several settings);
    - step h (``auto_step``): the seed's η is h² in these units and lr·tr(I₁) becomes
      h²·tr(H_z) (H_z the whitened Hessian of the potential: ≈ d when the particles'
      variances match the posterior, larger where it is correlated, e.g. softmax weights;
      Hutchinson-estimated). h is the smaller of 1/√λ_max(H_z) (power iteration; BAOAB is
      stable below 2) and the step that holds the per-chunk mini-batch bias
      m·h²·tr(H_z)/(4α|B|) (below) at ``max_chunk_bias`` nats (default 0.05: 10⁻⁴ nats per
      row at m = 500, well under 0.01 % of log Z for likelihoods of ~1 nat per row), with
      friction α = 2h (critical damping of a unit mode): h = 8|B|δ/(m tr H_z). Without
      gradient noise (the earlier rows fit in one mini-batch: the first chunks) only
      stability and ``max_step`` (0.3) bound h. (The target's own Hessian diagonal as the
      scale was tried too: on 4-class logistic regression it whitens away the softmax's
      prior-only direction and mixed worse, −1.1 % against −0.02 % on a first chunk.)
    - integrator: the BAOAB splitting (Leimkuhler & Matthews 2013) of the seed's Langevin
      dynamics (§4) instead of the Euler-type eq. (3): exact for Gaussian targets at any
      stable step, so the first chunk (prior → a posterior 10³ times narrower, no
      mini-batch) carries no discretization bias at h = 0.3;
    - burn_in = ⌈``move_time`` / h⌉ (whitened time 4 per move: a critically damped unit
      mode keeps a position correlation (1 + t)e^{−t} of 0.09 after it, 0.56 after the
      earlier 1.5, so resampled duplicates part), at most ``max_burn_in`` (1,000).

    An explicit ``learning_rate`` wins: the seed's eq. (3) with η = learning_rate / n (n the
    rows absorbed), unpreconditioned, α = ``alpha`` or 0.2, ``burn_in`` or 20 (the seed's
    §6.1 settings with ``target_ess=0.5``, ``resample=False``).
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
        "per_chunk" discards no weights (without it, the weights left at a chunk's end —
        ESS well below M after a first chunk of many steps — are dropped, a bias).
        False / "never": the seed's default. True or "chunk": after a chunk whose weights'
        ESS fell below ESS* (not in the seed), then w_i ← mean_j w_j.
    max_annealing_steps: cap per chunk (STATUS_MAX_STEPS when hit).
    reservoir_size: None draws mini-batches from all data seen; an int draws them from a
        reservoir of that many slots (what ``stream`` does), so both give the same bits.
        While the earlier rows fit in one mini-batch they are used whole (no noise).
    A last partial chunk is masked. ``cost`` counts SGHMC steps summed over particles;
    ``log_z_stderr`` is nan by design: every chunk reweights the same particles, moved by
    SGHMC from the previous chunk's population, so the chunks' log mean w are dependent
    and no single-run standard error is known for the product (the sum of the chunks'
    delta-method variances, ``state.log_z_variance``, kept as a diagnostic, measured
    0.47x the run-to-run spread on linear regression in benchmarks/calibration.py). Pool
    independent runs with ``jaxz.combine_runs`` for an error bar; note that it does not
    see the bias of SGHMC either (no Metropolis correction).

    Accuracy notes (linear regression, 6 parameters, exact evidence; measured, x64):

    - First chunk: AIS/SMC from the prior, unbiased for Z, so log Ẑ is low by about
      Var(log Ẑ)/2. With the seed's settings (10 particles / ESS* 5, eq. (3) at lr 0.1) on
      500 observations: −4.0 ± 0.45 nats (sd 2.5 over 32 runs, 0.5% of log Z); 20 particles /
      ESS* 18: −0.7 ± 0.1 (sd 0.6). It dominates the error at small N.
    - Later chunks: mini-batch gradient noise heats SGHMC. With η = lr/n and a gradient of
      covariance n² I₁/|B| (I₁ the per-observation Fisher information), the stationary
      variance grows by lr/(2α|B|) per unit of I₁, and integrating E[log p(D_k | θ)] over λ
      under the wider distribution gives a bias per chunk of about
      −m · lr · tr(I₁) / (4 α |B|)   (m = chunk size; n ≫ m; many annealing steps),
      independent of n, so it adds up linearly over the stream. Seed settings (m = |B| =
      500, α = 0.2, tr(I₁) = 6) at lr = 1.0: 7.5 nats predicted; measured over chunks at
      n = 2,000–5,500 −7.8 ± 0.1 (20 particles, target_ess 18), −7.3 ± 0.3 (burn_in 2, the
      seed's Fig. 8 point), −6.0 ± 0.2 (seed defaults: fewer annealing steps, so nearer the
      one-step importance-sampling value); −1.0 at lr 0.3 and −0.3 at lr 0.1. Neglected
      factors: n/(n+m) early on, and eq. (3)'s discretization, which widens the stationary
      distribution by 1/(1 − lr/(2(2−α))) (1.38 at lr 1). With unit noise the seed's
      lr = 0.1 thus costs 0.3 nats a chunk; on stiffer data (noise sd 0.5: tr(I₁) 4x
      larger) 4x more, and on features of scale 3 the step η·λmax(n I₁) exceeds eq. (3)'s
      stability limit in the first chunk (log Ẑ = −inf): what the automatic step removes.
    """
    config = _make_config(dict(num_particles=num_particles, chunk_size=chunk_size, minibatch_size=minibatch_size,
                               target_ess=target_ess, learning_rate=learning_rate, alpha=alpha, burn_in=burn_in,
                               resample=resample, weighting=weighting, noise_offset=noise_offset,
                               max_annealing_steps=max_annealing_steps, max_chunk_bias=max_chunk_bias,
                               max_step=max_step, move_time=move_time, max_burn_in=max_burn_in), reservoir_size)
    process_chunk, finalize = _build(log_prior_fn, log_likelihood_fn, config)

    def num_chunks(positions, data) -> int:
        return -(-_particles.num_particles_of(data, "data", "observation") // config.chunk_size)

    def init(rng_key, positions, data) -> SGAISState:
        num_rows = _particles.num_particles_of(data, "data", "observation")
        if config.chunk_size > num_rows:
            raise ValueError(f"chunk_size must be in [1, N] = [1, {num_rows}] (the number of observations), "
                             f"got {config.chunk_size}")
        _check_finite_rows(data)
        _check_functions(log_prior_fn, log_likelihood_fn, positions, jax.tree.map(lambda leaf: leaf[0], data))
        padded = _pad_rows(jax.tree.map(jnp.asarray, data), num_chunks(positions, data) * config.chunk_size)
        reservoir = ()
        if reservoir_size is not None:
            reservoir = jax.tree.map(lambda leaf: jnp.zeros((int(reservoir_size),) + leaf.shape[1:], leaf.dtype), data)
        return _initial_state(positions, config, (padded, jnp.int32(num_rows)), reservoir)

    @freeze_when_done
    def step(rng_key, state: SGAISState):
        padded, num_rows = state.data
        start = state.index * config.chunk_size
        chunk = jax.tree.map(
            lambda leaf: jax.lax.dynamic_slice_in_dim(leaf, start, config.chunk_size, axis=0), padded
        )
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
    most ``chunk_size``; a short chunk is padded and masked).

    Mini-batches come from a reservoir of ``reservoir_size`` slots (Algorithm R), so
    memory is bounded however long the stream. The per-chunk step is jitted once (fixed
    shapes). Keys follow ``jaxz.run``, so the result equals ``jaxz.run(sgais(...,
    reservoir_size=reservoir_size), rng_key, positions, data)`` on the concatenated chunks.
    ``options`` are those of ``sgais``. Returns a ``jaxz.Result`` whose trace stacks the
    per-chunk Info (``trace.log_z`` is the online log-evidence). ``callback(index, info)``,
    if given, is called on the host after each chunk has finished (for online use of the
    running evidence, or timing).
    """
    config = _make_config(dict(options), reservoir_size)
    process_chunk, finalize = _build(log_prior_fn, log_likelihood_fn, config)
    slots = int(reservoir_size)

    @jax.jit
    def chunk_step(rng_key, state, chunk, num_valid):
        pool_size = jnp.minimum(state.num_seen, slots)
        new_state, info = process_chunk(rng_key, state, chunk, num_valid, state.reservoir, pool_size)
        return new_state, info

    init_key, loop_key = jax.random.split(rng_key)
    del init_key  # kept so the chunk keys match jaxz.run's
    keys = jax.random.split(loop_key, 1024)  # split is prefix-consistent: grown by doubling

    iterator = iter(chunks)
    bar = None
    if progress:
        try:
            from tqdm.auto import tqdm
        except ImportError:  # tqdm ships with the [repro] and [bench] extras, not the core
            warnings.warn("progress=True needs tqdm (pip install tqdm); streaming without a progress bar")
        else:
            bar = tqdm(total=total, desc="sgais", unit="chunk")
    state, infos = None, []
    for index, chunk in enumerate(iterator):
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


__all__ = ["sgais", "stream", "reservoir_update", "SGAISState", "SGAISInfo"]
