"""Shared pieces of the SGAIS reproductions (sgais_accuracy, sgais_shift, sgais_sensitivity):
the seed's three models, and the baselines run on them (blackjax nested slice sampling,
full-data AIS with HMC). Public API only."""
import os
import time

import blackjax
import jax
import jax.numpy as jnp
import numpy as np

import jaxz
from jaxz.models import streaming
import _cli

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def machine():
    """``_cli.machine`` with blackjax's version (the nested-sampling baseline's)."""
    return _cli.machine(blackjax=blackjax.__version__)


class Model:
    """A seed §6 model: prior, per-observation likelihood, prior draws, data, exact log Z."""

    def __init__(self, name, log_prior, log_likelihood, sample_prior, make_data, exact=None, dim=None):
        self.name, self.log_prior, self.log_likelihood = name, log_prior, log_likelihood
        self.sample_prior, self.make_data, self.exact, self.dim = sample_prior, make_data, exact, dim


def gmm_model(num_components=5):
    def log_prior(theta):
        return streaming.gmm_log_prior(theta, num_components)

    def log_likelihood(theta, datum):
        return streaming.gmm_log_likelihood(theta, datum, num_components)

    return Model(
        f"gmm{num_components}", log_prior, log_likelihood,
        lambda key, num: streaming.gmm_sample_prior(key, num, num_components),
        lambda key, n: streaming.gmm_data(key, n, num_components)[0],
        dim=streaming.gmm_num_parameters(num_components),
    )


MODELS = {
    "linear": Model("linear", streaming.linear_log_prior, streaming.linear_log_likelihood,
                    streaming.linear_sample_prior, lambda key, n: streaming.linear_regression_data(key, n)[0],
                    exact=streaming.linear_exact_log_evidence, dim=6),
    "logistic": Model("logistic", streaming.logistic_log_prior, streaming.logistic_log_likelihood,
                      streaming.logistic_sample_prior, lambda key, n: streaming.logistic_data(key, n)[0], dim=44),
    "gmm": gmm_model(5),
}


def total_log_likelihood(model, data):
    def log_likelihood(theta):
        return jnp.sum(jax.vmap(model.log_likelihood, in_axes=(None, 0))(theta, data))

    return log_likelihood


def chunks_of(data, chunk_size):
    num_rows = jax.tree.leaves(data)[0].shape[0]
    host = jax.tree.map(np.asarray, data)
    for start in range(0, num_rows, chunk_size):
        yield jax.tree.map(lambda leaf: leaf[start:start + chunk_size], host)


def run_sgais_stream(model, key, data, *, progress=True, reservoir_size=100_000, **options):
    """Streaming SGAIS; returns (log_z trace, n trace, cumulative seconds trace, annealing steps, estimate)."""
    key_prior, key_run = jax.random.split(key)
    num_particles = options.get("num_particles", 10)
    chunk_size = options.get("chunk_size", 500)
    positions = model.sample_prior(key_prior, num_particles)
    times, start = [], time.perf_counter()
    num_rows = jax.tree.leaves(data)[0].shape[0]
    result = jaxz.sgais_stream(
        model.log_prior, model.log_likelihood, key_run, positions, chunks_of(data, chunk_size),
        reservoir_size=reservoir_size, progress=progress, total=-(-num_rows // chunk_size),
        callback=lambda index, info: times.append(time.perf_counter() - start), **options,
    )
    return (np.asarray(result.trace.log_z), np.asarray(result.trace.num_seen), np.asarray(times),
            np.asarray(result.trace.num_annealing_steps), result.estimate)


def run_nested(model, key, data, num_live=100, max_iterations=100_000):
    """blackjax nested slice sampling on the full-data likelihood; returns (log Z, seconds incl. compile)."""
    dim = model.dim
    algorithm = blackjax.nss(logprior_fn=model.log_prior, loglikelihood_fn=total_log_likelihood(model, data),
                             num_delete=max(num_live // 2, 1), num_inner_steps=max(5, 2 * dim))
    key_init, key_run = jax.random.split(key)

    @jax.jit
    def run(key_init, key_run):
        state = algorithm.init(model.sample_prior(key_init, num_live))

        def cond(carry):
            state, _, i = carry
            return (state.integrator.logZ_live - state.integrator.logZ > -3.0) & (i < max_iterations)

        def body(carry):
            state, key, i = carry
            key, sub = jax.random.split(key)
            state, _ = algorithm.step(sub, state)
            return state, key, i + 1

        state, _, _ = jax.lax.while_loop(cond, body, (state, key_run, jnp.int32(0)))
        return jnp.logaddexp(state.integrator.logZ, state.integrator.logZ_live)

    start = time.perf_counter()
    log_z = float(run(key_init, key_run))
    return log_z, time.perf_counter() - start


def run_ais(model, key, data, num_particles=10, num_temperatures=200, num_integration_steps=5):
    """Full-data AIS (jaxz.ais + jaxz.kernels.hmc) on likelihood tempering, geometric schedule;
    HMC step size scaled to the posterior width 1/sqrt(N). Returns (log Z, seconds incl. compile)."""
    num_rows = jax.tree.leaves(data)[0].shape[0]
    path = jaxz.paths.likelihood_tempering(model.log_prior, total_log_likelihood(model, data))
    kernel = jaxz.kernels.hmc(path, step_size=0.5 / np.sqrt(num_rows), num_integration_steps=num_integration_steps)
    estimator = jaxz.ais(path, kernel, jaxz.schedules.geometric(num_temperatures, beta_min=1e-5))
    key_prior, key_run = jax.random.split(key)
    positions = model.sample_prior(key_prior, num_particles)
    start = time.perf_counter()
    result = jax.jit(lambda k: jaxz.run(estimator, k, positions))(key_run)
    log_z = float(result.estimate.log_z)
    return log_z, time.perf_counter() - start
