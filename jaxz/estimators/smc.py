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
again leaves an O(1/N) bias. It grows where the moves leave the particles close to their
resampled ancestors, and the adapted number of moves once did: a measured decorrelation that
noise put near 0 cut the next stage's moves by up to 3x (see ``_moves.next_num_moves``, which now
reads it no lower than its noise). Tuned HMC, 10-d Gaussian 10⁴ times narrower than its base,
N = 256, float64, 100 runs of one pass: mean error −1.24 against an rms s.e. of 0.78, 0.60
covered with 12 % beyond 3 s.e. at status 0 before, −0.32, 0.94 and none beyond 3 s.e. since.
In float32 at 10⁻² (~22 stages, 2,000 runs each; ``benchmarks/results/calibration.md``, the
"tuned HMC" rows): one pass at N = 256 0.922 covered with 1.0 % beyond 3 s.e. (was 0.790 with
6.3 %), E[Ẑ/Z] = 0.941 ± 0.008 (was 0.709): still biased, by less than a run's s.e.; two passes 0.944
with 0.6 %, E[Ẑ/Z] = 1.002 ± 0.008; at N = 1024 one pass 0.930 with 0.7 % and 0.963 ± 0.004,
two passes 0.958 with 0.3 % and 0.996 ± 0.004. With exact draws at every stage the same adaptive
schedule gave E[Ẑ/Z] = 0.999 ± 0.022 (N = 256, 200 runs).
``schedule="two_pass"`` restores unbiasedness: a pilot
adaptive run on independent base draws fixes the schedule and the tuned kernel
parameters of every stage, and the estimate comes from a fresh run on them (pilot
cost included in ``Estimate.cost``).

Waste-free SMC (Dau & Chopin 2022, Alg. 2): with N = M·P particles, each stage
resamples only M of them and runs M chains of P states (P − 1 kernel steps each,
every state kept), so no MCMC output is discarded. Seen over chains it is standard SMC
with M particles (a chain is a particle, its potential the mean of its P weights), so
its standard error is the genealogy estimator over the chains' ancestry (which chain
each seed came from: Lee & Whiteley 2018), which carries the dependence across stages,
or Dau & Chopin's (§3.4) sum of per-stage chain variances where that is larger (less
noisy with M = 10–20 chains, but blind to that dependence: 0.77x the spread on 20-d
Gaussian shells, N = 1000, 32 runs). Before (issue 23, with the stuck kernel below),
the per-stage sum alone was 0.45x the spread on the shells and put 11 of 16 eggbox runs
beyond 3 s.e. with status 0.

