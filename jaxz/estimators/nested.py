"""Nested sampling as SMC (NS-SMC; Salomone, South, Drovandi & Kroese 2018, "Unbiased and
consistent nested sampling via sequential Monte Carlo", §3; Skilling 2006; the lecture
notes' pointer to nested sampling, "another, quite different, Monte-Carlo integration
method").

On an affine path (f_1 = f_0 L with f_0 the normalized base Z_0 f̄_0 and L the likelihood),
the targets are the base restricted to rising likelihood levels ℓ_0 = −∞ < ℓ_1 < … :

    η_t(x) ∝ f̄_0(x) 1{log L(x) > ℓ_t},      V_t = P_{f̄_0}(log L > ℓ_t),

and Z = Z_0 [Σ_{t≥1} V_{t−1} E_{η_{t−1}}[L 1{log L ≤ ℓ_t}] + V_T E_{η_T}[L]] (Salomone et
al., eq. 8: the mass of each shell between two levels, and the mass above the last). With
N particles x^i ~ η_{t−1}, one step

    ℓ_t   = the level with ⌈ρN⌉ of the log L^i above it (ρ: ``survival``),
    Ẑ    += V̂_{t−1} (1/N) Σ_i L^i 1{log L^i ≤ ℓ_t},      V̂_t = V̂_{t−1} m_t / N,

with m_t the particles above ℓ_t, which are then resampled to N and moved by a kernel
invariant for η_t. The run stops when every particle is at one likelihood (the maximum,
a plateau of L) or when the mass above ℓ_t, estimated by the particles there, is below
``tolerance`` of Ẑ; that mass, V̂_{t−1} (1/N) Σ_i L^i 1{log L^i > ℓ_t}, is added, not
dropped. Each level's particles are spread over the level set itself, so the moves'
scale (from the particles' covariance) follows the likelihood to whatever scale its mass
sits at: an integrable singularity, whose tempered posteriors put mass on every scale at
once, is reached decade by decade (benchmarks/evidence_suite.py's power-law rows).

The levels are adaptive, so Ẑ is consistent, not unbiased (Salomone et al. §3.3). The
standard error is the delta method over the levels, each level's N particles taken as
independent draws of η_{t−1}: with g^i = L^i 1{dead} + 1{alive} Ẑ_{>t}/V̂_t (a dead
particle's own mass, a survivor's share of all later mass),
Var(Ẑ) ≈ Σ_t V̂_{t−1}² Var_i(g^i) / N (the "information" error of nested sampling,
written per level). Each level's term is widened by (1 + c_t)/(1 − c_t), with c_t the rank
correlation of log L before and after its moves: survivors left near their ancestors carry one
level's luck into the next (coverage: tests/test_nested.py, and the jaxz_nested rows of
benchmarks/results/evidence_suite_hard.md).

Waste-free (Dau & Chopin 2022, Alg. 2, applied to these levels): instead of moving N
resampled survivors ``num_moves`` times each, M = N/P of them seed chains of P states
(``num_moves`` kernel steps between kept states) and every state is a particle of the next
level: a level costs about N transitions instead of N × ``num_moves``. Its particles are then
correlated within chains, so each level's variance is read from the chains (Geyer's estimate
of the variance of a chain mean, ``_chains.chain_mean_variance``) instead of from N
independent draws, and its memory c_t is the correlation of log L between each state and its
chain's seed.
"""
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxz import _checks
from jaxz import weights as _weights
from jaxz._status import STATUS_FEW_CHAINS, STATUS_FEW_PARTICLES, STATUS_OK, STATUS_PLATEAU, STATUS_STUCK
from jaxz.base import Estimate, Estimator, freeze_when_done
from jaxz.estimators import _chains, _moves, _particles
from jaxz.estimators.nested_moves import MoveCount, flat_positions, resample_move, waste_free_move
from jaxz.kernels.base import Kernel
from jaxz.kernels.gradient import rwmh
from jaxz.paths import Path
from jaxz.types import Array

