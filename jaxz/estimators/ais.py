"""Annealed importance sampling (Neal 2001) and its reverse, RAISE (Burda, Grosse &
Salakhutdinov 2015).

AIS moves particles from f_0 to f_1 along a fixed schedule β_0 = 0 < ... < β_K = 1.
Each step t multiplies a particle's weight by f_{β_t}(x)/f_{β_{t−1}}(x) and then moves
it with a kernel leaving f_{β_t} invariant. E[w] = Z_1/Z_0, so Ẑ = Z_0 · mean(w) is
unbiased and log Ẑ is, on average, an underestimate (Jensen).

RAISE runs the same chain down the ladder from (approximate) draws of f_1: E[w] =
Z_0/Z_1, so Ẑ = Z_0 / mean(w) and log Ẑ is a stochastic upper bound when the start
is exact; the two sandwich log Z.

A tunable kernel (``jaxz.kernels.hmc(path)`` with no step size) is adapted before
every move on the particle cloud (``jaxz.kernels.tuning``): the mass matrix from the
particles' covariance, the step size from the previous move's acceptance. The cloud
is taken unweighted: AIS never resamples, so its weights degenerate along the ladder,
while the particles themselves keep the support and scale of f_β. Adaptation changes
the kernels, not the weights; as the kernel of particle i then depends on particle i
through the cloud, E[Ẑ] = Z holds up to O(1/N). With ``path.sample_base`` the
default is instead a pilot run on fresh base draws whose per-rung parameters the run
proper replays: E[Ẑ] = Z exactly, as with explicit parameters.
"""
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks
from jaxz import weights as _weights
from jaxz._status import STATUS_FEW_PARTICLES, STATUS_HEAVY_TAIL
from jaxz.base import STATUS_OK, Estimate, Estimator, freeze_when_done
from jaxz.estimators import _moves, _particles, _weight_checks, pilot as _pilot
from jaxz.kernels.base import Kernel, KernelState, Population
from jaxz.paths import Path
from jaxz.schedules import validate
from jaxz.types import Array


class AISState(NamedTuple):
    kernel_states: KernelState  # one per particle, leading axis = particles
    log_weights: Array  # (num_particles,) accumulated log importance weights
    index: Array  # current position on the ladder (0 .. K)
    done: Array
    status: Array
    cost: Array
    acceptance_rate: Array  # mean acceptance of the last move (nan before the first): read by Kernel.adapt
    pilot_parameters: Any  # tuning="pilot": the pilot's kernel parameters, one set per rung; otherwise ()


class AISInfo(NamedTuple):
    beta: Array
    ess: Array
    acceptance_rate: Array
    kernel_parameters: Any  # the parameters of this rung's move (TunedParameters; () for an untuned kernel)


TUNINGS = ("auto", "pilot", "online")


