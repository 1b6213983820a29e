"""Paths: families of unnormalized densities f_β, β ∈ [0, 1], with f_1 the target.

Estimators only ever call ``log_density(x, beta)``, its derivative in β
(``log_density_derivative``) and ``sample_base``; on an ``affine`` path, ``jaxz.smc``
reads f_β at every β from f_0 and f_1.
"""
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz.types import Array


class Path(NamedTuple):
    log_density: Callable  # log_density(x, beta) -> log f_beta(x)
    log_z0: Array  # log Z at beta = 0 (known)
    sample_base: Callable | None = None  # sample_base(rng_key, num) -> exact draws at beta = 0
    # True when log f_β = (1 − β) log f_0 + β log f_1 (geometric, likelihood tempering): estimators may then
    # evaluate f_0 and f_1 once per particle and interpolate every other β (an adaptive schedule's bisection)
    affine: bool = False


def _check_callables(**functions) -> None:
    for name, fn in functions.items():
        if fn is not None and not callable(fn):
            raise ValueError(f"{name} must be callable, got {type(fn).__name__}")


def geometric(log_base_fn: Callable, log_target_fn: Callable, *, log_z0=0.0, sample_base=None) -> Path:
    """f_β = f_0^{1−β} f_1^β: the geometric path between a normalized-up-to-``log_z0``
    base and the target. ``log_z0`` is a scalar.

    f_1 is exactly the target and f_0 exactly the base, also where the other one is
    zero (0 · (−inf) would be nan there). For 0 < β < 1 the support of f_β is that of
    f_0 f_1: when the target has mass where the base has none (a U(0, 1) base for a
    Gaussian target), every f_β below 1 misses that mass. ``jaxz.ais`` flags it
    (STATUS_NONFINITE) when its last move, at β = 1, takes a particle there."""
    if log_base_fn is None or log_target_fn is None:
        raise ValueError("log_base_fn and log_target_fn are required")
    _check_callables(log_base_fn=log_base_fn, log_target_fn=log_target_fn, sample_base=sample_base)
    dtype = log_z0.dtype if hasattr(log_z0, "dtype") else np.asarray(log_z0).dtype
    numeric = jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.floating)
    if isinstance(log_z0, (bool, str, bytes)) or not numeric:  # a bool would read as 0/1, a string fail obscurely
        raise ValueError(f"log_z0 must be a real number (log Z of the base), got {log_z0!r}")
    if not isinstance(log_z0, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(log_z0, float))):
        raise ValueError(f"log_z0 must be finite (log Z of the base), got {log_z0}")
    if jnp.ndim(log_z0) != 0:
        raise ValueError(f"log_z0 must be a scalar (log Z of the base), got shape {jnp.shape(log_z0)}")

    def log_density(x, beta):
        log_base, log_target = log_base_fn(x), log_target_fn(x)
        # f_1 = target and f_0 = base exactly: no 0 · (−inf) = nan where the other vanishes
        log_base = jnp.where((beta == 1.0) & jnp.isneginf(log_base), 0.0, log_base)
        log_target = jnp.where((beta == 0.0) & jnp.isneginf(log_target), 0.0, log_target)
        return (1.0 - beta) * log_base + beta * log_target

    return Path(log_density, jnp.asarray(log_z0), sample_base, affine=True)


def likelihood_tempering(log_prior_fn: Callable, log_likelihood_fn: Callable, *, sample_prior=None) -> Path:
    """f_β(θ) = p(θ) p(y | θ)^β with a normalized prior, so Z_0 = 1 and Z_1 is the evidence."""
    if log_prior_fn is None or log_likelihood_fn is None:
        raise ValueError("log_prior_fn and log_likelihood_fn are required")
    _check_callables(log_prior_fn=log_prior_fn, log_likelihood_fn=log_likelihood_fn, sample_prior=sample_prior)

    def log_density(theta, beta):
        return log_prior_fn(theta) + beta * log_likelihood_fn(theta)

    return Path(log_density, jnp.asarray(0.0), sample_prior, affine=True)


def log_density_derivative(path: Path) -> Callable:
    """d/dβ log f_β(x), as a function of (x, beta): the integrand of thermodynamic integration."""
    return jax.grad(path.log_density, argnums=1)


__all__ = ["Path", "geometric", "likelihood_tempering", "log_density_derivative"]