# A level that keeps fewer survivors than this (ties at the level) rests its volume on too few particles.
MIN_SURVIVORS = 10
# The rank correlation of log L before and after a level's moves that the adapted count aims at: above
# its noise at a few hundred particles (1/√N), low enough that the levels it sets are not biased high.
DECORRELATION_TARGET = 0.05
# The largest rank correlation the error bar's inflation (1 + c)/(1 − c) reads.
MAX_MEMORY = 0.9
# A run where more than this share of the levels needed more moves than max_moves to decorrelate the particles
# is flagged STATUS_STUCK: its levels were set from particles left near their ancestors, whose bias the error bar
# does not hold (a thin rotated needle in a wide box: evidence_suite_hard's "needle d=10").
MAX_CAPPED_SHARE = 0.1
# A level whose moves moved fewer than this fraction of the particles left duplicates together.
MIN_MOVED = 0.5


class NestedState(NamedTuple):
    kernel_states: object  # the particles, at η_{t−1} (kernel states at the level ℓ_{t−1})
    log_likelihood: Array  # (N,) log L at the particles
    log_volume: Array  # log V̂_{t−1}
    log_z: Array  # log of Σ_{s<t} V̂_{s−1} (1/N) Σ_i L^i 1{dead at s} (Z_0 not included)
    shells: Array  # (max_levels, 7) per level: log V̂_{t−1}, log d_t, r_t, Var ū, Cov(ū, s̄), Var s̄, memory c_t
    index: Array
    done: Array
    status: Array
    cost: Array
    acceptance_rate: Array
    num_moves: Array  # int32: moves per particle (waste-free: between kept states) at the next level
    capped: Array  # int32: levels whose moves, at max_moves, left the particles short of the decorrelation target
    log_density_evaluations: Array
    chained: Array  # bool: the particles are waste-free chains (not independent draws)


class NestedInfo(NamedTuple):
    level: Array  # ℓ_t
    log_volume: Array  # log V̂_t
    survival: Array  # m_t / N
    acceptance_rate: Array
    moved: Array  # the fraction of particles (waste-free: chains) the move moved
    num_moves: Array  # the moves per particle (waste-free: between kept states) at this level
    log_mass: Array  # log V̂_{t−1} d_t: the shell's mass (Z_0 not included)
    mean: Array  # (d,) the particles' mean at η_{t−1}
    cholesky: Array  # (d, d) the Cholesky factor of their covariance


def constrained_path(path: Path) -> tuple[Path, Callable]:
    """(the path whose "β" is a log-likelihood level ℓ: log f̄_0(x) where log L(x) > ℓ,
    else −inf; log L) for an affine path with f_0 = Z_0 f̄_0."""
    def split(x):
        """(log f̄_0(x), log L(x)), log L = −inf outside the base's support."""
        log_f0 = path.log_density(x, 0.0)
        return log_f0, jnp.where(jnp.isneginf(log_f0), -jnp.inf, path.log_density(x, 1.0) - log_f0)

    def log_likelihood(x):
        return split(x)[1]

    def log_density(x, level):
        log_f0, log_l = split(x)
        return jnp.where(jnp.isfinite(log_f0) & (log_l > level), log_f0, -jnp.inf)

    return Path(log_density, jnp.zeros(()), path.sample_base), log_likelihood


def _log_mean(log_likelihood, mask):
    """log (1/N) Σ_i L^i 1{mask^i} over all N particles."""
    log_n = jnp.log(jnp.asarray(log_likelihood.shape[0], log_likelihood.dtype))
    return _weights.logsumexp(jnp.where(mask, log_likelihood, -jnp.inf)) - log_n


def _iid_variance(values):
    """The variance of the mean of N independent draws: their spread / N."""
    return jnp.var(values) / values.shape[0]


def _shell(log_likelihood, dead, variance_of):
    """(log d_t, Var ū, Cov(ū, s̄), Var s̄) of one level: d_t = (1/N) Σ_i L^i 1{dead^i}, the
    dead mass relative to it u^i = L^i 1{dead^i} / d_t, the survivors s^i = 1{alive^i};
    ``variance_of`` takes (N,) values to the variance of their mean (independent draws, or
    chains)."""
    log_d = _log_mean(log_likelihood, dead)
    finite = jnp.isfinite(log_d)
    relative = jnp.where(dead & finite, jnp.exp(log_likelihood - jnp.where(finite, log_d, 0.0)), 0.0)
    alive = (~dead).astype(log_likelihood.dtype)
    var_u, var_s = variance_of(relative), variance_of(alive)
    return log_d, var_u, 0.5 * (variance_of(relative + alive) - var_u - var_s), var_s


