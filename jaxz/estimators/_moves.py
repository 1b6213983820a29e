"""Moving particles with a kernel: vmapped init and steps over a batch of kernel states
(β and the tunable parameters shared by all particles, unbatched), chains of moves with
their counts, and the population-based adaptation of the kernel's parameters. Used by
``jaxz.smc`` and ``jaxz.ais``; the rest of the particle mechanics (densities, reweighting,
resampling, error bars) is in ``jaxz.estimators._particles``."""
import functools

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxz import reduction
from jaxz.estimators._particles import _shares_beta, first_particle, over_particles, take
from jaxz.kernels.base import KernelState
from jaxz.types import Array

# vmap axes of a batch of kernel states: the particle axis everywhere except β and the
# tunable parameters, which all particles share.
_SHARED_AXES = KernelState(0, 0, None, None)
# Adaptive number of moves: aim at this start-to-end correlation of the particles. Small, because a rejected move
# keeps a resampled duplicate where it was, and duplicates left together bias the next temperatures (a target of 0.1
# left log Ẑ nats low on narrow Gaussians).
DECORRELATION_TARGET = 0.01


def _shared_beta_axes(kernel, positions, beta):
    """vmap axes for a batch of kernel states: the particle axis everywhere except β
    and the kernel's parameters, which all particles share. Kept unbatched, a kernel's
    "has β changed?" test stays one real branch under vmap instead of a per-particle
    select that computes both sides, and a shared step size or mass matrix is used
    (and factorized) once per step, not once per particle."""
    one = jax.tree.map(lambda leaf: leaf[0], positions)
    state = jax.eval_shape(kernel.init, one, beta)
    return _SHARED_AXES if isinstance(state, KernelState) else 0


def kernel_init(kernel, positions, beta, batch_size=None):
    """Kernel states of every particle at a common β (leading axis = particles)."""
    axes = _shared_beta_axes(kernel, positions, beta)
    if batch_size is None:
        return jax.vmap(kernel.init, in_axes=(0, None), out_axes=axes)(positions, beta)
    if axes != _SHARED_AXES:
        return over_particles(lambda x: kernel.init(x, beta), positions, batch_size)
    shared = kernel.init(first_particle(positions), beta)  # β and parameters, common to all

    def one(x):
        state = kernel.init(x, beta)
        return state.position, state.inner

    position, inner = over_particles(one, positions, batch_size)
    return KernelState(position, inner, shared.beta, shared.parameters)


def _vmapped_step(kernel, kernel_states, batch_size=None, cached=False):
    """The kernel's step over every particle (keys, states) at a common β, vmapped or in
    chunks of ``batch_size`` particles. ``cached``: ``kernel.cached_step`` at the states'
    own β (the β argument is then ignored)."""
    if cached:
        def one_step(key, state, beta):
            return kernel.cached_step(key, state)
    else:
        one_step = kernel.step
    shared = _shares_beta(kernel_states)
    axes = _SHARED_AXES if shared else 0
    if batch_size is None:
        return jax.vmap(one_step, in_axes=(0, axes, None), out_axes=(axes, 0))
    if not shared:
        return lambda keys, states, beta: over_particles(
            lambda args: one_step(args[0], args[1], beta), (keys, states), batch_size)

    def step(keys, states, beta):
        def one(args):
            key, position, inner = args
            state, info = one_step(key, KernelState(position, inner, states.beta, states.parameters), beta)
            return (state.position, state.inner), info

        (position, inner), info = over_particles(one, (keys, states.position, states.inner), batch_size)
        beta = states.beta if cached else jnp.asarray(beta, jnp.result_type(states.beta))
        return KernelState(position, inner, beta, states.parameters), info

    return step


