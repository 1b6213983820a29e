"""``jaxz.smc``: tempered SMC assembled from parts (resample-move: Chopin 2002; Del
Moral, Doucet & Jasra 2006), the way optax assembles ``adam`` from transforms.

- the engine (``smc_engine``): one step reweights, resamples if needed and moves;
- a schedule (``smc_schedules``): a fixed ladder, adaptive by conditional ESS, or
  replayed from a pilot run (``schedule="two_pass"``, ``jaxz.estimators.pilot``);
- a mutation (``smc_mutations``): resample-move, or waste-free (Dau & Chopin 2022);
  tunable kernels are tuned from the weighted particles, with a step-size rescue
  (``_moves.step_size_rescue``), and the number of moves may adapt.

Ẑ = Z_0 ∏_t Σ_i W_t^i w_{t+1}^i is unbiased for a ladder and kernels fixed in advance;
an adaptive schedule or kernels tuned on the run's own particles leave an O(1/N) bias,
which two passes remove (see docs/error-bars.md and benchmarks/results/calibration.md).
The standard error is the fixed-lag genealogy estimator (Lee & Whiteley 2018; Olsson &
Douc 2019 beyond the lag); waste-free SMC takes the larger of it over the chains and Dau
& Chopin's (§3.4) per-stage chain variance.
"""
from typing import Callable

import jax.numpy as jnp

from jaxz import _checks
from jaxz import weights as _weights
from jaxz._status import STATUS_COLLAPSED, STATUS_FEW_CHAINS, STATUS_FEW_PARTICLES, STATUS_PLATEAU, STATUS_STUCK
from jaxz.base import Estimate, Estimator
from jaxz.estimators import _genealogy, _moves, _particles, pilot as _pilot, smc_schedules
from jaxz.estimators._chains import (  # noqa: F401 (the waste-free layout, read here and by its tests)
    DEFAULT_CHAIN_LENGTH, MIN_WASTE_FREE_CHAINS, WASTE_FREE_AUTOCORRELATION, WASTE_FREE_FIRST_MOVES,
    WASTE_FREE_LAGS, chain_mean_variance, waste_free_num_moves, waste_free_shape,
)
from jaxz.estimators._moves import DECORRELATION_TARGET, MAX_PROBES, MIN_PROBE_ACCEPTANCE, PROBE_PARTICLES  # noqa: F401
from jaxz.estimators.smc_engine import Mutation, Schedule, SMCInfo, SMCState, build_step, initial_state
from jaxz.estimators.smc_mutations import DECORRELATIONS, MoveCount, resample_move, waste_free as _waste_free
from jaxz.kernels.base import Kernel
from jaxz.paths import Path
from jaxz.schedules import validate

SCHEDULES = ("adaptive", "two_pass")
DEFAULT_MAX_MCMC_STEPS = 30
# A run whose last move moved fewer than this fraction of its particles (waste-free:
# chains) ends on copies of a few points: STATUS_STUCK. Only the last stage: an early one
# at low acceptance is repaired by the later ones.
MIN_MOVED_FRACTION = 0.1

# STATUS_PLATEAU where the smallest ESS fraction over the run's reweightings is 1 to within this: equal weights
# every time, the target density took one value at every particle (a log-likelihood whose sd across the
# particles is below about 0.003 nats reads the same)
PLATEAU_TOLERANCE = 1e-5


