"""SGAIS at its defaults (issue 29): no hand-set learning rate, any data scale.

Held-out streams (seeds used nowhere else): linear regression with features on scales
0.2 to 3 (exact evidence, ``jaxz.models.regression``), 4-class logistic regression and a
5-component 2-D Gaussian mixture (``jaxz.models.streaming``). Both references are
importance sampling with a multivariate t at the MAP (10⁵ draws, s.e. ≤ 0.006 nats;
benchmarks/sgais_logistic_reference.py and benchmarks/sgais_mixture_reference.py, their JSON
read here), the mixture's for one labelling plus log K! for its K! relabellings (modes ≥ 17
posterior sds apart). Cross-check against tempered SMC: logistic at 500 rows −384.072 ± 0.006
against −384.089 ± 0.120 (the mixture's, ``--smc-check``, not yet run to the end). The Laplace
values alone are low by 0.39 nats (0.10 %) on logistic and 0.34 (0.015 %) on the mixture at 500 rows.
Targets (issue 29): within 0.05 % of the exact or reference log evidence at the end of the
stream, within 0.2 % at every checkpoint.
"""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz.estimators.sgais import _target_count
from jaxz.models import regression, streaming

RESULTS = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks", "results")


def _stream(log_prior, log_likelihood, data, positions, chunk_size, key, **options):
    num_rows = jax.tree.leaves(data)[0].shape[0]
    host = jax.tree.map(np.asarray, data)
    chunks = (jax.tree.map(lambda leaf: leaf[start:start + chunk_size], host)
              for start in range(0, num_rows, chunk_size))
    return jaxz.sgais_stream(log_prior, log_likelihood, key, positions, chunks, chunk_size=chunk_size,
                             progress=False, **options)


def _scaled_regression(seed, num_rows, scales, noise_scale):
    """y = Xθ + ε, X_j ~ N(0, scale_j²), θ ~ N(0, I), ε ~ N(0, noise_scale²)."""
    key_x, key_theta, key_noise = jax.random.split(jax.random.key(seed), 3)
    scales = jnp.asarray(scales)
    inputs = jax.random.normal(key_x, (num_rows, scales.size)) * scales
    theta = jax.random.normal(key_theta, (scales.size,))
    return inputs, inputs @ theta + noise_scale * jax.random.normal(key_noise, (num_rows,))


def _relative_errors(trace, references):
    return (np.asarray(trace) - np.asarray(references)) / np.abs(np.asarray(references))


def _reference(name):
    """{rows: log Z} of a held-out stream from benchmarks/results/``name`` (importance sampling,
    s.e. ≤ 0.006 nats; written by benchmarks/sgais_logistic_reference.py or sgais_mixture_reference.py)."""
    with open(os.path.join(RESULTS, name)) as handle:
        checkpoints = json.load(handle)["checkpoints"]
    return {row["num_rows"]: row["log_z"] for row in checkpoints}


# --- cheap checks (default selection) ----------------------------------------------------

def test_sgais_target_ess_is_a_fraction_of_the_particles_and_legacy_counts_keep_their_meaning():
    # ESS* = target_ess · M for target_ess in (0, 1]; > 1 is the old absolute count: the
    # seed's 5 of 10 particles is 0.5 either way, and the ranges do not overlap.
    assert _target_count(0.5, 10) == _target_count(5.0, 10) == 5.0
    assert _target_count(0.5, 100) == 50.0 and _target_count(1.0, 7) == 7.0
    assert _target_count(0.1, 10) == 1.0  # the seed's Fig. 6 point: no annealing


def test_sgais_defaults_on_features_on_scales_0p2_to_3_take_m_from_the_positions_and_stay_within_4_sd():
    # Issue 29's second case, short: 8 features on scales 0.2..3, noise sd 0.5, 1,500 rows
    # in chunks of 500, 20 positions and no num_particles (the seed's defaults raised
    # "positions must hold num_particles = 10"). The first chunk goes from the prior to a
    # posterior ~10³ times narrower (the seed's lr = 0.1 gives −inf there, slow test below);
    # chunk 3 draws noisy mini-batches, where the automatic step is bias-limited.
    with jax.enable_x64(True):
        noise_scale = 0.5
        data = _scaled_regression(46, 1_500, np.geomspace(0.2, 3.0, 8), noise_scale)
        positions = jax.random.normal(jax.random.key(47), (20, 8))

        def log_likelihood(theta, datum):
            return regression.log_likelihood(theta, datum, noise_scale=noise_scale)

        result = _stream(streaming.linear_log_prior, log_likelihood, data, positions, 500, jax.random.key(48))
        ends = np.asarray(result.trace.num_seen)
        exact = [float(regression.exact_log_evidence((data[0][:end], data[1][:end]), noise_scale=noise_scale))
                 for end in ends]
        errors = np.asarray(result.trace.log_z) - np.asarray(exact)
        assert int(result.estimate.status) == 0
        # from the spread: 16 other keys gave errors of mean +0.25 / +0.24 / +0.20 and sd 0.58 /
        # 0.67 / 0.65 nats at the three checkpoints (0.2 % needs ~100 particles, the slow test
        # below), so within 3 nats is the mean plus 4 sd; the seed's settings are −inf or several
        # % (tens of nats) low. (The relative band of 1 % this had allowed 4 to 11 nats.)
        assert np.all(np.abs(errors) < 3.0), errors
        steps = np.asarray(result.trace.step_size)
        assert steps[-1] < steps[0]  # noisy chunks take the bias-limited step
        assert float(result.estimate.cost) == 20 * float(np.sum(result.trace.num_moves))


