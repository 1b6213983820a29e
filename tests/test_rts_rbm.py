"""RTS, TI-RB, MBAR, AIS and RAISE on a small digits-trained RBM with exact log Z
(12 hidden units: enumeration is instant)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

# RTS is checked against exact log Z on the 10-d mixture in tests/test_rts.py; this module
# repeats it on a trained digits RBM (minutes of CPU): run with `pytest -m slow`.
pytestmark = pytest.mark.slow

import jaxz
from jaxz.models import rbm as rbm_model
from jaxz.models import rbm_raise

NUM_RUNS = 8
NUM_CHAINS = 30
BETAS = np.linspace(0.0, 1.0, 50)
SWEEPS_PER_ITERATION, INITIAL_ITERATIONS, NUM_SWEEPS = 50, 10, 600
RECORD_EVERY = 5  # sweeps between recorded samples (for MBAR)


@pytest.fixture(scope="module")
def problem():
    data = jnp.asarray(jaxz.data.digits_binarized().train)
    model = rbm_model.train(jax.random.key(0), data, 12, method="pcd", num_epochs=10).rbm
    path, kernel = rbm_model.annealing(rbm_model.base_rate(data), model)
    return data, model, float(rbm_model.exact_log_z(model)), path, kernel


@pytest.fixture(scope="module")
def rts_runs(problem):
    """Eight RTS runs, their trace holding the chains' draws after every sweep (for MBAR)."""
    _, _, _, path, kernel = problem
    estimator = jaxz.rts(path, kernel, BETAS, num_sweeps=NUM_SWEEPS, initial_iterations=INITIAL_ITERATIONS,
                         sweeps_per_iteration=SWEEPS_PER_ITERATION, record_draws=True)

    @jax.jit
    @jax.vmap
    def one(key):
        key_init, key_run = jax.random.split(key)
        result = jaxz.run(estimator, key_run, path.sample_base(key_init, NUM_CHAINS))
        return result.estimate, jaxz.rts_estimates(result.state), result.state, result.trace

    return one(jax.random.split(jax.random.key(1), NUM_RUNS))


def test_rts_and_ti_rb_agree_with_exact_log_z_of_digits_rbm(problem, rts_runs):
    """Mean error over runs within 4 s.e. of the spread; every run within 5 batch-means s.e."""
    exact = problem[2]
    estimate, ladders, _, _ = rts_runs
    errors = np.asarray(estimate.log_z) - exact
    assert abs(errors.mean()) < 4 * errors.std(ddof=1) / np.sqrt(NUM_RUNS), errors
    assert np.all(np.abs(errors) < 5 * np.asarray(estimate.log_z_stderr)), (errors, estimate.log_z_stderr)
    ti_rb = np.asarray(ladders.ti_rb[:, -1]) - exact
    assert abs(ti_rb.mean()) < 4 * ti_rb.std(ddof=1) / np.sqrt(NUM_RUNS), ti_rb
    np.testing.assert_array_equal(np.asarray(estimate.status), 0)


def test_mbar_on_rts_samples_agrees_with_exact_log_z(problem, rts_runs):
    """MBAR (eq. 18) on one run's thinned long-run draws: |log Ẑ − log Z| < 4.5 s.e."""
    _, _, exact, path, _ = problem
    draws = rts_runs[3].draws
    thinned = slice(RECORD_EVERY - 1, None, RECORD_EVERY)  # the draws after every 5th sweep
    keep = np.asarray(draws.in_long_run[0, thinned])
    samples = np.asarray(draws.position[0, thinned])[keep].reshape(-1, draws.position.shape[-1])
    labels = np.asarray(draws.beta_index[0, thinned])[keep].reshape(-1)
    order = np.argsort(labels, kind="stable")
    samples, labels = samples[order], labels[order]
    u_kn = -jax.jit(jax.vmap(jax.vmap(path.log_density, in_axes=(0, None)), in_axes=(None, 0)))(
        jnp.asarray(samples), jnp.asarray(BETAS, jnp.float32)
    )
    n_k = np.bincount(labels, minlength=BETAS.size)
    f_k, stderr = jax.jit(jaxz.mbar)(u_kn, jnp.asarray(n_k))
    log_z = float(path.log_z0) - float(f_k[-1])
    assert abs(log_z - exact) < 4.5 * float(stderr[-1]), (log_z - exact, float(stderr[-1]))