def smc(path: Path, kernel: Kernel, *, betas=None, target_ess: float = 0.5, resample_ess: float = 0.5,
        num_mcmc_steps: int | None = None, resampling: Callable | str = "multinomial", schedule: str = "adaptive",
        max_stages: int = 1000, max_mcmc_steps: int | None = None, waste_free: bool = False,
        num_chains: int | None = None, chain_length: int | None = None, batch_size: int | None = None,
        decorrelation: str = "position", decorrelation_target: float = DECORRELATION_TARGET) -> Estimator:
    """Tempered SMC from f_0 (``positions`` passed to ``init`` are exact draws) to f_1.

    betas: a fixed ladder from 0 to 1 (Ẑ unbiased), or None: each β_{t+1} chosen by
        bisection so that the conditional ESS is ``target_ess``.
    schedule: with ``betas=None``, "adaptive" (one pass; Ẑ biased low by O(1/N)) or
        "two_pass" (a pilot adaptive run on fresh draws of ``path.sample_base`` fixes the
        ladder, kernel parameters and moves; the run proper replays them: Ẑ unbiased,
        about twice the cost). max_stages: cap on the pilot's stages.
    resample_ess: resample when ESS / N falls below it (waste-free resamples always).
    resampling: a function of ``jaxz.resampling`` or its name. Multinomial (the default) is
        the one scheme with a single-run standard error; the others report a nan s.e. once
        they resample (pool vmapped runs with ``jaxz.combine_runs``).
    num_mcmc_steps: kernel steps per particle per stage (waste-free: between two kept
        states). None: 1 for a kernel with fixed parameters; adapted for a tuned one.
    max_mcmc_steps: cap of an adapted number of moves (default 30 for a tuned kernel):
        each stage runs as many as the previous stage's measured decorrelation says bring
        the correlation between particles before and after the move to
        ``decorrelation_target`` (waste-free: the weights' autocorrelation time along the
        chains to a fifth of their length). decorrelation: measured on "position" (mean
        over coordinates) or on "log_density" (log f_{β_{t+1}} before and after).
    waste_free: Dau & Chopin's waste-free SMC with N = ``num_chains`` · ``chain_length``
        (give one; by default P is the largest divisor of N up to 50); runs with fewer than
        MIN_WASTE_FREE_CHAINS chains are flagged STATUS_FEW_CHAINS.
    batch_size: evaluate densities and kernel steps over the particles in chunks of this
        many (``lax.map``), for bounded memory; results equal the unchunked run up to
        floating-point reordering.
    A tunable kernel (``jaxz.kernels.hmc(path)``, ``mala(path)``, ``rwmh(path)`` with no step
    size) is adapted before each move; ``SMCInfo.kernel_parameters`` holds each stage's,
    and ``SMCInfo.log_density_evaluations`` / ``gradient_evaluations`` what each stage
    evaluated. target_ess and betas may be traced; they are then checked for shape only.
    An adaptive or two-pass schedule is driven by ``jaxz.run(..., max_steps=...)``.
    Status: STATUS_FEW_PARTICLES (a reweighting left fewer than 2 effective particles),
    STATUS_COLLAPSED (the genealogy collapsed to one family), STATUS_STUCK (the last move
    moved fewer than MIN_MOVED_FRACTION of the particles), STATUS_FEW_CHAINS (waste-free
    with too few chains), STATUS_PRECISION_LOSS, STATUS_NONFINITE (also: the target has mass
    where f_0 has none), STATUS_MAX_STEPS (the pilot hit max_stages).
    """
    settings = _settings(path, kernel, betas, target_ess, resample_ess, num_mcmc_steps, resampling, schedule,
                         max_stages, max_mcmc_steps, waste_free, num_chains, chain_length, batch_size, decorrelation,
                         decorrelation_target)
    (betas, two_pass, resampling, count, batch_size, max_stages) = settings

    def mutation(replay: bool) -> Mutation:
        if waste_free:
            return _waste_free(kernel, resampling=resampling, count=count, num_chains=num_chains,
                               chain_length=chain_length, replay=replay, batch_size=batch_size)
        return resample_move(path, kernel, resampling=resampling, resample_ess=resample_ess, count=count,
                             replay=replay, batch_size=batch_size, decorrelation=decorrelation,
                             decorrelation_target=decorrelation_target)

    adaptive = smc_schedules.adaptive(path, target_ess, batch_size)
    if two_pass:  # an adaptive pilot fixes the ladder, kernel parameters and moves; the run replays them
        pilot = assemble(path, kernel, adaptive, mutation(False), batch_size=batch_size)
        return assemble(path, kernel, smc_schedules.replayed(), mutation(True), batch_size=batch_size, pilot=pilot,
                        max_stages=max_stages)
    plan = adaptive if betas is None else smc_schedules.fixed(betas)
    return assemble(path, kernel, plan, mutation(False), batch_size=batch_size)


