"""Rao-Blackwellized Tempered Sampling (RTS; Carlson, Stinson, Pakman & Paninski,
ICML 2016), with the estimators it is compared against computed from the same run.

Simulated tempering samples the pair (x, β_k), k = 1..K (β_1 = 0, β_K = 1), from

    q(x, β_k) ∝ f_k(x) r_k / Ẑ_k                                         (seed eq. 6)

by alternating x | β_k (the Kernel at β_k) and β | x from

    q(β_k | x) = f_k(x) r_k / Ẑ_k / Σ_j f_j(x) r_j / Ẑ_j                   (seed eq. 7).

The marginal of β is q(β_k) ∝ r_k Z_k / Ẑ_k (eq. 8); its Rao-Blackwellized estimate
ĉ_k = (1/N) Σ_i q(β_k | x_i) (eq. 9) turns into the update

    Ẑ_k ← Ẑ_k (r_1 / r_k) (ĉ_k / ĉ_1)                                     (eq. 12)

anchored at the known Z_1 = Z_0 of the path. The seed's §2.4 initial iterations run
short blocks (x kept, β redrawn from r), applying eq. (12) after each, until
max_k |r_k − ĉ_k| < 0.1/K; the long run then keeps Ẑ fixed and accumulates ĉ for the
final eq. (12). With ``alpha`` < 1 every update is partial (§4.4):
log Ẑ ← log Ẑ + α · log[(r_1/r_k)(ĉ_k/ĉ_1)].

The file follows Algorithm 1: ``_gibbs_sweep`` (x | β, then β | x),
``_accumulate`` (the ĉ_k update of eq. 9 and the TS / TI sums beside it),
``_initial_iteration`` (§2.4: eq. 12 at the end of a block), ``_travel`` (how far the
chains move, for the error-bar checks), assembled by ``_step``; ``_finalize`` reads
eq. (12) off the long run.

``rts_estimates(state)`` gives, from the same run, the ladder of log Ẑ_k for RTS
(with a batch-means standard error), TS (visit counts + 0.1), TI (Riemann and
trapezoid, on the draws at each β_k) and TI-RB (eq. 21: the derivative at β_k
averaged over every draw with weight q(β_k | x)). Each sweep's ``RTSInfo`` carries the
β = 1 end of those ladders (``jaxz.run(...).trace``), and with ``record_draws=True``
the chains' draws (x, β) for MBAR (eq. 18, ``jaxz.mbar``).
"""
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks
from jaxz import weights as _weights
from jaxz.base import STATUS_FEW_CHAINS, STATUS_NONFINITE, STATUS_STUCK, Estimate, Estimator, freeze_when_done
from jaxz.estimators import _particles
from jaxz.kernels.base import Kernel, KernelState
from jaxz.paths import Path
from jaxz.schedules import validate
from jaxz.types import Array, ArrayTree

TS_PSEUDO_COUNT = 0.1  # added to every visit count in the TS estimate (seed §3)
# STATUS_FEW_CHAINS below this many one-way trips between the ends of the ladder per batch
# of the long run (summed over chains): a batch between whose ends no chain reached the hot
# end, where the chains change mode, is not an independent draw of ĉ. The case behind it:
# RTS on the 784-visible CD-1 RBM of benchmarks/rbm784.py, whose batch-means s.e. covered
# few runs (its coverage in benchmarks/results/rbm784.json).
MIN_TOURS_PER_BATCH = 1.0
CONVERGENCE_FACTOR = 0.1  # initial iterations stop when max_k |r_k − ĉ_k| < 0.1 / K (seed §2.4)


class RTSState(NamedTuple):
    kernel_states: KernelState  # one per chain, leading axis = chains
    beta_index: Array  # (C,) int32: the temperature k of each chain
    log_z_hat: Array  # (K,) the log Ẑ_k that define the sampled joint (eq. 6)
    log_c_sum: Array  # (K,) log Σ_sweeps Σ_chains q(β_k | x) over the current block
    counts: Array  # (K,) β draws per temperature over the current block (TS)
    du_sum: Array  # (K,) Σ of d/dβ log f_β(x) at β_k over draws with β = β_k (TI)
    rb_du_mean: Array  # (K,) q-weighted mean of d/dβ log f_β(x) at β_k (TI-RB, eq. 21)
    batch_log_c: Array  # (B, K) log Σ q(β_k | x) per batch of the long run (batch means)
    sweep: Array  # sweeps taken in the current block
    iteration: Array  # initial iterations completed
    long_run: Array  # bool: in the long run (Ẑ frozen)
    accepted: Array  # accepted x-moves in the long run, summed over chains (expected count)
    betas: Array  # (K,)
    log_prior: Array  # (K,) normalized log r_k
    done: Array
    status: Array
    cost: Array
    squared_jumps: Array  # Σ over long-run sweeps and chains of |x' − x|² (how far the chains moved)
    position_sum: Array  # one particle's shape: Σ x over long-run sweeps and chains
    position_square_sum: Array  # Σ x² likewise: with position_sum, the spread the chains sample
    last_end: Array  # (C,) int32: the end of the ladder each chain visited last (0: β_0, 1: β_K−1; −1: none)
    tours: Array  # one-way trips between the ends of the ladder in the long run, summed over chains


