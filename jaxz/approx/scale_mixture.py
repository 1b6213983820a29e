"""Kernels at every scale: a proposal that reaches mass far below the particles' spread.

At each of the particles x_i of greatest target density (NUM_CENTRES of them, equally
weighted) a kernel whose radial density, in units of D^(1/2) (D: the particles' weighted
variance per coordinate), is

    g(z) = C / (|z|^d + a^d)  for |z| ≤ R,  0 beyond;   C = d / (S_d log(1 + (R/a)^d)),

S_d the area of the unit sphere, a = SMALLEST_SCALE, R = LARGEST_SCALE. Between a and R it
falls off like |z|^(−d), as the posterior of a likelihood with a power-law singularity does,
so every decade of radii between them gets the same share of draws: v = |z|^d + a^d is
log-uniform on [a^d, R^d + a^d], which is how the draws are made. A mixture fitted at the
scale of the particles' spread (``jaxz.approx.mixture``) puts almost no draws there, and the
weights of the few that land there are too large to be seen in time. In float32 the
smallest scale is RESOLUTION x eps (about 8e-6; finer steps would be rounded to the
particles' grid where their coordinates are of the order of their spread). Only mass near
a particle is reached: a singularity farther from every particle than the particles' own
reach stays unseen.
"""
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxz.types import Array, PRNGKey

# Radii relative to the particles' sd per coordinate: from one tenth of the spread down eight decades
# (a cap of 1e-8 on a singularity of unit scale is reached by the smallest).
SMALLEST_SCALE = 1e-9
LARGEST_SCALE = 0.1
RESOLUTION = 64.0  # the smallest scale is at least this many of the dtype's eps (module docstring)
NUM_CENTRES = 32  # kernels at this many particles (each draw's density sums over all of them)


class ScaleMixture(NamedTuple):
    centres: Array  # (N, d) the particles
    log_weights: Array  # (N,) their normalized log weights
    scale: Array  # (d,) the particles' weighted sd per coordinate: D^(1/2)
    smallest: float
    largest: float


def fit(points: Array, log_weights: Array, log_heights: Array, num_centres: int = NUM_CENTRES,
        smallest: float = SMALLEST_SCALE, largest: float = LARGEST_SCALE) -> ScaleMixture:
    """Kernels at the ``num_centres`` weighted points (n, d) of greatest ``log_heights`` (the
    target's unnormalized log density there: a singularity's neighbours and the modes' tops),
    equally weighted, scaled by all the points' weighted sd per coordinate. Points of zero
    weight are never chosen."""
    weights = jax.nn.softmax(log_weights)
    mean = weights @ points
    variance = weights @ (points - mean) ** 2
    scale = jnp.sqrt(jnp.maximum(variance, jnp.finfo(points.dtype).tiny))
    # a step below the dtype's resolution at the particles would be rounded away (draws land on a grid that
    # the density does not describe): in float32 the smallest scale stays above RESOLUTION x eps
    smallest = max(smallest, RESOLUTION * float(jnp.finfo(points.dtype).eps))
    num = min(num_centres, points.shape[0])
    _, chosen = jax.lax.top_k(jnp.where(jnp.isneginf(log_weights), -jnp.inf, log_heights), num)
    centre_weights = jnp.where(jnp.isneginf(log_weights[chosen]), -jnp.inf, 0.0)
    return ScaleMixture(points[chosen], jax.nn.log_softmax(centre_weights), scale, smallest, largest)


def sample(mixture: ScaleMixture, rng_key: PRNGKey, num: int) -> Array:
    """``num`` draws (num, d): a centre, a radius with |z|^d + a^d log-uniform, a direction."""
    key_centre, key_radius, key_direction = jax.random.split(rng_key, 3)
    dtype = mixture.centres.dtype
    dim = mixture.centres.shape[-1]
    centre = jax.random.categorical(key_centre, mixture.log_weights, shape=(num,))
    log_floor, log_range = _log_floor_and_range(dim, mixture.smallest, mixture.largest)
    log_v = log_floor + log_range * jax.random.uniform(key_radius, (num, 1), dtype)
    log_power = log_v + jnp.log(-jnp.expm1(log_floor - log_v))  # log(v − a^d) = d log |z|
    direction = jax.random.normal(key_direction, (num, dim), dtype)
    direction = direction / jnp.linalg.norm(direction, axis=-1, keepdims=True)
    return mixture.centres[centre] + jnp.exp(log_power / dim) * direction * mixture.scale


def _log_floor_and_range(dim, smallest, largest):
    """d log a and log(1 + (R/a)^d): v = |z|^d + a^d is log-uniform over that range above a^d."""
    ratio = dim * math.log(largest / smallest)
    return dim * math.log(smallest), ratio + math.log1p(math.exp(-ratio))


def _log_kernel(squared, dim, smallest, largest):
    """log g(z) at |z|² = ``squared`` (module docstring)."""
    log_floor, log_range = _log_floor_and_range(dim, smallest, largest)
    log_sphere = math.log(2.0) + 0.5 * dim * math.log(math.pi) - math.lgamma(0.5 * dim)
    log_constant = math.log(dim) - log_sphere - math.log(log_range)
    log_power = 0.5 * dim * jnp.log(squared)  # d log |z| (−inf at the centre)
    inside = squared <= largest ** 2
    return jnp.where(inside, log_constant - jnp.logaddexp(log_power, log_floor), -jnp.inf)


def log_density(mixture: ScaleMixture, points: Array) -> Array:
    """log q(x) at each row of ``points`` (n, d): a sum over every centre's kernel."""
    dim = points.shape[-1]
    scaled = (points[:, None, :] - mixture.centres[None]) / mixture.scale  # (n, N, d)
    squared = jnp.sum(scaled ** 2, axis=-1)
    log_kernels = _log_kernel(squared, dim, mixture.smallest, mixture.largest)
    return jax.nn.logsumexp(mixture.log_weights + log_kernels, axis=-1) - jnp.sum(jnp.log(mixture.scale))


__all__ = ["ScaleMixture", "fit", "sample", "log_density", "SMALLEST_SCALE", "LARGEST_SCALE"]
