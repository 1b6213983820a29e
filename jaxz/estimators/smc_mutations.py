"""Mutation parts of the SMC engine (``smc_engine.Mutation``): how the reweighted
particles are resampled and moved.

- ``resample_move``: resample when the ESS is low, then move every particle with
  ``num_moves`` kernel steps invariant for f_{β_{t+1}} (Gilks & Berzuini 2001; Chopin
  2002; the lecture notes' resample-move).
- ``waste_free``: resample M of the N = M·P particles and run M chains of P states,
  keeping every state (Dau & Chopin 2022, Alg. 2).

Both tune the kernel before they move (``tuned``: from the weighted particles, or a
pilot's parameters when the schedule is replayed) and, for a tunable kernel, rescue a
step size that nothing accepts (``_moves.step_size_rescue``).
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxz import weights as _weights
from jaxz.estimators import _chains, _genealogy, _moves, _particles
from jaxz.estimators.smc_engine import Moves, Mutation
from jaxz.resampling import resample_if_needed

DECORRELATIONS = ("position", "log_density")


class MoveCount(NamedTuple):
    """How many kernel moves a stage runs: ``first`` always, or (``max_moves`` given)
    adapted from the previous stage's measured decorrelation, starting at ``first``."""
    first: int
    max_moves: int | None = None

    @property
    def adaptive(self) -> bool:
        return self.max_moves is not None


def tuned(kernel, state, population, replay: bool, count: MoveCount):
    """The kernel states with this stage's parameters, and its number of moves: the
    pilot's (replayed schedule), or adapted from the population before the move."""
    if replay:
        _, pilot_parameters, pilot_moves, _ = state.schedule
        parameters = jax.tree.map(lambda leaf: leaf[state.index], pilot_parameters)
        kernel_states = state.kernel_states
        if kernel.adapt is not None:
            kernel_states = kernel_states._replace(parameters=parameters)
        return kernel_states, (pilot_moves[state.index] if count.adaptive else count.first)
    kernel_states = _moves.adapt_kernel(kernel, state.kernel_states, population)
    return kernel_states, (state.num_mcmc_steps if count.adaptive else count.first)


def _rescue_for(kernel, replay, batch_size):
    """The step-size rescue, or None (an untuned kernel, or a pilot's parameters replayed)."""
    return None if replay else _moves.step_size_rescue(kernel, batch_size)


def _rescue_keys(rescue, key_resample):
    """(resampling key, rescue key): where a rescue runs it gets a key of its own, split from
    the resampling key (with partitionable threefry fold_in(k, 1) is split(k, n)[1], drawn
    from k's own stream); without one the resampling key is left as it is."""
    if rescue is None:
        return key_resample, None
    key_resample, key_rescue = jax.random.split(key_resample)
    return key_resample, key_rescue


def _rescued(rescue, key_rescue, kernel_states, population):
    """The kernel states after the rescue (where one runs) and its trial transitions."""
    if rescue is None:
        return kernel_states, 0
    return rescue(key_rescue, kernel_states, population)


def resample_move(path, kernel, *, resampling, resample_ess, count: MoveCount, replay=False, batch_size=None,
                  decorrelation="position", decorrelation_target=_moves.DECORRELATION_TARGET) -> Mutation:
    """Resample when ESS < ``resample_ess``·N (``resampling``: a scheme of
    ``jaxz.resampling`` or its name), then move every particle with the kernel."""
    resampling, genealogy_valid = _particles.resampler(resampling)
    rescue = _rescue_for(kernel, replay, batch_size)

    def move(keys, state, population, increments, ess, log_target):
        key_resample, key_move = keys
        key_resample, key_rescue = _rescue_keys(rescue, key_resample)
        num_particles = population.log_weights.shape[0]
        dtype = population.log_weights.dtype
        kernel_states, num_moves = tuned(kernel, state, population, replay, count)
        chosen = resample_if_needed(key_resample, population.log_weights, resampling, resample_ess, ess=ess)
        kernel_states = _particles.take(kernel_states, chosen.ancestors)
        kernel_states, probe_cost = _rescued(rescue, key_rescue, kernel_states, population)
        start = kernel_states.position
        kernel_states, acceptance = _moves.kernel_step(kernel, key_move, kernel_states, population.beta, num_moves,
                                                       batch_size)
        next_moves = state.num_mcmc_steps
        if count.adaptive:
            next_moves = _next_moves(start, kernel_states, log_target[chosen.ancestors], chosen.log_weights,
                                     num_moves, population.beta)
        updates = dict(
            kernel_states=kernel_states, log_weights=chosen.log_weights,
            genealogy=_genealogy.resample(state.genealogy, population.log_weights, chosen.ancestors,
                                          chosen.resampled),
            acceptance_rate=acceptance.astype(dtype), num_mcmc_steps=next_moves,
            moved=_moves.moved_fraction(start, kernel_states.position, axis=0).astype(dtype),
            cost=state.cost + num_particles * num_moves * kernel.num_transitions + probe_cost,
        )
        gradients = _moves.move_evaluations(kernel_states, num_particles, num_particles * num_moves, num_particles,
                                            probe_cost, num_particles)
        return updates, chosen.resampled, Moves(num_moves, probe_cost, 0.0, gradients)

    def _next_moves(start, kernel_states, start_log_target, log_weights, num_moves, beta):
        """The adapted number of moves for the next stage, from how far this one decorrelated
        the positions, or log f_{β_{t+1}} before and after (``decorrelation``)."""
        if decorrelation == "position":
            return _moves.next_num_moves(start, kernel_states.position, log_weights, num_moves, count.max_moves,
                                         decorrelation_target)
        num_particles = log_weights.shape[0]
        end_log_target = _cached_log_density(kernel_states, num_particles)
        if end_log_target is None:
            end_log_target = _particles.log_densities(path, kernel_states.position, beta, batch_size)
        finite = jnp.isfinite(start_log_target) & jnp.isfinite(end_log_target)  # a dead particle weighs 0
        return _moves.next_num_moves(jnp.where(finite, start_log_target, 0.0)[:, None],
                                     jnp.where(finite, end_log_target, 0.0)[:, None], log_weights,
                                     num_moves, count.max_moves, decorrelation_target)

    return Mutation(move, families=lambda num_particles: num_particles,
                    genealogy_valid=genealogy_valid, first_moves=count.first)