class RTSDraws(NamedTuple):
    """The chains' draws (x, β) after one sweep (``rts(..., record_draws=True)``)."""

    position: ArrayTree  # leading axis = chains
    beta_index: Array  # (C,) int32: the temperature k of each chain
    in_long_run: Array  # bool: the chains are in the long run after this sweep (β drawn at the frozen Ẑ)


class RTSInfo(NamedTuple):
    """One sweep's report (``jaxz.run(rts(...), ...).trace`` stacks it along the sweeps).

    The log Ẑ fields are the β = 1 ends of ``RTSEstimates``' ladders from the current
    block so far; in the long run (``long_run``) that is what ``rts_estimates`` of the
    state after this sweep gives at β = 1: the estimate of a run stopped there.
    """

    log_z: Array  # RTS: eq. (12) with ĉ (eq. 9), or with visit frequencies when not Rao-Blackwellized
    max_c_error: Array  # max_k |r_k − ĉ_k| over the current block
    long_run: Array  # bool: this sweep belongs to the long run (Ẑ frozen)
    acceptance_rate: Array  # the x-moves' acceptance, mean over chains
    log_z_ts: Array  # TS: eq. (12) with visit frequencies (counts + 0.1)
    log_z_ti_riemann: Array  # TI, left Riemann rule on the mean derivative at each β_k
    log_z_ti_trapezoid: Array  # TI, trapezoid rule
    log_z_ti_rb: Array  # TI-RB (eq. 21), trapezoid rule
    draws: RTSDraws | None  # the chains' (x, β) after this sweep; None unless record_draws=True


class RTSEstimates(NamedTuple):
    """Ladders of log Ẑ_k (K,) from one RTS run (all anchored at log Z_0)."""

    rts: Array  # eq. (12) with the long run's ĉ (and the partial step α)
    rts_stderr: Array  # batch-means standard error of rts
    ts: Array  # eq. (12) with visit frequencies (counts + 0.1)
    ti_riemann: Array  # Σ (β_{k+1} − β_k) Ê_k, Ê_k the mean derivative over draws at β_k
    ti_trapezoid: Array  # Σ (β_{k+1} − β_k)(Ê_k + Ê_{k+1}) / 2
    ti_rb: Array  # trapezoid rule on the Rao-Blackwellized means (eq. 21)
    c_hat: Array  # normalized ĉ_k of the long run
    counts: Array  # visits per temperature in the long run


class _Settings(NamedTuple):
    """``rts``'s arguments, checked (fixed when the estimator is built)."""

    path: Path
    kernel: Kernel
    betas: Array  # (K,) the ladder (traced or concrete)
    num_sweeps: int  # sweeps of the long run
    initial_iterations: int
    sweeps_per_iteration: int
    log_prior: np.ndarray  # (K,) normalized log r_k
    log_z_hat: Array  # (K,) initial log Ẑ_k (traced or concrete)
    alpha: float
    rao_blackwellize: bool
    num_batches: int
    adapt: Callable | None
    record_draws: bool

    @property
    def num_temperatures(self) -> int:
        return self.betas.shape[0]


def _log_q(path: Path, positions, betas, log_prior, log_z_hat):
    """log q(β_k | x_i) (eq. 7), the log f_k(x_i) and d/dβ log f_β(x_i) at β_k, all (C, K)."""
    value_and_derivative = jax.value_and_grad(path.log_density, argnums=1)
    # β batched, x shared: vmap keeps the β-free part of log f (e.g. W v) unbatched
    ladder = jax.vmap(value_and_derivative, in_axes=(None, 0))
    log_f, derivative = jax.vmap(ladder, in_axes=(0, None))(positions, betas)
    log_f, status = _weights.sanitize(log_f)
    log_q = _weights.normalize(log_f + log_prior - log_z_hat)
    return log_q, log_f, jnp.where(jnp.isfinite(derivative), derivative, 0.0), status


def _eq12(log_z_hat, log_prior, log_c, alpha):
    """log Ẑ_k ← log Ẑ_k + α log[(r_1/r_k)(ĉ_k/ĉ_1)] (eq. 12, partial step α of §4.4)."""
    correction = (log_prior[0] - log_prior) + (log_c - log_c[0])
    correction = jnp.where(jnp.isfinite(correction), correction, 0.0)
    return log_z_hat + alpha * correction


