"""Tempered sequential Monte Carlo (resample-move; Chopin 2002, Del Moral, Doucet &
Jasra 2006) with a fixed, an adaptive or a two-pass schedule, kernels tuned from the
particles, and the waste-free variant of Dau & Chopin (2022).

Each step goes from β_t to β_{t+1}: reweight by f_{β_{t+1}}/f_{β_t}, accumulate
log Ẑ, resample only when ESS < ``resample_ess``·N, then move every particle with
the kernel at β_{t+1}. Between resampling events the weights are carried, so for a
schedule and kernels fixed in advance

    Ẑ = Z_0 ∏_t Σ_i W_t^i w_{t+1}^i

is unbiased for Z_1 whichever resampling events occur (Del Moral 2004).

An adaptive schedule (each β_{t+1} chosen from the current particles so that the
conditional ESS is ``target_ess``; Zhou, Johansen & Aston 2016) makes the targets
depend on the particles, and Ẑ is then only consistent: it is biased low by O(1/N)
beyond the Jensen gap of log Ẑ (measured with exact draws on a Gaussian: E[Ẑ/Z] =
0.85 / 0.96 / 0.99 at N = 50 / 200 / 800; Beskos, Jasra, Kantas & Thiery 2016 give the
limit theory). A tunable kernel (``jaxz.kernels.hmc(path)`` with no step size, see
``jaxz.kernels.tuning``) is adapted before every move from the weighted particles
(mass matrix from their covariance, step size from the previous move's acceptance):
the weights do not change, but the kernel now depends on the particles too, which
again leaves an O(1/N) bias (tuned HMC, 10-d Gaussian 10⁴ times narrower than its base,
N = 256, 40 runs: log Ẑ − log Z = −1.27 ± 0.13 in one pass, where −Var/2 accounts for
−0.32; with two passes −0.34 ± 0.12 against −Var/2 = −0.28). ``schedule="two_pass"`` restores unbiasedness: a pilot
adaptive run on independent base draws fixes the schedule and the tuned kernel
parameters of every stage, and the estimate comes from a fresh run on them (pilot
cost included in ``Estimate.cost``).

Waste-free SMC (Dau & Chopin 2022, Alg. 2): with N = M·P particles, each stage
resamples only M of them and runs M chains of P states (P − 1 kernel steps each,
every state kept), so no MCMC output is discarded. Its standard error is theirs:
the N weights of a stage come as M chains of length P, the variance of the stage's
log increment is the MCMC variance of their mean (Geyer's initial monotone sequence
estimator over the M chains), and these add up over stages (Dau & Chopin 2022,
§3.4; particles' ``Var_logLt``).
"""
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxz import weights as _weights
from jaxz.base import STATUS_LOW_ESS, STATUS_MAX_STEPS, Estimate, Estimator, freeze_when_done, run
from jaxz.estimators import _genealogy, _particles
from jaxz.kernels.base import Kernel, KernelState, Population
from jaxz.paths import Path
from jaxz.schedules import next_temperature, validate
from jaxz.types import Array

SCHEDULES = ("adaptive", "two_pass")
# Adaptive number of moves: aim at this start-to-end correlation. 0.1 (one tenth) left
# tuned HMC at 2.6 moves per stage on a 10-d Gaussian 10⁸ times narrower than its base
# and log Ẑ 2.7 nats low at N = 256 (40 runs), since a rejected move (a third of them)
# keeps a resampled duplicate where it was; 0.01 gives about 5 and a bias of −0.8.
DECORRELATION_TARGET = 0.01
DEFAULT_MAX_MCMC_STEPS = 30
# Waste-free chains: on a 20-d Gaussian (condition 10⁴, N = 1000, tuned HMC, 20 runs) chains
# of 10 / 20 / 50 / 100 states left log Ẑ −0.67 / −0.40 / −0.10 / −0.12 nats off (sd ≈ 0.3),
# and chains of 2 states 6 nats off with a s.e. of 0.17: short chains do not forget
# their start, and the chain-variance s.e. cannot see that bias.
DEFAULT_CHAIN_LENGTH = 50


