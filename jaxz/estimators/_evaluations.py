"""What one ``jaxz.smc`` pass evaluates, read off its trace: the log-density and gradient
counts that ``jaxz.evidence`` reports (see its module docstring, "Cost"). Checked against
a log density that counts its own calls (tests/test_evidence.py)."""
import inspect
import math

import jax.numpy as jnp

from jaxz.estimators.smc import PROBE_PARTICLES, waste_free_shape
from jaxz.schedules import next_temperature


def _bisection_iterations(beta, dtype):
    """Iterations of ``jaxz.schedules.next_temperature``'s bisection from β: each halves
    a bracket of log step sizes, whichever half is kept, so the count depends on β
    alone: ⌈log₂(width / log(1 + relative_tolerance))⌉ from the width
    log(1 − β) − log(smallest step), capped at max_iterations (its defaults, read from
    its signature)."""
    defaults = {name: p.default for name, p in inspect.signature(next_temperature).parameters.items()}
    finfo = jnp.finfo(dtype)
    remaining = 1.0 - beta
    smallest = jnp.minimum(jnp.maximum(defaults["tolerance"], 8 * finfo.eps * jnp.abs(beta)), remaining)
    width = jnp.log(jnp.maximum(remaining, finfo.tiny)) - jnp.log(jnp.maximum(smallest, finfo.tiny))
    resolution = math.log1p(defaults["relative_tolerance"])
    iterations = jnp.ceil(jnp.log2(jnp.maximum(width, resolution) / resolution))
    return jnp.minimum(iterations, defaults["max_iterations"])


def _vmapped_leapfrog_steps(mean_steps, num_particles):
    """Leapfrog steps evaluated per particle and trajectory when ``num_particles``
    trajectories of ⌊L + U_i⌋ steps run as one vmapped loop: the loop runs to the
    longest, the shorter ones masked, so each particle costs the maximum, whose mean is
    ⌊L⌋ + 1 − (1 − frac(L))^N."""
    whole = jnp.floor(mean_steps)
    return whole + 1.0 - (1.0 - (mean_steps - whole)) ** num_particles


def _smc_evaluations(trace, num_steps, num_particles, dtype, *, adaptive, movers, chain_starts, width, affine):
    """(log densities, gradients) of one ``jaxz.smc`` pass from its trace.

    Per stage t (β_{t−1} → β_t): log f at β_{t−1} once, then with an adaptive schedule
    the bisection's points, f at β' = 1, twice at the chosen β_t (its increments and
    its ESS check) and the reweighting; with a fixed one the reweighting only; on an
    affine path (``Path.affine``) f_0 and f_1 once, every β read off the line. Moves:
    ``chain_starts`` particles refresh their gradient at the new β, then ``movers``
    particles × moves trajectories of L leapfrog steps each (one gradient per step).
    The N gradients of the kernels' initialization at β = 0 are added here too."""
    stages = jnp.arange(trace.beta.shape[0]) < num_steps
    beta_before = jnp.concatenate([jnp.zeros((1,), dtype), trace.beta[:-1].astype(dtype)])
    per_stage = 2.0
    if adaptive and not affine:
        per_stage = _bisection_iterations(beta_before, dtype) + 5.0
    log_densities = num_particles * jnp.sum(jnp.where(stages, per_stage, 0.0))
    steps = _vmapped_leapfrog_steps(trace.kernel_parameters.num_integration_steps, width)
    trajectories = movers * trace.num_mcmc_steps
    # The step-size rescue's trial steps (each a gradient at the new β, then its
    # trajectory), counted at the stage's final L: trials shrink the step, so this is
    # the most any of them took.
    probes = trace.probe_transitions * (1.0 + _vmapped_leapfrog_steps(trace.kernel_parameters.num_integration_steps,
                                                                       min(PROBE_PARTICLES, num_particles)))
    gradients = num_particles + jnp.sum(jnp.where(stages, chain_starts + trajectories * steps + probes, 0.0))
    return log_densities, gradients


def _counter(options, num_particles, affine=False, gradients=True):
    """A function of one run's (trace, num_steps, final SMC state) -> (log densities,
    gradients), for the ``jaxz.smc`` options given. ``gradients=False``: a kernel
    without gradients (random walk: one log density per proposal and per cache
    refresh, its trace's L = 1), whose moves are counted as log densities."""
    waste_free = bool(options.get("waste_free", False))
    fixed = options.get("betas") is not None
    two_pass = not fixed and options.get("schedule", "adaptive") == "two_pass"
    gradient_kernel = gradients
    movers, chain_starts = num_particles, num_particles
    if waste_free:  # Dau & Chopin (2022), Alg. 2: M chains of P states, shaped as jaxz.smc shapes them
        chain_starts, _ = waste_free_shape(num_particles, options.get("num_chains"), options.get("chain_length"))
        movers = num_particles - chain_starts
    width = chain_starts  # particles (waste-free: chains) that one vmapped kernel step moves

    def count(trace, num_steps, state):
        dtype = state.log_weights.dtype
        log_densities, gradients = _smc_evaluations(trace, num_steps, num_particles, dtype, adaptive=not fixed and
                                                    not two_pass, movers=movers, chain_starts=chain_starts, width=width,
                                                    affine=affine)
        if two_pass:  # the pilot: an adaptive pass whose schedule and parameters the trace replays
            ladder, parameters, moves, probes = state.schedule
            pilot_steps = jnp.sum(ladder[:-1] < 1.0)
            pilot = type(trace)(ladder[1:], None, None, None, None, parameters, moves, probes)
            pilot_log, pilot_gradients = _smc_evaluations(pilot, pilot_steps, num_particles, dtype, adaptive=True,
                                                          movers=movers, chain_starts=chain_starts, width=width,
                                                          affine=affine)
            log_densities, gradients = log_densities + pilot_log, gradients + pilot_gradients
        if not gradient_kernel:
            log_densities, gradients = log_densities + gradients, jnp.zeros_like(gradients)
        # finalize's support check: log f_0 at every particle (jaxz.smc, STATUS_NONFINITE)
        return log_densities + num_particles, gradients

    return count
