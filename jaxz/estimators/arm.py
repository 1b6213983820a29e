"""Resample-Move (RM, seed Alg. 1) and Adaptive Resample-Move (ARM, seed Alg. 2) for
targets built one variable at a time (Fraccaro, Paquet & Winther 2016, "An Adaptive
Resample-Move Algorithm for Estimating Normalizing Constants").

A ``jaxz.SequentialModel`` defines p_1, ..., p_N with f_{n+1}(x_[n+1]) extending
f_n(x_[n]); log Z = log Z_1 + Σ_n log Z_{n+1}/Z_n (seed eq. 2). One step goes from level
n to n + 1 and reads like seed Alg. 2:

1. smooth (Alg. 1/2, line 4): each of the R particles x^r targeting p_n, with normalized
   weight w̃^r, gets the weight w̃^r W(x^r_[n]), W = ∫ f_{n+1}/f_n dx_{n+1} (seed eq. 3);
2. generate (Alg. 2): if γ⁽⁰⁾ = ESS/R < γ_thr, empty the pool ("x := ∅", R_n := 0) and,
   while γ⁽ⁱ⁾ = ESS/R_n < γ_thr and i < i_max, make a new block of particles targeting
   p_n, smooth it and include it in the pool with Prop. 1's rescaling
       pool weights × R_n/(R_n + R),   new block × R/(R_n + R),   R_n ← R_n + R,
   so R_n ≤ i_max·R (seed §3). How a block is made is the variant (seed §3.2):
   ``"plain"`` moves the old set with the p_n-invariant kernel; ``"anticipate"`` first
   splits each particle into m_r = max(1, ⌊R w̃_{n+1}^r⌋) copies of weight w̃^r/m_r, so
   the moves explore around the particles p_{n+1} favours; ``"reseed"`` (seed §5.1) also
   adds S = max(⌊(1 − γ/γ_thr) R⌋, min_reseed) particles from ``reseed_fn`` (approximate
   draws of p_n), weight 1/S each;
3. log Ẑ_{n+1} = log Ẑ_n + log Σ_pool w_{n+1} (Alg. 1, line 5): a masked logsumexp;
4. resample back to R (Alg. 2, lines 7-8; residual by default) when γ < γ_thr or R_n > R
   (``resample_ess=c``: when ESS < c·R or R_n > R, the "R_eff < 0.9R" of seed §4.2),
   augment x_{n+1} ~ p_{n+1}(· | x_[n]) (Alg. 1, line 11: the smooth weight integrated
   x_{n+1} out, so drawing it after resampling is exact) and move every particle with the
   p_{n+1}-invariant kernel (Alg. 1, line 3 of the next level).

RM (seed Alg. 1) is ``max_generate=0``. ``generate="continue"`` is Alg. 2 as printed: the
same set is moved again each iteration, its chains continuing. ``generate="restart"``
keeps the unmoved old set in the pool (R_n up to (1 + i_max)R) and moves a fresh copy of
it each iteration (``benchmarks/arm_readings.py`` compares the two).

Reseeds that are not draws of p_n bias Ẑ without bound, so each is checked: the
weighted old set and the reseeded particles are two samples of p_n and must agree on
Z_{n+1}/Z_n within their delta-method s.e.s; a |z| above RESEED_DISAGREEMENT flags the
run STATUS_RUNS_DISAGREE (``ARMInfo.reseed_disagreement``: each level's largest |z|).
Reseeds a little off at every level, always the same way, pass that check and add up, so
the levels' signed differences are also summed: |Σ_n d_n| / sqrt(Σ_n var_n) above
RESEED_DRIFT flags the run too (``ARMInfo.reseed_drift``); with exact reseeds it is N(0, 1).
It narrows what passes unflagged, it does not close it: reseed from chains long enough to
mix, or check against plain ARM (``tests/test_arm.py``, ``benchmarks/rbm784.py``).

Fixed shapes: the pool is a padded buffer of R + i_max·(C + S_max) slots (C = R, or 2R
for anticipate, which bounds Σ_r m_r; S_max = max(R, min_reseed) for reseed) with a mask;
masked slots are never read. The State holds the buffer as ``scratch``: each step writes
the particles into slots [0, R) and fills the rest, nothing in it is read across steps, so
``freeze_when_done`` passes it through instead of selecting over all its slots, and the
loop carries it in place. Memory: (1 + i_max·C/R)·R particles, held once.

Cost. ``Estimate.cost`` adds, for every particle moved at level n, ``model.move_cost(n)``
(one move in full-size transitions; e.g. t·n/N Gibbs sweeps for the RBM, whose sweep at
level n touches the n included units only, seed §5: O(tHn)), or ``model.num_transitions``
when the model gives no ``move_cost``; ``ARMInfo.num_moved`` counts the particle moves.

Bias: with i_max = 0 (RM) Ẑ is unbiased. ARM's adaptive stop is not: the loop ends when
γ reaches γ_thr, which happens sooner when the new blocks carry no large weights, so the
pooled increment is biased low (``benchmarks/results/arm_readings.json``). Replaying a
pilot's counts (``generate_counts=``: the rounded mean of pilot runs' ``num_generate``
per level) makes the loop independent of the weights it produces and Ẑ unbiased; the
adaptive default follows the seed.
"""
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import resampling as _resampling
from jaxz import weights as _weights
from jaxz.base import (
    STATUS_FEW_PARTICLES,
    STATUS_RUNS_DISAGREE,
    Estimate,
    Estimator,
    SequentialModel,
    freeze_when_done,
)
from jaxz.estimators import _particles
from jaxz.types import Array