def assemble(path: Path, kernel: Kernel, schedule: Schedule, mutation: Mutation, *, batch_size: int | None = None,
             pilot: Estimator | None = None, max_stages: int = 1000) -> Estimator:
    """An SMC ``Estimator`` from its parts: the engine's step over ``schedule`` and
    ``mutation``, ``init(rng_key, positions)`` from exact draws of f_0 (kernel states at
    β = 0), and the finalize of ``jaxz.smc`` (genealogy s.e., status checks). With
    ``pilot`` (an assembled adaptive estimator) and ``smc_schedules.replayed()``, ``init``
    first runs the pilot on fresh draws of ``path.sample_base`` (at most ``max_stages``)
    and the run replays its ladder, kernel parameters and moves."""
    finalize = _finalizer(path, mutation, batch_size)

    def start(positions, schedule_buffer=()) -> SMCState:
        dtype = _particles.float_dtype(positions)
        _particles.check_scalar_function("path.log_density", path.log_density,
                                         _particles.first_particle(positions), jnp.zeros((), dtype))
        kernel_states = _moves.kernel_init(kernel, positions, jnp.zeros((), dtype), batch_size)
        return initial_state(path, kernel_states, dtype, mutation.first_moves, mutation, schedule_buffer)

    def init(rng_key, positions) -> SMCState:
        _checks.floating_positions(path, kernel, positions, 0.0)
        if pilot is None:
            return start(positions)
        ran = _pilot.pilot_run(pilot, rng_key, path.sample_base, _particles.num_particles_of(positions),
                               max_steps=max_stages)
        dtype = _particles.float_dtype(positions)
        state = start(positions, (_pilot.padded_ladder(ran, dtype), ran.trace.kernel_parameters,
                                  ran.trace.num_mcmc_steps, ran.trace.probe_transitions))
        return state._replace(cost=state.cost + ran.state.cost, status=state.status | ran.status,
                              log_density_evaluations=state.log_density_evaluations
                              + ran.state.log_density_evaluations,
                              gradient_evaluations=state.gradient_evaluations + ran.state.gradient_evaluations)

    return Estimator(init, build_step(path, schedule, mutation, batch_size), finalize, schedule.num_steps)


def _settings(path, kernel, betas, target_ess, resample_ess, num_mcmc_steps, resampling, schedule, max_stages,
              max_mcmc_steps, waste_free, num_chains, chain_length, batch_size, decorrelation, decorrelation_target):
    """The checked settings of ``smc`` (ValueError naming the argument otherwise)."""
    _particles.check_path(path)
    batch_size = _particles.check_batch_size(batch_size)
    _particles.check_fraction("target_ess", target_ess)
    _particles.check_fraction("resample_ess", resample_ess)
    resampling, _ = _particles.resampler(resampling)
    if decorrelation not in DECORRELATIONS:
        raise ValueError(f"decorrelation must be one of {DECORRELATIONS}, got {decorrelation!r}")
    _particles.check_fraction("decorrelation_target", decorrelation_target)
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
    # A tuned kernel with no number of moves given adapts it (up to DEFAULT_MAX_MCMC_STEPS); an explicit
    # num_mcmc_steps means exactly that many, unless max_mcmc_steps is also given.
    adaptive_moves = max_mcmc_steps is not None or (num_mcmc_steps is None and kernel.adapt is not None)
    if adaptive_moves:
        max_mcmc_steps = _particles.check_count(
            "max_mcmc_steps", DEFAULT_MAX_MCMC_STEPS if max_mcmc_steps is None else max_mcmc_steps)
    if num_mcmc_steps is None:
        num_mcmc_steps = min(WASTE_FREE_FIRST_MOVES, max_mcmc_steps) if waste_free and adaptive_moves else 1
    num_mcmc_steps = _particles.check_count("num_mcmc_steps", num_mcmc_steps)
    if adaptive_moves and max_mcmc_steps < num_mcmc_steps:
        raise ValueError(f"max_mcmc_steps must be >= num_mcmc_steps ({num_mcmc_steps}), got {max_mcmc_steps}")
    if not waste_free and (num_chains is not None or chain_length is not None):
        raise ValueError("num_chains and chain_length are waste-free settings: pass waste_free=True")
    if num_chains is not None and chain_length is not None:
        raise ValueError("give one of num_chains and chain_length (N = num_chains * chain_length), not both")
    if num_chains is not None:
        _particles.check_count("num_chains", num_chains)
    if chain_length is not None and (_particles.check_count("chain_length", chain_length) < 2):
        raise ValueError(f"chain_length must be >= 2 (one start and at least one MCMC step), got {chain_length}")
    count = MoveCount(num_mcmc_steps, max_mcmc_steps if adaptive_moves else None)
    return fixed, two_pass, resampling, count, batch_size, max_stages


