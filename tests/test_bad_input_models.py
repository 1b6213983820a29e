"""The bad-input audit of the model modules (cases S3-S10, S14, S15 and C4, C5, C13, C14):
every input that used to be silently broadcast into a wrong number, or to give a NaN
or a raw JAX error, is now a ValueError naming the argument and the shape or range it
must have. Shape checks are static, so they also hold under ``jit``; value checks
read concrete inputs only. Tiny problems: the whole file runs in seconds."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz.models import gaussian, hmm, ising, lgssm, logistic, mixture, regression


def _two_state_hmm(emission):
    return hmm.hmm([0.5, 0.5], [[0.9, 0.1], [0.1, 0.9]], emission)


# --- hmm ------------------------------------------------------------------------------------

def test_hmm_refuses_gaussian_observations_of_rank_two_exactly_under_jit_and_in_the_particle_filter():
    """(T, 2) observations for K = 2 scalar emissions: state k was scored against y[k] (S3)."""
    params = _two_state_hmm(hmm.gaussian_emission([-1.0, 1.0], [1.0, 1.0]))
    _, observations = hmm.simulate(jax.random.key(2), params, 30)
    wide = jnp.stack([observations, observations + 3.0], axis=1)
    with pytest.raises(ValueError, match=r"observations must have shape \(T,\)"):
        hmm.exact_log_likelihood(params, wide)
    with pytest.raises(ValueError, match=r"observations must have shape \(T,\)"):
        jax.jit(hmm.exact_log_likelihood)(params, wide)
    with pytest.raises(ValueError, match=r"observations must have shape \(T,\)"):
        jaxz.run(jaxz.particle_filter(*hmm.particle_filter_callables(params)), jax.random.key(0), 64, wide)
    assert np.isfinite(jax.jit(hmm.exact_log_likelihood)(params, observations))  # the (T,) series still runs


def test_hmm_refuses_categorical_observations_of_rank_two():
    """(T, 2) categorical observations were broadcast into the (K,) filter: −22.97, no error (S4)."""
    params = _two_state_hmm(hmm.categorical_emission([[0.7, 0.3], [0.2, 0.8]]))
    with pytest.raises(ValueError, match=r"observations must have shape \(T,\)"):
        hmm.exact_log_likelihood(params, jnp.array([[0, 1], [1, 0], [1, 1]]))


def test_hmm_exact_log_likelihood_of_a_float16_model_accumulates_in_float32():
    """The forward algorithm over T = 200 steps in float16 lost 1.5 nats (S14). Promoted,
    it equals the float32 forward algorithm on the same (float16-rounded) inputs."""
    _, observations = hmm.simulate(jax.random.key(5), hmm.three_state(), 200)
    params, observations = hmm.three_state(jnp.float16), observations.astype(jnp.float16)
    widened = jax.tree.map(lambda leaf: leaf.astype(jnp.float32), params)
    reference = hmm.exact_log_likelihood(widened, observations.astype(jnp.float32))
    result = hmm.exact_log_likelihood(params, observations)
    assert result.dtype == jnp.float32
    np.testing.assert_allclose(result, reference, rtol=1e-5)


# --- lgssm ----------------------------------------------------------------------------------

@pytest.mark.parametrize("width", [None, 2])
def test_lgssm_refuses_observations_that_are_not_t_by_d_y_in_kalman_and_the_particle_filter(width):
    """d_y = 1: (T,) observations gave an IndexError (C4); (T, 2) a dot_general TypeError in
    the Kalman filter (C5) and a silently broadcast log Ẑ with status 0 in the filter (S5)."""
    params = lgssm.default(2, 1)
    _, observations = lgssm.simulate(jax.random.key(3), params, 20)
    bad = observations[:, 0] if width is None else jnp.concatenate([observations, observations + 1.0], axis=1)
    message = r"observations must have shape \(T, d_y\) = \(T, 1\)"
    with pytest.raises(ValueError, match=message):
        lgssm.kalman_log_likelihood(params, bad)
    with pytest.raises(ValueError, match=message):
        jax.jit(lgssm.kalman_log_likelihood)(params, bad)
    with pytest.raises(ValueError, match=message):
        jaxz.run(jaxz.particle_filter(*lgssm.particle_filter_callables(params)), jax.random.key(0), 64, bad)


# --- mixture --------------------------------------------------------------------------------

def test_mixture_refuses_means_without_a_dimension_axis():
    """1-D means (K,) were read as one point in d = K dimensions: 1.093, true 0.488 (S6)."""
    weights, means, scales = np.array([0.3, 0.7]), np.array([-5.0, 5.0]), np.array([1.0, 0.5])
    with pytest.raises(ValueError, match=r"means must have shape \(K, d\)"):
        mixture.exact_log_z(weights, means, scales)
    with pytest.raises(ValueError, match=r"means must have shape \(K, d\)"):
        mixture.log_density(jnp.zeros(1), weights, means, scales)
    np.testing.assert_allclose(mixture.exact_log_z(weights, means[:, None], scales),
                               np.log(np.sum(weights * np.sqrt(2 * np.pi) * scales)), rtol=1e-6)


@pytest.mark.parametrize("weights, scales, argument", [
    ([1.0], [1.0, 0.5], r"weights must have shape \(2,\)"),
    ([0.3, 0.7], [1.0], r"scales must have shape \(2,\)"),
    ([-0.3, 0.7], [1.0, 0.5], "weights must be finite and >= 0"),
    ([np.nan, 0.7], [1.0, 0.5], "weights must be finite and >= 0"),
    ([0.0, 0.0], [1.0, 0.5], "weights must not all be 0"),
    ([0.3, 0.7], [0.0, 0.5], "scales must be finite and > 0"),
    ([0.3, 0.7], [1.0, np.inf], "scales must be finite and > 0"),
])
def test_mixture_refuses_weights_and_scales_of_the_wrong_length_or_range(weights, scales, argument):
    """Length-1 arrays broadcast silently (2.061, 1.838); a negative or nan weight gave nan (S7)."""
    with pytest.raises(ValueError, match=argument):
        mixture.exact_log_z(np.asarray(weights), np.zeros((2, 2)), np.asarray(scales))
    with pytest.raises(ValueError, match=argument):
        mixture.log_density(jnp.zeros(2), np.asarray(weights), np.zeros((2, 2)), np.asarray(scales))


# --- regression and logistic ----------------------------------------------------------------

def test_regression_evidence_refuses_a_vector_prior_scale():
    """θ ~ N(0, τ² I) takes one τ: a (2,) prior_scale returned two numbers (S8)."""
    data, _ = regression.generate(jax.random.key(1), 20, 2)
    with pytest.raises(ValueError, match="prior_scale must be a scalar"):
        regression.exact_log_evidence(data, prior_scale=jnp.array([1.0, 2.0]))


def test_regression_evidence_refuses_data_that_is_not_x_n_by_d_and_y_n():
    """X and y of different lengths gave a dot_general TypeError, a 1-D X an unpacking error (C13)."""
    (inputs, targets), _ = regression.generate(jax.random.key(1), 20, 2)
    for data in [(inputs, targets[:-1]), (inputs[:, 0], targets)]:
        with pytest.raises(ValueError, match=r"data must be \(X \(N, d\), y \(N,\)\)"):
            regression.exact_log_evidence(data)
        with pytest.raises(ValueError, match=r"data must be \(X \(N, d\), y \(N,\)\)"):
            regression.posterior(data)


@pytest.mark.parametrize("label", [7, 3, -1])
def test_logistic_likelihood_refuses_labels_outside_the_classes(label):
    """3 classes: label 7 gave nan, −1 wrapped to the last class (S9). Traced, an
    out-of-range label has probability 0 under the model: −inf, never a wrapped class."""
    (inputs, labels), theta = logistic.generate(jax.random.key(0), 10, 2, 3)
    bad = labels.at[0].set(label)
    with pytest.raises(ValueError, match=r"labels .* must be integers in \[0, 2\]"):
        logistic.total_log_likelihood(theta, (inputs, bad))
    with pytest.raises(ValueError, match=r"labels .* must be integers in \[0, 2\]"):
        logistic.log_likelihood(theta, (inputs[0], bad[0]))
    assert np.isneginf(jax.jit(logistic.total_log_likelihood)(theta, (inputs, bad)))
    assert np.isneginf(jax.jit(logistic.log_likelihood)(theta, (inputs[0], bad[0])))
    assert np.isfinite(jax.jit(logistic.total_log_likelihood)(theta, (inputs, labels)))


@pytest.mark.parametrize("prior_scale", [-1.0, 0.0, np.nan])
def test_logistic_log_prior_refuses_a_scale_that_is_not_positive(prior_scale):
    """prior_scale = −1 gave nan (S9), as regression.log_prior already refuses."""
    _, theta = logistic.generate(jax.random.key(0), 10, 2, 3)
    with pytest.raises(ValueError, match="prior_scale must be finite and > 0"):
        logistic.log_prior(theta, prior_scale=prior_scale)


# --- ising ----------------------------------------------------------------------------------

def test_ising_constructors_refuse_non_finite_fields_couplings_and_inverse_temperature():
    """A nan field or coupling, or β = inf, made exact_log_z nan with no error (S10)."""
    field = np.zeros((3, 3))
    field[0, 0] = np.nan
    with pytest.raises(ValueError, match="field must be finite"):
        ising.periodic_lattice(jnp.asarray(field), 0.3)
    with pytest.raises(ValueError, match="inverse_temperature must be finite"):
        ising.periodic_lattice(jnp.zeros((3, 3)), np.inf)
    with pytest.raises(ValueError, match="field must be finite"):
        ising.pairwise([[0, 1]], 0.5, jnp.array([0.0, jnp.inf]))
    with pytest.raises(ValueError, match="couplings must be finite"):
        ising.pairwise([[0, 1], [1, 2]], jnp.array([0.5, jnp.nan]), jnp.zeros(3))
    assert np.isfinite(ising.exact_log_z(ising.periodic_lattice(jnp.zeros((3, 3)), 0.3)))


# --- gaussian -------------------------------------------------------------------------------

def test_gaussian_exact_log_z_refuses_a_non_finite_log_scale_and_an_empty_covariance():
    """log_scale = nan gave nan (S15); a (0, 0) covariance a numpy reduction error (C14)."""
    with pytest.raises(ValueError, match="log_scale must be finite"):
        gaussian.exact_log_z(jnp.eye(2), log_scale=jnp.nan)
    with pytest.raises(ValueError, match=r"cov must be a \(d, d\) matrix with d >= 1"):
        gaussian.exact_log_z(jnp.zeros((0, 0)))
    with pytest.raises(ValueError, match=r"cov must be a \(d, d\) matrix with d >= 1"):
        jax.jit(gaussian.exact_log_z)(jnp.zeros((2, 3)))


def test_gaussian_sample_refuses_a_mean_that_does_not_match_the_covariance():
    """mean (3,) with cov (2, 2) gave a dot_general TypeError (C14)."""
    with pytest.raises(ValueError, match=r"mean must have shape \(d,\) = \(2,\)"):
        gaussian.sample(jax.random.key(0), jnp.zeros(3), jnp.eye(2))
    with pytest.raises(ValueError, match=r"cov must be a \(d, d\) matrix"):
        gaussian.sample(jax.random.key(0), jnp.zeros(2), jnp.eye(2)[0])
    assert gaussian.sample(jax.random.key(0), jnp.zeros(2), jnp.eye(2), (5,)).shape == (5, 2)