VARIANTS = ("plain", "anticipate", "reseed")
GENERATE = ("continue", "restart")

# |z| above which ARM-reseed's check flags STATUS_RUNS_DISAGREE: z compares log Ẑ_{n+1}/Ẑ_n read
# from the reseeded particles (their mean smooth weight) with the same ratio read from the
# weighted old set, over the two delta-method s.e.s combined.
RESEED_DISAGREEMENT = 6.0
# |z| above which ARM-reseed's cumulative check flags STATUS_RUNS_DISAGREE: the levels' signed
# differences of the same two logs, summed, over the root of their summed variances (N(0, 1)
# under exact reseeds; see the module docstring).
RESEED_DRIFT = 4.0


class ARMState(NamedTuple):
    positions: Any  # (R, ...) the particles targeting p_n
    log_weights: Array  # (R,) normalized log w̃ of the particles
    log_z: Array  # log Ẑ_n (including log Z_1)
    n: Array  # current level, 1-based
    min_ess: Array  # smallest ESS (a count) of the weighted pool at any level
    done: Array
    status: Array
    cost: Array
    scratch: Any  # the pool buffer (capacity, ...): written and read within a step only
    # variant="reseed": (Σ_n d_n, Σ_n var_n) of the levels' reseed checks, the signed difference of the two
    # increments' logs and its variance (see RESEED_DRIFT); zeros otherwise
    reseed_drift: Array


class ARMInfo(NamedTuple):
    num_particles: Array  # R_n: live particles in the pool at the end of the generate loop
    # (max_generate + 1,): γ = ESS/R_n before generating (0) and after each iteration; 0 past num_generate
    gamma: Array
    num_generate: Array  # generate iterations used
    num_moved: Array  # particle moves made in this step (generate loop + the move at level n + 1)
    resampled: Array
    log_z_increment: Array  # log Ẑ_{n+1}/Ẑ_n
    # variant="reseed": the largest |z| of this level's reseed check (see RESEED_DISAGREEMENT); 0 otherwise
    reseed_disagreement: Array = 0.0
    # variant="reseed": the reseed checks' signed differences summed over the levels so far, over their s.e.
    # (see RESEED_DRIFT); 0 otherwise
    reseed_drift: Array = 0.0


# ---------------------------------------------------------------- the model, vmapped over particles

def _move(model, rng_key, positions, n):
    """Every particle moved once by the p_n-invariant kernel (Alg. 1, line 3)."""
    keys = jax.random.split(rng_key, jax.tree.leaves(positions)[0].shape[0])
    return jax.vmap(model.move, in_axes=(0, 0, None))(keys, positions, n)


