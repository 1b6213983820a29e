"""jaxz.models.rbm: exact log Z, marginals, the sequence of eq. (14), annealing path, training."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz.models import rbm as rbm_lib


def random_rbm(key, num_visible, num_hidden, scale=1.0, dtype=jnp.float32):
    k1, k2, k3 = jax.random.split(key, 3)
    return rbm_lib.RBM(
        scale * jax.random.normal(k1, (num_visible, num_hidden), dtype),
        jax.random.normal(k2, (num_visible,), dtype),
        jax.random.normal(k3, (num_hidden,), dtype),
    )


def all_states(num_bits):
    return np.array(list(itertools.product([0.0, 1.0], repeat=num_bits)))


def brute_force_log_z(rbm):
    """log Σ_v Σ_h exp(a·v + b·h + vᵀW h) over BOTH layers, in float64 numpy."""
    W, a, b = (np.asarray(p, np.float64) for p in rbm)
    v, h = all_states(W.shape[0]), all_states(W.shape[1])
    energy = (v @ a)[:, None] + (h @ b)[None, :] + v @ W @ h.T
    top = energy.max()
    return top + np.log(np.exp(energy - top).sum())


@pytest.mark.parametrize("shape", [(7, 4), (4, 7), (5, 5)])
def test_exact_log_z_equals_brute_force_over_both_layers(shape):
    rbm = random_rbm(jax.random.key(sum(shape)), *shape)
    expected = brute_force_log_z(rbm)
    # chunk_bits=2 forces several lax.map chunks
    for chunk_bits in (12, 2, 0):
        np.testing.assert_allclose(rbm_lib.exact_log_z(rbm, chunk_bits=chunk_bits), expected, rtol=1e-5)


def test_exact_log_z_float64_follows_dtype():
    with jax.enable_x64(True):
        rbm = random_rbm(jax.random.key(3), 6, 5, dtype=jnp.float64)
        value = rbm_lib.exact_log_z(rbm, chunk_bits=3)
        assert value.dtype == jnp.float64
        np.testing.assert_allclose(value, brute_force_log_z(rbm), rtol=1e-12)


@pytest.mark.parametrize("shape", [(10, 12), (12, 10)])
def test_chunked_exact_log_z_equals_enumeration_of_the_other_layer(shape):
    """exact_log_z sums the smaller layer out in lax.map chunks; the larger layer summed out
    instead (all 2^12 states of it, float64 numpy) gives the same log Z. Peaked weights
    (scale 3) make the sum dominated by a few states, as in a trained RBM."""
    with jax.enable_x64(True):
        rbm = random_rbm(jax.random.key(sum(shape) + shape[0]), *shape, scale=3.0, dtype=jnp.float64)
        W, a, b = (np.asarray(p) for p in rbm)
        if shape[0] < shape[1]:  # enumerate the hidden layer: log f(h) = b·h + Σ_i softplus(a_i + (W h)_i)
            states = all_states(shape[1])
            log_f = states @ b + np.logaddexp(0.0, states @ W.T + a).sum(axis=1)
        else:  # enumerate the visible layer: log f(v) = a·v + Σ_j softplus(b_j + (vᵀW)_j)
            states = all_states(shape[0])
            log_f = states @ a + np.logaddexp(0.0, states @ W + b).sum(axis=1)
        expected = log_f.max() + np.log(np.exp(log_f - log_f.max()).sum())
        for chunk_bits in (3, 12):  # 2^7 chunks of 8 states, and one chunk
            np.testing.assert_allclose(rbm_lib.exact_log_z(rbm, chunk_bits=chunk_bits), expected, rtol=1e-12)


def test_log_marginals_of_either_layer_give_the_same_log_z():
    rbm = random_rbm(jax.random.key(4), 6, 5)
    from_visible = jax.nn.logsumexp(rbm_lib.log_marginal_visible(rbm, jnp.asarray(all_states(6), jnp.float32)))
    from_hidden = jax.nn.logsumexp(rbm_lib.log_marginal_hidden(rbm, jnp.asarray(all_states(5), jnp.float32)))
    np.testing.assert_allclose(from_visible, from_hidden, rtol=1e-5)
    np.testing.assert_allclose(from_visible, brute_force_log_z(rbm), rtol=1e-5)


def test_exact_log_z_rejects_too_large_layers():
    rbm = rbm_lib.RBM(jnp.zeros((40, 31)), jnp.zeros(40), jnp.zeros(31))
    with pytest.raises(ValueError, match="at most 30"):
        rbm_lib.exact_log_z(rbm)


def test_base_rate_log_z_is_sum_of_softplus_and_matches_smoothed_means():
    data = jnp.asarray([[1, 0, 1], [1, 1, 0], [1, 0, 0], [0, 0, 0]], jnp.float32)
    base = rbm_lib.base_rate(data, pseudo_count=1.0)
    means = (np.array([3, 1, 1]) + 1.0) / (4 + 2.0)
    np.testing.assert_allclose(jax.nn.sigmoid(base.a), means, rtol=1e-6)
    np.testing.assert_allclose(rbm_lib.exact_log_z(base), np.sum(np.log1p(np.exp(base.a))), rtol=1e-6)


def test_sequential_model_log_z_ratios_equal_enumeration_eq14():
    """Z_1 and every Z_{n+1} = Σ_{v_[n]} f_n(v_[n]) W(v_[n]) (seed eq. 14) by enumeration,
    in a non-trivial unit order."""
    rbm = random_rbm(jax.random.key(5), 5, 3)
    order = np.array([3, 0, 4, 1, 2])
    model = rbm_lib.sequential_model(rbm, order=order, gibbs_sweeps=1)
    states = jnp.asarray(all_states(5), jnp.float32)

    def log_z_first(n):  # brute force: units order[:n] free, the others clamped to 0 and dropped
        keep = np.isin(np.arange(5), order[:n])
        unique = np.unique(np.asarray(states) * keep, axis=0)
        return jax.nn.logsumexp(rbm_lib.log_marginal_visible(rbm, jnp.asarray(unique)))

    np.testing.assert_allclose(model.log_z1, log_z_first(1), rtol=1e-5)
    for n in range(1, 5):
        keep = np.isin(np.arange(5), order[:n])
        unique = jnp.asarray(np.unique(np.asarray(states) * keep, axis=0))
        log_f_n = rbm_lib.log_marginal_visible(rbm, unique)
        log_w = jax.vmap(model.log_smooth_weight, in_axes=(0, None))(unique, n)
        np.testing.assert_allclose(jax.nn.logsumexp(log_f_n + log_w), log_z_first(n + 1), rtol=1e-5)
    np.testing.assert_allclose(log_z_first(5), rbm_lib.exact_log_z(rbm), rtol=1e-5)


def test_sequential_model_move_touches_only_included_units():
    rbm = random_rbm(jax.random.key(6), 6, 3)
    model = rbm_lib.sequential_model(rbm, order=np.arange(6), gibbs_sweeps=3)
    x = jnp.asarray([1.0, 0.0, 1.0, 7.0, 7.0, 7.0])  # entries past n = 3 are unused
    moved = jax.vmap(model.move, in_axes=(0, None, None))(jax.random.split(jax.random.key(0), 50), x, 3)
    np.testing.assert_array_equal(moved[:, 3:], 7.0)
    assert set(np.unique(moved[:, :3])) <= {0.0, 1.0}


def test_sequential_model_rejects_non_permutation_order():
    rbm = random_rbm(jax.random.key(7), 4, 2)
    with pytest.raises(ValueError, match="order must be a permutation"):
        rbm_lib.sequential_model(rbm, order=[0, 1, 1, 2])
    with pytest.raises(ValueError, match="gibbs_sweeps"):
        rbm_lib.sequential_model(rbm, gibbs_sweeps=0)


def test_sequential_model_takes_an_rbm_with_numpy_parameters():
    """An RBM(W, a, b) of numpy arrays (e.g. loaded from disk) runs under jit like a jax one."""
    rbm = random_rbm(jax.random.key(8), 5, 3)
    as_numpy = rbm_lib.RBM(*(np.asarray(p) for p in rbm))
    models = [rbm_lib.sequential_model(r, gibbs_sweeps=1) for r in (rbm, as_numpy)]
    draws = [jax.jit(model.sample_initial)(jax.random.key(0)) for model in models]
    np.testing.assert_array_equal(*draws)
    weights = [jax.jit(model.log_smooth_weight)(draws[0], 1) for model in models]
    np.testing.assert_allclose(*weights, rtol=1e-6)


def test_annealing_path_ends_are_base_and_target_with_exact_log_z0():
    base = rbm_lib.RBM(jnp.zeros((5, 2)), jnp.asarray([0.3, -1.0, 0.5, 0.0, 2.0]), jnp.asarray([0.1, -0.2]))
    target = random_rbm(jax.random.key(8), 5, 3)
    path, kernel = rbm_lib.annealing(base, target)
    v = jnp.asarray(all_states(5), jnp.float32)
    at = jax.vmap(path.log_density, in_axes=(0, None))
    np.testing.assert_allclose(at(v, 0.0), rbm_lib.log_marginal_visible(base, v), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(at(v, 1.0), rbm_lib.log_marginal_visible(target, v), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(path.log_z0, brute_force_log_z(base), rtol=1e-6)
    assert kernel.num_transitions == 1


def test_annealing_gibbs_kernel_leaves_intermediate_distribution_invariant():
    """Start 4,000 chains at exact draws of f_β (by enumeration), apply the kernel at β,
    and compare the state frequencies with f_β by a chi-square statistic."""
    base = rbm_lib.base_rate(jnp.asarray([[1, 0, 1, 0], [0, 0, 1, 1], [1, 1, 1, 0]], jnp.float32))
    target = random_rbm(jax.random.key(9), 4, 3)
    path, kernel = rbm_lib.annealing(base, target)
    beta = 0.6
    v = jnp.asarray(all_states(4), jnp.float32)
    log_p = jax.vmap(path.log_density, in_axes=(0, None))(v, beta)
    probabilities = np.asarray(jax.nn.softmax(log_p), np.float64)
    num = 4000
    key_start, key_step = jax.random.split(jax.random.key(10))
    start = v[jax.random.categorical(key_start, log_p, shape=(num,))]
    states = jax.vmap(kernel.init, in_axes=(0, None))(start, beta)
    moved, _ = jax.vmap(kernel.step, in_axes=(0, 0, None))(jax.random.split(key_step, num), states, beta)
    codes = np.asarray(moved.position @ (2.0 ** jnp.arange(3, -1, -1))).astype(int)
    counts = np.bincount(codes, minlength=16)
    chi2 = np.sum((counts - num * probabilities) ** 2 / (num * probabilities))
    assert chi2 < 15 + 5 * np.sqrt(2 * 15), chi2  # 15 degrees of freedom, mean + 5 sd


@pytest.mark.parametrize("method", ["cd", "pcd"])
def test_train_lowers_reconstruction_error(method):
    data = jaxz.data.digits_binarized().train
    result = rbm_lib.train(jax.random.key(0), data, 8, method=method, k=2, num_epochs=4, batch_size=200)
    assert result.rbm.W.shape == (64, 8)
    errors = np.asarray(result.reconstruction_error)
    assert errors.shape == (4,) and np.all(np.isfinite(errors))
    assert errors[-1] < errors[0]


def test_train_rejects_bad_arguments():
    data = jnp.zeros((10, 4))
    with pytest.raises(ValueError, match="method"):
        rbm_lib.train(jax.random.key(0), data, 2, method="gibbs")
    with pytest.raises(ValueError, match="batch_size"):
        rbm_lib.train(jax.random.key(0), data, 2, batch_size=11)
    with pytest.raises(ValueError, match="k must be"):
        rbm_lib.train(jax.random.key(0), data, 2, k=0)