def kernel_step(kernel, rng_key, kernel_states, beta, num_steps: int = 1, batch_size=None, refresh=True):
    """Apply the kernel ``num_steps`` times to every particle at the common β; mean
    acceptance rate out. ``num_steps`` is a static int (a ``scan``), or a traced
    int32 (an adapted count: a ``fori_loop``, keys folded in by step).

    The first step moves the particles to β (``kernel.step``: its cache rebuilt where β
    changed); the later ones, and all of them with ``refresh=False`` (the states are
    at β already), use ``kernel.cached_step`` where the kernel has one, so that runs
    vmapped with different β do not pay a cache rebuild (a select of both sides of the
    kernel's ``lax.cond``) at every move."""
    positions = kernel_states.position
    num_particles = jax.tree.leaves(positions)[0].shape[0]
    step = _vmapped_step(kernel, kernel_states, batch_size)
    later = step
    if kernel.cached_step is not None and _shares_beta(kernel_states):
        later = _vmapped_step(kernel, kernel_states, batch_size, cached=True)
    first = step if refresh else later

    def body(move, states, key):
        states, info = move(jax.random.split(key, num_particles), states, beta)
        return states, reduction.mean(info.acceptance_rate, axis=0)  # fixed order on any device layout

    if isinstance(num_steps, int):
        keys = jax.random.split(rng_key, num_steps)
        if num_steps == 0:
            return kernel_states, jnp.asarray(jnp.nan, jnp.result_type(float))
        kernel_states, acceptance = body(first, kernel_states, keys[0])
        if num_steps == 1:
            return kernel_states, acceptance
        kernel_states, rest = jax.lax.scan(functools.partial(body, later), kernel_states, keys[1:])
        return kernel_states, jnp.mean(jnp.concatenate([acceptance[None], rest]))

    def loop_body(i, carry):
        states, total = carry
        states, acceptance = body(later, states, jax.random.fold_in(rng_key, i))
        return states, total + acceptance

    # the first step outside the loop (kept only where num_steps >= 1), the rest cached
    moved, acceptance = body(first, kernel_states, jax.random.fold_in(rng_key, 0))
    any_step = num_steps >= 1
    kernel_states = jax.tree.map(lambda new, old: jnp.where(any_step, new, old), moved, kernel_states)
    total = jnp.where(any_step, acceptance, 0.0).astype(jnp.result_type(float))
    kernel_states, total = jax.lax.fori_loop(1, num_steps, loop_body, (kernel_states, total))
    return kernel_states, total / jnp.maximum(num_steps, 1)


def kernel_chains(kernel, rng_key, kernel_states, beta, chain_length: int, thinning: int = 1, batch_size=None):
    """Run a chain of ``chain_length`` states from every particle (the start included,
    ``thinning`` kernel steps between kept states) and keep every state: the move of
    waste-free SMC (Dau & Chopin 2022, Alg. 2). Out: the M · P states, ordered step by
    step (index k · M + m is state k of chain m), and the mean acceptance rate."""

    def body(refresh, states, key):
        states, acceptance = kernel_step(kernel, key, states, beta, thinning, batch_size, refresh)
        return states, (states, acceptance)

    keys = jax.random.split(rng_key, chain_length - 1)
    if chain_length == 1:
        _, (chains, acceptance) = jax.lax.scan(functools.partial(body, True), kernel_states, keys)
    else:  # the first step moves the seeds to β, the later ones read the cache at β
        states, first = body(True, kernel_states, keys[0])
        _, rest = jax.lax.scan(functools.partial(body, False), states, keys[1:])
        chains, acceptance = jax.tree.map(lambda one, more: jnp.concatenate([one[None], more]), first, rest)
    shared = _shares_beta(kernel_states)

    def flatten(first, rest):
        return jnp.concatenate([first[None], rest]).reshape((-1,) + first.shape[1:])

    if shared:
        states = KernelState(
            jax.tree.map(flatten, kernel_states.position, chains.position),
            jax.tree.map(flatten, kernel_states.inner, chains.inner),
            kernel_states.beta if chain_length == 1 else chains.beta[-1],
            kernel_states.parameters,
        )
    else:
        states = jax.tree.map(flatten, kernel_states, chains)
    return states, jnp.mean(acceptance)


