"""The 10-dimensional two-Gaussian mixture of Carlson et al. (2016), §4.1, on a
geometric path from a broad Gaussian base, with exact log Z at β = 1.

    f_0(x) = N(x; 0, σ_0² I)                       (normalized: Z_0 = 1)
    f_1(x) = Σ_k w_k exp(−|x − μ_k|² / (2σ_k²))      (jaxz.models.mixture)
    f_β(x) = f_0(x)^{1−β} f_1(x)^β

The seed's exact constants are not reproduced; the defaults put two unequal modes
(weights 0.3 / 0.7, scales 1 / 0.5) eight units apart along e₁ in d = 10, so that
a gradient kernel at β = 1 cannot cross between them and tempering must.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxz import paths
from jaxz.models import mixture
from jaxz.types import Array


class GMM10(NamedTuple):
    weights: Array  # (2,)
    means: Array  # (2, d)
    scales: Array  # (2,)
    base_scale: Array  # σ_0


def make(dim: int = 10, separation: float = 8.0, base_scale: float = 4.0, dtype=None) -> GMM10:
    """The §4.1 setup in ``dim`` dimensions (default 10), arrays in ``dtype``."""
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    if not base_scale > 0:
        raise ValueError(f"base_scale must be > 0, got {base_scale}")
    dtype = jnp.result_type(float) if dtype is None else dtype
    weights, means, scales = mixture.well_separated(dim, separation)
    return GMM10(*(jnp.asarray(a, dtype) for a in (weights, means, scales, base_scale)))


def log_target(model: GMM10, x: Array) -> Array:
    """log f_1(x), unnormalized."""
    return mixture.log_density(x, model.weights, model.means, model.scales)


def log_base(model: GMM10, x: Array) -> Array:
    """log N(x; 0, σ_0² I), normalized."""
    dim = x.shape[-1]
    return -0.5 * jnp.sum(x**2) / model.base_scale**2 - 0.5 * dim * jnp.log(2.0 * jnp.pi * model.base_scale**2)


def exact_log_z(model: GMM10) -> Array:
    """log Z_1 (Z_0 = 1)."""
    return mixture.exact_log_z(model.weights, model.means, model.scales)


def path(model: GMM10) -> paths.Path:
    """The geometric path f_0^{1−β} f_1^β with exact base draws."""
    dim = model.means.shape[-1]

    def sample_base(rng_key, num):
        return model.base_scale * jax.random.normal(rng_key, (num, dim), model.means.dtype)

    return paths.geometric(
        lambda x: log_base(model, x), lambda x: log_target(model, x),
        log_z0=jnp.zeros((), model.means.dtype), sample_base=sample_base,
    )


__all__ = ["GMM10", "make", "log_target", "log_base", "exact_log_z", "path"]
