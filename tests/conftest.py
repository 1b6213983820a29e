"""Shared fixtures: small targets whose log Z is known exactly."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz


class GaussianProblem:
    """Base N(0, I_d) (normalized: log Z_0 = 0) and target f_1(x) = exp(−|x − μ|²/(2σ²)),
    whose normalizer is log Z_1 = (d/2) log(2πσ²)."""

    def __init__(self, dim=2, scale=0.5, shift=1.0):
        self.dim, self.scale = dim, scale
        self.mean = shift * np.arange(1, dim + 1) / dim
        self.log_z = 0.5 * dim * np.log(2 * np.pi * scale**2)

    def log_base(self, x):
        return -0.5 * jnp.sum(x**2) - 0.5 * self.dim * jnp.log(2 * jnp.pi).astype(x.dtype)

    def log_target(self, x):
        return -0.5 * jnp.sum((x - self.mean.astype(x.dtype)) ** 2) / self.scale**2

    def path(self):
        return jaxz.paths.geometric(self.log_base, self.log_target)

    def base_draws(self, key, num, dtype=jnp.float32):
        return jax.random.normal(key, (num, self.dim), dtype)

    def target_draws(self, key, num, dtype=jnp.float32):
        return (self.mean + self.scale * jax.random.normal(key, (num, self.dim))).astype(dtype)


@pytest.fixture(scope="session")
def gaussian():
    return GaussianProblem()
