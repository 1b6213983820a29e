"""A random walk whose proposals span many scales: moves that follow mass far below the
particles' spread.

Each move of ``multiscale_rwmh`` is two Metropolis–Hastings steps, both invariant for f_β:

1. the tuned Gaussian random walk (``jaxz.kernels.rwmh``): x' = x + ε L ξ, ξ ~ N(0, I),
   with L L^T the particles' covariance and ε tuned toward the acceptance target from this
   step's acceptance alone;
2. the same walk with each coordinate's step shrunk by a factor s_i = exp(−u b_i), where
   u ~ U(0, log(1/SMALLEST_SCALE)) is shared by the coordinates and b_i ∈ {0, 1} says which
   are shrunk: all of them with probability 1/2 (a point singularity), else each with
   probability 1/2 (a singular subspace such as x₁ = 0).

The shrink factors are drawn independently of x, so the second proposal is a mixture of
symmetric Gaussian steps and is symmetric itself: its acceptance ratio is f_β(x')/f_β(x)
(the lecture notes' Metropolis step; Roberts & Rosenthal 2009 for mixtures of scales). Where
f has a power-law singularity, f(x) ∝ |x₁|^(−a), the posterior puts comparable mass on every
decade of |x₁|; the tuned step (of the order of the particles' spread) proposes almost
nothing that keeps a particle near the singularity, and a step at the particle's own
distance from it is proposed with probability of order 1/log(1/SMALLEST_SCALE) per decade.
A move costs two log densities (``num_integration_steps`` = 2 in the kernel's parameters, so
the estimators count both).
"""
import math

import blackjax
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxz.kernels.base import Kernel
from jaxz.kernels.tuning import RWMH_EXPONENT, RWMH_TARGET, _factor, _flat_map, rwmh_initial_step, tuned_kernel
from jaxz.paths import Path

SMALLEST_SCALE = 1e-9  # the smallest shrink factor: nine decades below the tuned step
ALL_SHRUNK = 0.5  # probability that every coordinate is shrunk (else each one with probability 1/2)
STEPS_PER_MOVE = 2  # the tuned step, then the shrunk one: two log densities per move


def shrink_factors(rng_key, dim: int, dtype):
    """The step-2 factors s_i = exp(−u b_i) (module docstring), shape (dim,)."""
    key_u, key_all, key_each = jax.random.split(rng_key, 3)
    u = jax.random.uniform(key_u, (), dtype, 0.0, math.log(1.0 / SMALLEST_SCALE))
    shrunk = jax.random.bernoulli(key_all, ALL_SHRUNK) | jax.random.bernoulli(key_each, 0.5, (dim,))
    return jnp.where(shrunk, jnp.exp(-u), 1.0).astype(dtype)


def multiscale_rwmh(path: Path, *, mass_matrix: str = "diagonal", target_acceptance: float = RWMH_TARGET) -> Kernel:
    """Tuned random-walk Metropolis followed by a step at a random smaller scale (module
    docstring), for ``jaxz.smc`` and ``jaxz.ais``: the proposal covariance is ε² × the
    particles' weighted covariance (``mass_matrix`` "diagonal" or "dense"), ε tuned from
    the first step's acceptance toward ``target_acceptance``."""
    build = blackjax.additive_step_random_walk.build_kernel()
    dense = mass_matrix == "dense"

    def move(rng_key, inner, log_density, parameters):
        key_step, key_shrink, key_factors = jax.random.split(rng_key, 3)
        factor = _factor(parameters.inverse_mass_matrix, dense)
        full_step = blackjax.mcmc.random_walk.normal(parameters.step_size * factor)
        inner, info = build(key_step, inner, log_density, full_step)
        flat, unravel = ravel_pytree(inner.position)
        shrink = shrink_factors(key_factors, flat.shape[0], flat.dtype)

        def shrunk_step(key, position):
            del position  # the step does not depend on where it starts: a symmetric proposal
            noise = jax.random.normal(key, flat.shape, flat.dtype)
            return unravel(parameters.step_size * _flat_map(factor, dense, shrink * noise))

        inner, _ = build(key_shrink, inner, log_density, shrunk_step)
        return inner, info.acceptance_rate

    return tuned_kernel(
        path, inner_init=blackjax.additive_step_random_walk.init, move=move, initial_step=rwmh_initial_step,
        exponent=RWMH_EXPONENT, target_acceptance=target_acceptance, mass_matrix=mass_matrix,
        inverse_mass_matrix=None, num_integration_steps=STEPS_PER_MOVE, trajectory_length=None,
    )


__all__ = ["multiscale_rwmh", "shrink_factors", "SMALLEST_SCALE"]