def rts(
    path: Path,
    kernel: Kernel,
    betas,
    *,
    num_sweeps: int,
    initial_iterations: int = 10,
    sweeps_per_iteration: int = 50,
    log_prior_weights=None,
    log_z_hat=None,
    alpha: float = 1.0,
    rao_blackwellize: bool = True,
    num_batches: int = 20,
    adapt: Callable | None = None,
    record_draws: bool = False,
) -> Estimator:
    """Rao-Blackwellized tempered sampling along the ladder ``betas`` (β_1 = 0 … β_K = 1).

    ``init(rng_key, positions)``: one chain per leading-axis entry of ``positions``.
    One step = one sweep of every chain (Algorithm 1's loop body): x | β_k with the
    kernel at the chain's own β_k, then β | x from eq. (7), accumulating ĉ (eq. 9). The
    first ``initial_iterations`` blocks of ``sweeps_per_iteration`` sweeps update Ẑ by
    eq. (12) and redraw β from r (§2.4), stopping early once max_k |r_k − ĉ_k| < 0.1/K;
    then ``num_sweeps`` sweeps with Ẑ frozen. ``Estimator.num_steps`` is the maximum,
    initial_iterations · sweeps_per_iteration + num_sweeps; a run that stops its initial
    iterations early is done sooner and idles (``freeze_when_done``).

    Args:
      log_prior_weights: (K,) unnormalized log r_k (default uniform; §4.4 uses r_k ∝ exp(2β_k)).
      log_z_hat: (K,) initial log Ẑ_k (default zeros; only differences matter, the
        ladder is anchored at ``path.log_z0``); may be a traced array, so a jitted loop
        can carry Ẑ from one run to the next (tracking, §4.4).
      alpha: step of the partial update of §4.4, in (0, 1] (1: the full eq. 12).
      rao_blackwellize: False replaces ĉ_k by visit frequencies (counts + 0.1) in every
        update: plain tempered sampling (TS), the seed's Figure 1 comparison.
      num_batches: batches of the long run for the batch-means standard error.
      adapt: optional ``adapt(kernel_states, beta_index, acceptance_rate) -> kernel_states``
        applied after every sweep of the initial iterations only (e.g. the per-temperature
        step sizes of ``jaxz.kernels.tempered_hmc``); the long run is a fixed Markov chain.
      record_draws: also put the chains' draws (x, β) after every sweep in ``RTSInfo.draws``
        (MBAR's input, eq. 18). Off by default: the trace would hold every chain's
        position at every sweep.

    ``finalize`` gives log Ẑ at β = 1 with its batch-means standard error (widened by
    t_{B−1}(0.975)/1.96 for the B − 1 degrees of freedom of B batch means, so that
    ±1.96 s.e. is the Student-t interval). Flags: STATUS_STUCK
    when the chains' x-moves were accepted fewer than twice in the whole long run, or
    the chains moved (mean cumulative squared jump) less than twice the spread they
    sample (a tiny HMC step size: accepted but frozen); STATUS_FEW_CHAINS with
    ``num_sweeps=1`` (one batch: the s.e. is nan), or when the chains made fewer one-way
    trips between the two ends of the ladder in the long run than there are batches
    (``MIN_TOURS_PER_BATCH``; ``RTSState.tours``): a chain changes mode at the hot end,
    and batches between which no chain got there are not independent draws of ĉ.
    Chains that do travel the ladder and still never find a mode are not seen
    (docs/error-bars.md). A traced ``betas`` that does not increase from 0 to 1 gives
    log Ẑ = nan with STATUS_NONFINITE. cost counts kernel transitions (Gibbs sweeps, HMC
    trajectories) over all chains, initial iterations included.
    ``jaxz.rts_estimates(state)`` gives the ladders of every method.
    """
    settings = _check_arguments(path, kernel, betas, num_sweeps, initial_iterations, sweeps_per_iteration,
                                log_prior_weights, log_z_hat, alpha, rao_blackwellize, num_batches, adapt,
                                record_draws)
    max_steps = settings.initial_iterations * settings.sweeps_per_iteration + settings.num_sweeps

    def init(rng_key, positions) -> RTSState:
        return _init(settings, rng_key, positions)

    @freeze_when_done
    def step(rng_key, state: RTSState):
        return _step(settings, rng_key, state)

    def finalize(state: RTSState) -> Estimate:
        return _finalize(settings, state)

    return Estimator(init, step, finalize, max_steps)