def _moments(positions):
    """(mean, Cholesky factor of the covariance) of the particles, raveled, the covariance's diagonal floored at
    its mean × machine ε (a level narrower than that in some coordinate keeps a usable factor)."""
    flat = flat_positions(positions)
    mean = jnp.mean(flat, axis=0)
    centred = flat - mean
    covariance = centred.T @ centred / flat.shape[0]
    diagonal = jnp.diagonal(covariance)
    floor = jnp.finfo(flat.dtype).eps * jnp.maximum(jnp.mean(diagonal), jnp.finfo(flat.dtype).tiny)
    covariance = covariance + jnp.diag(jnp.maximum(floor, 1e-6 * diagonal))
    return mean, jnp.linalg.cholesky(covariance)


def nested_smc(path: Path, kernel_of: Callable | None = None, *, survival: float = 0.5, num_moves: int | None = None,
               max_moves: int | None = 200, decorrelation_target: float = DECORRELATION_TARGET,
               tolerance: float = 1e-3, max_levels: int = 1000, resampling: str = "systematic",
               waste_free: bool = False, chain_length: int | None = None, record_levels: bool = False) -> Estimator:
    """Nested sampling as SMC on an affine ``path`` (``jaxz.paths.likelihood_tempering`` or
    ``geometric`` with a normalized base and ``sample_base``): log Z ± s.e. from the levels
    of the likelihood (see the module docstring for the estimator and its error bar).

    kernel_of: ``kernel_of(constrained) -> Kernel`` for the constrained path, whose "β" is
        the level ℓ (default: ``jaxz.kernels.rwmh(constrained, mass_matrix="dense")``, tuned
        from the particles' covariance at each level, its variances floored at ε × their mean:
        in float32 a level set narrower than ~10⁻⁴ of its widest coordinate is flagged STUCK).
    survival: ρ, the fraction of particles above each new level.
    num_moves: kernel moves per particle at the first level, after resampling (at every
        level where ``max_moves`` is None); waste-free: kernel steps between kept states.
        Default 20 (waste-free: ``_chains.WASTE_FREE_FIRST_MOVES``).
    max_moves: the cap on the adapted moves, set from the previous level's correlation of the
        particles before and after the moves (to ``decorrelation_target``) or, waste-free, from
        the chains' autocorrelation time (``nested_moves.mixing_time``). Survivors left near their ancestors
        set the next level too high, and Ẑ with it (docs/changelog.md, nested SMC).
    tolerance: stop when the mass above the level is below this fraction of Ẑ.
    max_levels: the per-level record's length; ``jaxz.run``'s ``max_steps`` should not exceed it.
    waste_free, chain_length: grow each level's particles as M = N / P chains of P =
        ``chain_length`` states (default: the longest P up to ``_chains.DEFAULT_CHAIN_LENGTH``
        dividing N), every state kept (module docstring).
    record_levels: put each level's particle mean and covariance (Cholesky factor) in the
        Info (d + d² numbers a level; else empty arrays), for
        ``jaxz.estimators.nested_importance``.

    ``init(rng_key, positions)`` takes N exact draws of f̄_0. Status: STATUS_PLATEAU when
    every draw of the base has the same likelihood (no level can be set; Ẑ = Z_0 L, its s.e.
    infinite: mass below ~1/N of the base is unseen);
    STATUS_FEW_PARTICLES when a level kept fewer than ``MIN_SURVIVORS`` particles (ties);
    STATUS_STUCK when a level's moves moved fewer than ``MIN_MOVED`` of them (waste-free: of
    its chains), or when more than ``MAX_CAPPED_SHARE`` of the levels needed more than
    ``max_moves`` moves to decorrelate; STATUS_FEW_CHAINS for waste-free runs of fewer than
    ``_chains.MIN_WASTE_FREE_CHAINS`` chains.
    """
    if not isinstance(path, Path) or not path.affine:
        raise ValueError("nested_smc needs an affine jaxz.paths.Path (likelihood_tempering or geometric): "
                         "the likelihood is f_1 / f_0")
    if path.sample_base is None:
        raise ValueError("nested_smc needs path.sample_base (exact draws of the base)")
    _checks.fraction("survival", survival)
    default_moves = _chains.WASTE_FREE_FIRST_MOVES if waste_free else 20
    num_moves = _checks.integer("num_moves", default_moves if num_moves is None else num_moves)
    if max_moves is not None:
        max_moves = _checks.integer("max_moves", max_moves, num_moves, what="at least num_moves")
    _checks.fraction("decorrelation_target", decorrelation_target)
    _checks.fraction("tolerance", tolerance)
    max_levels = _checks.integer("max_levels", max_levels)
    if chain_length is not None:
        if not waste_free:
            raise ValueError("chain_length is a waste-free setting: pass waste_free=True")
        chain_length = _checks.integer("chain_length", chain_length, 2, what="at least 2")
    constrained, log_likelihood_fn = constrained_path(path)
    kernel = (kernel_of or (lambda p: rwmh(p, mass_matrix="dense")))(constrained)
    if not isinstance(kernel, Kernel):
        raise ValueError(f"kernel_of must return a jaxz Kernel, got {type(kernel).__name__}")
    resample, _ = _particles.resampler(resampling)
    count = MoveCount(num_moves, max_moves, decorrelation_target)

    def shape(num):
        return _chains.waste_free_shape(num, chain_length=chain_length)

    mutate = (waste_free_move(kernel, log_likelihood_fn, resample, count, shape) if waste_free
              else resample_move(kernel, log_likelihood_fn, resample, count))

    def init(rng_key, positions) -> NestedState:
        num = _particles.num_particles_of(positions)
        if num < 2 * MIN_SURVIVORS:
            raise ValueError(f"nested_smc needs at least {2 * MIN_SURVIVORS} particles, got {num}")
        few_chains = waste_free and shape(num)[0] < _chains.MIN_WASTE_FREE_CHAINS
        dtype = _particles.float_dtype(positions)
        level = jnp.full((), -jnp.inf, dtype)
        zero = jnp.zeros((), dtype)
        return NestedState(_moves.kernel_init(kernel, positions, level),
                           jax.vmap(log_likelihood_fn)(positions).astype(dtype), zero, level,
                           jnp.full((max_levels, 7), jnp.nan, dtype), jnp.int32(0), jnp.bool_(False),
                           jnp.int32(STATUS_FEW_CHAINS if few_chains else STATUS_OK), zero,
                           jnp.full((), jnp.nan, dtype), jnp.int32(num_moves), jnp.int32(0),
                           jnp.asarray(num, dtype), jnp.bool_(False))

    @freeze_when_done
    def step(rng_key, state: NestedState):
        key_resample, key_move = jax.random.split(rng_key)
        log_l = state.log_likelihood
        num, dtype = log_l.shape[0], log_l.dtype
        survivors = max(1, min(num - 1, round(survival * num)))
        # ℓ_t: ``survivors`` of the particles above it (fewer where they tie at it)
        level = jnp.sort(log_l)[num - survivors - 1]
        alive = log_l > level
        num_alive = jnp.sum(alive)
        log_rest = state.log_volume + _log_mean(log_l, alive)
        log_z_dead = jnp.logaddexp(state.log_z, state.log_volume + _log_mean(log_l, ~alive))
        last = (num_alive == 0) | (log_rest < log_z_dead + jnp.log(tolerance)) | (state.index + 1 >= max_levels)
        # the last level counts every particle's own mass (the mass above ℓ_t estimated by its particles)
        dead = ~alive | last
        survival_rate = (num_alive / num).astype(dtype)
        if waste_free:
            length = shape(num)[1]
            chained = lambda values: _chains.chain_mean_variance(values.reshape(length, -1))  # noqa: E731
            variance_of = lambda values: jnp.where(state.chained, chained(values), _iid_variance(values))  # noqa: E731
        else:
            variance_of = _iid_variance
        log_d, var_u, covariance, var_s = _shell(log_l, dead, variance_of)
        log_z = jnp.logaddexp(state.log_z, state.log_volume + log_d)

        moved = mutate(key_resample, key_move, state, level, alive, num_alive)
        memory = jnp.where(last, 0.0, jnp.clip(moved.memory, 0.0, MAX_MEMORY)).astype(dtype)
        shells = state.shells.at[state.index].set(jnp.stack([
            state.log_volume, log_d, jnp.where(last, 1.0, survival_rate).astype(dtype), var_u, covariance, var_s,
            memory]).astype(dtype))
        status = (state.status | jnp.where((state.index == 0) & (num_alive == 0), STATUS_PLATEAU, STATUS_OK)
                  | jnp.where(~last & (num_alive < MIN_SURVIVORS), STATUS_FEW_PARTICLES, STATUS_OK)
                  | jnp.where(~last & (moved.moved < MIN_MOVED), STATUS_STUCK, STATUS_OK))
        # the last level moves nothing: the state keeps its particles
        keep = lambda old, new: jnp.where(last, old, new)  # noqa: E731
        new_state = NestedState(
            jax.tree.map(keep, state.kernel_states, moved.kernel_states), keep(log_l, moved.log_likelihood),
            keep(state.log_volume, state.log_volume + jnp.log(survival_rate)), log_z, shells, state.index + 1, last,
            status.astype(jnp.int32), state.cost + keep(0.0, moved.cost),
            keep(state.acceptance_rate, moved.acceptance.astype(dtype)),
            keep(state.num_moves, moved.next_moves).astype(jnp.int32),
            state.capped + (~last & moved.capped).astype(jnp.int32),
            state.log_density_evaluations + keep(0.0, moved.evaluations), state.chained | (waste_free & ~last))
        if record_levels:
            mean, cholesky = _moments(state.kernel_states.position)
        else:
            mean, cholesky = jnp.zeros((0,), dtype), jnp.zeros((0, 0), dtype)
        info = NestedInfo(level, new_state.log_volume, survival_rate, new_state.acceptance_rate,
                          keep(jnp.ones((), dtype), moved.moved.astype(dtype)),
                          jnp.asarray(count.now(state), jnp.int32), state.log_volume + log_d, mean, cholesky)
        return new_state, info

    def finalize(state: NestedState) -> Estimate:
        log_z = state.log_z
        variance = _relative_variance(state.shells, log_z, state.index)
        log_z_total = log_z + jnp.asarray(path.log_z0, log_z.dtype)
        spread = jnp.sqrt(jnp.log1p(variance))  # the s.d. of log Ẑ for a log-normal Ẑ of that relative variance
        stuck = state.capped > MAX_CAPPED_SHARE * state.index
        status = state.status | jnp.where(stuck, STATUS_STUCK, STATUS_OK)
        # every base draw at one likelihood: the draws' spread (0) says nothing of mass they missed
        spread = jnp.where(status & STATUS_PLATEAU, jnp.inf, spread)
        return _particles.make_estimate(log_z_total, spread, state.cost, status)

    return Estimator(init, step, finalize)


