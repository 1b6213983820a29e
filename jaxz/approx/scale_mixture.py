"""Kernels at every scale: a proposal that reaches mass far below the particles' spread.

q(x) = Σ_i W_i ∫ N(x; x_i, s² D) ds / (s log(s_max / s_min)) over s_min ≤ s ≤ s_max: at each of
the particles x_i of greatest target density (NUM_CENTRES of them, W_i equal) a Gaussian
kernel whose scale s is log-uniform, so every decade of
scales between s_min and s_max gets the same share of draws; D is the diagonal of the
particles' weighted variances. Around a particle, q falls off like r^(−d) between those
scales (r: distance in units of D^(1/2)), as the posterior of a likelihood with a power-law
singularity does. A mixture fitted at the scale of the particles' spread (``jaxz.approx.mixture``)
puts almost no draws there, and the weights of the few that land there are then far too
large to be seen in time (issue 57's singular likelihoods). In float32 the smallest scale is
RESOLUTION x eps (about 8e-6; finer steps would be rounded to the particles' grid where their
coordinates are of the order of their spread). Only mass near a particle is reached: a
singularity farther from every particle than the particles' own reach stays unseen.

The scale integral has a closed form: with a = d/2 and u = r² the squared scaled distance,

    ∫ N(x; x_i, s² D) ds / s = (π u)^(−a) Γ(a) [P(a, u / 2s_min²) − P(a, u / 2s_max²)] / (2 |D|^(1/2)),

P the regularized lower incomplete gamma function (substitute t = u / 2s²); as u → 0 it
tends to (2π)^(−a) (s_min^(−d) − s_max^(−d)) / (d |D|^(1/2)).
"""
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy import special

from jaxz.types import Array, PRNGKey

# Scales relative to the particles' sd per coordinate: from one tenth of the spread down eight decades
# (a cap of 1e-8 on a singularity of unit scale is reached by the smallest).
SMALLEST_SCALE = 1e-9
LARGEST_SCALE = 0.1
RESOLUTION = 64.0  # the smallest scale is at least this many of the dtype's eps (module docstring)
NUM_CENTRES = 32  # kernels at this many particles (each draw's density sums over all of them)
# Below this t = u / 2 s_min², the series limit replaces the incomplete gamma (relative error about t)
SMALL_ARGUMENT = 1e-6


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
    """``num`` draws (num, d): a particle by its weight, a log-uniform scale, a Gaussian step."""
    key_centre, key_scale, key_normal = jax.random.split(rng_key, 3)
    dtype = mixture.centres.dtype
    centre = jax.random.categorical(key_centre, mixture.log_weights, shape=(num,))
    log_scale = jax.random.uniform(key_scale, (num, 1), dtype, math.log(mixture.smallest), math.log(mixture.largest))
    noise = jax.random.normal(key_normal, (num, mixture.centres.shape[-1]), dtype)
    return mixture.centres[centre] + jnp.exp(log_scale) * mixture.scale * noise


def _log_kernel(squared, dim, smallest, largest):
    """log ∫ N(z; 0, s² I) ds / (s log(s_max/s_min)) at |z|² = ``squared`` (module docstring)."""
    a = 0.5 * dim
    log_range = math.log(math.log(largest / smallest))
    high, low = squared / (2 * smallest ** 2), squared / (2 * largest ** 2)
    # P(a, high) − P(a, low) loses its relative precision only far out (P(a, low) near 1), where the
    # kernels' density is negligible against the rest of a proposal built at the particles' spread
    difference = special.gammainc(a, high) - special.gammainc(a, low)
    safe = jnp.maximum(squared, jnp.finfo(squared.dtype).tiny)
    general = (-a * jnp.log(jnp.pi * safe) + jax.lax.lgamma(a) - math.log(2.0)
               + jnp.log(jnp.maximum(difference, jnp.finfo(squared.dtype).tiny)) - log_range)
    limit = (-a * math.log(2 * math.pi) - dim * math.log(smallest) + math.log1p(-(smallest / largest) ** dim)
             - math.log(dim) - log_range)
    return jnp.where(high < SMALL_ARGUMENT, limit, general)


def log_density(mixture: ScaleMixture, points: Array) -> Array:
    """log q(x) at each row of ``points`` (n, d): a sum over every particle's kernel."""
    dim = points.shape[-1]
    scaled = (points[:, None, :] - mixture.centres[None]) / mixture.scale  # (n, N, d)
    squared = jnp.sum(scaled ** 2, axis=-1)
    log_kernels = _log_kernel(squared, dim, mixture.smallest, mixture.largest)
    return jax.nn.logsumexp(mixture.log_weights + log_kernels, axis=-1) - jnp.sum(jnp.log(mixture.scale))


__all__ = ["ScaleMixture", "fit", "sample", "log_density", "SMALLEST_SCALE", "LARGEST_SCALE"]