Tuned kernels and many modes. A tuned kernel takes its mass matrix from the particles'
covariance, which on a multimodal target spans the gaps between modes; the step size
then shrinks by at most 0.65x per stage from the previous move's acceptance. On the
eggbox (Feroz, Hobson & Bridges 2009: 18 modes 0.1 wide in a box 31 wide) the whole
5-stage run went by at acceptance 0, the particles never moved, and log Ẑ was up to 12
nats low with status 0. Each move is therefore preceded by probe steps of a few
particles that re-adapt the step while it is almost never accepted (``PROBE_PARTICLES``),
and a run whose last move moved fewer than a tenth of its particles (chains, waste-free) is
flagged STATUS_LOW_ESS.
"""
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxz import _checks
from jaxz import weights as _weights
from jaxz.base import STATUS_LOW_ESS, STATUS_MAX_STEPS, Estimate, Estimator, freeze_when_done, run
from jaxz.estimators import _chains, _genealogy, _moves, _particles
from jaxz.estimators._chains import chain_mean_variance  # noqa: F401 (public here, see __all__)
from jaxz.estimators._moves import DECORRELATION_TARGET
from jaxz.estimators._moves import moved_fraction as _moved_fraction, next_num_moves as _next_num_moves
from jaxz.estimators._chains import (  # noqa: F401 (the waste-free layout, read here and by its tests)
    DEFAULT_CHAIN_LENGTH, MIN_WASTE_FREE_CHAINS, WASTE_FREE_AUTOCORRELATION, WASTE_FREE_FIRST_MOVES,
    WASTE_FREE_LAGS, waste_free_num_moves, waste_free_shape,
)
from jaxz.kernels.base import Kernel, KernelState, Population
from jaxz.paths import Path
from jaxz.schedules import next_temperature, validate
from jaxz.types import Array

SCHEDULES = ("adaptive", "two_pass")
DECORRELATIONS = ("position", "log_density")
DEFAULT_MAX_MCMC_STEPS = 30
# Step-size rescue: before each move of a tuned kernel, PROBE_PARTICLES of the particles
# about to move take one trial step; while their acceptance is below
# MIN_PROBE_ACCEPTANCE the step is re-adapted (at most MAX_PROBES times). The
# between-stage adaptation changes the step by at most 0.65x per stage at zero
# acceptance: on the eggbox (18 modes 0.1 wide in a box 31 wide, mass matrix from the
# particles' covariance) the whole 5-stage run went by at acceptance 0.000, the
# particles never moved, and log Ẑ was up to 12 nats low.
PROBE_PARTICLES = 64
MIN_PROBE_ACCEPTANCE = 0.1
MAX_PROBES = 12
# Continuous states that a move left exactly where they were did not move: if the last
# stage's move moved fewer than this fraction of the particles (waste-free: chains), the
# final particles are copies of a few points and the run is flagged STATUS_LOW_ESS. Only
# the last stage: an early stage at low acceptance (the eggbox's first, 1 move at 9%
# acceptance) is repaired by the later ones (log Ẑ within its s.e. there).
MIN_MOVED_FRACTION = 0.1  # a working kernel (acceptance ~0.65, several steps) moves most; a stuck one ~none


class SMCState(NamedTuple):
    kernel_states: KernelState
    log_weights: Array  # normalized log W_t
    log_z: Array  # log Ẑ_t accumulated so far (including log Z_0)
    beta: Array
    index: Array  # number of steps taken
    genealogy: _genealogy.Genealogy  # lagged ancestors, for the variance estimate
    min_ess: Array  # smallest ESS (a count) after any reweighting so far
    schedule: Any  # two-pass: (betas padded with 1, the pilot's trace of kernel parameters, moves, probes); else ()
    done: Array
    status: Array
    cost: Array
    acceptance_rate: Array  # mean acceptance of the last move (nan before the first): read by Kernel.adapt
    num_mcmc_steps: Array  # int32: moves per particle at the next stage (adapted with max_mcmc_steps;
    #                        waste-free: the last stage's, which the next one scales by its chains' τ)
    log_z_variance: Array  # waste-free: Σ_t of the stages' chain variances of log (1/N) Σ w_t (Dau & Chopin 2022)
    moved: Array  # fraction of particles (waste-free: chains) that the last move moved (continuous states)


class SMCInfo(NamedTuple):
    beta: Array
    ess: Array  # ESS fraction after reweighting, before resampling
    resampled: Array
    acceptance_rate: Array
    log_z_increment: Array
    kernel_parameters: Any  # the parameters of this stage's move (TunedParameters; () for an untuned kernel)
    num_mcmc_steps: Array  # moves per particle (per kept state, waste-free) at this stage
    probe_transitions: Array  # trial transitions of the step-size rescue at this stage (counted in the cost)


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
    decorrelation: str = "position",
    decorrelation_target: float = DECORRELATION_TARGET,
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
        max_mcmc_steps, cap 30) for a tuned one (``jaxz.kernels.hmc(path)`` with no step),
        starting from 1 (waste-free: from WASTE_FREE_FIRST_MOVES = 5).
    max_mcmc_steps: a cap for an adapted number of moves: starting from
        ``num_mcmc_steps``, each stage runs as many moves as the previous stage's measured
        decorrelation says are needed to bring the weighted correlation between the
        particles and their positions before the move down to 0.01 (the idea of
        particles' AdaptiveMCMCSequence; decided from the previous stage so that a move
        depends only on the particles before it). Waste-free: as many as bring the
        autocorrelation time of the weights along the previous stage's chains to
        WASTE_FREE_AUTOCORRELATION = 0.2 of their length (``waste_free_num_moves``).
    decorrelation: what that correlation is measured on: "position" (the mean over
        coordinates) or "log_density" (log f_{β_{t+1}} before and after the move, read
        from the kernel's cache where it has one: no evaluation). For likelihood
        tempering every later weight L^{Δβ} is a function of the log density alone, so
        the coordinates can stay correlated (which mode of the eggbox, where on a
        shell: no local move changes it) after all that the estimate reads has
        decorrelated; "position" then runs the cap of moves at every stage.
    decorrelation_target: the correlation to reach (0.01).
    resampling: a function of ``jaxz.resampling`` or its name. The default, multinomial,
        is the one scheme with a valid single-run standard error (the genealogy estimator
        of Lee & Whiteley 2018 with a lag, ``jaxz.estimators._genealogy``);
        systematic / stratified / residual have lower variance but report a nan s.e.
        once they resample (use ``jaxz.combine_runs`` over vmapped runs).
    waste_free: Dau & Chopin's waste-free SMC: each stage resamples M = ``num_chains``
        particles and runs each for ``chain_length`` − 1 steps, keeping every state
        (N = M · P must hold; give one of the two; by default P is the largest divisor
        of N up to 50). Chains shorter than ~50 states biased log Ẑ low on a 20-d
        Gaussian (see DEFAULT_CHAIN_LENGTH); with a tuned kernel the moves between kept
        states are adapted (see max_mcmc_steps). Its s.e. is the larger of the genealogy
        estimator over the M chains and Dau & Chopin's per-stage chain variance (nan for
        a resampling other than multinomial, as for standard SMC); it needs M of 10 or
        more chains (MIN_WASTE_FREE_CHAINS): runs with fewer are flagged STATUS_LOW_ESS.
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
    effective particles, the genealogy has collapsed to one family (waste-free: the
    particles descend from fewer than 2 effective seed chains, e.g. too few of them in
    the modes that carry the mass, or there are fewer than MIN_WASTE_FREE_CHAINS
    chains), or the last move left more than half of the
    particles (waste-free: chains) exactly where they were (continuous states), and
    STATUS_PRECISION_LOSS when the log densities are too large for their differences
    to be resolved in the working dtype.
    """
    _particles.check_path(path)
    batch_size = _particles.check_batch_size(batch_size)
    target_ess = _particles.check_fraction("target_ess", target_ess)
    resample_ess = _particles.check_fraction("resample_ess", resample_ess)
    resampling, genealogy_valid = _particles.resampler(resampling)
    if decorrelation not in DECORRELATIONS:
        raise ValueError(f"decorrelation must be one of {DECORRELATIONS}, got {decorrelation!r}")
    decorrelation_target = _particles.check_fraction("decorrelation_target", decorrelation_target)
    if not isinstance(schedule, str) or schedule not in SCHEDULES:
        hint = " (a β grid goes in betas=)" if not isinstance(schedule, str) else ""
        raise ValueError(f"schedule must be one of {SCHEDULES}{hint}, got {schedule!r}")
    fixed = None if betas is None else validate(betas)
    if fixed is not None and schedule != "adaptive":
        raise ValueError(f"schedule={schedule!r} needs betas=None (it builds the schedule), got a fixed betas")
    two_pass = fixed is None and schedule == "two_pass"
    if two_pass:
        if path.sample_base is None:
            raise ValueError("schedule='two_pass' needs path.sample_base: the pilot run draws its own base particles")
        max_stages = _particles.check_count("max_stages", max_stages)
    # A tuned kernel with no number of moves given adapts it too (up to 30); an explicit
    # num_mcmc_steps means exactly that many, unless max_mcmc_steps is also given. Waste-free:
    # the moves between two kept states of a chain (see waste_free_move).
    adaptive_moves = max_mcmc_steps is not None or (num_mcmc_steps is None and kernel.adapt is not None)
    if adaptive_moves:
        max_mcmc_steps = _particles.check_count(
            "max_mcmc_steps", DEFAULT_MAX_MCMC_STEPS if max_mcmc_steps is None else max_mcmc_steps)
    if num_mcmc_steps is None:
        num_mcmc_steps = min(WASTE_FREE_FIRST_MOVES, max_mcmc_steps) if waste_free and adaptive_moves else 1
    num_mcmc_steps = _particles.check_count("num_mcmc_steps", num_mcmc_steps)
    if adaptive_moves:
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

    chain_lags = WASTE_FREE_LAGS if waste_free else None  # the lags its genealogy reads

    def chain_shape(num_particles):
        return waste_free_shape(num_particles, num_chains, chain_length)

    def initial_state(positions, schedule_buffer) -> SMCState:
        num_particles = _particles.num_particles_of(positions)
        dtype = _particles.float_dtype(positions)
        _particles.check_scalar_function("path.log_density", path.log_density,
                                         _particles.first_particle(positions), jnp.zeros((), dtype))
        zero = jnp.zeros((), dtype)
        # Waste-free: the genealogy is over the M chains (the particles of the chain-space
        # Feynman–Kac model, see waste_free_move); the N base draws form M groups of P.
        families = chain_shape(num_particles)[0] if waste_free else num_particles
        return SMCState(
            _moves.kernel_init(kernel, positions, zero, batch_size),
            jnp.full((num_particles,), -jnp.log(num_particles), dtype),
            jnp.asarray(path.log_z0, dtype), zero, jnp.int32(0),
            _genealogy.init(families, _genealogy.default_lag(families), dtype, chain_lags),
            jnp.asarray(num_particles, dtype), schedule_buffer, jnp.bool_(False), jnp.int32(0), zero,
            jnp.full((), jnp.nan, dtype), jnp.int32(num_mcmc_steps), zero, jnp.ones((), dtype),
        )

    def tune(state: SMCState, population: Population, replay: bool):
        """The kernel states with this stage's parameters, and its number of moves: the
        pilot's (two-pass), or adapted from the population before the move."""
        if replay:
            _, pilot_parameters, pilot_moves, _ = state.schedule
            parameters = jax.tree.map(lambda leaf: leaf[state.index], pilot_parameters)
            kernel_states = state.kernel_states
            if kernel.adapt is not None:
                kernel_states = kernel_states._replace(parameters=parameters)
            return kernel_states, (pilot_moves[state.index] if adaptive_moves else num_mcmc_steps)
        kernel_states = _moves.adapt_kernel(kernel, state.kernel_states, population)
        return kernel_states, (state.num_mcmc_steps if adaptive_moves else num_mcmc_steps)

    def rescue(rng_key, kernel_states, population, replay):
        """The kernel states (about to move) with a step size that some of them accept:
        PROBE_PARTICLES of them, drawn at random, take one trial step; while fewer than
        MIN_PROBE_ACCEPTANCE of their proposals are accepted, ``kernel.adapt`` is applied
        again with that acceptance (MAX_PROBES times at most). Out: the states and the
        trial transitions spent (for the cost). The pilot's parameters (two-pass replay)
        and untuned kernels are left alone."""
        if replay or kernel.adapt is None or not isinstance(kernel_states, KernelState):
            return kernel_states, 0
        num_particles = jax.tree.leaves(kernel_states.position)[0].shape[0]
        num_probes = min(num_particles, PROBE_PARTICLES)
        key_pick, key_steps = jax.random.split(rng_key)
        probes = _particles.take(kernel_states, jax.random.randint(key_pick, (num_probes,), 0, num_particles))

        def low(carry):
            _, acceptance, count = carry
            return (acceptance < MIN_PROBE_ACCEPTANCE) & (count < MAX_PROBES)

        def trial(carry):
            parameters, acceptance, count = carry
            parameters = jax.lax.cond(
                count > 0, lambda: kernel.adapt(parameters, population._replace(acceptance_rate=acceptance)),
                lambda: parameters)
            _, acceptance = _moves.kernel_step(kernel, jax.random.fold_in(key_steps, count),
                                                   probes._replace(parameters=parameters), population.beta, 1,
                                                   batch_size)
            return parameters, acceptance.astype(acceptance_dtype), count + 1

        acceptance_dtype = jnp.result_type(float)
        parameters, _, count = jax.lax.while_loop(
            low, trial, (kernel_states.parameters, jnp.zeros((), acceptance_dtype), jnp.int32(0)))
        return kernel_states._replace(parameters=parameters), count * num_probes * kernel.num_transitions

    def resample_move(key_resample, key_move, state, kernel_states, population, ess, num_moves, replay, log_target):
        """Resample when the ESS is low, then move every particle (standard SMC)."""
        log_weights, beta_next = population.log_weights, population.beta
        num_particles = log_weights.shape[0]
        dtype = log_weights.dtype
        # Resample only when the ESS is low: fewer resampling events, less variance.
        resample = ess < resample_ess * num_particles
        ancestors = jnp.where(
            resample, resampling(key_resample, log_weights), jnp.arange(num_particles, dtype=jnp.int32)
        )
        kernel_states = _particles.take(kernel_states, ancestors)
        start_log_target = log_target[ancestors]
        resampled_log_weights = jnp.where(resample, -jnp.log(jnp.asarray(num_particles, dtype)), log_weights)
        kernel_states, probe_cost = rescue(jax.random.fold_in(key_resample, 1), kernel_states, population, replay)
        start = kernel_states.position
        # Move: num_moves kernel applications invariant for f_{β_{t+1}}
        kernel_states, acceptance = _moves.kernel_step(kernel, key_move, kernel_states, beta_next, num_moves,
                                                           batch_size)
        moved = _moved_fraction(start, kernel_states.position, axis=0)
        if not adaptive_moves:
            next_moves = state.num_mcmc_steps
        elif decorrelation == "position":
            next_moves = _next_num_moves(start, kernel_states.position, resampled_log_weights, num_moves,
                                         max_mcmc_steps, decorrelation_target)
        else:  # the log target f_{β_{t+1}} before and after the move (the kernel's cache, or evaluated)
            end_log_target = _cached_log_density(kernel_states, num_particles)
            if end_log_target is None:
                end_log_target = _particles.log_densities(path, kernel_states.position, beta_next, batch_size)
            finite = jnp.isfinite(start_log_target) & jnp.isfinite(end_log_target)  # a dead particle weighs 0
            next_moves = _next_num_moves(jnp.where(finite, start_log_target, 0.0)[:, None],
                                         jnp.where(finite, end_log_target, 0.0)[:, None], resampled_log_weights,
                                         num_moves, max_mcmc_steps, decorrelation_target)
        return dict(
            kernel_states=kernel_states, log_weights=resampled_log_weights,
            genealogy=_genealogy.resample(state.genealogy, log_weights, ancestors, resample),
            acceptance_rate=acceptance.astype(dtype),
            num_mcmc_steps=next_moves, moved=moved.astype(dtype),
            cost=state.cost + num_particles * num_moves * kernel.num_transitions + probe_cost,
            probe_transitions=probe_cost,
        ), resample

    def waste_free_move(key_resample, key_move, state, kernel_states, population, increment_variance, num_moves,
                        replay):
        """Dau & Chopin (2022), Alg. 2: resample M of the N particles, run M chains of P
        states from them, keep all N states (equal weights again).

        Seen over chains, this is standard SMC with M particles: particle m is the
        whole chain (x_{0,m}, …, x_{P−1,m}) (state k of chain m at index k·M + m), its
        potential the mean of its P weights, G_t(chain) = (1/P) Σ_k w_t(x_{k,m}), so
        that Ẑ's factor (1/N) Σ_n w_t(x_n) = (1/M) Σ_m G_t(chain_m); resampling a seed
        from the N weights is resampling a chain by G_t and a state within it, and the
        move builds a new chain from that seed. The M chains of a stage are therefore
        conditionally independent given the previous stage, and the genealogy estimator
        of Lee & Whiteley (2018) applies with the chains as particles: their ancestry
        (which chain each seed came from) carries the dependence across stages that a
        per-stage chain variance (Dau & Chopin 2022, §3.4) leaves out."""
        log_weights, beta_next = population.log_weights, population.beta
        num_particles = log_weights.shape[0]
        dtype = log_weights.dtype
        num_chains_, length = chain_shape(num_particles)
        seeds = resampling(key_resample, log_weights, num_chains_)
        chain_log_weights = _weights.logsumexp(log_weights.reshape(length, num_chains_).T)
        starts = _particles.take(kernel_states, seeds)
        starts, probe_cost = rescue(jax.random.fold_in(key_resample, 1), starts, population, replay)
        kernel_states, acceptance = _moves.kernel_chains(kernel, key_move, starts, beta_next, length, num_moves,
                                                              batch_size)
        # a chain moved if any of its P states differs from its seed (index k·M + m: state k of chain m)
        chains = jax.tree.map(lambda leaf: leaf.reshape((length, num_chains_) + leaf.shape[1:]),
                              kernel_states.position)
        moved = _moved_fraction(jax.tree.map(lambda leaf: leaf[:1], chains), chains, axis=1)
        return dict(
            kernel_states=kernel_states, log_weights=jnp.full((num_particles,), -jnp.log(num_particles), dtype),
            genealogy=_genealogy.resample(state.genealogy, chain_log_weights, seeds % num_chains_, jnp.bool_(True),
                                          chain_lags),
            acceptance_rate=acceptance.astype(dtype), moved=moved.astype(dtype),
            num_mcmc_steps=jnp.asarray(num_moves, jnp.int32),
            log_z_variance=state.log_z_variance + increment_variance.astype(dtype),
            cost=state.cost + (num_particles - num_chains_) * num_moves * kernel.num_transitions + probe_cost,
            probe_transitions=probe_cost,
        ), jnp.bool_(True)

    def make_step(choose_beta, replay=False):
        @freeze_when_done
        def step(rng_key, state: SMCState):
            key_resample, key_move = jax.random.split(rng_key)
            positions = state.kernel_states.position
            num_particles = state.log_weights.shape[0]
            # log f_{β_t} at the particles, evaluated once for the choice of β_{t+1} and the reweighting
            # (an affine path: f_0 and f_1 once, every β read off the line between them)
            read = _particles.log_density_reader(path, positions, batch_size)
            log_current = read(state.beta)
            beta_next, beta_status = choose_beta(state, positions, log_current, read)

            # Reweight: log Ẑ_{t+1} = log Ẑ_t + log Σ_i W_t^i w_{t+1}^i
            increments, status = _particles.incremental_log_weights(path, positions, state.beta, beta_next, batch_size,
                                                                    log_current, read)
            unnormalized = state.log_weights + increments
            log_z_increment = _weights.logsumexp(unnormalized)
            log_weights = _weights.normalize(unnormalized)
            ess = _weights.ess(log_weights)

            # Tune the kernel on the weighted particles that approximate f_{β_{t+1}}.
            population = Population(positions, log_weights, beta_next, state.acceptance_rate)
            kernel_states, num_moves = tune(state, population, replay)
            if waste_free:
                num_chains_, length = chain_shape(num_particles)
                increment_variance, tau = _chains.weight_statistics(increments, num_chains_)
                if adaptive_moves and not replay:  # the first stage's particles are no chains: keep the start
                    num_moves = jnp.where(state.index > 0,
                                          waste_free_num_moves(tau, num_moves, length, max_mcmc_steps), num_moves)
                updates, resampled = waste_free_move(key_resample, key_move, state, kernel_states, population,
                                                     increment_variance, num_moves, replay)
            else:
                updates, resampled = resample_move(key_resample, key_move, state, kernel_states, population, ess,
                                                   num_moves, replay, log_current + increments)
            log_z = state.log_z + log_z_increment
            done = (beta_next >= 1.0) | jnp.isneginf(log_z)  # nothing more to learn once every weight died
            probe_transitions = updates.pop("probe_transitions")
            new_state = state._replace(
                log_z=log_z, beta=beta_next, index=state.index + 1, min_ess=jnp.minimum(state.min_ess, ess),
                done=done, status=state.status | status | beta_status, **updates,
            )
            info = SMCInfo(beta_next, ess / num_particles, resampled, updates["acceptance_rate"], log_z_increment,
                           new_state.kernel_states.parameters if isinstance(kernel_states, KernelState) else (),
                           jnp.int32(num_moves), jnp.asarray(probe_transitions, jnp.int32))
            return new_state, info

        return step

    def adaptive_beta(state, positions, log_current, read):
        def log_increment_fn(beta_new):
            return _particles.incremental_log_weights(path, positions, state.beta, beta_new, batch_size,
                                                      log_current, read)[0]

        return next_temperature(state.log_weights, log_increment_fn, state.beta, target_ess, return_status=True)

    def scheduled_beta(state, positions, log_current, read):
        ladder = fixed if fixed is not None else state.schedule[0]
        return jnp.asarray(ladder, state.log_weights.dtype)[state.index + 1], jnp.int32(0)

    adaptive_step = make_step(adaptive_beta)
    step = adaptive_step if fixed is None and not two_pass else make_step(scheduled_beta, replay=two_pass)

    def init(rng_key, positions) -> SMCState:
        _checks.floating_positions(path, kernel, positions, 0.0)
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
        state = initial_state(positions, (ladder, result.trace.kernel_parameters, result.trace.num_mcmc_steps,
                                          result.trace.probe_transitions))
        pilot_status = jnp.where(result.state.done, 0, STATUS_MAX_STEPS).astype(jnp.int32)
        return state._replace(cost=state.cost + result.state.cost, status=state.status | pilot_status)

    def finalize(state: SMCState) -> Estimate:
        final_ess = _weights.ess(state.log_weights)
        min_ess = jnp.minimum(state.min_ess, final_ess)
        stuck = state.moved < MIN_MOVED_FRACTION
        status = jnp.where(stuck, state.status | STATUS_LOW_ESS, state.status) | support_status(state)
        if waste_free:
            return waste_free_estimate(state, min_ess, status)
        return _particles.genealogy_estimate(
            state.log_z, state.log_weights, state.genealogy, genealogy_valid, min_ess, state.cost, status,
        )

    def support_status(state: SMCState):
        """STATUS_NONFINITE when a weighted particle, moved at β = 1, lies where the base
        f_0 is 0: the target has mass where the path below β = 1 has none (a U(0, 1) base
        for a Gaussian target), which no reweighting sees, so Ẑ is biased low however many
        particles (as ``ais``'s last-rung check). One log f_0 per particle, counted in
        jaxz.evidence's evaluations."""
        log_base = _particles.log_densities(path, state.kernel_states.position, 0.0, batch_size)
        return jnp.where(state.beta >= 1, _particles.lost_support_status(state.log_weights, log_base), 0)

    def waste_free_estimate(state: SMCState, min_ess, status) -> Estimate:
        """Var(log Ẑ) of waste-free SMC: the larger of two estimates. Dau & Chopin's
        (2022, §3.4) sum over stages of the chain variance of each stage's mean weight
        (``state.log_z_variance``) has little noise but treats the stages as
        independent: on the 20-d shells (17 stages, M = 20) it was 0.77x the spread of
        log Ẑ (6% of runs beyond 3 s.e.). The genealogy estimator of Lee & Whiteley
        (2018) over the M chains (see waste_free_move) sees the dependence across
        stages through the chains' ancestry, but from M = 20 chains it is noisy (below 0
        — clipped to 0 — in a third of the runs). STATUS_LOW_ESS as for standard SMC,
        with the chains as the particles: a collapsed chain genealogy (fewer than 2
        effective ancestor chains at the oldest generation it reads: the particles all
        descend from one or two seeds, e.g. the modes they cover; or fewer than
        MIN_WASTE_FREE_CHAINS chains in all), a last move that moved fewer than
        MIN_MOVED_FRACTION of the chains, an ESS below 2. No diagnostic sees a mode that
        no particle reached: on two modes of masses 1 and 2, the heavier 10x narrower,
        standard and waste-free SMC alike mostly miss part of the heavy one with status 0
        (tests/test_waste_free_coverage.py)."""
        num_particles = state.log_weights.shape[0]
        num_chains_, length = chain_shape(num_particles)
        chain_log_weights = _weights.logsumexp(state.log_weights.reshape(length, num_chains_).T)
        genealogy_variance, families = _genealogy.log_variance(state.genealogy, chain_log_weights, chain_lags)
        variance = jnp.fmax(state.log_z_variance, genealogy_variance.astype(state.log_z_variance.dtype))
        collapsed = (families < _particles.MIN_EFFECTIVE_PARTICLES) | jnp.isinf(genealogy_variance)
        collapsed = collapsed | (num_chains_ < MIN_WASTE_FREE_CHAINS)
        low = (num_particles > 1) & ((min_ess < _particles.MIN_EFFECTIVE_PARTICLES) | collapsed)
        status = jnp.where(low, status | STATUS_LOW_ESS, status)
        stderr = jnp.where(genealogy_valid, jnp.sqrt(variance), jnp.nan)
        return _particles.make_estimate(state.log_z, stderr.astype(state.log_z.dtype), state.cost, status)

    return Estimator(init, step, finalize, num_steps)


def _cached_log_density(kernel_states, num_particles):
    """The log f_β that a kernel's state caches at its position (blackjax's HMC, MALA and
    random-walk states: ``inner.logdensity``), shape (N,), or None."""
    value = getattr(getattr(kernel_states, "inner", None), "logdensity", None)
    if value is None or jnp.shape(value) != (num_particles,):
        return None
    return value


__all__ = ["smc", "SMCState", "SMCInfo", "SCHEDULES", "chain_mean_variance"]