def _relative_variance(shells, log_z, num_levels):
    """Var(Ẑ)/Ẑ² by the delta method over the levels: with c_t = V̂_{t−1} d_t / Ẑ the level's
    share, A_t the share of every later level and r_t its survival (Ẑ = Σ_t V̂_{t−1} d_t,
    V̂_t = V̂_{t−1} r_t, so δẐ/Ẑ = c_t δd_t/d_t + (A_t/r_t) δr_t), the level adds
    c_t² Var ū + 2 c_t (A_t/r_t) Cov(ū, s̄) + (A_t/r_t)² Var s̄, widened by (1 + m_t)/(1 − m_t)
    for its memory m_t (module docstring)."""
    log_volume, log_d, survival, var_u, covariance, var_s, memory = (shells[:, k] for k in range(7))
    valid = jnp.arange(shells.shape[0]) < num_levels
    share = jnp.where(valid, jnp.exp(log_volume + log_d - log_z), 0.0)
    later = jnp.clip(1.0 - jnp.cumsum(share), 0.0, 1.0)
    odds = later / jnp.where(valid & (survival > 0), survival, 1.0)
    terms = share**2 * var_u + 2.0 * share * odds * covariance + odds**2 * var_s
    memory = jnp.where(valid, memory, 0.0)
    return jnp.sum(jnp.where(valid, jnp.maximum(terms, 0.0) * (1.0 + memory) / (1.0 - memory), 0.0))


__all__ = ["nested_smc", "NestedState", "NestedInfo", "constrained_path", "MIN_SURVIVORS", "MIN_MOVED",
           "DECORRELATION_TARGET", "MAX_CAPPED_SHARE", "MAX_MEMORY"]