class SMCState(NamedTuple):
    kernel_states: KernelState
    log_weights: Array  # normalized log W_t
    log_z: Array  # log Ẑ_t accumulated so far (including log Z_0)
    beta: Array
    index: Array  # number of steps taken
    genealogy: _genealogy.Genealogy  # lagged ancestors, for the variance estimate
    min_ess: Array  # smallest ESS (a count) after any reweighting so far
    schedule: Any  # two-pass: (betas padded with 1, the pilot's trace of kernel parameters and moves); else ()
    done: Array
    status: Array
    cost: Array
    acceptance_rate: Array  # mean acceptance of the last move (nan before the first): read by Kernel.adapt
    num_mcmc_steps: Array  # int32: moves per particle at the next stage (adapted with max_mcmc_steps)
    log_z_variance: Array  # waste-free: Dau–Chopin variance of log Ẑ so far; 0 otherwise


class SMCInfo(NamedTuple):
    beta: Array
    ess: Array  # ESS fraction after reweighting, before resampling
    resampled: Array
    acceptance_rate: Array
    log_z_increment: Array
    kernel_parameters: Any  # the parameters of this stage's move (TunedParameters; () for an untuned kernel)
    num_mcmc_steps: Array  # moves per particle (per kept state, waste-free) at this stage


