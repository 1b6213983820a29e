"""Rao-Blackwellized Tempered Sampling (RTS; Carlson, Stinson, Pakman & Paninski,
ICML 2016), with the estimators it is compared against computed from the same run.

Simulated tempering samples the pair (x, β_k), k = 1..K (β_1 = 0, β_K = 1), from

    p(x, β_k) ∝ f_k(x) r_k / Ẑ_k                                         (seed eq. 6)

by alternating x | β_k (the Kernel at β_k) and β | x from

    q(β_k | x) = f_k(x) r_k / Ẑ_k / Σ_j f_j(x) r_j / Ẑ_j                   (seed eq. 7).

The marginal of β is π_k ∝ r_k Z_k / Ẑ_k; its Rao-Blackwellized estimate
ĉ_k = (1/N) Σ_i q(β_k | x_i) (eq. 9) turns into the update

    Ẑ_k ← Ẑ_k (r_1 / r_k) (ĉ_k / ĉ_1)                                     (eq. 12)

anchored at the known Z_1 = Z_0 of the path. The seed's §2.4 initial iterations run
short blocks (x kept, β redrawn from r), applying eq. (12) after each, until
max_k |r_k − ĉ_k| < 0.1/K; the long run then keeps Ẑ fixed and accumulates ĉ for the
final eq. (12). With ``alpha`` < 1 every update is partial (§4.4):
log Ẑ ← log Ẑ + α · log[(r_1/r_k)(ĉ_k/ĉ_1)].

``rts_estimates(state)`` gives, from the same run, the ladder of log Ẑ_k for RTS
(with a batch-means standard error), TS (visit counts + 0.1), TI (Riemann and
trapezoid, on the draws at each β_k) and TI-RB (eq. 21: the derivative at β_k
averaged over every draw with weight q(β_k | x)).
"""
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks
from jaxz import weights as _weights
from jaxz.base import STATUS_LOW_ESS, STATUS_NONFINITE, Estimate, Estimator, freeze_when_done
from jaxz.estimators import _particles
from jaxz.kernels.base import Kernel, KernelState
from jaxz.paths import Path
from jaxz.schedules import validate
from jaxz.types import Array

TS_PSEUDO_COUNT = 0.1  # added to every visit count in the TS estimate (seed §3)
# STATUS_LOW_ESS below this many one-way trips between the ends of the ladder per batch of
# the long run (summed over chains). Measured: on the 784-visible CD-1 RBM of
# benchmarks/rbm784.py (100 chains, 500 long-run sweeps) the runs made 0-2 trips and their
# batch-means s.e. (0.9-1.1) covered 1 of 16 runs (errors −0.4 to −11 nats), status 0.
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


