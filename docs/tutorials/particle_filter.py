"""A bootstrap particle filter's log-likelihood of a linear-Gaussian state-space model,
against the Kalman filter's exact value.

``jaxz.models.lgssm`` gives the model's three callables (initial draw, transition draw,
observation log density); the filter resamples multinomially when the ESS falls below
half, and its standard error is the genealogy estimator (Lee & Whiteley 2018, read over
a fixed lag so that it stays honest on long series).
"""
import jax
import numpy as np

import jaxz
from jaxz.models import lgssm

params = lgssm.default()
_, observations = lgssm.simulate(jax.random.key(0), params, 100)
exact = float(lgssm.kalman_log_likelihood(params, observations))

pf = jaxz.particle_filter(*lgssm.particle_filter_callables(params), resample_ess=0.5)
runs = jax.jit(jax.vmap(lambda key: jaxz.run(pf, key, 500, observations).estimate))
estimates = runs(jax.random.split(jax.random.key(1), 16))
log_z, stderr = np.asarray(estimates.log_z), np.asarray(estimates.log_z_stderr)
# A run whose genealogy collapsed (all particles from one ancestor within the lag) says so:
# STATUS_LOW_ESS, and its s.e. is inf rather than a number that looks precise.
trusted = (np.asarray(estimates.status) & jaxz.STATUS_LOW_ESS) == 0
print(f"Kalman {exact:.3f}; particle filter {log_z.mean():.3f} (sd over 16 runs {log_z.std(ddof=1):.3f}, "
      f"rms reported s.e. of the {trusted.sum()} unflagged runs {np.sqrt(np.mean(stderr[trusted] ** 2)):.3f})")
pooled = jaxz.combine_runs(estimates)
assert abs(float(pooled.log_z) - exact) < 5 * float(pooled.log_z_stderr)