def smc(
    path: Path,
    kernel: Kernel,
    *,
    betas=None,
    target_ess: float = 0.5,
    resample_ess: float = 0.5,
    num_mcmc_steps: int | None = None,
    resampling: Callable | str = "multinomial",
    schedule: str = "adaptive",
    max_stages: int = 1000,
    max_mcmc_steps: int | None = None,
    waste_free: bool = False,
    num_chains: int | None = None,
    chain_length: int | None = None,
    batch_size: int | None = None,
) -> Estimator:
    """Tempered SMC from f_0 (``positions`` passed to ``init`` are exact draws) to f_1.

    betas: a fixed schedule from 0 to 1 (Ẑ unbiased), or None for an adaptive one that
        picks each β_{t+1} by bisection so the conditional ESS is ``target_ess``.
    schedule: with ``betas=None``, "adaptive" (one pass; Ẑ biased low by O(1/N)) or
        "two_pass" (a pilot adaptive run on fresh draws of ``path.sample_base`` fixes the
        schedule and the tuned kernel parameters, then the run proper uses them: Ẑ
        unbiased, about twice the cost).
    max_stages: cap on the pilot's number of stages (two-pass only).
    resample_ess: resample when ESS / N falls below it (waste-free SMC resamples always).
    num_mcmc_steps: kernel applications per particle per step (waste-free: between two
        kept states of a chain). None: 1 for a kernel with fixed parameters; adapted (see
        max_mcmc_steps, cap 30) for a tuned one (``jaxz.kernels.hmc(path)`` with no step).
    max_mcmc_steps: a cap for an adapted number of moves: starting from
        ``num_mcmc_steps``, each stage runs as many moves as the previous stage's measured
        decorrelation says are needed to bring the weighted correlation between the
        particles and their positions before the move down to 0.01 (the idea of
        particles' AdaptiveMCMCSequence; decided from the previous stage so that a move
        depends only on the particles before it).
    resampling: a function of ``jaxz.resampling`` or its name. The default, multinomial,
        is the one scheme with a valid single-run standard error (the genealogy estimator
        of Lee & Whiteley 2018 with a lag, ``jaxz.estimators._genealogy``);
        systematic / stratified / residual have lower variance but report a nan s.e.
        once they resample (use ``jaxz.combine_runs`` over vmapped runs).
    waste_free: Dau & Chopin's waste-free SMC: each stage resamples M = ``num_chains``
        particles and runs each for ``chain_length`` − 1 steps, keeping every state
        (N = M · P must hold; give one of the two; by default P is the largest divisor
        of N up to 50). Chains shorter than ~50 states biased log Ẑ low on a 20-d
        Gaussian (see DEFAULT_CHAIN_LENGTH). Its s.e. is the Dau–Chopin chain-variance
        estimator (any resampling scheme).
    batch_size: None (every particle at once, one ``vmap``), or evaluate log densities
        and kernel steps over the particles in chunks of this many (``lax.map``), so the
        memory of one evaluation (a gradient, data-sized intermediates) is held for one
        chunk: 10⁶ particles of a large model in bounded memory. Results equal the
        unchunked run up to floating-point reordering.
    A tunable kernel (``jaxz.kernels.hmc(path)``, ``mala(path)``, ``rwmh(path)`` with no
    step size) is adapted before each move; ``Info.kernel_parameters`` holds the
    parameters each stage used. target_ess and betas may be traced (built inside
    ``jit``/``vmap`` to sweep over them); they are then checked for shape only.
    With an adaptive or two-pass schedule, drive it with ``jaxz.run(..., max_steps=...)``.
    The standard error is the fixed-lag genealogy estimator of ``jaxz.particle_filter``
    (Lee & Whiteley 2018 within the lag, Olsson & Douc 2019 beyond).
    ``Estimate.status`` gets STATUS_LOW_ESS when a reweighting left fewer than 2
    effective particles or the genealogy has collapsed to one family, and
    STATUS_PRECISION_LOSS when the log densities are too large for their differences
    to be resolved in the working dtype.
    """
    _particles.check_path(path)
    batch_size = _particles.check_batch_size(batch_size)
    target_ess = _particles.check_fraction("target_ess", target_ess)
    resample_ess = _particles.check_fraction("resample_ess", resample_ess)
    resampling, genealogy_valid = _particles.resampler(resampling)
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    fixed = None if betas is None else validate(betas)
    if fixed is not None and schedule != "adaptive":
        raise ValueError(f"schedule={schedule!r} needs betas=None (it builds the schedule), got a fixed betas")
    two_pass = fixed is None and schedule == "two_pass"
    if two_pass:
        if path.sample_base is None:
            raise ValueError("schedule='two_pass' needs path.sample_base: the pilot run draws its own base particles")
        max_stages = _particles.check_count("max_stages", max_stages)
    if waste_free and max_mcmc_steps is not None:
        raise ValueError("max_mcmc_steps (an adapted number of moves) does not apply to waste_free=True, "
                         "whose chains keep every state; set chain_length instead")
    # A tuned kernel with no number of moves given adapts it too (up to 30); an explicit
    # num_mcmc_steps means exactly that many, unless max_mcmc_steps is also given.
    adaptive_moves = not waste_free and (max_mcmc_steps is not None or (
        num_mcmc_steps is None and kernel.adapt is not None))
    num_mcmc_steps = _particles.check_count("num_mcmc_steps", 1 if num_mcmc_steps is None else num_mcmc_steps)
    if adaptive_moves and max_mcmc_steps is None:
        max_mcmc_steps = DEFAULT_MAX_MCMC_STEPS
    if adaptive_moves:
        max_mcmc_steps = _particles.check_count("max_mcmc_steps", max_mcmc_steps)
        if max_mcmc_steps < num_mcmc_steps:
            raise ValueError(f"max_mcmc_steps must be >= num_mcmc_steps ({num_mcmc_steps}), got {max_mcmc_steps}")
    if not waste_free and (num_chains is not None or chain_length is not None):
        raise ValueError("num_chains and chain_length are waste-free settings: pass waste_free=True")
    if num_chains is not None and chain_length is not None:
        raise ValueError("give one of num_chains and chain_length (N = num_chains * chain_length), not both")
    if num_chains is not None:
        num_chains = _particles.check_count("num_chains", num_chains)
    if chain_length is not None and (_particles.check_count("chain_length", chain_length) < 2):
        raise ValueError(f"chain_length must be >= 2 (one start and at least one MCMC step), got {chain_length}")
    num_steps = None if fixed is None else fixed.shape[0] - 1

    def chain_shape(num_particles):
        """(M, P) of waste-free SMC for N particles; ValueError unless N = M · P."""
        if chain_length is not None:
            length = chain_length
        elif num_chains is not None:
            length = num_particles // num_chains
        else:  # the longest chain up to DEFAULT_CHAIN_LENGTH that divides N
            length = max(p for p in range(1, min(DEFAULT_CHAIN_LENGTH, num_particles) + 1) if num_particles % p == 0)
        if num_chains is not None and num_particles % num_chains:
            raise ValueError(f"num_chains ({num_chains}) must divide the number of particles ({num_particles})")
        if num_particles % length or length < 2:
            raise ValueError(f"chain_length ({length}) must be >= 2 and divide the number of particles "
                             f"({num_particles}); pass num_chains or chain_length to waste_free SMC")
        return num_particles // length, length

    def initial_state(positions, schedule_buffer) -> SMCState:
        num_particles = _particles.num_particles_of(positions)
        dtype = _particles.float_dtype(positions)
        if waste_free:
            chain_shape(num_particles)
        _particles.check_scalar_function("path.log_density", path.log_density,
                                         _particles.first_particle(positions), jnp.zeros((), dtype))
        zero = jnp.zeros((), dtype)
        return SMCState(
            _particles.kernel_init(kernel, positions, zero, batch_size),
            jnp.full((num_particles,), -jnp.log(num_particles), dtype),
            jnp.asarray(path.log_z0, dtype), zero, jnp.int32(0),
            _genealogy.init(num_particles, _genealogy.default_lag(num_particles), dtype),
            jnp.asarray(num_particles, dtype), schedule_buffer, jnp.bool_(False), jnp.int32(0), zero,
            jnp.full((), jnp.nan, dtype), jnp.int32(num_mcmc_steps), zero,
        )

    def tune(state: SMCState, population: Population, replay: bool):
        """The kernel states with this stage's parameters, and its number of moves: the
        pilot's (two-pass), or adapted from the population before the move."""
        if replay:
            _, pilot_parameters, pilot_moves = state.schedule
            parameters = jax.tree.map(lambda leaf: leaf[state.index], pilot_parameters)
            kernel_states = state.kernel_states
            if kernel.adapt is not None:
                kernel_states = kernel_states._replace(parameters=parameters)
            return kernel_states, (pilot_moves[state.index] if adaptive_moves else num_mcmc_steps)
        kernel_states = _particles.adapt_kernel(kernel, state.kernel_states, population)
        return kernel_states, (state.num_mcmc_steps if adaptive_moves else num_mcmc_steps)

    def resample_move(key_resample, key_move, state, kernel_states, log_weights, ess, beta_next, num_moves):
        """Resample when the ESS is low, then move every particle (standard SMC)."""
        num_particles = log_weights.shape[0]
        dtype = log_weights.dtype
        # Resample only when the ESS is low: fewer resampling events, less variance.
        resample = ess < resample_ess * num_particles
        ancestors = jnp.where(
            resample, resampling(key_resample, log_weights), jnp.arange(num_particles, dtype=jnp.int32)
        )
        kernel_states = _particles.take(kernel_states, ancestors)
        resampled_log_weights = jnp.where(resample, -jnp.log(jnp.asarray(num_particles, dtype)), log_weights)
        start = kernel_states.position
        # Move: num_moves kernel applications invariant for f_{β_{t+1}}
        kernel_states, acceptance = _particles.kernel_step(kernel, key_move, kernel_states, beta_next, num_moves,
                                                           batch_size)
        next_moves = (_next_num_moves(start, kernel_states.position, resampled_log_weights, num_moves, max_mcmc_steps)
                      if adaptive_moves else state.num_mcmc_steps)
        return dict(
            kernel_states=kernel_states, log_weights=resampled_log_weights,
            genealogy=_genealogy.resample(state.genealogy, log_weights, ancestors, resample),
            acceptance_rate=acceptance.astype(dtype),
            num_mcmc_steps=next_moves, cost=state.cost + num_particles * num_moves * kernel.num_transitions,
        ), resample

    def waste_free_move(key_resample, key_move, state, kernel_states, log_weights, increments, beta_next, num_moves):
        """Dau & Chopin (2022), Alg. 2: resample M of the N particles, run M chains of P
        states from them, keep all N states (equal weights again)."""
        num_particles = log_weights.shape[0]
        dtype = log_weights.dtype
        num_chains_, length = chain_shape(num_particles)
        starts = _particles.take(kernel_states, resampling(key_resample, log_weights, num_chains_))
        kernel_states, acceptance = _particles.kernel_chains(kernel, key_move, starts, beta_next, length, num_moves,
                                                              batch_size)
        # The weights w_t(x) of this stage's N particles: M chains of P states from the
        # previous move (the first stage's N base draws are independent).
        variance = waste_free_log_increment_variance(increments, num_chains_)
        return dict(
            kernel_states=kernel_states, log_weights=jnp.full((num_particles,), -jnp.log(num_particles), dtype),
            acceptance_rate=acceptance.astype(dtype),
            log_z_variance=state.log_z_variance + variance.astype(dtype),
            cost=state.cost + (num_particles - num_chains_) * num_moves * kernel.num_transitions,
        ), jnp.bool_(True)

    def make_step(choose_beta, replay=False):
        @freeze_when_done
        def step(rng_key, state: SMCState):
            key_resample, key_move = jax.random.split(rng_key)
            positions = state.kernel_states.position
            num_particles = state.log_weights.shape[0]
            # log f_{β_t} at the particles, evaluated once for the choice of β_{t+1} and the reweighting
            log_current = _particles.log_densities(path, positions, state.beta, batch_size)
            beta_next, beta_status = choose_beta(state, positions, log_current)

            # Reweight: log Ẑ_{t+1} = log Ẑ_t + log Σ_i W_t^i w_{t+1}^i
            increments, status = _particles.incremental_log_weights(path, positions, state.beta, beta_next, batch_size,
                                                                    log_current)
            unnormalized = state.log_weights + increments
            log_z_increment = _weights.logsumexp(unnormalized)
            log_weights = _weights.normalize(unnormalized)
            ess = _weights.ess(log_weights)

            # Tune the kernel on the weighted particles that approximate f_{β_{t+1}}.
            population = Population(positions, log_weights, beta_next, state.acceptance_rate)
            kernel_states, num_moves = tune(state, population, replay)
            if waste_free:
                updates, resampled = waste_free_move(key_resample, key_move, state, kernel_states, log_weights,
                                                     increments, beta_next, num_moves)
            else:
                updates, resampled = resample_move(key_resample, key_move, state, kernel_states, log_weights, ess,
                                                   beta_next, num_moves)
            log_z = state.log_z + log_z_increment
            done = (beta_next >= 1.0) | jnp.isneginf(log_z)  # nothing more to learn once every weight died
            new_state = state._replace(
                log_z=log_z, beta=beta_next, index=state.index + 1, min_ess=jnp.minimum(state.min_ess, ess),
                done=done, status=state.status | status | beta_status, **updates,
            )
            info = SMCInfo(beta_next, ess / num_particles, resampled, updates["acceptance_rate"], log_z_increment,
                           kernel_states.parameters if isinstance(kernel_states, KernelState) else (),
                           jnp.int32(num_moves))
            return new_state, info

        return step

    def adaptive_beta(state, positions, log_current):
        def log_increment_fn(beta_new):
            return _particles.incremental_log_weights(path, positions, state.beta, beta_new, batch_size,
                                                      log_current)[0]

        return next_temperature(state.log_weights, log_increment_fn, state.beta, target_ess, return_status=True)

    def scheduled_beta(state, positions, log_current):
        ladder = fixed if fixed is not None else state.schedule[0]
        return jnp.asarray(ladder, state.log_weights.dtype)[state.index + 1], jnp.int32(0)

    adaptive_step = make_step(adaptive_beta)
    step = adaptive_step if fixed is None and not two_pass else make_step(scheduled_beta, replay=two_pass)

    def init(rng_key, positions) -> SMCState:
        if not two_pass:
            return initial_state(positions, ())
        # Pass 1: an adaptive pilot on independent base draws fixes the schedule and the
        # kernel parameters of every stage.
        num_particles = _particles.num_particles_of(positions)
        key_draws, key_pilot = jax.random.split(rng_key)
        pilot_positions = path.sample_base(key_draws, num_particles)
        pilot = Estimator(lambda key, x: initial_state(x, ()), adaptive_step, finalize)
        result = run(pilot, key_pilot, pilot_positions, max_steps=max_stages)
        dtype = result.state.log_weights.dtype
        stages = jnp.arange(max_stages) < result.num_steps
        ladder = jnp.concatenate([jnp.zeros((1,), dtype), jnp.where(stages, result.trace.beta, 1.0)])
        state = initial_state(positions, (ladder, result.trace.kernel_parameters, result.trace.num_mcmc_steps))
        pilot_status = jnp.where(result.state.done, 0, STATUS_MAX_STEPS).astype(jnp.int32)
        return state._replace(cost=state.cost + result.state.cost, status=state.status | pilot_status)

    def finalize(state: SMCState) -> Estimate:
        final_ess = _weights.ess(state.log_weights)
        min_ess = jnp.minimum(state.min_ess, final_ess)
        if waste_free:
            num_particles = state.log_weights.shape[0]
            low = (num_particles > 1) & (min_ess < _particles.MIN_EFFECTIVE_PARTICLES)
            status = jnp.where(low, state.status | STATUS_LOW_ESS, state.status)
            return _particles.make_estimate(state.log_z, jnp.sqrt(state.log_z_variance), state.cost, status)
        return _particles.genealogy_estimate(
            state.log_z, state.log_weights, state.genealogy, genealogy_valid, min_ess, state.cost, state.status,
        )

    return Estimator(init, step, finalize, num_steps)