def _annealer(path: Path, kernel: Kernel, betas, *, reverse: bool, tuning: str = "auto", batch_size=None) -> Estimator:
    _checks.path(path)
    batch_size = _checks.batch_size(batch_size)
    betas = validate(betas)
    ladder = betas[::-1] if reverse else betas
    num_steps = ladder.shape[0] - 1
    if tuning not in TUNINGS:
        raise ValueError(f"tuning must be one of {TUNINGS}, got {tuning!r}")
    if tuning == "pilot" and (reverse or path.sample_base is None):
        raise ValueError("tuning='pilot' needs path.sample_base (fresh draws of f_0 for the pilot run); "
                         "raise_ starts from f_1 and tunes online")
    pilot = kernel.adapt is not None and not reverse and (
        tuning == "pilot" or (tuning == "auto" and path.sample_base is not None))

    def online_init(rng_key, positions) -> AISState:
        num_particles = _particles.num_particles_of(positions)
        dtype = _particles.float_dtype(positions)
        _checks.positions_for_path(path, positions, jnp.asarray(ladder[0], dtype))
        _checks.scalar_function("path.log_density", path.log_density, _particles.first_particle(positions),
                                jnp.zeros((), dtype))
        states = _moves.kernel_init(kernel, positions, jnp.asarray(ladder[0], dtype), batch_size)
        return AISState(
            states, jnp.zeros((num_particles,), dtype), jnp.int32(0), jnp.bool_(num_steps == 0),
            jnp.int32(0), jnp.zeros((), dtype), jnp.full((), jnp.nan, dtype), (),
        )

    def make_step(replay: bool):
        @freeze_when_done
        def step(rng_key, state: AISState):
            return annealing_step(rng_key, state, replay)

        return step

    def annealing_step(rng_key, state: AISState, replay: bool):
        dtype = state.log_weights.dtype
        schedule = jnp.asarray(ladder, dtype)
        beta_from, beta_to = schedule[state.index], schedule[state.index + 1]
        # Neal (2001), eq. (3): w ← w · f_{β_t}(x_{t−1}) / f_{β_{t−1}}(x_{t−1})
        increments, status = _particles.incremental_log_weights(
            path, state.kernel_states.position, beta_from, beta_to, batch_size
        )
        log_weights = state.log_weights + increments
        num_particles = log_weights.shape[0]
        if replay:  # the pilot's parameters for this rung
            parameters = jax.tree.map(lambda leaf: leaf[state.index], state.pilot_parameters)
            states = state.kernel_states._replace(parameters=parameters)
        else:  # a tunable kernel adapts to the (unweighted) cloud before it moves
            uniform = jnp.full((num_particles,), -jnp.log(num_particles), dtype)
            population = Population(state.kernel_states.position, uniform, beta_to, state.acceptance_rate)
            states = _moves.adapt_kernel(kernel, state.kernel_states, population)
        # then x_t ~ T_t(x_{t−1}, ·), invariant for f_{β_t}
        states, acceptance = _moves.kernel_step(kernel, rng_key, states, beta_to, batch_size=batch_size)
        index = state.index + 1
        new_state = AISState(
            states, log_weights, index, index >= num_steps, state.status | status,
            state.cost + num_particles * kernel.num_transitions, jnp.asarray(acceptance, dtype),
            state.pilot_parameters,
        )
        parameters = states.parameters if isinstance(states, KernelState) else ()
        return new_state, AISInfo(beta_to, _weights.ess(log_weights), acceptance, parameters)

    def finalize(state: AISState) -> Estimate:
        log_mean_w = _weights.log_mean_exp(state.log_weights)
        log_z0 = jnp.asarray(path.log_z0, state.log_weights.dtype)
        if reverse:  # E[w] = Z_0 / Z_1
            log_z = jnp.where(jnp.isneginf(log_mean_w), -jnp.inf, log_z0 - log_mean_w)
        else:  # E[w] = Z_1 / Z_0
            log_z = log_z0 + log_mean_w
        stderr = _weight_checks.importance_stderr(state.log_weights)
        status = _weight_checks.low_ess_status(state.log_weights, state.status)
        if state.log_weights.shape[0] == 1:  # one particle: ESS 1 < 2, s.e. nan
            status = status | STATUS_FEW_PARTICLES
        if reverse:
            status = status | _reverse_tail_status(state.log_weights)
        else:
            status = status | _final_support_status(state)
        # a traced ladder cannot be checked at construction: a bad one gives nan, flagged
        log_z = jnp.where(_checks.schedule_valid(betas), log_z, jnp.nan)
        return _particles.make_estimate(log_z, stderr, state.cost, status)

    def _final_support_status(state: AISState):
        """STATUS_NONFINITE when a particle that the last move (at β = 1) left at a point
        with f_1 > 0 finds f_{β_{K−1}} = 0 there: the target's support is larger than the
        path's below β = 1 (a base of smaller support, e.g. U(0, 1) for a Gaussian target),
        so the last reweighting missed mass and Ẑ is biased low, however many particles."""
        if num_steps < 1:
            return jnp.int32(STATUS_OK)
        dtype = state.log_weights.dtype
        positions = state.kernel_states.position
        schedule = jnp.asarray(ladder, dtype)
        log_target = _particles.log_densities(path, positions, schedule[-1], batch_size)
        log_before = _particles.log_densities(path, positions, schedule[-2], batch_size)
        return _particles.lost_support_status(log_target, log_before)

    online_step = make_step(replay=False)

    def init(rng_key, positions) -> AISState:
        _checks.floating_positions(path, kernel, positions, ladder[0])
        if not pilot:
            return online_init(rng_key, positions)
        # A pilot run, tuned online on fresh draws of f_0, fixes each rung's parameters;
        # the run proper replays them, so its kernels do not depend on its own particles.
        ran = _pilot.pilot_run(Estimator(online_init, online_step, finalize, num_steps), rng_key, path.sample_base,
                               _particles.num_particles_of(positions))
        state = online_init(rng_key, positions)
        return state._replace(pilot_parameters=ran.trace.kernel_parameters, cost=ran.state.cost)

    return Estimator(init, make_step(replay=pilot), finalize, num_steps)



def _reverse_tail_status(log_weights) -> Array:
    """STATUS_HEAVY_TAIL unless Hill's k̂ of the reverse weights (``jaxz.weights.hill_khat``)
    lies one of its standard errors (k̂/√M) below ``jaxz.weights.pareto_threshold(N)``,
    from N = MIN_PARETO_SAMPLES. The reverse increments exp(−Δβ h) have Pareto tails by
    construction, so log w has an exponential upper tail whose scale Hill's estimate
    reads with less than half the noise of the GPD fit; the GPD k̂ of a run that has not
    drawn its tail reads low. The one-s.e. margin flags the runs whose tail is near the
    threshold too: a flag only removes runs from those kept (where it removes good ones
    the kept ones cover less), but no wrong run gains status 0."""
    num_slots = log_weights.shape[-1]
    if num_slots < _weight_checks.MIN_PARETO_SAMPLES:
        return jnp.int32(0)
    upper = _weights.hill_khat(log_weights) * (1.0 + 1.0 / np.sqrt(_weights.pareto_tail_size(num_slots)))
    return jnp.where(upper > _weights.pareto_threshold(num_slots), STATUS_HEAVY_TAIL, 0).astype(jnp.int32)


