"""SGAIS (Cameron, Eggers & Kroon 2019): online evidence on streaming data."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import jaxz
from jaxz.estimators.sgais import reservoir_update
from jaxz.models import streaming


def _linear_problem(num_data, seed=0):
    key_data, key_prior = jax.random.split(jax.random.key(seed))
    data, _ = streaming.linear_regression_data(key_data, num_data)
    return data, key_prior


def test_sgais_online_log_z_within_0p2_percent_of_exact_evidence_on_linear_regression():
    # Issue 5: relative error of log Z <= 0.2% at N = 10^4 and at every checkpoint of the trace.
    # The first chunk is plain AIS from the prior, the hardest step: with 20 particles and
    # target_ess = 18 its relative error over 16 seeds was -0.036% ± 0.026% (chunks of 1,000),
    # so 0.2% sits about 6 spreads out; the seed's 10 particles / ESS 5 reach ~1% there.
    with jax.enable_x64(True):
        num_data, chunk_size = 10_000, 1_000
        data, key_prior = _linear_problem(num_data)
        estimator = jaxz.sgais(streaming.linear_log_prior, streaming.linear_log_likelihood, chunk_size=chunk_size,
                               num_particles=20, target_ess=18.0)
        positions = streaming.linear_sample_prior(key_prior, 20)
        result = jax.jit(lambda key: jaxz.run(estimator, key, positions, data))(jax.random.key(1))
        checkpoints = np.arange(chunk_size, num_data + 1, chunk_size)
        exact = np.array([streaming.linear_exact_log_evidence((data[0][:n], data[1][:n])) for n in checkpoints])
        trace = np.asarray(result.trace.log_z)
        relative_error = np.abs(trace - exact) / np.abs(exact)
        assert int(result.estimate.status) == 0
        assert np.all(relative_error <= 2e-3), relative_error
        assert np.asarray(result.trace.num_seen).tolist() == checkpoints.tolist()
        assert float(result.estimate.log_z) == pytest.approx(trace[-1])
        # cost = SGHMC steps × particles: burn_in × annealing steps × num_particles
        assert float(result.estimate.cost) == 20 * 20 * int(np.sum(result.trace.num_annealing_steps))


def _small_estimator(**options):
    return dict(num_particles=6, chunk_size=50, minibatch_size=40, target_ess=3.0, burn_in=3, **options)


def _chunks(data, chunk_size):
    num_rows = data[0].shape[0]
    for start in range(0, num_rows, chunk_size):
        yield jax.tree.map(lambda leaf: leaf[start:start + chunk_size], data)


@pytest.mark.parametrize("reservoir_size", [64, None])
def test_sgais_streaming_trace_equals_offline_run_on_same_chunks_and_keys(reservoir_size):
    # A stream of 230 rows in chunks of 50 (the last one partial). With a reservoir smaller
    # than the stream, the offline run keeps the same reservoir; with None it draws from all
    # data seen, which a reservoir at least as large as the stream reproduces exactly.
    with jax.enable_x64(True):
        data, key_prior = _linear_problem(230, seed=3)
        options = _small_estimator()
        positions = streaming.linear_sample_prior(key_prior, options["num_particles"])
        key = jax.random.key(7)
        offline = jax.jit(lambda k: jaxz.run(
            jaxz.sgais(streaming.linear_log_prior, streaming.linear_log_likelihood, reservoir_size=reservoir_size,
                       **options), k, positions, data))(key)
        online = jaxz.sgais_stream(
            streaming.linear_log_prior, streaming.linear_log_likelihood, key, positions, _chunks(data, 50),
            reservoir_size=reservoir_size or 230, progress=False, **options,
        )
        assert int(offline.num_steps) == int(online.num_steps) == 5
        np.testing.assert_allclose(online.trace.log_z, offline.trace.log_z, rtol=1e-10)
        np.testing.assert_array_equal(online.trace.num_annealing_steps, offline.trace.num_annealing_steps)
        np.testing.assert_allclose(online.state.positions, offline.state.positions, rtol=1e-8, atol=1e-12)
        assert float(online.estimate.cost) == float(offline.estimate.cost)


def test_reservoir_inclusion_probabilities_are_uniform():
    # Algorithm R keeps each of the n items seen with probability R / n. Stream n = 60 items
    # in chunks of 7 (the last one partial) into R = 10 slots, over many independent keys;
    # the inclusion counts c_i are then sums of indicators of uniform R-subsets, and
    # X² = (n − 1)/n · Σ_i (c_i − m)² / (runs p (1 − p)) is approximately χ²_{n−1}.
    num_items, chunk, slots, runs = 60, 7, 10, 4000
    items = jnp.arange(num_items, dtype=jnp.int32)
    padded = jnp.concatenate([items, jnp.full((-num_items % chunk,), -1, jnp.int32)])

    def one_run(key):
        reservoir = jnp.full((slots,), -1, jnp.int32)
        for start in range(0, num_items, chunk):
            num_valid = min(chunk, num_items - start)
            key, sub = jax.random.split(key)
            reservoir = reservoir_update(sub, reservoir, start, padded[start:start + chunk], num_valid)
        return reservoir

    reservoirs = np.asarray(jax.jit(jax.vmap(one_run))(jax.random.split(jax.random.key(0), runs)))
    assert np.all(reservoirs >= 0)  # padding never enters
    assert all(len(set(row)) == slots for row in reservoirs)  # no item twice
    counts = np.bincount(reservoirs.ravel(), minlength=num_items)
    p = slots / num_items
    statistic = (num_items - 1) / num_items * np.sum((counts - runs * p) ** 2) / (runs * p * (1 - p))
    assert statistic < stats.chi2.ppf(1 - 1e-3, num_items - 1), (statistic, counts)
    # and the first R items fill the empty reservoir in order
    first = reservoir_update(jax.random.key(1), jnp.full((slots,), -1), 0, jnp.arange(slots), slots)
    assert first.tolist() == list(range(slots))


def test_sgais_rejects_bad_arguments():
    log_prior, log_likelihood = streaming.linear_log_prior, streaming.linear_log_likelihood
    with pytest.raises(ValueError, match="chunk_size"):
        jaxz.sgais(log_prior, log_likelihood, chunk_size=0)
    for bad in (1.0, 0.5, 10.5):
        with pytest.raises(ValueError, match=r"target_ess must be in \(1, num_particles\]"):
            jaxz.sgais(log_prior, log_likelihood, num_particles=10, target_ess=bad)
    jaxz.sgais(log_prior, log_likelihood, num_particles=10, target_ess=10.0)  # the closed end is fine
    data, key_prior = _linear_problem(100)
    positions = streaming.linear_sample_prior(key_prior, 10)
    with pytest.raises(ValueError, match="chunk_size"):
        jaxz.sgais(log_prior, log_likelihood, chunk_size=101).init(jax.random.key(0), positions, data)
    inputs, targets = data
    broken = (inputs.at[17, 2].set(jnp.nan), targets)
    with pytest.raises(ValueError, match="nan"):
        jaxz.sgais(log_prior, log_likelihood, chunk_size=50).init(jax.random.key(0), positions, broken)
    with pytest.raises(ValueError, match="nan"):
        jaxz.sgais_stream(log_prior, log_likelihood, jax.random.key(0), positions, _chunks(broken, 50),
                          chunk_size=50, reservoir_size=100, progress=False)
    with pytest.raises(ValueError, match="num_particles"):
        jaxz.sgais(log_prior, log_likelihood, chunk_size=50).init(jax.random.key(0), positions[:4], data)


def test_sgais_nan_likelihood_gets_zero_weight_and_flags_nonfinite_in_float32():
    # A likelihood that is nan wherever θ_0 > 0 (half the prior particles): those particles
    # get zero weight, the estimate stays finite and STATUS_NONFINITE is raised.
    def log_likelihood(theta, datum):
        value = streaming.linear_log_likelihood(theta, datum)
        return jnp.where(theta[0] > 0, jnp.nan, value)

    data, key_prior = _linear_problem(100, seed=5)
    positions = streaming.linear_sample_prior(key_prior, 6, dtype=jnp.float32)
    estimator = jaxz.sgais(streaming.linear_log_prior, log_likelihood, **_small_estimator())
    result = jax.jit(lambda k: jaxz.run(estimator, k, positions, data))(jax.random.key(2))
    assert result.estimate.log_z.dtype == jnp.float32
    assert np.isfinite(float(result.estimate.log_z))
    assert int(result.estimate.status) & jaxz.STATUS_NONFINITE