def adapt_kernel(kernel, kernel_states, population):
    """The kernel states with their shared parameters replaced by
    ``kernel.adapt(parameters, population)`` (unchanged for a kernel without adapt)."""
    if kernel.adapt is None or not isinstance(kernel_states, KernelState):
        return kernel_states
    return kernel_states._replace(parameters=kernel.adapt(kernel_states.parameters, population))


# Step-size rescue: before each move of a tuned kernel, PROBE_PARTICLES of the particles
# about to move take one trial step; while their acceptance is below MIN_PROBE_ACCEPTANCE
# the step is re-adapted (at most MAX_PROBES times). The between-stage adaptation alone
# shrinks the step by a bounded factor per stage, too slowly where the mass matrix from the
# particles' covariance spans the gaps between modes (the eggbox of Feroz, Hobson & Bridges
# 2009; benchmarks/results/evidence_suite.md).
PROBE_PARTICLES = 64
MIN_PROBE_ACCEPTANCE = 0.1
MAX_PROBES = 12


def step_size_rescue(kernel, batch_size=None):
    """A wrapper of ``kernel``'s tuning: ``rescue(rng_key, kernel_states, population) ->
    (kernel_states, trial transitions)``. PROBE_PARTICLES of the states about to move,
    drawn at random, take one trial step; while fewer than MIN_PROBE_ACCEPTANCE of their
    proposals are accepted, ``kernel.adapt`` is applied again with that acceptance
    (MAX_PROBES times at most). None for a kernel without ``adapt``."""
    if kernel.adapt is None:
        return None

    def rescue(rng_key, kernel_states, population):
        if not isinstance(kernel_states, KernelState):
            return kernel_states, 0
        num_particles = jax.tree.leaves(kernel_states.position)[0].shape[0]
        num_probes = min(num_particles, PROBE_PARTICLES)
        key_pick, key_steps = jax.random.split(rng_key)
        probes = take(kernel_states, jax.random.randint(key_pick, (num_probes,), 0, num_particles))
        acceptance_dtype = jnp.result_type(float)

        def low(carry):
            _, acceptance, count = carry
            return (acceptance < MIN_PROBE_ACCEPTANCE) & (count < MAX_PROBES)

        def trial(carry):
            parameters, acceptance, count = carry
            parameters = jax.lax.cond(
                count > 0, lambda: kernel.adapt(parameters, population._replace(acceptance_rate=acceptance)),
                lambda: parameters)
            _, acceptance = kernel_step(kernel, jax.random.fold_in(key_steps, count),
                                        probes._replace(parameters=parameters), population.beta, 1, batch_size)
            return parameters, acceptance.astype(acceptance_dtype), count + 1

        parameters, _, count = jax.lax.while_loop(
            low, trial, (kernel_states.parameters, jnp.zeros((), acceptance_dtype), jnp.int32(0)))
        return kernel_states._replace(parameters=parameters), count * num_probes * kernel.num_transitions

    return rescue


def vmapped_trajectory_steps(mean_steps, num_particles):
    """Leapfrog steps evaluated per particle and trajectory when ``num_particles``
    trajectories of ⌊L + U_i⌋ steps run as one vmapped loop: the loop runs to the
    longest, the shorter ones masked, so each particle costs the maximum, whose mean is
    ⌊L⌋ + 1 − (1 − frac(L))^N."""
    whole = jnp.floor(mean_steps)
    return whole + 1.0 - (1.0 - (mean_steps - whole)) ** num_particles


def move_evaluations(kernel_states, num_refreshed, num_trajectories, width, probe_transitions, num_particles):
    """Gradient evaluations of one stage's moves (log densities for a gradient-free
    kernel): ``num_refreshed`` states rebuild their cache at the new β, then
    ``num_trajectories`` trajectories of the tuned ⌊L + U⌋ leapfrog steps run, ``width`` of
    them vmapped together (``vmapped_trajectory_steps``), and the rescue's trial
    transitions each refresh a cache and run a trajectory (counted at the stage's final L:
    trials shrink the step, so this is the most any took). A kernel without tuned
    parameters counts one evaluation per transition (HMC with a fixed step: a lower bound)."""
    mean_steps = getattr(getattr(kernel_states, "parameters", None), "num_integration_steps", None)
    if mean_steps is None:
        return num_refreshed + num_trajectories + probe_transitions
    steps = vmapped_trajectory_steps(mean_steps, width)
    probe_steps = vmapped_trajectory_steps(mean_steps, min(PROBE_PARTICLES, num_particles))
    return num_refreshed + num_trajectories * steps + probe_transitions * (1.0 + probe_steps)