def _log_smooth_weights(model, positions, n, valid=None):
    """log W(x_[n]) at every slot (seed eq. 3); nan → zero weight, flagged (only where ``valid``)."""
    values = jax.vmap(model.log_smooth_weight, in_axes=(0, None))(positions, n)
    return _weights.sanitize(values if valid is None else jnp.where(valid, values, -jnp.inf))


def _move_cost(model, n):
    """Cost of one particle's move at level n, in full-size MCMC transitions."""
    if model.move_cost is None:
        return jnp.asarray(model.num_transitions, jnp.float32)
    return jnp.asarray(model.move_cost(n), jnp.float32)


# ---------------------------------------------------------------- the pool (seed Prop. 1)

class _Pool(NamedTuple):
    """The weighted particles of one level (Alg. 2's x^[R_n] with weights w_{n+1}^[R_n]) in
    fixed shapes: ``capacity`` slots, the live ones marked by ``mask``."""
    particles: Any  # (capacity, ...) the buffer; masked slots are never read
    log_weights: Array  # (capacity,) log ρ̃ W: Prop. 1's pooled weights times the smooth weight; −inf if masked
    mask: Array  # (capacity,) live slots
    count: Array  # R_n, the particles Prop. 1 counts (a block of anticipated copies counts R)


def _write(buffer, block, offset):
    return jax.tree.map(lambda leaf, new: jax.lax.dynamic_update_slice_in_dim(leaf, new, offset, 0), buffer, block)


def _old_set_pool(buffer, old, old_log_weights):
    """The pool before generating: the R old particles in slots [0, R), weights w̃_n W."""
    num_particles, capacity = old_log_weights.shape[0], jax.tree.leaves(buffer)[0].shape[0]
    log_weights = jnp.full((capacity,), -jnp.inf, old_log_weights.dtype).at[:num_particles].set(old_log_weights)
    return _Pool(_write(buffer, old, 0), log_weights, jnp.arange(capacity) < num_particles,
                 jnp.asarray(num_particles, old_log_weights.dtype))


def _emptied(pool, empty):
    """Alg. 2: "x := ∅; ρ̃ := ∅" where ``empty`` (R_n := 0)."""
    log_weights = jnp.where(empty & pool.mask, -jnp.inf, pool.log_weights)
    count = jnp.where(empty, 0.0, pool.count).astype(pool.count.dtype)
    return pool._replace(log_weights=log_weights, mask=pool.mask & ~empty, count=count)


def _include(pool, block, block_log_weights, block_valid, block_count, offset):
    """Include a block targeting p_n on its own (Prop. 1, condition 1; its ``block_log_weights``
    log w̃ W normalized over the block) at slots [offset, offset + len): the pool's weights ×
    R_n/(R_n + c), the block's × c/(R_n + c), R_n ← R_n + c, c = ``block_count``."""
    total = pool.count + block_count
    log_weights = pool.log_weights + jnp.log(pool.count / total)  # R_n = 0: the pool is empty (-inf)
    block_log_weights = jnp.where(block_valid, block_log_weights + jnp.log(block_count / total), -jnp.inf)
    # the block's slots were masked out until now: writing its validity is a union
    mask = jax.lax.dynamic_update_slice_in_dim(pool.mask, block_valid, offset, 0)
    log_weights = jax.lax.dynamic_update_slice_in_dim(log_weights, block_log_weights, offset, 0)
    return _Pool(_write(pool.particles, block, offset), log_weights, mask, total)


def _gamma(pool):
    """γ = R_eff / R_n over the live slots (seed §3.1)."""
    return _weights.ess(pool.log_weights, pool.mask) / jnp.sum(pool.mask).astype(pool.log_weights.dtype)


# ---------------------------------------------------------------- the set each iteration moves (seed §3.2)

class _Copies(NamedTuple):
    """The copy of the old set the kernel moves: it targets p_n with weights ``log_prior``."""
    particles: Any  # (C, ...)
    valid: Array  # (C,) live slots
    log_prior: Array  # (C,) normalized log-weights (w̃_n, split for anticipate)


def _plain_copies(old, log_weights, old_log_weights):
    """ARM (Alg. 2): the old set (x^[R], w̃_n^[R]) as it is."""
    num_particles = log_weights.shape[0]
    return _Copies(_particles.take(old, jnp.arange(num_particles)), jnp.ones((num_particles,), bool), log_weights)


