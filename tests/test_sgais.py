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
                               num_particles=20, target_ess=18.0, learning_rate=0.1, burn_in=20, resample=False)
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


@pytest.mark.parametrize("reservoir_size", [pytest.param(64, marks=pytest.mark.slow), None])
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
    # target_ess: a fraction in (0, 1], or a legacy count in (1, num_particles]
    for bad in (0.0, -0.5, 10.5):
        with pytest.raises(ValueError, match=r"target_ess must be a fraction of the particles in \(0, 1\]"):
            jaxz.sgais(log_prior, log_likelihood, num_particles=10, target_ess=bad)
    jaxz.sgais(log_prior, log_likelihood, num_particles=10, target_ess=10.0)  # a legacy count: all particles
    jaxz.sgais(log_prior, log_likelihood, num_particles=10, target_ess=1.0)  # a fraction: all particles
    jaxz.sgais(log_prior, log_likelihood, num_particles=10, target_ess=0.05)
    with pytest.raises(ValueError, match="learning_rate must be > 0"):
        jaxz.sgais(log_prior, log_likelihood, learning_rate=0.0)
    # the noise offset β̂ must stay below the friction the moves use: the seed's α = 0.2 with an explicit
    # learning rate and no alpha (β̂ = 0.5 had been accepted and gave nan positions, log Ẑ = −inf)
    with pytest.raises(ValueError, match=r"noise_offset must be in \[0, 0.2\)"):
        jaxz.sgais(log_prior, log_likelihood, learning_rate=0.1, noise_offset=0.5)
    with pytest.raises(ValueError, match=r"noise_offset must be in \[0, 0.5\)"):
        jaxz.sgais(log_prior, log_likelihood, alpha=0.5, noise_offset=0.5)
    jaxz.sgais(log_prior, log_likelihood, learning_rate=0.1, noise_offset=0.1)
    jaxz.sgais(log_prior, log_likelihood, noise_offset=0.5)  # the automatic step: critical damping
    with pytest.raises(ValueError, match="max_chunk_bias must be > 0"):
        jaxz.sgais(log_prior, log_likelihood, max_chunk_bias=0.0)
    with pytest.raises(ValueError, match="resample must be"):
        jaxz.sgais(log_prior, log_likelihood, resample="always")
    with pytest.raises(ValueError, match="weighting must be one of"):
        jaxz.sgais(log_prior, log_likelihood, weighting="reset")
    with pytest.raises(ValueError, match="unknown sgais options"):
        jaxz.sgais_stream(log_prior, log_likelihood, jax.random.key(0), None, [], weights="carried")
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
        jaxz.sgais(log_prior, log_likelihood, chunk_size=50, num_particles=10).init(jax.random.key(0),
                                                                                    positions[:4], data)
    with pytest.raises(ValueError, match=r"legacy count in \(1, num_particles\] = \(1, 4\]"):
        jaxz.sgais(log_prior, log_likelihood, chunk_size=50, target_ess=5.0).init(jax.random.key(0),
                                                                                  positions[:4], data)


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


def _chunk_errors(options, num_data, num_runs, seed=0):
    """Per-chunk errors of log p(D_k | D_<k) against the exact (conjugate) increments, over
    ``num_runs`` vmapped SGAIS runs on linear regression: (errors (runs, chunks), annealing steps)."""
    data, _ = _linear_problem(num_data, seed=3)
    chunk_size = options["chunk_size"]
    ends = np.arange(chunk_size, num_data + 1, chunk_size)
    exact = np.array([float(streaming.linear_exact_log_evidence((data[0][:n], data[1][:n]))) for n in ends])
    estimator = jaxz.sgais(streaming.linear_log_prior, streaming.linear_log_likelihood, **options)

    def one(key):
        key_prior, key_run = jax.random.split(key)
        positions = streaming.linear_sample_prior(key_prior, options["num_particles"])
        result = jaxz.run(estimator, key_run, positions, data)
        return result.trace.log_z_increment, result.trace.num_annealing_steps

    increments, steps = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(seed), num_runs))
    return np.asarray(increments) - np.diff(exact, prepend=0.0), np.asarray(steps)


def test_sgais_target_ess_one_particle_takes_each_chunk_in_one_step():
    # Seed Fig. 6: ESS >= 1 always, so ESS* = 0.1 M = 1 particle reweights by the whole chunk at once
    # (no annealing); the estimate stays finite and the first chunk, plain importance
    # sampling from the prior, is far off (the seed's "high variance" without annealing).
    with jax.enable_x64(True):
        options = dict(num_particles=10, chunk_size=100, minibatch_size=100, target_ess=0.1, burn_in=5,
                       learning_rate=0.1, resample=False)
        errors, steps = _chunk_errors(options, 300, 4)
        assert np.all(steps == 1)
        assert np.all(np.isfinite(errors))
        assert np.mean(errors[:, 0]) < -3.0, errors[:, 0]  # annealed (target_ess 5) it is ~ -1