def ais(path: Path, kernel: Kernel, betas, *, tuning: str = "auto", batch_size: int | None = None) -> Estimator:
    """Annealed importance sampling along ``betas`` (increasing from 0 to 1).

    ``init(rng_key, positions)`` takes exact draws of f_0 (leading axis = particles).
    One step = one rung: reweight, then one kernel application per particle.
    ``finalize`` gives log Ẑ = log Z_0 + log mean(w) with a delta-method standard error;
    from N = 100 the weights' second moment above their M = min(N/5, 3√N) largest takes
    the fitted generalized Pareto tail (``jaxz.weights.stderr_log_mean_exp_pareto``), so
    that runs which have not drawn their largest weights are not over-confident. A run
    is flagged STATUS_LOW_ESS when its final ESS is below 2 particles (one particle
    included: its s.e. then sees one weight and is meaningless or nan), or when N ≥ 100
    and the weights' Pareto k̂ (``jaxz.weights.pareto_khat``, Vehtari et al. 2024)
    exceeds ``jaxz.weights.pareto_threshold(N)`` = min(1 − 1/log10 N, 0.7): the tail is
    too heavy for the s.e. (nan where k̂ > 0.7), or when the log-weights spread so widely
    that, were they normal, N draws would stand for fewer than 2
    (``jaxz.weights.log_normal_ess``) and the Pareto fit cannot rule out a heavy tail.
    ``betas`` may be traced (a vmapped sweep over schedules); a traced schedule that does
    not increase from 0 to 1 gives log Ẑ = nan with STATUS_NONFINITE. STATUS_NONFINITE
    also flags a target whose support is larger than the path's below β = 1 (e.g. a
    U(0, 1) base for a Gaussian target),
    seen when the last move, at β = 1, takes a particle where f_{β_{K−1}} = 0: Ẑ then
    misses the target's mass outside the base's support.

    tuning: how a tunable kernel (``jaxz.kernels.hmc(path)`` etc. with no step size) is
        tuned; kernels with explicit parameters ignore it. "pilot": a pilot AIS run on
        fresh ``path.sample_base`` draws tunes each rung's parameters online, and the run
        proper replays them, so Ẑ stays exactly unbiased (cost about twice, counted in
        ``Estimate.cost``). "online": the kernel adapts to the run's own cloud before each
        move; E[Ẑ]/Z is then off by O(1/N). "auto"
        (default): "pilot" when the path has sample_base, otherwise "online".
    batch_size: None (all particles in one ``vmap``) or evaluate densities and kernel
        steps in chunks of this many particles (``lax.map``): bounded memory for large N.
    """
    return _annealer(path, kernel, betas, reverse=False, tuning=tuning, batch_size=batch_size)


def raise_(path: Path, kernel: Kernel, betas, *, tuning: str = "auto", batch_size: int | None = None) -> Estimator:
    """Reverse AIS (RAISE): the chain of ``ais`` run from β = 1 down to β = 0.

    ``betas`` is given increasing, as for ``ais``. ``init(rng_key, positions)`` takes
    draws of (or chains seeded near) f_1 — exact draws, or data-seeded states for
    models like RBMs. log Ẑ = log Z_0 − log mean(w) is a stochastic upper bound on
    log Z when the start is exact. Its s.e. and STATUS_LOW_ESS (ESS below 2, or Pareto
    k̂ of the reverse weights above ``jaxz.weights.pareto_threshold(N)``) are those of
    ``ais``, and STATUS_LOW_ESS also flags reverse weights whose Hill k̂
    (``jaxz.weights.hill_khat``) is not one s.e. below that threshold; the reverse
    weights have a Pareto tail (on a Gaussian path, k ≈ 2 Δβ c v at
    a rung of variance v), so a short ladder leaves a heavy tail, and the runs that did
    not draw it are biased high with k̂ that can still read below the threshold at small
    N. More particles in one run do what pooling runs does, and better: the 1/Ẑ of one run
    of 8N particles is the mean of eight runs' of N, and its tail check reads all 8N
    weights, where ``combine_runs(estimates, reciprocal=True)`` of 8 runs of N keeps the
    flag of any member. A tunable
    kernel is tuned online (there are no exact draws of f_1 for a pilot);
    ``tuning="pilot"`` is refused.
    """
    return _annealer(path, kernel, betas, reverse=True, tuning=tuning, batch_size=batch_size)