def _anticipate_copies(old, log_weights, old_log_weights):
    """ARM-anticipate (seed §3.2): particle r split into m_r = max(1, ⌊R w̃_{n+1}^r⌋) copies
    of weight w̃_n^r / m_r (w̃_{n+1}: the normalized smoothed weights); Σ_r m_r ≤ 2R slots."""
    num_particles = log_weights.shape[0]
    promise = jnp.exp(_weights.normalize(old_log_weights))
    splits = jnp.maximum(1, jnp.floor(num_particles * promise).astype(jnp.int32))
    sources = jnp.repeat(jnp.arange(num_particles), splits, total_repeat_length=2 * num_particles)
    valid = jnp.arange(2 * num_particles) < jnp.sum(splits)
    log_prior = log_weights[sources] - jnp.log(splits[sources].astype(log_weights.dtype))
    return _Copies(_particles.take(old, sources), valid, log_prior)


# variant -> (the copies it moves, their slots per old particle, whether it also reseeds)
_COPIES = {"plain": (_plain_copies, 1), "anticipate": (_anticipate_copies, 2), "reseed": (_plain_copies, 1)}


# ---------------------------------------------------------------- ARM-reseed's checks (seed §5.1)

class _ReseedCheck(NamedTuple):
    """One level's reseed checks so far (zeros for the other variants)."""
    disagreement: Array  # the largest |z| (RESEED_DISAGREEMENT)
    sums: Array  # (3,) Σ d, Σ var of the reseeds' part, the number of reseeds


def _weighted_increment(old_log_weights, log_prior):
    """The old set's estimate of log Z_{n+1}/Z_n, log Σ_r π_r W_r (π the normalized weights,
    ``log_prior``), and its delta-method variance Σ π² (W/m − 1)², m = Σ π W."""
    log_old = _weights.logsumexp(old_log_weights)
    return log_old, jnp.sum((jnp.exp(old_log_weights - log_old) - jnp.exp(log_prior)) ** 2)  # π W/m − π


def _reseed_difference(old, increments, valid):
    """(d, var of the reseeds' part, |z|): d the difference between the reseeded particles'
    estimate of log Z_{n+1}/Z_n (the mean of their W over the ``valid`` slots) and the old
    set's (``old``, from ``_weighted_increment``), each with its delta-method s.e., and
    |z| = |d| / sqrt(both variances)."""
    log_old, old_var = old
    difference = _weights.log_mean_exp(increments, valid) - log_old
    new_var = _weights.stderr_log_mean_exp(increments, valid) ** 2
    z = jnp.abs(difference) / jnp.sqrt(old_var + new_var)
    return difference, new_var, jnp.where(jnp.isnan(z), 0.0, z)  # nan: both samples exact and equal


def _level_drift(old_increment, check):
    """The level's reseed checks as one (d_n, var_n): the mean of its k differences, whose
    variance is the old set's (shared by all k) plus the mean of the k reseeds' over k."""
    reseeds_made = check.sums[2]
    per_level = jnp.maximum(reseeds_made, 1.0)
    level_drift = jnp.stack([check.sums[0] / per_level, old_increment[1] + check.sums[1] / per_level**2])
    return jnp.where(reseeds_made > 0, level_drift, 0.0)


def _drift_z(drift):
    """|Σ d_n| / sqrt(Σ var_n) of ``ARMState.reseed_drift`` (0 before any reseed)."""
    total, variance = drift[0], drift[1]
    return jnp.where(variance > 0, jnp.abs(total) / jnp.sqrt(jnp.where(variance > 0, variance, 1.0)), 0.0)


# ---------------------------------------------------------------- the generate loop (seed Alg. 2)

class _Settings(NamedTuple):
    """The static settings of one ``arm(...)``: R = ``num_particles``, γ_thr =
    ``gamma_threshold``, i_max = ``max_generate``, C = ``copy_capacity``, S_max = ``reseed_capacity``."""
    model: SequentialModel
    num_particles: int
    gamma_threshold: float
    max_generate: int
    resample_ess: float | None
    generate: str
    generate_counts: Array | None
    copies: Callable  # _plain_copies or _anticipate_copies
    copy_capacity: int
    reseed_fn: Callable | None  # None unless variant="reseed"
    min_reseed: int
    reseed_capacity: int
    reseed_cost: int
    resampling: Callable

    @property
    def capacity(self) -> int:  # pool slots: R + i_max (C + S_max)
        return self.num_particles + self.max_generate * (self.copy_capacity + self.reseed_capacity)