def _next_num_moves(start, end, log_weights, num_moves, max_moves):
    """Moves for the next stage: with ρ the mean over coordinates of the weighted
    correlation between the particles before (``start``) and after (``end``) this
    stage's ``num_moves`` moves, a per-move autocorrelation ρ^{1/num_moves} needs
    ⌈log 0.1 / log ρ^{1/num_moves}⌉ moves to bring it to DECORRELATION_TARGET."""
    weights = jnp.exp(log_weights)
    flat_start = jax.vmap(lambda x: ravel_pytree(x)[0])(start)
    flat_end = jax.vmap(lambda x: ravel_pytree(x)[0])(end)
    centred_start = flat_start - weights @ flat_start
    centred_end = flat_end - weights @ flat_end
    covariance = weights @ (centred_start * centred_end)
    scale = jnp.sqrt((weights @ centred_start**2) * (weights @ centred_end**2))
    correlation = jnp.mean(jnp.where(scale > 0, covariance / jnp.where(scale > 0, scale, 1.0), 1.0))
    correlation = jnp.clip(correlation, 1e-6, 1.0 - 1e-6)
    per_move = jnp.log(correlation) / num_moves
    needed = jnp.ceil(jnp.log(DECORRELATION_TARGET) / per_move)
    return jnp.clip(needed, 1, max_moves).astype(jnp.int32)


