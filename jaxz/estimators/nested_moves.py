"""The moves of nested SMC's levels (``jaxz.estimators.nested``): each takes the particles at
η_{t−1}, the new level ℓ_t and the survivors above it, and returns N particles of η_t with what
the level records of them (``Moved``).

- ``resample_move``: Salomone, South, Drovandi & Kroese's (2018, §3) move: the N slots resampled
  from the survivors, then ``num_moves`` kernel steps each.
- ``waste_free_move``: Dau & Chopin's (2022, Alg. 2) move: M = N/P survivors seed chains of P
  states, every state a particle of the next level.

``MoveCount`` sets the kernel steps per particle (waste-free: between kept states) level by level,
from the rank correlation of log L before and after the moves, or from the chains'
autocorrelation time (``mixing_time``).
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxz import weights as _weights
from jaxz.estimators import _chains, _moves, _particles
from jaxz.kernels.base import Population
from jaxz.resampling import resample_if_needed
from jaxz.types import Array


class Moved(NamedTuple):
    """What a level's mutation hands back: the new particles and what the step records of them."""
    kernel_states: object
    log_likelihood: Array
    acceptance: Array
    moved: Array
    memory: Array  # c_t, the correlation of the new particles' log L with their seeds'
    next_moves: Array
    capped: Array
    cost: Array
    evaluations: Array


def flat_positions(positions):
    """(N, d): each particle's pytree raveled to one vector."""
    return jax.vmap(lambda x: ravel_pytree(x)[0])(positions)


def ranks(values):
    """The ranks of ``values`` scaled to (0, 1) (ties broken by position)."""
    return (jnp.argsort(jnp.argsort(values)) + 0.5) / values.shape[0]


def correlation(a, b):
    """Pearson's correlation of ``a`` and ``b``; 1 where either is constant."""
    a, b = a - jnp.mean(a), b - jnp.mean(b)
    scale = jnp.sqrt(jnp.sum(a**2) * jnp.sum(b**2))
    return jnp.where(scale > 0, jnp.sum(a * b) / jnp.where(scale > 0, scale, 1.0), 1.0)


def mixing_time(positions, log_l_ranks):
    """The chains' autocorrelation time (``_chains.chain_autocorrelation_time``, chains of P states as (P, M)
    columns): the larger of log L's ranks' and the mean over the coordinates of the position's. log L alone
    reads a thin rotated needle as mixed while its chains crawl along it, and the levels set from them land
    too high (docs/changelog.md, waste-free nested SMC)."""
    length, num_chains = log_l_ranks.shape
    flat = flat_positions(positions).reshape(length, num_chains, -1)
    per_coordinate = jax.vmap(_chains.chain_autocorrelation_time, in_axes=2)(flat)
    return jnp.maximum(_chains.chain_autocorrelation_time(log_l_ranks), jnp.mean(per_coordinate))


def alive_weights(alive, num_alive, dtype):
    """Equal normalized log-weights on the survivors (on every particle where none survived)."""
    log_n = jnp.log(jnp.asarray(alive.shape[0], dtype))
    return jnp.where(num_alive > 0, _weights.normalize(jnp.where(alive, 0.0, -jnp.inf)), -log_n).astype(dtype)


class MoveCount(NamedTuple):
    """Moves per particle (waste-free: between kept states): ``first`` at the first level, then adapted up to
    ``cap`` (every level ``first`` where ``cap`` is None) towards ``target``."""
    first: int
    cap: int | None
    target: float

    def now(self, state):
        return state.num_moves if self.cap is not None else self.first

    def capped(self, next_moves):
        return jnp.bool_(False) if self.cap is None else next_moves >= self.cap