class _Generate(NamedTuple):
    """The generate loop's carry."""
    iteration: Array  # i
    pool: _Pool
    moving: Any  # the set the kernel moves ("continue": the same set, its chains continuing)
    gamma: Array  # γ⁽ⁱ⁾
    gammas: Array  # (i_max + 1,) γ⁽⁰⁾, ..., γ⁽ⁱ⁾, 0 past i
    moved: Array  # particle moves made
    cost: Array
    status: Array
    key: Array
    check: _ReseedCheck


def _keep_generating(settings, n, iteration, gamma):
    """Alg. 2's loop test "γ⁽ⁱ⁾ < γ_thr and i < i_max", or the replayed count of level n."""
    if settings.generate_counts is not None:  # the loop then ignores the weights it makes
        return iteration < settings.generate_counts[n - 1]
    return (iteration < settings.max_generate) & (gamma < settings.gamma_threshold)


def _add_reseeds(settings, rng_key, n, offset, old_increment, loop):
    """ARM-reseed (seed §5.1): S = max(⌊(1 − γ/γ_thr) R⌋, min_reseed) particles from
    ``reseed_fn``, weight 1/S each, included at ``offset``, and checked against the old set."""
    dtype = loop.pool.log_weights.dtype
    num_reseed = jnp.maximum(jnp.floor((1.0 - loop.gamma / settings.gamma_threshold) * settings.num_particles),
                             float(settings.min_reseed))
    num_reseed = jnp.minimum(num_reseed, float(settings.reseed_capacity)).astype(dtype)
    reseeded = settings.reseed_fn(rng_key, n, settings.reseed_capacity)
    valid = jnp.arange(settings.reseed_capacity) < num_reseed
    increments, status = _log_smooth_weights(settings.model, reseeded, n, valid)
    pool = _include(loop.pool, reseeded, increments - jnp.log(num_reseed), valid, num_reseed, offset)
    # two samples of p_n, the weighted old set and the reseeded one, must agree on the increment
    # Z_{n+1}/Z_n; where they do not, one of them misses mass
    difference, new_var, z = _reseed_difference(old_increment, increments, valid)
    status = loop.status | status
    status = jnp.where(z > RESEED_DISAGREEMENT, status | STATUS_RUNS_DISAGREE, status)
    check = _ReseedCheck(jnp.maximum(loop.check.disagreement, z),
                         loop.check.sums + jnp.stack([difference, new_var, jnp.ones((), dtype)]))
    return loop._replace(pool=pool, cost=loop.cost + num_reseed * settings.reseed_cost, status=status, check=check)


def _generate_once(settings, n, copies, old_increment, loop):
    """One generate iteration: move the set with the p_n kernel ("continue": the set moved
    last iteration, "restart": a fresh copy of the old set), smooth it, include it in the
    pool (Prop. 1), add reseeds for that variant, and read γ⁽ⁱ⁺¹⁾."""
    key, key_copy, key_reseed = jax.random.split(loop.key, 3)
    dtype = loop.pool.log_weights.dtype
    offset = settings.num_particles + loop.iteration * (settings.copy_capacity + settings.reseed_capacity)
    start = loop.moving if settings.generate == "continue" else copies.particles
    moving = _move(settings.model, key_copy, start, n)
    increments, status = _log_smooth_weights(settings.model, moving, n, copies.valid)
    pool = _include(loop.pool, moving, copies.log_prior + increments, copies.valid,
                    jnp.asarray(settings.num_particles, dtype), offset)
    loop = loop._replace(
        pool=pool, moving=moving, moved=loop.moved + jnp.sum(copies.valid, dtype=jnp.int32),
        cost=loop.cost + jnp.sum(copies.valid).astype(dtype) * _move_cost(settings.model, n),
        status=loop.status | status,
    )
    if settings.reseed_fn is not None:
        loop = _add_reseeds(settings, key_reseed, n, offset + settings.copy_capacity, old_increment, loop)
    gamma = _gamma(loop.pool)
    gammas = loop.gammas.at[loop.iteration + 1].set(gamma)
    return loop._replace(iteration=loop.iteration + 1, gamma=gamma, gammas=gammas, key=key)