def _finalizer(path, mutation: Mutation, batch_size):
    """``finalize(state) -> Estimate``: the genealogy s.e. and the status checks."""

    def finalize(state: SMCState) -> Estimate:
        min_ess = jnp.minimum(state.min_ess, _weights.ess(state.log_weights))
        status = state.status | jnp.where(state.moved < MIN_MOVED_FRACTION, STATUS_STUCK, 0)
        status = status | _support_status(state)
        if mutation.chain_shape is not None:
            estimate = _waste_free_estimate(state, min_ess, status)
        else:
            estimate = _particles.genealogy_estimate(state.log_z, state.log_weights, state.genealogy,
                                                     mutation.genealogy_valid, min_ess, state.cost, status)
        # every reweighting gave all the particles one weight (an ESS fraction of 1 to rounding)
        num_particles = state.log_weights.shape[0]
        plateau = (num_particles > 1) & (min_ess >= num_particles * (1.0 - PLATEAU_TOLERANCE))
        return estimate._replace(status=(estimate.status | jnp.where(plateau, STATUS_PLATEAU, 0)).astype(jnp.int32))

    def _support_status(state: SMCState):
        """STATUS_NONFINITE when a weighted particle, moved at β = 1, lies where f_0 is 0:
        the target has mass where the path below β = 1 has none (a U(0, 1) base for a
        Gaussian target), which no reweighting sees (as ``ais``'s last-rung check)."""
        log_base = _particles.log_densities(path, state.kernel_states.position, 0.0, batch_size)
        return jnp.where(state.beta >= 1, _particles.lost_support_status(state.log_weights, log_base), 0)

    def _waste_free_estimate(state: SMCState, min_ess, status) -> Estimate:
        """Var(log Ẑ): the larger of Dau & Chopin's (2022, §3.4) sum of per-stage chain
        variances (little noise, blind to dependence across stages) and the genealogy
        estimator over the M chains (Lee & Whiteley 2018; sees that dependence, noisy
        from few chains)."""
        num_particles = state.log_weights.shape[0]
        chains, length = mutation.chain_shape(num_particles)
        chain_log_weights = _weights.logsumexp(state.log_weights.reshape(length, chains).T)
        genealogy_variance, families = _genealogy.log_variance(state.genealogy, chain_log_weights,
                                                               mutation.chain_lags)
        variance = jnp.fmax(state.log_z_variance, genealogy_variance.astype(state.log_z_variance.dtype))
        collapsed = (families < _particles.MIN_EFFECTIVE_PARTICLES) | jnp.isinf(genealogy_variance)
        several = num_particles > 1
        status = status | jnp.where(several & collapsed, STATUS_COLLAPSED, 0)
        status = status | jnp.where(several & (chains < MIN_WASTE_FREE_CHAINS), STATUS_FEW_CHAINS, 0)
        status = status | jnp.where(several & (min_ess < _particles.MIN_EFFECTIVE_PARTICLES), STATUS_FEW_PARTICLES, 0)
        stderr = jnp.where(mutation.genealogy_valid, jnp.sqrt(variance), jnp.nan)
        return _particles.make_estimate(state.log_z, stderr.astype(state.log_z.dtype), state.cost, status)

    return finalize


__all__ = ["smc", "assemble", "SMCState", "SMCInfo", "SCHEDULES", "chain_mean_variance"]