# --- the full held-out streams (slow) ----------------------------------------------------

def _check_stream(trace, references, final=5e-4, every=2e-3):
    errors = _relative_errors(trace, references)
    print(f"log Z {float(np.asarray(trace)[-1]):.2f} reference {float(references[-1]):.2f} relative error "
          f"{errors[-1]:+.2e} worst checkpoint {np.max(np.abs(errors)):.2e}")  # pytest -s: the README table
    assert abs(errors[-1]) < final, errors
    assert np.all(np.abs(errors) < every), errors
    return errors


@pytest.mark.slow
def test_sgais_defaults_on_8_features_on_scales_0p2_to_3_stream_match_exact_evidence():
    # Issue 29's second case in full: 5,000 rows in chunks of 1,000, 100 particles, defaults.
    with jax.enable_x64(True):
        noise_scale = 0.5
        data = _scaled_regression(50, 5_000, np.geomspace(0.2, 3.0, 8), noise_scale)
        positions = jax.random.normal(jax.random.key(51), (100, 8))

        def log_likelihood(theta, datum):
            return regression.log_likelihood(theta, datum, noise_scale=noise_scale)

        result = _stream(streaming.linear_log_prior, log_likelihood, data, positions, 1_000, jax.random.key(52))
        ends = np.asarray(result.trace.num_seen)
        exact = [float(regression.exact_log_evidence((data[0][:end], data[1][:end]), noise_scale=noise_scale))
                 for end in ends]
        assert int(result.estimate.status) == 0
        _check_stream(result.trace.log_z, exact)
        first = jax.tree.map(lambda leaf: leaf[:1_000], data)  # the seed's lr = 0.1: −inf from chunk 1
        seed = _stream(streaming.linear_log_prior, log_likelihood, first, positions, 1_000, jax.random.key(52),
                       learning_rate=0.1, target_ess=5.0, burn_in=20, resample=False)  # the old defaults
        # −inf (STATUS_DEGENERATE) on the data; on this one flagged and far off
        flagged = int(seed.estimate.status) & (jaxz.STATUS_DEGENERATE | jaxz.STATUS_LOW_ESS)
        exact = float(regression.exact_log_evidence(first, noise_scale=noise_scale))
        off = _relative_errors(seed.estimate.log_z, exact)
        assert flagged and (float(seed.estimate.log_z) == -np.inf or abs(off) > 0.02), (seed.estimate, off)


@pytest.mark.slow
def test_sgais_defaults_on_20000_row_linear_regression_match_exact_evidence():
    # Issue 29's first case: 20,000 rows (5 features + bias), chunks of 500; the seed's
    # lr = 0.1 ended 51.7 nats (0.24 %) low. 50 particles, defaults otherwise.
    with jax.enable_x64(True):
        data, _ = streaming.linear_regression_data(jax.random.key(53), 20_000)
        positions = streaming.linear_sample_prior(jax.random.key(54), 50)
        result = _stream(streaming.linear_log_prior, streaming.linear_log_likelihood, data, positions, 500,
                         jax.random.key(55))
        ends = np.asarray(result.trace.num_seen)
        exact = [float(streaming.linear_exact_log_evidence((data[0][:end], data[1][:end]))) for end in ends]
        assert int(result.estimate.status) == 0
        _check_stream(result.trace.log_z, exact)


@pytest.mark.slow
def test_sgais_defaults_on_logistic_regression_match_the_importance_sampling_reference():
    # 4 classes, 10 features (44 parameters), 3,000 rows in chunks of 500, 100 particles. At
    # target_ess 0.5 (the old default) 100 particles ended −0.05 to −0.09 % low (40: −0.165 %):
    # the first two chunks (exact gradients) lost −0.9 nats to the schedule's variance (sgais
    # docstring, target_ess); benchmarks/results/sgais_defaults.md has the spread over runs.
    with jax.enable_x64(True):
        (inputs, labels), _ = streaming.logistic_data(jax.random.key(56), 3_000)
        positions = streaming.logistic_sample_prior(jax.random.key(57), 100)
        result = _stream(streaming.logistic_log_prior, streaming.logistic_log_likelihood, (inputs, labels),
                         positions, 500, jax.random.key(58))

        ends = np.asarray(result.trace.num_seen)
        reference = _reference("sgais_logistic_reference.json")
        references = [reference[int(end)] for end in ends]
        assert int(result.estimate.status) == 0
        _check_stream(result.trace.log_z, references)


@pytest.mark.slow
def test_sgais_defaults_on_a_gaussian_mixture_match_the_importance_sampling_reference():
    # 5 components in 2-D (25 parameters), 3,000 rows in chunks of 500, 40 particles.
    with jax.enable_x64(True):
        num_components = 5
        points, _ = streaming.gmm_data(jax.random.key(59), 3_000, num_components)

        def log_prior(theta):
            return streaming.gmm_log_prior(theta, num_components)

        def log_likelihood(theta, datum):
            return streaming.gmm_log_likelihood(theta, datum, num_components)

        positions = streaming.gmm_sample_prior(jax.random.key(60), 40, num_components)
        result = _stream(log_prior, log_likelihood, points, positions, 500, jax.random.key(61))
        reference = _reference("sgais_mixture_reference.json")
        references = [reference[int(end)] for end in np.asarray(result.trace.num_seen)]
        assert int(result.estimate.status) == 0
        _check_stream(result.trace.log_z, references)