def chain_mean_variance(values: Array) -> Array:
    """Variance of the mean of M chains of length P (``values``: (P, M), time first)
    by Geyer's (1992) initial monotone sequence estimator: pooled autocovariances
    c_k = Σ_m Σ_{j<P−k} (x_{j,m} − x̄)(x_{j+k,m} − x̄) / (P M), pair sums
    Γ_i = c_{2i} + c_{2i+1} kept while positive and non-increasing, σ² = −c_0 + 2 Σ Γ_i,
    and Var(x̄) ≈ σ² / (P M) (the estimator of Dau & Chopin 2022 for waste-free SMC)."""
    length, num_chains = values.shape
    centred = values - jnp.mean(values)
    size = 1 << (2 * length - 1).bit_length()  # a power of two >= 2P: no circular overlap
    spectrum = jnp.fft.rfft(centred, n=size, axis=0)
    autocovariance = jnp.sum(jnp.fft.irfft(spectrum * jnp.conj(spectrum), n=size, axis=0)[:length], axis=1)
    autocovariance = autocovariance / (length * num_chains)
    pairs = autocovariance[0 : 2 * (length // 2) : 2] + autocovariance[1 : 2 * (length // 2) : 2]
    previous = jnp.concatenate([pairs[:1], pairs[:-1]])
    keep = jnp.cumprod((pairs > 0) & (pairs <= previous))
    asymptotic = -autocovariance[0] + 2.0 * jnp.sum(keep * pairs)
    return jnp.maximum(asymptotic, 0.0) / (length * num_chains)


def waste_free_log_increment_variance(increments: Array, num_chains: int) -> Array:
    """Var of log((1/N) Σ_n w_n) for one waste-free stage: the N = P·M weights
    w_n = f_{β_{t+1}}/f_{β_t}(x_n) form M chains of P states (index k·M + m is state k
    of chain m); by the delta method it is the chain variance of the mean of w / w̄."""
    top = jnp.max(jnp.where(jnp.isfinite(increments), increments, -jnp.inf))
    ratios = jnp.exp(increments - top)
    ratios = ratios / jnp.mean(ratios)
    return chain_mean_variance(ratios.reshape(-1, num_chains))


__all__ = ["smc", "SMCState", "SMCInfo", "SCHEDULES", "chain_mean_variance"]