def _generate_loop(settings, rng_key, n, pool, copies, old_increment, status, cost):
    """Alg. 2's generate loop from the pool of the smoothed old set: empty the pool if the
    loop is to run (generate="continue"), then grow it while ``_keep_generating``."""
    gamma = _gamma(pool)
    dtype = pool.log_weights.dtype
    gammas = jnp.zeros((settings.max_generate + 1,), dtype).at[0].set(gamma)
    if settings.generate == "continue":  # Alg. 2: if γ⁽⁰⁾ < γ_thr then x := ∅
        pool = _emptied(pool, _keep_generating(settings, n, jnp.int32(0), gamma))
    loop = _Generate(jnp.int32(0), pool, copies.particles, gamma, gammas, jnp.int32(0), cost, status, rng_key,
                     _ReseedCheck(jnp.zeros((), dtype), jnp.zeros((3,), dtype)))
    return jax.lax.while_loop(
        lambda loop: _keep_generating(settings, n, loop.iteration, loop.gamma),
        lambda loop: _generate_once(settings, n, copies, old_increment, loop),
        loop,
    )


# ---------------------------------------------------------------- resample (Alg. 2, lines 7-8)

def _resample(settings, rng_key, pool):
    """Resample the pool to R when γ = ESS/R_n < γ_thr (``resample_ess=c``: ESS < c·R) or
    R_n > R; otherwise the pool is one block of exactly R live slots, kept as it is."""
    pool_size = jnp.sum(pool.mask)
    if settings.resample_ess is None:  # Alg. 2, line 7: γ < γ_thr
        threshold, reference = settings.gamma_threshold, pool_size
    else:  # seed §4.2: R_eff < c·R
        threshold, reference = settings.resample_ess, settings.num_particles
    return _resampling.resample_if_needed(
        rng_key, pool.log_weights, settings.resampling, threshold, reference_count=reference,
        force=pool_size > settings.num_particles, num_samples=settings.num_particles, mask=pool.mask,
    )


# ---------------------------------------------------------------- the estimator

def _init(settings, rng_key) -> ARMState:
    """R particles from p_1 (Alg. 1, line 1), weights 1/R, log Ẑ = log Z_1."""
    model, num_particles = settings.model, settings.num_particles
    particles = jax.vmap(model.sample_initial)(jax.random.split(rng_key, num_particles))
    log_z1 = jnp.asarray(model.log_z1)
    dtype = log_z1.dtype if jnp.issubdtype(log_z1.dtype, jnp.floating) else _particles.float_dtype(particles)
    buffer = jax.tree.map(
        lambda leaf: jnp.zeros((settings.capacity,) + leaf.shape[1:], leaf.dtype).at[:num_particles].set(leaf),
        particles,
    )
    return ARMState(
        particles, jnp.full((num_particles,), -np.log(num_particles), dtype), log_z1.astype(dtype), jnp.int32(1),
        jnp.asarray(num_particles, dtype), jnp.bool_(int(model.num_steps) <= 1), jnp.int32(0), jnp.zeros((), dtype),
        buffer, jnp.zeros((2,), dtype),
    )


