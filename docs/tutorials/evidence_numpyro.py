"""The evidence of a NumPyro model in one call: ``jaxz.evidence``.

A model written for NumPyro — latent sites with ``numpyro.sample``, data observed with
``obs=`` — goes to ``jaxz.evidence`` as it is. jaxz maps the latent sites to one flat
unconstrained vector (``numpyro.distributions.biject_to`` of each site's support, with
its log |det J| in the prior, so the prior stays normalized: Z_0 = 1), draws the prior
with the model itself, tempers the likelihood p(y | θ)^β from β = 0 to 1 with adaptive
SMC (self-tuned random-walk moves up to 5 coordinates, as here; self-tuned HMC above),
and pools independent vmapped runs into log Z ± s.e.

Here: a click-through rate p ~ Beta(2, 3) (a site on the unit interval, mapped by a
logistic transform) and a rate λ ~ Gamma(2, 0.5) (positive, mapped by exp), with
Bernoulli and Poisson data. The two blocks are independent, so the evidence is the
product of two conjugate closed forms: log Z = log B(2 + k, 3 + n − k) − log B(2, 3)
+ the gamma–Poisson term. ``numpyro.factor`` sites count in the likelihood (tempered
with it); discrete latent sites are refused (marginalize them). The runs are compiled as functions
of the model's array arguments and kept, so that the next data set of the same shapes (or
the same data with a new key) runs without compiling again; the posterior comes back as
equally weighted draws (``result.posterior_draws``) or an ArviZ ``InferenceData``
(``result.to_arviz``, with the "arviz" extra).
"""
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from scipy import special

import jaxz

clicks = jnp.array([1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0], dtype=jnp.float32)
counts = jnp.array([3, 5, 2, 4, 6, 3, 1, 4], dtype=jnp.float32)


def model(clicks, counts):
    p = numpyro.sample("p", dist.Beta(2.0, 3.0))
    rate = numpyro.sample("rate", dist.Gamma(2.0, 0.5))
    with numpyro.plate("sessions", clicks.shape[0]):
        numpyro.sample("click", dist.Bernoulli(p), obs=clicks)
    with numpyro.plate("days", counts.shape[0]):
        numpyro.sample("count", dist.Poisson(rate), obs=counts)
    numpyro.deterministic("clicks_per_day", rate * p)


# the runs are compiled as functions of the data (see the end)
result = jaxz.evidence(model, jax.random.key(0), model_args=(clicks, counts), num_runs=8, num_particles=300)


def exact_log_z(clicks, counts):
    k, n = float(clicks.sum()), clicks.shape[0]
    total, days = float(counts.sum()), counts.shape[0]
    return (special.betaln(2 + k, 3 + n - k) - special.betaln(2, 3)
            + 2 * np.log(0.5) - special.gammaln(2) + special.gammaln(2 + total) - (2 + total) * np.log(0.5 + days)
            - special.gammaln(np.asarray(counts) + 1).sum())


k, n = float(clicks.sum()), clicks.shape[0]
exact = exact_log_z(clicks, counts)
print(f"log Z = {float(result.log_z):.3f} ± {float(result.log_z_stderr):.3f} (exact {exact:.3f}), "
      f"status {int(result.status)}")
print(f"per run: {np.asarray(result.runs.log_z).round(3)}")
print(f"{result.num_evaluations:,} evaluations ({result.num_gradient_evaluations:,} gradients), "
      f"stages {np.asarray(result.num_stages)}, smallest ESS {float(np.min(result.min_ess)):.2f}, "
      f"acceptance at β = 1 {np.asarray(result.acceptance_rate).round(2)}")

# The posterior: the final particles of every run resampled to equally weighted draws of the
# model's sites, in their own space (deterministic sites included)
draws = result.posterior_draws(jax.random.key(2))
p_mean = float(np.mean(draws["p"]))
print(f"posterior mean of p: {p_mean:.3f} (exact {(2 + k) / (5 + n):.3f}); "
      f"{draws['p'].shape[0]} draws of {sorted(draws)}")

assert int(result.status) == 0
assert abs(float(result.log_z) - exact) < 4 * float(result.log_z_stderr)
assert abs(p_mean - (2 + k) / (5 + n)) < 0.03

# Another data set of the same shapes: the compiled runs are reused (same model, settings,
# shapes and dtypes). An array the model reads from a global or a closure is compiled in,
# and a call where it changed compiles anew (the cache keys on a fingerprint of it).
later = jnp.array([0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0], dtype=jnp.float32)
again = jaxz.evidence(model, jax.random.key(1), model_args=(later, counts), num_runs=8, num_particles=300)
print(f"new clicks: log Z = {float(again.log_z):.3f} ± {float(again.log_z_stderr):.3f} "
      f"(exact {exact_log_z(later, counts):.3f}); compiled in {result.compile_seconds:.1f} s at the first call, "
      f"{again.compile_seconds:.2f} s now")
assert again.compile_seconds < result.compile_seconds
assert abs(float(again.log_z) - exact_log_z(later, counts)) < 4 * float(again.log_z_stderr)
