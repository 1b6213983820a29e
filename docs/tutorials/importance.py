"""Importance sampling, SIR and rejection sampling on a 2-D Gaussian with exact log Z.

Target f(x) = exp(−|x − 1|² / (2 · 0.5²)): Z = 2π · 0.5² (log Z = 0.4516).
"""
import jax
import jax.numpy as jnp
import numpy as np

import jaxz

SCALE = 0.5
EXACT = np.log(2 * np.pi * SCALE**2)


def log_target(x):
    return -0.5 * jnp.sum((x - 1.0) ** 2) / SCALE**2


def sample_proposal(key):  # one draw from N(0, 1.5² I), wider than the target
    return 1.5 * jax.random.normal(key, (2,))


def log_proposal(x):
    return jnp.sum(jax.scipy.stats.norm.logpdf(x, 0.0, 1.5))


# Importance sampling: one step, the delta-method standard error.
estimator = jaxz.importance(log_target, sample_proposal, log_proposal)
result = jax.jit(lambda key: jaxz.run(estimator, key, 4096))(jax.random.key(0))
estimate = result.estimate
print(f"IS        log Z = {float(estimate.log_z):.4f} ± {float(estimate.log_z_stderr):.4f} (exact {EXACT:.4f})")
assert abs(float(estimate.log_z) - EXACT) < 5 * float(estimate.log_z_stderr)

# SIR: resample the weighted draws into (approximately) target draws.
draws = jaxz.sir(jax.random.key(1), result.state)
print("SIR mean ≈ 1:", np.asarray(jnp.mean(draws, axis=0)).round(2))

# Rejection: needs an envelope c · q ≥ f; c = max f/q, found analytically here at x = 1.2.
log_c = float(log_target(jnp.full(2, 1.2)) - log_proposal(jnp.full(2, 1.2))) + 1.0
rejection = jaxz.rejection(log_target, sample_proposal, log_proposal, log_c)
estimate = jax.jit(lambda key: jaxz.run(rejection, key, 4096).estimate)(jax.random.key(2))
print(f"rejection log Z = {float(estimate.log_z):.4f} ± {float(estimate.log_z_stderr):.4f}")
assert abs(float(estimate.log_z) - EXACT) < 5 * float(estimate.log_z_stderr)