__all__ = ["kernel_init", "kernel_step", "kernel_chains", "adapt_kernel", "step_size_rescue",
           "vmapped_trajectory_steps", "move_evaluations"]


def next_num_moves(start, end, log_weights, num_moves, max_moves, target=DECORRELATION_TARGET):
    """Moves for the next stage: with ρ the mean over coordinates of the weighted
    correlation between the particles before (``start``) and after (``end``) this
    stage's ``num_moves`` moves, a per-move autocorrelation ρ^{1/num_moves} needs
    ⌈log target / log ρ^{1/num_moves}⌉ moves to bring it to ``target``.

    ρ is read no lower than its own noise, 1/√(ESS·d) (the sd of a mean of d sample
    correlations at ESS effective particles where the true one is 0): below that, the
    particles say only that the moves reached it, not how far beyond. Where that noise exceeds
    ``target`` (few effective particles or coordinates: 1/√ESS with ``decorrelation=
    "log_density"``, which ``jaxz.evidence`` uses for its random walk) the count never falls
    and climbs towards ``max_moves``: no run can show it decorrelated that far. Without the
    floor, a correlation the noise put near 0 cuts the next stage's moves sharply, and the
    temperatures chosen from particles left near their resampled ancestors bias log Ẑ
    beyond its s.e."""
    weights = jnp.exp(log_weights)
    flat_start = jax.vmap(lambda x: ravel_pytree(x)[0])(start)
    flat_end = jax.vmap(lambda x: ravel_pytree(x)[0])(end)
    def weighted_sum(values):  # over particles, in one fixed order on any device layout
        return reduction.sum(weights[:, None] * values, axis=0)

    centred_start = flat_start - weighted_sum(flat_start)
    centred_end = flat_end - weighted_sum(flat_end)
    covariance = weighted_sum(centred_start * centred_end)
    scale = jnp.sqrt(weighted_sum(centred_start**2) * weighted_sum(centred_end**2))
    correlation = jnp.mean(jnp.where(scale > 0, covariance / jnp.where(scale > 0, scale, 1.0), 1.0))
    # the weights are normalized: Σ_i w_i² = 1/ESS, so the noise is sqrt(Σ w² / d)
    noise = jnp.sqrt(weighted_sum(weights[:, None])[0] / flat_start.shape[1])
    correlation = jnp.clip(correlation, jnp.maximum(noise, 1e-6), 1.0 - 1e-6)
    per_move = jnp.log(correlation) / num_moves
    needed = jnp.ceil(jnp.log(target) / per_move)
    return jnp.clip(needed, 1, max_moves).astype(jnp.int32)


def moved_fraction(start, end, axis: int) -> Array:
    """The fraction of particles (or chains) whose continuous state in ``end`` differs
    anywhere from ``start`` (leading axis = particles; with ``axis=1``, ``end`` is
    (P, M, …) chains and ``start`` their (1, M, …) seeds: a chain moved if any state
    differs). 1 for discrete states: a Gibbs move that keeps a spin keeps it legitimately."""
    leaves = [(a, b) for a, b in zip(jax.tree.leaves(start), jax.tree.leaves(end))
              if jnp.issubdtype(b.dtype, jnp.floating)]
    if not leaves:
        return jnp.ones(())
    changed = [jnp.any((a != b).reshape(b.shape[: axis + 1] + (-1,)), axis=-1) for a, b in leaves]
    changed = jnp.any(jnp.stack(changed), axis=0)
    if axis == 1:
        changed = jnp.any(changed, axis=0)
    return jnp.mean(changed.astype(jnp.result_type(float)))