def resample_move(kernel, log_likelihood_fn, resample, count: MoveCount):
    """Salomone et al.'s move: resample the N survivors' slots, then ``num_moves`` kernel steps each."""
    def mutate(key_resample, key_move, state, level, alive, num_alive):
        log_l = state.log_likelihood
        num, dtype = log_l.shape[0], log_l.dtype
        log_weights = alive_weights(alive, num_alive, dtype)
        ancestors = resample_if_needed(key_resample, log_weights, resample, 1.0, force=True).ancestors
        kernel_states = _particles.take(state.kernel_states, ancestors)
        population = Population(kernel_states.position, jnp.full((num,), -jnp.log(num), dtype), level,
                                state.acceptance_rate)
        kernel_states = _moves.adapt_kernel(kernel, kernel_states, population)
        start = kernel_states.position
        moves = count.now(state)
        kernel_states, acceptance = _moves.kernel_step(kernel, key_move, kernel_states, level, moves)
        new_log_l = jax.vmap(log_likelihood_fn)(kernel_states.position).astype(dtype)
        # how much of the particles' place in the level set the moves kept: the rank correlation of log L
        # before and after (the survivors are draws of η_t, so this is the kernel's own autocorrelation)
        memory = correlation(ranks(log_l[ancestors]), ranks(new_log_l))
        next_moves = moves
        if count.cap is not None:
            next_moves = _moves.next_num_moves(start, kernel_states.position, population.log_weights, moves,
                                               count.cap, count.target)
        return Moved(kernel_states, new_log_l, acceptance, _moves.moved_fraction(start, kernel_states.position, 0),
                      memory, next_moves, count.capped(next_moves), num * moves * kernel.num_transitions,
                      # each a point's f̄_0 and L: the kernel's cache rebuilt at the new level, its proposals,
                      # and log L at the moved particles
                      num * (moves + 2))

    return mutate


def waste_free_move(kernel, log_likelihood_fn, resample, count: MoveCount, shape):
    """Dau & Chopin's (2022, Alg. 2) move: M = N/P survivors seed chains of P states (``num_moves`` kernel steps
    between kept states), and all N states are the next level's particles (state k of chain m at k·M + m)."""
    def mutate(key_resample, key_move, state, level, alive, num_alive):
        log_l = state.log_likelihood
        num, dtype = log_l.shape[0], log_l.dtype
        num_chains, length = shape(num)
        log_weights = alive_weights(alive, num_alive, dtype)
        # the scale from every survivor, not only the M seeds
        population = Population(state.kernel_states.position, log_weights, level, state.acceptance_rate)
        kernel_states = _moves.adapt_kernel(kernel, state.kernel_states, population)
        seeds = resample_if_needed(key_resample, log_weights, resample, 1.0, force=True,
                                   num_samples=num_chains).ancestors
        starts = _particles.take(kernel_states, seeds)
        moves = count.now(state)
        kernel_states, acceptance = _moves.kernel_chains(kernel, key_move, starts, level, length, moves)
        new_log_l = jax.vmap(log_likelihood_fn)(kernel_states.position).astype(dtype)
        new_ranks = ranks(new_log_l).reshape(length, num_chains)
        # each state's log-L rank against its seed's: the level's memory of the survivors it grew from
        memory = correlation(jnp.broadcast_to(ranks(log_l[seeds]), new_ranks.shape).ravel(), new_ranks.ravel())
        next_moves = moves
        if count.cap is not None:
            next_moves = _chains.waste_free_num_moves(mixing_time(kernel_states.position, new_ranks), moves, length,
                                                      count.cap)
        chains = jax.tree.map(lambda leaf: leaf.reshape((length, num_chains) + leaf.shape[1:]),
                              kernel_states.position)
        moved = _moves.moved_fraction(jax.tree.map(lambda leaf: leaf[:1], chains), chains, axis=1)
        grown = (num - num_chains) * moves
        return Moved(kernel_states, new_log_l, acceptance, moved, memory, next_moves, count.capped(next_moves),
                      grown * kernel.num_transitions,
                      # the seeds' cache rebuilt at the new level, the proposals, and log L at every state
                      num_chains + grown + num)

    return mutate

__all__ = ["Moved", "MoveCount", "resample_move", "waste_free_move", "mixing_time", "flat_positions"]