def _check_arguments(path, kernel, betas, num_sweeps, initial_iterations, sweeps_per_iteration,
                     log_prior_weights, log_z_hat, alpha, rao_blackwellize, num_batches, adapt,
                     record_draws) -> _Settings:
    """``rts``'s arguments checked by name; r normalized (log r_k − log Σ_j r_j)."""
    _particles.check_path(path)
    betas = validate(betas)
    num_temperatures = betas.shape[0]
    num_sweeps = _checks.integer("num_sweeps", num_sweeps, 1, "sweeps of the long run")
    initial_iterations = _checks.integer("initial_iterations", initial_iterations, 0)
    sweeps_per_iteration = _checks.integer("sweeps_per_iteration", sweeps_per_iteration, 1)
    alpha = _particles.check_fraction("alpha", alpha)
    num_batches = min(_checks.integer("num_batches", num_batches, 2), num_sweeps)
    if log_prior_weights is None:
        log_prior_weights = np.zeros(num_temperatures)
    log_prior_weights = np.asarray(log_prior_weights, float)
    if log_prior_weights.shape != (num_temperatures,) or not np.all(np.isfinite(log_prior_weights)):
        raise ValueError(f"log_prior_weights must be a finite ({num_temperatures},) array, "
                         f"got shape {log_prior_weights.shape}")
    log_prior = log_prior_weights - np.logaddexp.reduce(log_prior_weights)
    if log_z_hat is None:
        log_z_hat = np.zeros(num_temperatures)
    if np.shape(log_z_hat) != (num_temperatures,):
        raise ValueError(f"log_z_hat must be a ({num_temperatures},) array, got shape {np.shape(log_z_hat)}")
    if not isinstance(log_z_hat, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(log_z_hat))):
        raise ValueError("log_z_hat must be finite")
    if not isinstance(record_draws, (bool, np.bool_)):
        raise ValueError(f"record_draws must be True or False, got {record_draws!r}")
    return _Settings(path, kernel, betas, num_sweeps, initial_iterations, sweeps_per_iteration, log_prior,
                     log_z_hat, alpha, rao_blackwellize, num_batches, adapt, bool(record_draws))


def _init(settings: _Settings, rng_key, positions) -> RTSState:
    """Algorithm 1's initialization: Ẑ anchored at log Z_0, ĉ = 0, β drawn per chain."""
    path, kernel, num_temperatures = settings.path, settings.kernel, settings.num_temperatures
    _particles.num_particles_of(positions)  # validates the chain axis
    dtype = _particles.float_dtype(positions)
    _checks.floating_positions(path, kernel, positions, settings.betas[0])
    _checks.positions_for_path(path, positions)
    _particles.check_scalar_function("path.log_density", path.log_density,
                                     _particles.first_particle(positions), jnp.zeros((), dtype))
    ladder = jnp.asarray(settings.betas, dtype)
    log_prior = jnp.asarray(settings.log_prior, dtype)
    log_z = jnp.asarray(settings.log_z_hat, dtype)
    log_z = log_z - log_z[0] + jnp.asarray(path.log_z0, dtype)
    # β from r for the §2.4 iterations; from q(β | x) when going straight to the long run
    log_q, _, _, status = _log_q(path, positions, ladder, log_prior, log_z)
    logits = jnp.broadcast_to(log_prior, log_q.shape) if settings.initial_iterations > 0 else log_q
    beta_index = jax.random.categorical(rng_key, logits, axis=-1).astype(jnp.int32)
    states = jax.vmap(kernel.init)(positions, ladder[beta_index])
    zeros = jnp.zeros((num_temperatures,), dtype)
    return RTSState(
        states, beta_index, log_z, jnp.full((num_temperatures,), -jnp.inf, dtype), zeros, zeros, zeros,
        jnp.full((settings.num_batches, num_temperatures), -jnp.inf, dtype), jnp.int32(0), jnp.int32(0),
        jnp.bool_(settings.initial_iterations == 0), jnp.zeros((), dtype), ladder, log_prior, jnp.bool_(False),
        status, jnp.zeros((), dtype), jnp.zeros((), dtype),
        *(jax.tree.map(lambda leaf: jnp.zeros(leaf.shape[1:], dtype), positions) for _ in range(2)),
        _ladder_end(beta_index, jnp.full_like(beta_index, -1), num_temperatures), jnp.zeros((), dtype),
    )


class _Sweep(NamedTuple):
    """One Gibbs sweep's output (``_gibbs_sweep``)."""

    kernel_states: KernelState
    acceptance: Array  # (C,)
    log_q: Array  # (C, K) log q(β_k | x) at the new x (eq. 7)
    derivative: Array  # (C, K) d/dβ log f_β(x) at β_k
    beta_index: Array  # (C,) β drawn from q(β | x)
    status: Array  # STATUS_NONFINITE where a log density was nan