def test_initial_iterations_bring_c_hat_close_to_r(rts_runs):
    """From Ẑ = 1 the first block puts its mass near β = 1 (log Z ≈ 39 above Z_0):
    max_k |r_k − ĉ_k| is over 50 × 0.1/K; by the end of the initial iterations max_k |r_k − ĉ_k| < 0.1/K,
    and the long run's
    ĉ stays within 2 × 0.1/K of r."""
    _, ladders, state, trace = rts_runs
    max_c_error = np.asarray(trace.max_c_error)
    long_run = np.asarray(trace.long_run)
    num_temperatures = BETAS.size
    assert np.all(max_c_error[:, SWEEPS_PER_ITERATION - 1] > 50 * 0.1 / num_temperatures)
    first_long = np.argmax(long_run, axis=1)
    last_initial = max_c_error[np.arange(NUM_RUNS), first_long - 1]
    assert np.all(last_initial < 0.1 / num_temperatures), last_initial
    assert np.all(np.asarray(state.iteration) < INITIAL_ITERATIONS)  # stopped early: the criterion was met
    c_error = np.abs(np.asarray(ladders.c_hat) - 1.0 / num_temperatures).max(axis=1)
    assert np.all(c_error < 0.3 / num_temperatures), c_error


def test_initial_iterations_match_a_nonuniform_prior(problem):
    """With r_k ∝ exp(2β_k) (§4.4) the initial iterations bring ĉ to that r: within
    3 × 0.1/K over the long run (the last update uses one short, noisy block), with
    100 chains as in the seed."""
    _, _, _, path, kernel = problem
    log_prior = 2.0 * BETAS
    prior = np.exp(log_prior - np.logaddexp.reduce(log_prior))
    estimator = jaxz.rts(path, kernel, BETAS, num_sweeps=200, initial_iterations=10, sweeps_per_iteration=50,
                         log_prior_weights=log_prior)

    @jax.jit
    @jax.vmap
    def one(key):
        return jaxz.rts_estimates(jaxz.run(estimator, key, path.sample_base(key, 100)).state).c_hat

    c_hat = np.asarray(one(jax.random.split(jax.random.key(2), 2)))
    assert np.all(np.abs(c_hat - prior).max(axis=1) < 0.3 / BETAS.size), np.abs(c_hat - prior).max(axis=1)


def test_rts_bias_has_no_fixed_sign_while_ais_underestimates_and_raise_overestimates(problem, rts_runs):
    """Jensen: E[log Ẑ_AIS] < log Z < E[log Ẑ_RAISE] (RAISE from data-seeded chains after
    50 Gibbs sweeps). A 4-temperature ladder and 4 chains make both biases many s.e.
    large over 512 runs. RTS errors take both signs and average to zero within 3 s.e."""
    data, model, exact, path, kernel = problem
    betas = np.linspace(0.0, 1.0, 4)
    ais, raise_ = jaxz.ais(path, kernel, betas), jaxz.raise_(path, kernel, betas)

    @jax.jit
    @jax.vmap
    def one(key):
        key_ais, key_seed, key_raise = jax.random.split(key, 3)
        forward = jaxz.run(ais, key_ais, path.sample_base(key_ais, 4)).estimate.log_z
        chains = rbm_raise.data_seeded_chains(key_seed, model, data, 4, burn_in=50)
        backward = jaxz.run(raise_, key_raise, chains).estimate.log_z
        return forward, backward

    forward, backward = (np.asarray(v) - exact for v in one(jax.random.split(jax.random.key(3), 512)))
    assert forward.mean() + 3 * forward.std(ddof=1) / np.sqrt(forward.size) < 0, forward.mean()
    assert backward.mean() - 3 * backward.std(ddof=1) / np.sqrt(backward.size) > 0, backward.mean()
    rts_errors = np.asarray(rts_runs[0].log_z) - exact
    assert np.any(rts_errors > 0) and np.any(rts_errors < 0), rts_errors
    assert abs(rts_errors.mean()) < 3 * rts_errors.std(ddof=1) / np.sqrt(NUM_RUNS)
