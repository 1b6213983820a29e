"""The problem shared by the sharding checks (tests/sharding_check.py, tests/multiprocess_check.py
and tests/test_sharding.py): a 2-d Gaussian geometric path and 256 initial particles."""
import jax
import jax.numpy as jnp

import jaxz


def gaussian_path():
    def log_base(x):
        return -0.5 * jnp.sum(x**2) - jnp.log(2 * jnp.pi)

    def log_target(x):
        return -0.5 * jnp.sum((x - 1.0) ** 2) / 0.09

    return jaxz.paths.geometric(log_base, log_target, sample_base=lambda key, n: jax.random.normal(key, (n, 2)))


def initial_positions():
    return jax.random.normal(jax.random.key(1), (256, 2))