def _step(settings, rng_key, state: ARMState):
    """Level n → n + 1 (seed Alg. 2; the module docstring's steps 1-4)."""
    key_generate, key_resample, key_augment, key_move = jax.random.split(rng_key, 4)
    model, n, num_particles = settings.model, state.n, settings.num_particles
    reseeds = settings.reseed_fn is not None
    # 1. smooth (line 4): w_{n+1} = w̃_n W(x_[n]) for the old set
    increments, status = _log_smooth_weights(model, state.positions, n)
    old_log_weights = state.log_weights + increments
    pool = _old_set_pool(state.scratch, state.positions, old_log_weights)
    copies = settings.copies(state.positions, state.log_weights, old_log_weights)
    old_increment = _weighted_increment(old_log_weights, state.log_weights) if reseeds else None
    # 2. generate
    loop = _generate_loop(settings, key_generate, n, pool, copies, old_increment, state.status | status, state.cost)
    pool = loop.pool
    reseed_drift = (state.reseed_drift + _level_drift(old_increment, loop.check)) if reseeds else state.reseed_drift
    # 3. log Ẑ_{n+1} = log Ẑ_n + log Σ_pool w_{n+1} (Alg. 1, line 5)
    log_z_increment = _weights.logsumexp(pool.log_weights, pool.mask)
    log_z = state.log_z + log_z_increment
    # 4. resample (lines 7-8), augment x_{n+1} ~ p_{n+1}(· | x_[n]) (Alg. 1, line 11), move with the p_{n+1} kernel
    resampled = _resample(settings, key_resample, pool)
    particles = _particles.take(pool.particles, resampled.ancestors)
    augment = jax.vmap(model.augment, in_axes=(0, 0, None))
    particles = augment(jax.random.split(key_augment, num_particles), particles, n)
    particles = _move(model, key_move, particles, n + 1)
    cost = loop.cost + num_particles * _move_cost(model, n + 1)

    next_n = n + 1
    new_state = ARMState(
        particles, resampled.log_weights, log_z, next_n, jnp.minimum(state.min_ess, resampled.ess),
        (next_n >= int(model.num_steps)) | jnp.isneginf(log_z), loop.status, cost, pool.particles, reseed_drift,
    )
    info = ARMInfo(jnp.sum(pool.mask).astype(jnp.int32), loop.gammas, loop.iteration, loop.moved + num_particles,
                   resampled.resampled, log_z_increment, loop.check.disagreement, _drift_z(reseed_drift))
    return new_state, info


def _finalize(state: ARMState) -> Estimate:
    """log Ẑ with a nan s.e. (use the spread of runs), flagged where too few particles
    carried a level (one particle included) or, for ARM-reseed, where the reseeds lean one
    way level after level."""
    status = jnp.where(state.min_ess < _particles.MIN_EFFECTIVE_PARTICLES, state.status | STATUS_FEW_PARTICLES,
                       state.status)
    status = jnp.where(_drift_z(state.reseed_drift) > RESEED_DRIFT, status | STATUS_RUNS_DISAGREE, status)
    return _particles.make_estimate(state.log_z, jnp.full((), jnp.nan, state.log_z.dtype), state.cost, status)


def _checked_generate_counts(generate_counts, num_steps, max_generate):
    counts = np.asarray(generate_counts)
    if counts.shape != (num_steps - 1,) or not np.issubdtype(counts.dtype, np.integer):
        raise ValueError(f"generate_counts must be {num_steps - 1} integers (one per level n = 1..N-1), "
                         f"got shape {counts.shape} and dtype {counts.dtype}")
    if counts.min(initial=0) < 0 or counts.max(initial=0) > max_generate:
        raise ValueError(f"generate_counts must lie in [0, max_generate={max_generate}], "
                         f"got [{counts.min()}, {counts.max()}]")
    return jnp.asarray(counts, jnp.int32)