class RTSInfo(NamedTuple):
    log_z: Array  # eq.-(12) estimate of log Z at β = 1 from the current block so far
    max_c_error: Array  # max_k |r_k − ĉ_k| over the current block
    long_run: Array
    acceptance_rate: Array


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
) -> Estimator:
    """Rao-Blackwellized tempered sampling along the ladder ``betas`` (β_1 = 0 … β_K = 1).

    ``init(rng_key, positions)``: one chain per leading-axis entry of ``positions``.
    One step = one sweep of every chain: x | β_k with the kernel at the chain's own
    β_k, then β | x from eq. (7), accumulating ĉ (eq. 9). The first
    ``initial_iterations`` blocks of ``sweeps_per_iteration`` sweeps update Ẑ by
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

    ``finalize`` gives log Ẑ at β = 1 with its batch-means standard error (widened by
    t_{B−1}(0.975)/1.96 for the B − 1 degrees of freedom of B batch means, so that
    ±1.96 s.e. is the Student-t interval); STATUS_LOW_ESS
    when the chains' x-moves were accepted fewer than twice in the whole long run, when
    the chains moved (mean cumulative squared jump) less than twice the spread they
    sample (a tiny HMC step size: accepted but frozen), with ``num_sweeps=1`` (one
    batch: the s.e. is nan), or when the chains made fewer one-way trips between the two
    ends of the ladder in the long run than there are batches (``MIN_TOURS_PER_BATCH``;
    ``RTSState.tours``): a chain changes mode at the hot end, and batches between which no
    chain got there are not independent draws of ĉ. Measured: the seed's 10-D two-Gaussian
    mixture with 200 temperatures and a long run of 100 sweeps, 8-14 trips, errors up to
    6.7 s.e. (flagged; 20 temperatures and 600 sweeps: 170-216 trips, not flagged); the
    784-visible CD-1 RBM of ``benchmarks/rbm784.py``, 0-2 trips, s.e. 0.9-1.1 against
    errors to −11 nats (flagged). Chains that do travel the ladder and still never find a
    mode are not seen (the PCD-1 RBM there: 130-150 trips, 5 nats low, s.e. 0.2). A traced
    ``betas`` that does not increase from 0 to 1 gives log Ẑ = nan with STATUS_NONFINITE.
    cost counts kernel transitions (Gibbs sweeps, HMC trajectories) over all chains, initial
    iterations included. ``jaxz.rts_estimates(state)`` gives the ladders of every method.
    """
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
    log_prior_np = log_prior_weights - np.logaddexp.reduce(log_prior_weights)
    if log_z_hat is None:
        log_z_hat = np.zeros(num_temperatures)
    if np.shape(log_z_hat) != (num_temperatures,):
        raise ValueError(f"log_z_hat must be a ({num_temperatures},) array, got shape {np.shape(log_z_hat)}")
    if not isinstance(log_z_hat, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(log_z_hat))):
        raise ValueError("log_z_hat must be finite")
    max_steps = initial_iterations * sweeps_per_iteration + num_sweeps
    step_kernel = jax.vmap(kernel.step, in_axes=(0, 0, 0))

    def init(rng_key, positions) -> RTSState:
        _particles.num_particles_of(positions)  # validates the chain axis
        dtype = _particles.float_dtype(positions)
        _checks.floating_positions(path, kernel, positions, betas[0])
        _checks.positions_for_path(path, positions)
        _particles.check_scalar_function("path.log_density", path.log_density,
                                         _particles.first_particle(positions), jnp.zeros((), dtype))
        ladder = jnp.asarray(betas, dtype)
        log_prior = jnp.asarray(log_prior_np, dtype)
        log_z = jnp.asarray(log_z_hat, dtype)
        log_z = log_z - log_z[0] + jnp.asarray(path.log_z0, dtype)
        # β from r for the §2.4 iterations; from q(β | x) when going straight to the long run
        log_q, _, _, status = _log_q(path, positions, ladder, log_prior, log_z)
        logits = jnp.broadcast_to(log_prior, log_q.shape) if initial_iterations > 0 else log_q
        beta_index = jax.random.categorical(rng_key, logits, axis=-1).astype(jnp.int32)
        states = jax.vmap(kernel.init)(positions, ladder[beta_index])
        zeros = jnp.zeros((num_temperatures,), dtype)
        return RTSState(
            states, beta_index, log_z, jnp.full((num_temperatures,), -jnp.inf, dtype), zeros, zeros, zeros,
            jnp.full((num_batches, num_temperatures), -jnp.inf, dtype), jnp.int32(0), jnp.int32(0),
            jnp.bool_(initial_iterations == 0), jnp.zeros((), dtype), ladder, log_prior, jnp.bool_(False), status,
            jnp.zeros((), dtype), jnp.zeros((), dtype),
            *(jax.tree.map(lambda leaf: jnp.zeros(leaf.shape[1:], dtype), positions) for _ in range(2)),
            _ladder_end(beta_index, jnp.full_like(beta_index, -1), num_temperatures), jnp.zeros((), dtype),
        )

    @freeze_when_done
    def step(rng_key, state: RTSState):
        key_x, key_beta, key_fresh, key_redraw = jax.random.split(rng_key, 4)
        num_chains = state.beta_index.shape[0]
        dtype = state.log_z_hat.dtype
        # x | β_k: the kernel at each chain's own temperature (Alg. 1, line 3)
        kernel_states, info = step_kernel(
            jax.random.split(key_x, num_chains), state.kernel_states, state.betas[state.beta_index]
        )
        acceptance = jnp.asarray(info.acceptance_rate, dtype)
        if adapt is not None:
            adapted = adapt(kernel_states, state.beta_index, acceptance)
            kernel_states = jax.tree.map(
                lambda old, new: jnp.where(state.long_run, old, new), kernel_states, adapted
            )
        # β | x from eq. (7) (Alg. 1, line 4), and the Rao-Blackwellized sums of eq. (9)
        log_q, _, derivative, status = _log_q(
            path, kernel_states.position, state.betas, state.log_prior, state.log_z_hat
        )
        beta_index = jax.random.categorical(key_beta, log_q, axis=-1).astype(jnp.int32)
        one_hot = jax.nn.one_hot(beta_index, num_temperatures, dtype=dtype)
        log_c_sweep = jax.nn.logsumexp(log_q, axis=0)
        log_c_sum = jnp.logaddexp(state.log_c_sum, log_c_sweep)
        counts = state.counts + jnp.sum(one_hot, axis=0)
        du_sum = state.du_sum + jnp.sum(one_hot * derivative, axis=0)
        # running q-weighted mean of the derivative, in log space so unvisited k stay finite
        sweep_mean = jnp.sum(jax.nn.softmax(log_q, axis=0) * derivative, axis=0)
        share = jnp.exp(log_c_sweep - log_c_sum)
        share = jnp.where(jnp.isfinite(share), share, 0.0)
        rb_du_mean = state.rb_du_mean + share * (sweep_mean - state.rb_du_mean)
        batch = jnp.minimum(state.sweep * num_batches // num_sweeps, num_batches - 1)
        batch_log_c = state.batch_log_c.at[batch].set(
            jnp.where(state.long_run, jnp.logaddexp(state.batch_log_c[batch], log_c_sweep), state.batch_log_c[batch])
        )
        sweep = state.sweep + 1
        # how far the chains move, against the spread they sample (the frozen-chain check)
        moved = _jump_statistics(state.kernel_states.position, kernel_states.position, dtype)
        squared_jumps, position_sum, position_square_sum = jax.tree.map(
            lambda total, new: total + jnp.where(state.long_run, new, jnp.zeros_like(new)),
            (state.squared_jumps, state.position_sum, state.position_square_sum), moved)

        # end of an initial iteration (§2.4): update Ẑ by eq. (12), test ĉ ≈ r, redraw β ~ r
        log_c = _block_log_c(log_c_sum, counts, rao_blackwellize)
        max_c_error = jnp.max(jnp.abs(jnp.exp(state.log_prior) - jnp.exp(log_c)))
        end_of_block = ~state.long_run & (sweep >= sweeps_per_iteration)
        iteration = state.iteration + end_of_block.astype(jnp.int32)
        converged = max_c_error < CONVERGENCE_FACTOR / num_temperatures
        start_long_run = end_of_block & (converged | (iteration >= initial_iterations))
        log_z_hat = jnp.where(end_of_block, _eq12(state.log_z_hat, state.log_prior, log_c, alpha), state.log_z_hat)
        fresh = jax.random.categorical(key_fresh, jnp.broadcast_to(state.log_prior, log_q.shape), axis=-1)
        beta_index = jnp.where(end_of_block & ~start_long_run, fresh.astype(jnp.int32), beta_index)
        # the long run samples the joint at the updated Ẑ: redraw β | x there
        log_q_new = _weights.normalize(log_q + state.log_z_hat - log_z_hat)
        redrawn = jax.random.categorical(key_redraw, log_q_new, axis=-1).astype(jnp.int32)
        beta_index = jnp.where(start_long_run, redrawn, beta_index)

        # tours: a chain that reaches one end of the ladder after the other (the long run only)
        last_end = _ladder_end(beta_index, state.last_end, num_temperatures)
        trips = state.long_run & (state.last_end >= 0) & (last_end != state.last_end)
        tours = state.tours + jnp.sum(trips).astype(dtype)

        reset = end_of_block  # every block (and the long run) accumulates from scratch
        empty = jnp.full_like(log_c_sum, -jnp.inf)
        zeros = jnp.zeros_like(counts)
        long_run = state.long_run | start_long_run
        done = state.long_run & (sweep >= num_sweeps)
        new_state = RTSState(
            kernel_states, beta_index, log_z_hat,
            jnp.where(reset, empty, log_c_sum), jnp.where(reset, zeros, counts),
            jnp.where(reset, zeros, du_sum), jnp.where(reset, zeros, rb_du_mean), batch_log_c,
            jnp.where(reset, 0, sweep), iteration, long_run,
            state.accepted + jnp.where(state.long_run, jnp.sum(acceptance), 0.0), state.betas, state.log_prior, done,
            state.status | status, state.cost + num_chains * kernel.num_transitions,
            squared_jumps, position_sum, position_square_sum, last_end, tours,
        )
        log_z = _eq12(state.log_z_hat, state.log_prior, log_c, alpha)[-1]  # this block's eq. (12)
        return new_state, RTSInfo(log_z, max_c_error, state.long_run, jnp.mean(acceptance))

    def finalize(state: RTSState) -> Estimate:
        estimates = _estimates(state, alpha, rao_blackwellize)
        # a traced ladder cannot be checked at construction: a bad one gives nan, flagged
        log_z = jnp.where(_checks.schedule_valid(betas), estimates.rts[-1], jnp.nan)
        status = state.status | _particles.degenerate_status(log_z)
        status = jnp.where(jnp.isnan(log_z), status | STATUS_NONFINITE, status)
        # chains that never moved: ĉ averages q(β | x) over frozen x, and the batch means
        # see no spread (a s.e. of 0): flag it. "Moved" is judged twice: accepted moves,
        # and distance, since a kernel that accepts steps of 1e-8 (HMC with a tiny step
        # size, a zero random-walk scale) counts as moving while its chains stay put.
        frozen = (state.accepted < _particles.MIN_EFFECTIVE_PARTICLES) | _stuck(state)
        # one sweep is one batch: the batch-means s.e. is nan (it needs two batches)
        frozen = frozen | (num_sweeps < 2)
        # fewer one-way trips along the ladder than batches: the batches are not independent
        # draws of ĉ where only the hot end lets the chains change mode (see MIN_TOURS_PER_BATCH)
        frozen = frozen | ((num_temperatures > 1) & (state.tours < MIN_TOURS_PER_BATCH * num_batches))
        status = jnp.where(frozen, status | STATUS_LOW_ESS, status).astype(jnp.int32)
        return Estimate(log_z, estimates.rts_stderr[-1], state.cost, status)

    return Estimator(init, step, finalize, max_steps)


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
    e.g. the state ``init`` returns.
    """
    alpha = _particles.check_fraction("alpha", alpha)
    if not _checks.is_traced(state.batch_log_c) and not np.any(np.isfinite(np.asarray(state.batch_log_c))):
        raise ValueError("state has no sweep of the long run yet (nothing to estimate from): pass the final "
                         "state of jaxz.run(rts(...), ...), not the state init returns")
    return _estimates(state, alpha, rao_blackwellize)


def _estimates(state: RTSState, alpha, rao_blackwellize: bool) -> RTSEstimates:
    log_z0 = state.log_z_hat[0]
    log_c = _block_log_c(state.log_c_sum, state.counts, rao_blackwellize)
    ladder = _eq12(state.log_z_hat, state.log_prior, log_c, alpha)
    ts = _eq12(state.log_z_hat, state.log_prior, _block_log_c(state.log_c_sum, state.counts, False), 1.0)
    mean_du = state.du_sum / state.counts  # nan where a temperature was never visited
    ti_riemann = log_z0 + _thermodynamic_integral(state.betas, mean_du, "riemann")
    ti_trapezoid = log_z0 + _thermodynamic_integral(state.betas, mean_du, "trapezoid")
    ti_rb = log_z0 + _thermodynamic_integral(state.betas, state.rb_du_mean, "trapezoid")
    # batch means: Var[log ĉ_k − log ĉ_1] ≈ Var_b[ĉ_k^b/ĉ_k − ĉ_1^b/ĉ_1] / B (delta method)
    batch_log_c = jax.vmap(_weights.normalize)(state.batch_log_c)
    filled = jnp.isfinite(jax.nn.logsumexp(state.batch_log_c, axis=1))
    num_filled = jnp.sum(filled)
    overall = jax.nn.logsumexp(jnp.where(filled[:, None], batch_log_c, -jnp.inf), axis=0) - jnp.log(num_filled)
    relative = jnp.exp(batch_log_c - overall[None, :])
    relative = relative - relative[:, :1]
    relative = jnp.where(filled[:, None], relative, 0.0)
    mean = jnp.sum(relative, axis=0) / num_filled
    variance = jnp.sum(jnp.where(filled[:, None], (relative - mean) ** 2, 0.0), axis=0) / (num_filled - 1)
    # B batch means give a variance with B − 1 degrees of freedom: ±1.96 s.e. is the
    # Student-t interval (the s.e. widened by t_{B−1}(0.975)/1.96; 1.07 at B = 20)
    widen = _weights.student_t_factor(jnp.asarray(num_filled - 1, variance.dtype))
    stderr = alpha * jnp.sqrt(variance / num_filled) * widen
    c_hat = jnp.exp(_weights.normalize(state.log_c_sum))
    return RTSEstimates(ladder, stderr, ts, ti_riemann, ti_trapezoid, ti_rb, c_hat, state.counts)


__all__ = ["rts", "rts_estimates", "RTSState", "RTSInfo", "RTSEstimates"]