def waste_free(kernel, *, resampling, count: MoveCount, num_chains=None, chain_length=None, replay=False,
               batch_size=None) -> Mutation:
    """Dau & Chopin (2022), Alg. 2: resample M of the N particles, run M chains of P
    states from them, keep all N states (equal weights again).

    Seen over chains this is standard SMC with M particles: particle m is the whole
    chain (state k of chain m at index k·M + m), its potential the mean of its P weights,
    G_t(chain) = (1/P) Σ_k w_t(x_{k,m}), so Ẑ's factor (1/N) Σ_n w_t(x_n) = (1/M) Σ_m
    G_t(chain_m). The chains of a stage are conditionally independent given the previous
    one, so the genealogy estimator of Lee & Whiteley (2018) applies with the chains as
    particles; their ancestry carries the dependence across stages that the per-stage
    chain variance (Dau & Chopin 2022, §3.4, ``SMCState.log_z_variance``) leaves out."""
    resampling, genealogy_valid = _particles.resampler(resampling)
    rescue = _rescue_for(kernel, replay, batch_size)

    def shape(num_particles):
        return _chains.waste_free_shape(num_particles, num_chains, chain_length)

    def move(keys, state, population, increments, ess, log_target):
        key_resample, key_move = keys
        key_resample, key_rescue = _rescue_keys(rescue, key_resample)
        log_weights = population.log_weights
        num_particles = log_weights.shape[0]
        dtype = log_weights.dtype
        num_chains_, length = shape(num_particles)
        kernel_states, num_moves = tuned(kernel, state, population, replay, count)
        increment_variance, tau = _chains.weight_statistics(increments, num_chains_)
        if count.adaptive and not replay:  # the first stage's particles are no chains: keep the start
            num_moves = jnp.where(state.index > 0,
                                  _chains.waste_free_num_moves(tau, num_moves, length, count.max_moves), num_moves)
        seeds = resampling(key_resample, log_weights, num_chains_)
        chain_log_weights = _weights.logsumexp(log_weights.reshape(length, num_chains_).T)
        starts = _particles.take(kernel_states, seeds)
        starts, probe_cost = _rescued(rescue, key_rescue, starts, population)
        kernel_states, acceptance = _moves.kernel_chains(kernel, key_move, starts, population.beta, length,
                                                         num_moves, batch_size)
        # a chain moved if any of its P states differs from its seed
        chains = jax.tree.map(lambda leaf: leaf.reshape((length, num_chains_) + leaf.shape[1:]),
                              kernel_states.position)
        moved = _moves.moved_fraction(jax.tree.map(lambda leaf: leaf[:1], chains), chains, axis=1)
        updates = dict(
            kernel_states=kernel_states, log_weights=jnp.full((num_particles,), -jnp.log(num_particles), dtype),
            genealogy=_genealogy.resample(state.genealogy, chain_log_weights, seeds % num_chains_, jnp.bool_(True),
                                          _chains.WASTE_FREE_LAGS),
            acceptance_rate=acceptance.astype(dtype), moved=moved.astype(dtype),
            num_mcmc_steps=jnp.asarray(num_moves, jnp.int32),
            log_z_variance=state.log_z_variance + increment_variance.astype(dtype),
            cost=state.cost + (num_particles - num_chains_) * num_moves * kernel.num_transitions + probe_cost,
        )
        gradients = _moves.move_evaluations(kernel_states, num_chains_, (num_particles - num_chains_) * num_moves,
                                            num_chains_, probe_cost, num_particles)
        return updates, jnp.bool_(True), Moves(num_moves, probe_cost, 0.0, gradients)

    return Mutation(move, families=lambda num_particles: shape(num_particles)[0], chain_lags=_chains.WASTE_FREE_LAGS,
                    chain_shape=shape, genealogy_valid=genealogy_valid, first_moves=count.first)


def _cached_log_density(kernel_states, num_particles):
    """The log f_β that a kernel's state caches at its position (blackjax's HMC, MALA and
    random-walk states: ``inner.logdensity``), shape (N,), or None."""
    value = getattr(getattr(kernel_states, "inner", None), "logdensity", None)
    if value is None or jnp.shape(value) != (num_particles,):
        return None
    return value


__all__ = ["resample_move", "waste_free", "tuned", "MoveCount", "DECORRELATIONS"]
