"""Resample-Move (RM, seed Alg. 1) and Adaptive Resample-Move (ARM, seed Alg. 2) for
targets built one variable at a time (Fraccaro, Paquet & Winther 2016).

A ``jaxz.SequentialModel`` defines p_1, ..., p_N with f_{n+1}(x_[n+1]) extending
f_n(x_[n]). One step goes from level n to n + 1 (seed Alg. 2):

1. weight: each of the R particles x^r targeting p_n, with normalized weight π^r,
   gets the smooth weight W(x^r_[n]) = ∫ f_{n+1}/f_n dx_{n+1} (seed eq. 14 for RBMs);
2. generate (seed Alg. 2): if γ⁽⁰⁾ = ESS/R < γ_thr, empty the pool ("x := ∅", R_n := 0)
   and, while γ⁽ⁱ⁾ = ESS/R_n < γ_thr and i < i_max, move the R-particle set once more
   with the p_n-invariant kernel — the same set every iteration, its chains
   continuing — weight it, and add it to the pool. Each block b is properly weighted
   for p_n on its own, so Σ_{r∈b} π^r W(x^r) estimates Z_{n+1}/Z_n; the pool is their
   convex combination in proportion to the particles drawn (seed Prop. 1):
       pool weights × R_n/(R_n + R),   new block × R/(R_n + R),   R_n ← R_n + R,
   so R_n ≤ i_max·R (seed §3: R_tot/(N − 1) ≤ i_max R);
3. Ẑ_{n+1} = Ẑ_n · Σ_pool (weights): the log-increment is a masked logsumexp;
4. resample back to R (residual by default) when γ < γ_thr or R_n > R (seed Alg. 2,
   line 7; ``resample_ess=c`` uses ESS < c·R or R_n > R instead, the "R_eff < 0.9R" of
   the seed's GP experiments, §4.2), augment x_{n+1} ~ p_{n+1}(· | x_[n]) — the smooth
   weight already integrated x_{n+1} out, so drawing it after resampling is exact —
   and move every particle with the p_{n+1}-invariant kernel.

``generate="restart"`` is the other reading we shipped first: the pool keeps the
unmoved set (R_n up to (1 + i_max)R) and every iteration moves a fresh copy of it from
scratch. It measured better, so it stays as an option: on exact digits RBMs
(``benchmarks/arm_readings.py``; R = 100, t = 10, γ_thr = 0.7, i_max = 3, 400 runs) the
log of the mean Ẑ was −0.070 ± 0.010 vs −0.092 ± 0.012 (64 × 16, CD-1) and −0.003 ± 0.005
vs −0.033 ± 0.005 (64 × 16, PCD-1) off log Z, sd of log Ẑ 0.20 vs 0.23 and 0.10 vs 0.10, at
the same cost.

RM (seed Alg. 1) is ``max_generate=0``. ``variant="anticipate"`` (seed §3.2) splits
each promising particle of the copy into m_r = max(1, ⌊R w̃_r⌋) copies of weight
π^r/m_r before moving it (w̃: normalized smooth-weighted weights of the old set), so
the moves explore more around the particles the next level favours. ``"reseed"``
(seed §5.1) also adds, per generate iteration, S = max(⌊(1 − γ/γ_thr) R⌋, min_reseed)
particles from ``reseed_fn(rng_key, n, num)`` (approximate draws of p_n, e.g. Gibbs
chains started from training data), pooled with weight 1/S each by Prop. 1. Reseeds that
are not draws of p_n bias Ẑ without bound: on the 784-visible RBMs of
``benchmarks/rbm784.py`` data-started chains of 10 sweeps left ARM-reseed 90-210 nats
HIGH. So each reseed is checked: the weighted old set and the reseeded particles are two
samples of p_n and must agree on Z_{n+1}/Z_n (mean smooth weight) within their delta-method
s.e.s; a |z| above RESEED_DISAGREEMENT (6) flags the run STATUS_LOW_ESS (one of the two
misses mass; ``ARMInfo.reseed_disagreement`` holds each level's largest |z|). Measured:
every run on those RBMs flagged (8 runs, max |z| 7-145, first at levels 93-371); on the
64-visible digits RBMs (R = 100, γ_thr = 0.95, 200 runs each) exact reseeds reach max |z|
≤ 5.2, data-started chains of 10 and 100 sweeps (no bias there) 4.8-6.1 (≤ 0.5 % flagged).
Chains that are a little off at every level, always the same way, pass that check and add
up: on a 64 × 500 PCD digits RBM at R = 1000, chains of 20 sweeps left ARM-reseed 0.9 nat
high (log Z ≈ 138.55 by AIS with 1,000 particles; chains of 200 sweeps and plain ARM agree
with it) with 3 runs of 8 unflagged, max |z| 5.0-5.4. So the levels' differences are also
summed, signed: |Σ_n d_n| / sqrt(Σ_n var_n) above RESEED_DRIFT (4) flags the run
(``ARMInfo.reseed_drift`` holds it level by level), d_n a level's difference of the two
logs (the mean over its reseeds) and var_n its variance. With exact reseeds it is N(0, 1):
|z| quantiles 50 / 90 / 99 % 0.69 / 1.79 / 2.68 over 400 runs of the 64 × 16 RBM (normal:
0.67 / 1.64 / 2.58), none above 4. Measured, runs flagged by the per-level / the summed
check: the PCD RBM above 5 / 7 of 8 (the eighth 0.87 high, summed |z| 3.2); the 64 × 16
RBM with chains of 1 sweep (+1.05 nat) 9 % / 94 %, of 3 sweeps (+0.48) 0 / 28 %, of 10
(−0.02) 0 / 0 (32 runs each). It narrows what passes unflagged, it does not close it:
reseed from chains long enough to mix, or check against plain ARM.

Fixed shapes: the pool is a padded buffer of R + i_max·(C + S_max) slots (C = R, or
2R for anticipate, which bounds Σ_r m_r; S_max = max(R, min_reseed) for reseed)
with a mask; masked slots are never read. The State holds the R particles and the
buffer as ``scratch``: each step writes the particles into slots [0, R) and fills the
rest; nothing in it is read across steps, so ``freeze_when_done`` passes it through
instead of selecting over all its slots at every step (which made ARM's wall time per
transition 1.67× RM's on the GPC) and the loop carries it in place. Memory: the buffer
is (1 + i_max·C/R)·R particles, e.g. 51·10⁵·365·8 bytes = 14.9 GB for the GPC of
seed §4.2 at R = 10⁵, i_max = 50 (float64), held once.

Cost. ``Estimate.cost`` adds, for every particle moved at level n, ``model.move_cost(n)``
(the model's cost of one move in full-size transitions; e.g. t·n/N Gibbs sweeps for the
RBM, whose sweep at level n touches the n included units only, seed §5: O(tHn)), or
``model.num_transitions`` when the model gives no ``move_cost``. ``ARMInfo.num_moved``
counts the particle moves of each step, so the plain count is Σ num_moved · t.

Note on bias: with i_max = 0 (RM) Ẑ is unbiased. ARM's adaptive stop is not: the loop
ends when the pool's γ reaches γ_thr, which happens sooner when the new blocks carry no
large weights, so the pooled increment is biased low. Measured (same runs as above):
log E[Ẑ]/Z = −0.092 ± 0.012 (64 × 16 CD-1), −0.033 ± 0.005 (PCD-1), −0.013 ± 0.003
(14 × 10), while RM gave −0.017 ± 0.016, −0.000 ± 0.006, −0.000 ± 0.003. The stop is the
cause: with γ_thr = 1 (the loop runs i_max iterations unless the weights are uniform to
float precision: 2.3-2.4 per level on the 64-unit RBMs) the same RBMs gave
−0.001 ± 0.009, +0.004 ± 0.003, +0.004 ± 0.002, and replaying a pilot's counts
(``generate_counts=``: the rounded mean of 8 adaptive pilot runs' ``num_generate`` per
level) gave −0.017 ± 0.012, −0.006 ± 0.005, −0.003 ± 0.003 at the adaptive runs' cost and
sd (``benchmarks/results/arm_readings.json``, rerun 2026-11-28: the PCD-1 RBM's training
had changed since the first run, which read −0.075 ± 0.010 for ARM on it). For an
unbiased Ẑ (averaging runs, log-mean-exp), replay a pilot's counts; the adaptive default
follows the seed.
"""
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import resampling as _resampling
from jaxz import weights as _weights
from jaxz.base import STATUS_LOW_ESS, Estimate, Estimator, SequentialModel, freeze_when_done
from jaxz.estimators import _particles
from jaxz.types import Array

