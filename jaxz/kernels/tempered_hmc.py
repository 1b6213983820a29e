"""HMC for simulated tempering with one step size per temperature, adapted toward a
target acceptance rate during RTS's initial iterations (Carlson et al. 2016, App. E).

A single step size cannot suit every β_k: the base f_0 is broad, the target narrow.
The kernel keeps a table log ε_k in each chain's KernelState (the same table in every
chain) and integrates at ε_k for the chain's current β_k. ``adapt`` pools the
acceptance of all chains at each β_k after a sweep and takes a Robbins–Monro step

    log ε_k ← log ε_k + n_k^{−0.6} (ā_k − target_acceptance),

n_k the number of updates ε_k has had. ``jaxz.rts(..., adapt=adapt)`` calls it during
the initial iterations only, so the long run is a fixed, valid Markov chain.
"""
from typing import NamedTuple

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from jaxz import _checks
from jaxz.kernels.base import Kernel, KernelInfo, KernelState, tempered_log_density
from jaxz.kernels.base import check_inverse_mass_matrix
from jaxz.paths import Path
from jaxz.types import Array


class TemperedHMCTable(NamedTuple):
    log_step_sizes: Array  # (K,) log ε_k
    num_updates: Array  # (K,) adaptation steps taken at each β_k


def tempered_hmc(
    path: Path,
    betas,
    step_size,
    num_integration_steps: int,
    *,
    target_acceptance: float = 0.65,
    inverse_mass_matrix=None,
):
    """HMC (blackjax.hmc) at each β_k of ``betas`` with its own step size.

    Args:
      step_size: initial ε, a scalar or a (K,) array.
      target_acceptance: the acceptance rate ``adapt`` steers every ε_k toward, in (0, 1).
      inverse_mass_matrix: diagonal (flattened position) or dense; identity by default.

    Returns:
      ``(kernel, adapt)``: a Kernel (β must be one of ``betas``) and
      ``adapt(kernel_states, beta_index, acceptance_rate) -> kernel_states`` acting on
      the batched states of all chains.
    """
    betas = np.asarray(betas, float)
    num_temperatures = betas.shape[0]
    if np.ndim(step_size) not in (0, 1) or (np.ndim(step_size) == 1 and np.shape(step_size)[0] != num_temperatures):
        raise ValueError(f"step_size must be a scalar or one per temperature, shape ({num_temperatures},), "
                         f"got shape {np.shape(step_size)}")
    step_size = np.broadcast_to(np.asarray(step_size, float), (num_temperatures,))
    if not np.all(step_size > 0):
        raise ValueError(f"step_size must be > 0, got {step_size}")
    num_integration_steps = _checks.integer("num_integration_steps", num_integration_steps, 1, "leapfrog steps")
    _checks.inverse_mass_matrix("inverse_mass_matrix", inverse_mass_matrix)
    if not 0.0 < target_acceptance < 1.0:
        raise ValueError(f"target_acceptance must be in (0, 1), got {target_acceptance}")

    def init(position, beta):
        if inverse_mass_matrix is not None:
            check_inverse_mass_matrix(inverse_mass_matrix, position)
        dtype = jnp.result_type(jnp.asarray(beta))
        table = TemperedHMCTable(jnp.log(jnp.asarray(step_size, dtype)), jnp.zeros((num_temperatures,), dtype))
        return KernelState(position, table, jnp.asarray(beta))

    def step(rng_key, state, beta):
        dtype = state.inner.log_step_sizes.dtype
        beta = jnp.asarray(beta, dtype)
        index = jnp.argmin(jnp.abs(jnp.asarray(betas, dtype) - beta))
        flat, _ = ravel_pytree(state.position)
        mass = jnp.ones_like(flat) if inverse_mass_matrix is None else jnp.asarray(inverse_mass_matrix, flat.dtype)
        sampler = blackjax.hmc(
            tempered_log_density(path, beta), step_size=jnp.exp(state.inner.log_step_sizes[index]),
            inverse_mass_matrix=mass, num_integration_steps=int(num_integration_steps),
        )
        inner, info = sampler.step(rng_key, sampler.init(state.position))
        acceptance = jnp.asarray(info.acceptance_rate, dtype)
        acceptance = jnp.where(jnp.isnan(acceptance), 0.0, acceptance)  # a divergent proposal counts as rejected
        return KernelState(inner.position, state.inner, beta), KernelInfo(acceptance)

    def adapt(kernel_states, beta_index, acceptance_rate):
        table = jax.tree.map(lambda leaf: leaf[0], kernel_states.inner)  # shared by all chains
        dtype = table.log_step_sizes.dtype
        one_hot = jax.nn.one_hot(beta_index, num_temperatures, dtype=dtype)
        visits = jnp.sum(one_hot, axis=0)
        mean_acceptance = jnp.sum(one_hot * acceptance_rate[:, None], axis=0) / jnp.maximum(visits, 1.0)
        seen = visits > 0
        num_updates = table.num_updates + seen
        gain = jnp.maximum(num_updates, 1.0) ** -0.6
        log_step_sizes = table.log_step_sizes + jnp.where(seen, gain * (mean_acceptance - target_acceptance), 0.0)
        table = TemperedHMCTable(log_step_sizes, num_updates)
        num_chains = beta_index.shape[0]
        inner = jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (num_chains,) + leaf.shape), table)
        return kernel_states._replace(inner=inner)

    return Kernel(init, step), adapt


__all__ = ["tempered_hmc", "TemperedHMCTable"]