def _gibbs_sweep(settings: _Settings, key_x, key_beta, state: RTSState) -> _Sweep:
    """Algorithm 1, loop body: a transition in x leaving q(x | β) invariant (the kernel
    at each chain's own β_k), then β | x from eq. (7)."""
    num_chains = state.beta_index.shape[0]
    step_kernel = jax.vmap(settings.kernel.step, in_axes=(0, 0, 0))
    kernel_states, info = step_kernel(
        jax.random.split(key_x, num_chains), state.kernel_states, state.betas[state.beta_index]
    )
    acceptance = jnp.asarray(info.acceptance_rate, state.log_z_hat.dtype)
    if settings.adapt is not None:  # the initial iterations only: the long run is a fixed chain
        adapted = settings.adapt(kernel_states, state.beta_index, acceptance)
        kernel_states = jax.tree.map(
            lambda old, new: jnp.where(state.long_run, old, new), kernel_states, adapted
        )
    log_q, _, derivative, status = _log_q(
        settings.path, kernel_states.position, state.betas, state.log_prior, state.log_z_hat
    )
    beta_index = jax.random.categorical(key_beta, log_q, axis=-1).astype(jnp.int32)
    return _Sweep(kernel_states, acceptance, log_q, derivative, beta_index, status)


class _Sums(NamedTuple):
    """The current block's sums after one more sweep (``_accumulate``)."""

    log_c_sweep: Array  # (K,) log Σ_chains q(β_k | x) of this sweep
    log_c_sum: Array  # (K,) log of N ĉ_k over the block (eq. 9)
    counts: Array  # (K,) visits (TS)
    du_sum: Array  # (K,) Σ of the derivative over the draws at β_k (TI)
    rb_du_mean: Array  # (K,) q-weighted mean derivative at β_k (TI-RB, eq. 21)
    batch_log_c: Array  # (B, K) log N ĉ_k per batch of the long run