@pytest.mark.parametrize("variant", [pytest.param(dict(), marks=pytest.mark.slow), dict(weighting="carried"),
                                     dict(resample="every_move"),
                                     pytest.param(dict(resample="chunk", weighting="carried"), marks=pytest.mark.slow),
                                     pytest.param(dict(resample="every_move", learning_rate=None, burn_in=None),
                                                  marks=pytest.mark.slow)])
def test_sgais_weighting_and_resampling_variants_match_exact_evidence(variant):
    # Alg. 1 with w set once (lines 2, 12) or reset per chunk, with or without resampling
    # before each SGHMC move (line 9, w <- mean w) or after a degenerate chunk. At a small
    # learning rate the SGHMC bias is small (m·lr·tr(I_1)/(4 alpha |B|) = 0.1 nats per chunk,
    # below). Z-hat is (close to) unbiased for Z, so log Z-hat is low by about Var/2
    # (log-normal; carried weights without resampling degenerate across chunks: sd 1.7,
    # mean -2.3). Over 16 runs at N = 200, mean + Var/2 must sit within 4 s.e. + 0.6 nats
    # of the exact log evidence. A missing w <- mean w, or weights not kept relative to
    # Z-hat, is off by tens of nats.
    with jax.enable_x64(True):
        options = dict(num_particles=16, chunk_size=50, minibatch_size=50, target_ess=10.0, burn_in=10,
                       learning_rate=0.05, resample=False)
        options.update(variant)
        errors, _ = _chunk_errors(options, 200, 16)
        total = errors.sum(axis=1)
        stderr = total.std(ddof=1) / np.sqrt(total.size)
        assert abs(total.mean() + 0.5 * total.var(ddof=1)) < 4 * stderr + 0.6, (total.mean(), total.var(), stderr)


def test_sgais_minibatch_noise_bias_per_chunk_matches_m_lr_trace_fisher_over_4_alpha_b():
    # Mini-batch gradient noise heats SGHMC: with eta = lr/n and a gradient of variance
    # n² I_1/|B|, the stationary variance grows by lr/(2 alpha |B|) per unit of I_1, and
    # thermodynamic integration of E[log p(D_k|θ)] over λ under that wider distribution
    # gives a per-chunk bias of -m·lr·tr(I_1)/(4 alpha |B|) (n >> m, many annealing steps).
    # Linear regression with unit noise: I_1 = E[x xᵀ] = I_6, tr = 6; chunk m = |B| = 250,
    # lr = 1, alpha = 0.2: 7.5 nats. Measured on chunks 3..6 (n/(n+m) >= 0.67):
    # about -8.0 ± 0.05 (2 runs); the band ±25% covers the neglected n/(n+m) and
    # discretization factors (see the sgais docstring).
    with jax.enable_x64(True):
        options = dict(num_particles=20, target_ess=18.0, chunk_size=250, minibatch_size=250, burn_in=20,
                       learning_rate=1.0, resample=False)
        errors, _ = _chunk_errors(options, 1500, 2)
        later = errors[:, 2:].mean(axis=1)
        predicted = -250 * 1.0 * 6 / (4 * 0.2 * 250)
        assert 0.75 * predicted > later.mean() > 1.25 * predicted, later


@pytest.mark.slow  # CI time: run with pytest -m slow
def test_sgais_first_chunk_with_10_particles_is_low_by_half_the_variance_of_log_z():
    # The first chunk is AIS from the prior: unbiased for Z, so E[log Z-hat] ≈ log Z − Var/2
    # (Jensen, log-normal). With the seed's 10 particles / target_ess 5 on 500 observations:
    # measured −4.0 ± 0.45 nats (32 runs; sd 2.5, so Var/2 = 3.2, the rest SGHMC's own bias),
    # 20 particles / target_ess 18 −0.7 ± 0.1 (sd 0.6). Check the 10-particle case: clearly
    # below the exact value and within 1.5 nats of −Var/2.
    with jax.enable_x64(True):
        options = dict(num_particles=10, target_ess=5.0, chunk_size=500, minibatch_size=500, learning_rate=0.1,
                       resample=False)
        errors, _ = _chunk_errors(options, 500, 24)
        first = errors[:, 0]
        stderr = first.std(ddof=1) / np.sqrt(first.size)
        assert first.mean() < -3 * stderr, (first.mean(), stderr)
        assert abs(first.mean() + 0.5 * first.var(ddof=1)) < 1.5, (first.mean(), first.var(ddof=1))