def _settings(model, num_particles, gamma_threshold, max_generate, resample_ess, variant, generate,
              generate_counts, reseed_fn, min_reseed, reseed_cost, resampling) -> _Settings:
    """``arm``'s arguments checked (a ValueError naming the bad one) and sized."""
    num_particles = _particles.check_count("num_particles", num_particles)  # 2.5 is refused, not truncated
    gamma_threshold = _particles.check_fraction("gamma_threshold", gamma_threshold)
    if resample_ess is not None:
        resample_ess = _particles.check_fraction("resample_ess", resample_ess)
    if generate not in GENERATE:
        raise ValueError(f"generate must be one of {GENERATE}, got {generate!r}")
    if isinstance(max_generate, bool) or int(max_generate) != max_generate or max_generate < 0:
        raise ValueError(f"max_generate must be an integer >= 0, got {max_generate}")
    max_generate = int(max_generate)
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if variant == "reseed" and reseed_fn is None:
        raise ValueError("variant='reseed' needs reseed_fn(rng_key, n, num), got None")
    if variant != "reseed" and reseed_fn is not None:
        raise ValueError(f"reseed_fn is only used by variant='reseed', got variant={variant!r}")
    if int(min_reseed) < 1:
        raise ValueError(f"min_reseed must be >= 1, got {min_reseed}")
    if int(reseed_cost) < 0:
        raise ValueError(f"reseed_cost must be >= 0, got {reseed_cost}")
    if isinstance(resampling, str):
        if resampling not in _resampling.SCHEMES:
            raise ValueError(f"resampling must be one of {sorted(_resampling.SCHEMES)}, got {resampling!r}")
        resampling = _resampling.SCHEMES[resampling]
    if int(model.num_steps) < 1:
        raise ValueError(f"model.num_steps must be >= 1, got {model.num_steps}")
    if generate_counts is not None:
        generate_counts = _checked_generate_counts(generate_counts, int(model.num_steps), max_generate)
    copies, copies_per_particle = _COPIES[variant]
    reseed_capacity = max(num_particles, int(min_reseed)) if variant == "reseed" else 0
    return _Settings(model, num_particles, gamma_threshold, max_generate, resample_ess, generate, generate_counts,
                     copies, copies_per_particle * num_particles, reseed_fn, min_reseed, reseed_capacity, reseed_cost,
                     resampling)


def arm(
    model: SequentialModel,
    num_particles: int,
    *,
    gamma_threshold: float = 0.7,
    max_generate: int = 3,
    resample_ess: float | None = None,
    variant: str = "plain",
    generate: str = "continue",
    generate_counts=None,
    reseed_fn: Callable | None = None,
    min_reseed: int = 100,
    reseed_cost: int = 0,
    resampling: Callable | str = _resampling.residual,
) -> Estimator:
    """Adaptive Resample-Move on a ``SequentialModel``; RM when ``max_generate=0``.

    Paper symbols: R = ``num_particles``, γ_thr = ``gamma_threshold``, i_max =
    ``max_generate``. ``init(rng_key)`` draws R particles from ``model.sample_initial``;
    one step = one level n → n + 1; N − 1 steps in all (``jaxz.run`` scans them).
    variant: "plain", "anticipate" (seed §3.2) or "reseed" (seed §5.1, needs
        ``reseed_fn(rng_key, n, num) -> num`` particles approximately from p_n;
        ``min_reseed`` is the seed's floor of 100 on S, ``reseed_cost`` the MCMC
        transitions one reseeded particle costs, added to ``Estimate.cost``).
    generate: "continue" (seed Alg. 2: the pool starts empty and the same set is moved
        again each iteration) or "restart" (the pool keeps the unmoved set; each
        iteration moves a fresh copy of it).
    generate_counts: None, or the number of generate iterations to run at each level
        n = 1, ..., N − 1 (length N − 1, each in [0, max_generate]), replacing the γ test:
        e.g. the rounded mean of a pilot run's ``trace.num_generate``. The loop then no
        longer depends on the weights it produces and Ẑ is unbiased (see the bias note).
    resample_ess: None (seed Alg. 2, line 7: resample when γ = ESS/R_n < γ_thr or
        R_n > R) or c ∈ (0, 1]: resample when ESS < c·R or R_n > R (seed §4.2 uses 0.9).
    resampling: a scheme of ``jaxz.resampling`` or its name (residual, as in the seed).
    ``Estimate.cost`` counts MCMC transitions summed over particles, each move at level
    n weighted by ``model.move_cost(n)`` where the model gives one (see the module
    docstring); ``log_z_stderr`` is nan (use the spread of runs).
    """
    settings = _settings(model, num_particles, gamma_threshold, max_generate, resample_ess, variant, generate,
                         generate_counts, reseed_fn, min_reseed, reseed_cost, resampling)

    def init(rng_key) -> ARMState:
        return _init(settings, rng_key)

    @freeze_when_done(pass_through=("scratch",))
    def step(rng_key, state: ARMState):
        return _step(settings, rng_key, state)

    return Estimator(init, step, _finalize, int(model.num_steps) - 1)


__all__ = ["arm", "ARMState", "ARMInfo", "VARIANTS", "RESEED_DISAGREEMENT", "RESEED_DRIFT"]