def _accumulate(settings: _Settings, state: RTSState, sweep: _Sweep) -> _Sums:
    """Algorithm 1's ĉ_k ← ĉ_k + q(β_k | x)/N (eq. 9, in log space), the batch of the
    long run it falls in, and beside it the visit counts (TS) and the derivative sums of
    TI and TI-RB."""
    num_temperatures, num_batches = settings.num_temperatures, settings.num_batches
    one_hot = jax.nn.one_hot(sweep.beta_index, num_temperatures, dtype=state.log_z_hat.dtype)
    log_c_sweep = jax.nn.logsumexp(sweep.log_q, axis=0)
    log_c_sum = jnp.logaddexp(state.log_c_sum, log_c_sweep)
    counts = state.counts + jnp.sum(one_hot, axis=0)
    du_sum = state.du_sum + jnp.sum(one_hot * sweep.derivative, axis=0)
    # running q-weighted mean of the derivative, in log space so unvisited k stay finite
    sweep_mean = jnp.sum(jax.nn.softmax(sweep.log_q, axis=0) * sweep.derivative, axis=0)
    share = jnp.exp(log_c_sweep - log_c_sum)
    share = jnp.where(jnp.isfinite(share), share, 0.0)
    rb_du_mean = state.rb_du_mean + share * (sweep_mean - state.rb_du_mean)
    batch = jnp.minimum(state.sweep * num_batches // settings.num_sweeps, num_batches - 1)
    batch_log_c = state.batch_log_c.at[batch].set(
        jnp.where(state.long_run, jnp.logaddexp(state.batch_log_c[batch], log_c_sweep), state.batch_log_c[batch])
    )
    return _Sums(log_c_sweep, log_c_sum, counts, du_sum, rb_du_mean, batch_log_c)


class _Iteration(NamedTuple):
    """What the §2.4 schedule decides after a sweep (``_initial_iteration``)."""

    log_z_hat: Array  # (K,) Ẑ after eq. (12) at the end of a block, else unchanged
    beta_index: Array  # (C,) β for the next sweep
    iteration: Array
    end_of_block: Array  # bool: an initial iteration ended (its sums start afresh)
    start_long_run: Array  # bool: ... and it was the last
    max_c_error: Array  # max_k |r_k − ĉ_k| over the block so far


def _initial_iteration(settings: _Settings, key_fresh, key_redraw, state: RTSState, sweep: _Sweep, log_c,
                       sweeps_done) -> _Iteration:
    """§2.4: at the end of an initial block, update Ẑ by eq. (12) and test ĉ ≈ r
    (max_k |r_k − ĉ_k| < 0.1/K, or the last iteration); another block redraws β from r,
    the long run redraws β | x from eq. (7) at the updated Ẑ."""
    num_temperatures = settings.num_temperatures
    max_c_error = jnp.max(jnp.abs(jnp.exp(state.log_prior) - jnp.exp(log_c)))
    end_of_block = ~state.long_run & (sweeps_done >= settings.sweeps_per_iteration)
    iteration = state.iteration + end_of_block.astype(jnp.int32)
    converged = max_c_error < CONVERGENCE_FACTOR / num_temperatures
    start_long_run = end_of_block & (converged | (iteration >= settings.initial_iterations))
    updated = _eq12(state.log_z_hat, state.log_prior, log_c, settings.alpha)
    log_z_hat = jnp.where(end_of_block, updated, state.log_z_hat)
    fresh = jax.random.categorical(key_fresh, jnp.broadcast_to(state.log_prior, sweep.log_q.shape), axis=-1)
    beta_index = jnp.where(end_of_block & ~start_long_run, fresh.astype(jnp.int32), sweep.beta_index)
    log_q_new = _weights.normalize(sweep.log_q + state.log_z_hat - log_z_hat)
    redrawn = jax.random.categorical(key_redraw, log_q_new, axis=-1).astype(jnp.int32)
    beta_index = jnp.where(start_long_run, redrawn, beta_index)
    return _Iteration(log_z_hat, beta_index, iteration, end_of_block, start_long_run, max_c_error)


def _travel(settings: _Settings, state: RTSState, kernel_states, beta_index):
    """How far the chains moved in the long run (``_jump_statistics``, for ``_stuck``)
    and their one-way trips between the ends of the ladder (``RTSState.tours``)."""
    moved = _jump_statistics(state.kernel_states.position, kernel_states.position, state.log_z_hat.dtype)
    squared_jumps, position_sum, position_square_sum = jax.tree.map(
        lambda total, new: total + jnp.where(state.long_run, new, jnp.zeros_like(new)),
        (state.squared_jumps, state.position_sum, state.position_square_sum), moved)
    last_end = _ladder_end(beta_index, state.last_end, settings.num_temperatures)
    trips = state.long_run & (state.last_end >= 0) & (last_end != state.last_end)
    tours = state.tours + jnp.sum(trips).astype(state.log_z_hat.dtype)
    return squared_jumps, position_sum, position_square_sum, last_end, tours


def _step(settings: _Settings, rng_key, state: RTSState):
    """One sweep of every chain: ``_gibbs_sweep``, ``_accumulate``, ``_initial_iteration``."""
    key_x, key_beta, key_fresh, key_redraw = jax.random.split(rng_key, 4)
    num_chains = state.beta_index.shape[0]
    sweep = _gibbs_sweep(settings, key_x, key_beta, state)
    sums = _accumulate(settings, state, sweep)
    sweeps_done = state.sweep + 1
    log_c = _block_log_c(sums.log_c_sum, sums.counts, settings.rao_blackwellize)
    schedule = _initial_iteration(settings, key_fresh, key_redraw, state, sweep, log_c, sweeps_done)
    squared_jumps, position_sum, position_square_sum, last_end, tours = _travel(
        settings, state, sweep.kernel_states, schedule.beta_index)

    reset = schedule.end_of_block  # every block (and the long run) accumulates from scratch
    empty = jnp.full_like(sums.log_c_sum, -jnp.inf)
    zeros = jnp.zeros_like(sums.counts)
    long_run = state.long_run | schedule.start_long_run
    new_state = RTSState(
        sweep.kernel_states, schedule.beta_index, schedule.log_z_hat,
        jnp.where(reset, empty, sums.log_c_sum), jnp.where(reset, zeros, sums.counts),
        jnp.where(reset, zeros, sums.du_sum), jnp.where(reset, zeros, sums.rb_du_mean), sums.batch_log_c,
        jnp.where(reset, 0, sweeps_done), schedule.iteration, long_run,
        state.accepted + jnp.where(state.long_run, jnp.sum(sweep.acceptance), 0.0), state.betas, state.log_prior,
        state.long_run & (sweeps_done >= settings.num_sweeps), state.status | sweep.status,
        state.cost + num_chains * settings.kernel.num_transitions,
        squared_jumps, position_sum, position_square_sum, last_end, tours,
    )
    # this block's ladders so far, before the reset (in the long run: those of new_state)
    ladders = _ladders(state.log_z_hat, state.log_prior, state.betas, log_c, sums.counts, sums.du_sum,
                       sums.rb_du_mean, settings.alpha)
    draws = RTSDraws(sweep.kernel_states.position, schedule.beta_index, long_run) if settings.record_draws else None
    info = RTSInfo(ladders.rts[-1], schedule.max_c_error, state.long_run, jnp.mean(sweep.acceptance),
                   ladders.ts[-1], ladders.ti_riemann[-1], ladders.ti_trapezoid[-1], ladders.ti_rb[-1], draws)
    return new_state, info


def _finalize(settings: _Settings, state: RTSState) -> Estimate:
    """Algorithm 1's last line: eq. (12) with the long run's ĉ, at β = 1."""
    estimates = _estimates(state, settings.alpha, settings.rao_blackwellize)
    # a traced ladder cannot be checked at construction: a bad one gives nan, flagged
    log_z = jnp.where(_checks.schedule_valid(settings.betas), estimates.rts[-1], jnp.nan)
    status = state.status | _particles.degenerate_status(log_z)
    status = jnp.where(jnp.isnan(log_z), status | STATUS_NONFINITE, status)
    status = (status | _error_bar_status(settings, state)).astype(jnp.int32)
    return Estimate(log_z, estimates.rts_stderr[-1], state.cost, status)


def _error_bar_status(settings: _Settings, state: RTSState):
    """The batch-means s.e. rests on chains that move and batches that are independent.

    STATUS_STUCK: chains that never moved. ĉ averages q(β | x) over frozen x, and the
    batch means see no spread (a s.e. of 0). "Moved" is judged twice: accepted moves,
    and distance, since a kernel that accepts steps of 1e-8 (HMC with a tiny step size,
    a zero random-walk scale) counts as moving while its chains stay put.
    STATUS_FEW_CHAINS: one sweep is one batch (the s.e. is nan: it needs two), or fewer
    one-way trips along the ladder than batches (``MIN_TOURS_PER_BATCH``).
    """
    stuck = (state.accepted < _particles.MIN_EFFECTIVE_PARTICLES) | _stuck(state)
    few_tours = (settings.num_temperatures > 1) & (state.tours < MIN_TOURS_PER_BATCH * settings.num_batches)
    few_batches = few_tours | (settings.num_sweeps < 2)
    return jnp.where(stuck, STATUS_STUCK, 0) | jnp.where(few_batches, STATUS_FEW_CHAINS, 0)


def _jump_statistics(old, new, dtype):
    """Σ_chains |x' − x|², Σ_chains x' and Σ_chains x'² (the last two per coordinate)."""
    def squared(a, b):
        return jnp.sum((jnp.asarray(b, dtype) - jnp.asarray(a, dtype)) ** 2)

    jumps = sum(squared(a, b) for a, b in zip(jax.tree.leaves(old), jax.tree.leaves(new)))
    sums = jax.tree.map(lambda leaf: jnp.sum(jnp.asarray(leaf, dtype), axis=0), new)
    squares = jax.tree.map(lambda leaf: jnp.sum(jnp.asarray(leaf, dtype) ** 2, axis=0), new)
    return jnp.asarray(jumps, dtype), sums, squares


def _ladder_end(beta_index, last_end, num_temperatures: int):
    """The end of the ladder each chain visited last: 0 at β_0, 1 at β_{K−1}, else unchanged."""
    return jnp.where(beta_index == 0, 0, jnp.where(beta_index == num_temperatures - 1, 1, last_end)).astype(jnp.int32)


def _stuck(state: RTSState):
    """True when the chains' mean cumulative squared jump over the long run,
    (1/C) Σ_t |x_{t+1} − x_t|², is below twice the spread they sample, Σ_coords Var(x)
    pooled over chains and sweeps: a chain that has not travelled a target's width in
    all its sweeps has not forgotten its start, and its batch means cannot see the
    spread of ĉ (s.e. ≈ 0 while the estimate is that of the starting points)."""
    num_chains = state.beta_index.shape[0]
    count = jnp.maximum(state.sweep, 1).astype(state.squared_jumps.dtype) * num_chains
    variance = jax.tree.map(lambda total, square: jnp.sum(square / count - (total / count) ** 2),
                            state.position_sum, state.position_square_sum)
    spread = sum(jax.tree.leaves(variance))
    return state.squared_jumps / num_chains < 2.0 * spread


def _block_log_c(log_c_sum, counts, rao_blackwellize: bool):
    """log ĉ_k normalized over k: Rao-Blackwellized (eq. 9) or visit frequencies + 0.1 (TS)."""
    if rao_blackwellize:
        return _weights.normalize(log_c_sum)
    return _weights.normalize(jnp.log(counts + TS_PSEUDO_COUNT))


def _thermodynamic_integral(betas, means, rule: str):
    """Cumulative ∫_0^{β_k} E_β[d/dβ log f_β] dβ on the ladder (left Riemann or trapezoid)."""
    widths = jnp.diff(betas)
    if rule == "riemann":
        pieces = widths * means[:-1]
    else:
        pieces = widths * 0.5 * (means[:-1] + means[1:])
    return jnp.concatenate([jnp.zeros((1,), means.dtype), jnp.cumsum(pieces)])


def rts_estimates(state: RTSState, *, alpha: float = 1.0, rao_blackwellize: bool = True) -> RTSEstimates:
    """Every ladder of log Ẑ_k from the long run of an RTS state (see ``RTSEstimates``).

    Pass the ``alpha`` and ``rao_blackwellize`` the estimator was built with (they
    change only ``rts``). TI needs at least one draw at every β_k (else its ladder is
    nan from that k on); TI-RB and RTS use every draw at every k. Raises ValueError for
    ``alpha`` outside (0, 1] and for a (concrete) state without a sweep of the long run,
    e.g. the state ``init`` returns. The β = 1 ends after every sweep are in the run's
    trace (``RTSInfo``).
    """
    alpha = _particles.check_fraction("alpha", alpha)
    if not _checks.is_traced(state.batch_log_c) and not np.any(np.isfinite(np.asarray(state.batch_log_c))):
        raise ValueError("state has no sweep of the long run yet (nothing to estimate from): pass the final "
                         "state of jaxz.run(rts(...), ...), not the state init returns")
    return _estimates(state, alpha, rao_blackwellize)


def _ladders(log_z_hat, log_prior, betas, log_c, counts, du_sum, rb_du_mean, alpha) -> RTSEstimates:
    """The ladders of RTS (eq. 12 with ``log_c``), TS (eq. 12 with counts + 0.1) and TI
    (Riemann, trapezoid; TI-RB on the q-weighted means, eq. 21), from one block's sums.
    Only those fields of the result are filled (the others are None)."""
    log_z0 = log_z_hat[0]
    rts_ladder = _eq12(log_z_hat, log_prior, log_c, alpha)
    ts = _eq12(log_z_hat, log_prior, _block_log_c(None, counts, False), 1.0)
    mean_du = du_sum / counts  # nan where a temperature was never visited
    ti_riemann = log_z0 + _thermodynamic_integral(betas, mean_du, "riemann")
    ti_trapezoid = log_z0 + _thermodynamic_integral(betas, mean_du, "trapezoid")
    ti_rb = log_z0 + _thermodynamic_integral(betas, rb_du_mean, "trapezoid")
    return RTSEstimates(rts_ladder, None, ts, ti_riemann, ti_trapezoid, ti_rb, None, None)


def _batch_means_stderr(batch_log_c, alpha):
    """Standard error of the eq.-(12) ladder from B batch means of ĉ (delta method):
    Var[log ĉ_k − log ĉ_1] ≈ Var_b[ĉ_k^b/ĉ_k − ĉ_1^b/ĉ_1] / B, over the filled batches."""
    normalized = jax.vmap(_weights.normalize)(batch_log_c)
    filled = jnp.isfinite(jax.nn.logsumexp(batch_log_c, axis=1))
    num_filled = jnp.sum(filled)
    overall = jax.nn.logsumexp(jnp.where(filled[:, None], normalized, -jnp.inf), axis=0) - jnp.log(num_filled)
    relative = jnp.exp(normalized - overall[None, :])
    relative = relative - relative[:, :1]
    relative = jnp.where(filled[:, None], relative, 0.0)
    mean = jnp.sum(relative, axis=0) / num_filled
    variance = jnp.sum(jnp.where(filled[:, None], (relative - mean) ** 2, 0.0), axis=0) / (num_filled - 1)
    # B batch means give a variance with B − 1 degrees of freedom: ±1.96 s.e. is the
    # Student-t interval (the s.e. widened by t_{B−1}(0.975)/1.96)
    widen = _weights.student_t_factor(jnp.asarray(num_filled - 1, variance.dtype))
    return alpha * jnp.sqrt(variance / num_filled) * widen


def _estimates(state: RTSState, alpha, rao_blackwellize: bool) -> RTSEstimates:
    """``rts_estimates`` without its checks: the ladders, their batch-means s.e., ĉ."""
    log_c = _block_log_c(state.log_c_sum, state.counts, rao_blackwellize)
    ladders = _ladders(state.log_z_hat, state.log_prior, state.betas, log_c, state.counts, state.du_sum,
                       state.rb_du_mean, alpha)
    stderr = _batch_means_stderr(state.batch_log_c, alpha)
    c_hat = jnp.exp(_weights.normalize(state.log_c_sum))
    return ladders._replace(rts_stderr=stderr, c_hat=c_hat, counts=state.counts)


__all__ = ["rts", "rts_estimates", "RTSState", "RTSInfo", "RTSDraws", "RTSEstimates"]