VARIANTS = ("plain", "anticipate", "reseed")
GENERATE = ("continue", "restart")


class ARMState(NamedTuple):
    positions: Any  # (R, ...) the particles targeting p_n
    log_weights: Array  # (R,) normalized log π of the particles
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


# |z| above which ARM-reseed's check flags STATUS_LOW_ESS: z compares log Ẑ_{n+1}/Ẑ_n read from
# the reseeded particles (their mean smooth weight) with the same ratio read from the weighted
# old set, over the two delta-method s.e.s combined.
RESEED_DISAGREEMENT = 6.0
# |z| above which ARM-reseed's cumulative check flags STATUS_LOW_ESS: the levels' signed differences
# of the same two logs, summed, over the root of their summed variances (N(0, 1) under exact
# reseeds; see the module docstring for what it catches).
RESEED_DRIFT = 4.0


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


def _drift_z(drift):
    """|Σ d_n| / sqrt(Σ var_n) of ``ARMState.reseed_drift`` (0 before any reseed)."""
    total, variance = drift[0], drift[1]
    return jnp.where(variance > 0, jnp.abs(total) / jnp.sqrt(jnp.where(variance > 0, variance, 1.0)), 0.0)


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
    ``Estimate.cost`` counts MCMC transitions summed over particles, each move at level
    n weighted by ``model.move_cost(n)`` where the model gives one (see the module
    docstring); ``log_z_stderr`` is nan (use the spread of runs).
    """
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
        counts = np.asarray(generate_counts)
        if counts.shape != (int(model.num_steps) - 1,) or not np.issubdtype(counts.dtype, np.integer):
            raise ValueError(f"generate_counts must be {int(model.num_steps) - 1} integers (one per level n = 1..N-1), "
                             f"got shape {counts.shape} and dtype {counts.dtype}")
        if counts.min(initial=0) < 0 or counts.max(initial=0) > max_generate:
            raise ValueError(f"generate_counts must lie in [0, max_generate={max_generate}], "
                             f"got [{counts.min()}, {counts.max()}]")
        generate_counts = jnp.asarray(counts, jnp.int32)

    num_levels = int(model.num_steps)
    copy_capacity = 2 * num_particles if variant == "anticipate" else num_particles
    reseed_capacity = max(num_particles, int(min_reseed)) if variant == "reseed" else 0
    block_capacity = copy_capacity + reseed_capacity
    capacity = num_particles + max_generate * block_capacity
    smooth = jax.vmap(model.log_smooth_weight, in_axes=(0, None))
    move = jax.vmap(model.move, in_axes=(0, 0, None))
    augment = jax.vmap(model.augment, in_axes=(0, 0, None))

    def move_cost(n):
        """Cost of one particle's move at level n, in full-size MCMC transitions."""
        if model.move_cost is None:
            return jnp.asarray(model.num_transitions, jnp.float32)
        return jnp.asarray(model.move_cost(n), jnp.float32)

    def log_smooth_weights(positions, n, valid=None):
        """log W at every slot; nan → zero weight, flagged (only where ``valid``)."""
        values = smooth(positions, n)
        return _weights.sanitize(values if valid is None else jnp.where(valid, values, -jnp.inf))

    def init(rng_key) -> ARMState:
        particles = jax.vmap(model.sample_initial)(jax.random.split(rng_key, num_particles))
        log_z1 = jnp.asarray(model.log_z1)
        dtype = log_z1.dtype if jnp.issubdtype(log_z1.dtype, jnp.floating) else _particles.float_dtype(particles)
        buffer = jax.tree.map(
            lambda leaf: jnp.zeros((capacity,) + leaf.shape[1:], leaf.dtype).at[:num_particles].set(leaf), particles
        )
        return ARMState(
            particles, jnp.full((num_particles,), -np.log(num_particles), dtype), log_z1.astype(dtype), jnp.int32(1),
            jnp.asarray(num_particles, dtype), jnp.bool_(num_levels <= 1), jnp.int32(0), jnp.zeros((), dtype), buffer,
            jnp.zeros((2,), dtype),
        )

    def write(buffer, block, offset):
        return jax.tree.map(lambda leaf, new: jax.lax.dynamic_update_slice_in_dim(leaf, new, offset, 0), buffer, block)

    @freeze_when_done(pass_through=("scratch",))
    def step(rng_key, state: ARMState):
        key_generate, key_resample, key_augment, key_move = jax.random.split(rng_key, 4)
        n, dtype, R = state.n, state.log_weights.dtype, num_particles
        old = state.positions  # the old R-particle set, targeting p_n
        pool = write(state.scratch, old, 0)  # slots [0, R); the rest is filled below before it is read

        # 1. weight by the smooth weight: log π^r + log W(x^r_[n])
        increments, status = log_smooth_weights(old, n)
        old_log_weights = state.log_weights + increments
        slots = jnp.arange(capacity)
        pool_log_weights = jnp.full((capacity,), -jnp.inf, dtype).at[:R].set(old_log_weights)
        mask = slots < R

        def gamma_of(pool_log_weights, mask):  # γ = ESS / R_n over the live slots
            return _weights.ess(pool_log_weights, mask) / jnp.sum(mask).astype(dtype)

        # The set each generate iteration moves: source slots and their prior weights.
        if variant == "anticipate":  # seed §3.2: split particle r into m_r copies of weight π^r/m_r
            promise = jnp.exp(_weights.normalize(old_log_weights))
            splits = jnp.maximum(1, jnp.floor(R * promise).astype(jnp.int32))  # Σ splits <= 2R
            sources = jnp.repeat(jnp.arange(R), splits, total_repeat_length=copy_capacity)
            copy_valid = jnp.arange(copy_capacity) < jnp.sum(splits)
            copy_log_prior = state.log_weights[sources] - jnp.log(splits[sources].astype(dtype))
        else:
            sources = jnp.arange(R)
            copy_valid = jnp.ones((R,), bool)
            copy_log_prior = state.log_weights
        copies = _particles.take(old, sources)

        def add_block(pool_log_weights, mask, count, block_log_weights, block_valid, block_count, offset):
            """Seed Prop. 1: pool × R_n/(R_n + c), new block × c/(R_n + c); c = block_count."""
            total = count + block_count
            pool_log_weights = pool_log_weights + jnp.log(count / total)  # count = 0: the pool is empty (-inf)
            block_log_weights = jnp.where(block_valid, block_log_weights + jnp.log(block_count / total), -jnp.inf)
            # the block's slots were masked out until now: writing its validity is a union
            mask = jax.lax.dynamic_update_slice_in_dim(mask, block_valid, offset, 0)
            pool_log_weights = jax.lax.dynamic_update_slice_in_dim(pool_log_weights, block_log_weights, offset, 0)
            return pool_log_weights, mask, total

        def cond(carry):
            iteration, _, _, _, _, _, gamma, *_ = carry
            if generate_counts is not None:  # replayed counts: the loop ignores the weights it makes
                return iteration < generate_counts[n - 1]
            return (iteration < max_generate) & (gamma < gamma_threshold)

        old_increment = _weighted_increment(old_log_weights, state.log_weights) if variant == "reseed" else None

        def body(carry):
            (iteration, buffer, moving, pool_log_weights, mask, count, gamma, gammas, moved, cost, status, key,
             disagreement, reseeds) = carry
            key, key_copy, key_reseed = jax.random.split(key, 3)
            offset = R + iteration * block_capacity
            # 2. move the set with the p_n kernel ("continue": the set moved last iteration,
            # "restart": a fresh copy of the old set), weight it, add it to the pool
            start = moving if generate == "continue" else copies
            moving = move(jax.random.split(key_copy, copy_capacity), start, n)
            increments, copy_status = log_smooth_weights(moving, n, copy_valid)
            buffer = write(buffer, moving, offset)
            pool_log_weights, mask, count = add_block(
                pool_log_weights, mask, count, copy_log_prior + increments, copy_valid, jnp.asarray(R, dtype), offset
            )
            moved = moved + jnp.sum(copy_valid, dtype=jnp.int32)
            cost = cost + jnp.sum(copy_valid).astype(dtype) * move_cost(n)
            status = status | copy_status
            if variant == "reseed":  # seed §5.1: S fresh particles from reseed_fn, weight 1/S each
                num_reseed = jnp.maximum(jnp.floor((1.0 - gamma / gamma_threshold) * R), float(min_reseed))
                num_reseed = jnp.minimum(num_reseed, float(reseed_capacity)).astype(dtype)
                reseeded = reseed_fn(key_reseed, n, reseed_capacity)
                reseed_valid = jnp.arange(reseed_capacity) < num_reseed
                increments, reseed_status = log_smooth_weights(reseeded, n, reseed_valid)
                buffer = write(buffer, reseeded, offset + copy_capacity)
                pool_log_weights, mask, count = add_block(
                    pool_log_weights, mask, count, increments - jnp.log(num_reseed), reseed_valid, num_reseed,
                    offset + copy_capacity,
                )
                cost = cost + num_reseed * reseed_cost
                status = status | reseed_status
                # two samples of p_n, the weighted old set and the reseeded one, must agree on
                # the increment Z_{n+1}/Z_n; where they do not, one of them misses mass
                difference, new_var, z = _reseed_difference(old_increment, increments, reseed_valid)
                disagreement = jnp.maximum(disagreement, z)
                status = jnp.where(z > RESEED_DISAGREEMENT, status | STATUS_LOW_ESS, status)
                # this level's checks, for the cumulative one: Σ d, Σ var of the reseeds' part, their number
                reseeds = reseeds + jnp.stack([difference, new_var, jnp.ones((), dtype)])
            gamma = gamma_of(pool_log_weights, mask)
            gammas = gammas.at[iteration + 1].set(gamma)
            return (iteration + 1, buffer, moving, pool_log_weights, mask, count, gamma, gammas, moved, cost, status,
                    key, disagreement, reseeds)

        gamma = gamma_of(pool_log_weights, mask)
        gammas = jnp.zeros((max_generate + 1,), dtype).at[0].set(gamma)
        count = jnp.asarray(R, dtype)
        if generate == "continue" and max_generate > 0:  # seed Alg. 2: x := ∅ before generating
            empty = gamma < gamma_threshold if generate_counts is None else generate_counts[n - 1] > 0
            pool_log_weights = jnp.where(empty & mask, -jnp.inf, pool_log_weights)
            mask = mask & ~empty
            count = jnp.where(empty, 0.0, count).astype(dtype)
        carry = (
            jnp.int32(0), pool, copies, pool_log_weights, mask, count, gamma, gammas, jnp.int32(0),
            state.cost, state.status | status, key_generate, jnp.zeros((), dtype), jnp.zeros((3,), dtype),
        )
        (num_generate, buffer, _, pool_log_weights, mask, _, gamma, gammas, moved, cost, status, _,
         disagreement, reseeds) = jax.lax.while_loop(cond, body, carry)
        reseed_drift = state.reseed_drift
        if variant == "reseed":
            # the level's reseed checks as one: the mean of its k differences, whose variance is the old
            # set's (shared by all k) plus the mean of the k independent reseeds' over k
            reseeds_made = reseeds[2]
            per_level = jnp.maximum(reseeds_made, 1.0)
            level_drift = jnp.stack([reseeds[0] / per_level, old_increment[1] + reseeds[1] / per_level**2])
            reseed_drift = reseed_drift + jnp.where(reseeds_made > 0, level_drift, 0.0)

        # 3. Ẑ_{n+1}/Ẑ_n = Σ over the pool of the (Prop. 1-rescaled) weights
        log_z_increment = _weights.logsumexp(pool_log_weights, mask)
        log_z = state.log_z + log_z_increment

        # 4. resample to R when γ < γ_thr (or ESS < resample_ess·R) or R_n > R (seed Alg. 2, line 7)
        pool_size = jnp.sum(mask)
        pool_ess = _weights.ess(pool_log_weights, mask)
        degenerate = gamma < gamma_threshold if resample_ess is None else pool_ess < resample_ess * R
        resample = degenerate | (pool_size > R)
        # without resampling the pool is one block of exactly R live slots: keep it as it is
        kept = jnp.nonzero(mask, size=R, fill_value=0)[0].astype(jnp.int32)
        ancestors = jnp.where(resample, resampling(key_resample, pool_log_weights, R, mask), kept)
        particles = _particles.take(buffer, ancestors)
        log_weights = jnp.where(
            resample, -jnp.log(jnp.asarray(R, dtype)), _weights.normalize(pool_log_weights[kept])
        )
        # augment x_{n+1} ~ p_{n+1}(· | x_[n]), then move with the p_{n+1}-invariant kernel
        particles = augment(jax.random.split(key_augment, R), particles, n)
        particles = move(jax.random.split(key_move, R), particles, n + 1)
        cost = cost + R * move_cost(n + 1)

        next_n = n + 1
        new_state = ARMState(
            particles, log_weights, log_z, next_n, jnp.minimum(state.min_ess, pool_ess),
            (next_n >= num_levels) | jnp.isneginf(log_z), status, cost, buffer, reseed_drift,
        )
        info = ARMInfo(pool_size.astype(jnp.int32), gammas, num_generate, moved + R, resample, log_z_increment,
                       disagreement, _drift_z(reseed_drift))
        return new_state, info

    def finalize(state: ARMState) -> Estimate:
        low = state.min_ess < _particles.MIN_EFFECTIVE_PARTICLES  # one particle included
        # ARM-reseed: the reseeds, level after level, lean one way (approximate draws of p_n)
        low = low | (_drift_z(state.reseed_drift) > RESEED_DRIFT)
        status = jnp.where(low, state.status | STATUS_LOW_ESS, state.status)
        return _particles.make_estimate(state.log_z, jnp.full((), jnp.nan, state.log_z.dtype), state.cost, status)

    return Estimator(init, step, finalize, num_levels - 1)


__all__ = ["arm", "ARMState", "ARMInfo", "VARIANTS", "RESEED_DISAGREEMENT", "RESEED_DRIFT"]
