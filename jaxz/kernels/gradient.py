"""Gradient-based and random-walk kernels: thin adapters over blackjax."""
import blackjax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxz.kernels.base import Kernel, from_blackjax
from jaxz.paths import Path


def _check_positive(name, value):
    if not float(value) > 0:
        raise ValueError(f"{name} must be > 0, got {value}")


def check_inverse_mass_matrix(inverse_mass_matrix, position, name: str = "inverse_mass_matrix"):
    """A diagonal (d,) or dense (d, d) inverse mass matrix for a position that flattens
    to d numbers (shapes are static: this runs at trace time)."""
    size = ravel_pytree(position)[0].shape[0]
    shape = jnp.shape(inverse_mass_matrix)
    if shape not in ((size,), (size, size)):
        raise ValueError(f"{name} must have shape ({size},) (diagonal) or ({size}, {size}) (dense) for a position "
                         f"of {size} numbers, got {shape}")


def hmc(path: Path, step_size, num_integration_steps: int, inverse_mass_matrix=None) -> Kernel:
    """Hamiltonian Monte Carlo (blackjax.hmc) at each β. ``inverse_mass_matrix``
    defaults to the identity of the flattened position."""
    _check_positive("step_size", step_size)
    if int(num_integration_steps) < 1:
        raise ValueError(f"num_integration_steps must be >= 1, got {num_integration_steps}")
    if inverse_mass_matrix is not None:
        kernel = from_blackjax(
            blackjax.hmc, path, step_size=step_size,
            inverse_mass_matrix=jnp.asarray(inverse_mass_matrix), num_integration_steps=int(num_integration_steps),
        )

        def checked_init(position, beta):
            check_inverse_mass_matrix(inverse_mass_matrix, position)
            return kernel.init(position, beta)

        return kernel._replace(init=checked_init)

    def with_identity_mass(position):
        flat, _ = ravel_pytree(position)
        return from_blackjax(
            blackjax.hmc, path, step_size=step_size,
            inverse_mass_matrix=jnp.ones_like(flat), num_integration_steps=int(num_integration_steps),
        )

    return Kernel(
        lambda position, beta: with_identity_mass(position).init(position, beta),
        lambda rng_key, state, beta: with_identity_mass(state.position).step(rng_key, state, beta),
    )


def mala(path: Path, step_size) -> Kernel:
    """Metropolis-adjusted Langevin (blackjax.mala) at each β."""
    _check_positive("step_size", step_size)
    return from_blackjax(blackjax.mala, path, step_size=step_size)


def rwmh(path: Path, scale) -> Kernel:
    """Gaussian random-walk Metropolis–Hastings (blackjax's normal random walk),
    isotropic with standard deviation ``scale`` in every coordinate."""
    if jnp.ndim(scale) == 0:
        _check_positive("scale", scale)

    def with_scale(position):
        flat, _ = ravel_pytree(position)
        sigma = jnp.broadcast_to(jnp.asarray(scale, flat.dtype), flat.shape)
        return from_blackjax(blackjax.additive_step_random_walk.normal_random_walk, path, sigma=sigma)

    return Kernel(
        lambda position, beta: with_scale(position).init(position, beta),
        lambda rng_key, state, beta: with_scale(state.position).step(rng_key, state, beta),
    )


def rmhmc(path: Path, step_size, metric_fn, num_integration_steps: int) -> Kernel:
    """Riemannian-manifold HMC (blackjax.rmhmc, implicit midpoint integrator) with a
    position-dependent metric ``metric_fn(x) -> (d, d)`` mass matrix."""
    _check_positive("step_size", step_size)
    return from_blackjax(
        blackjax.rmhmc, path, step_size=step_size, mass_matrix=metric_fn,
        num_integration_steps=int(num_integration_steps),
    )
