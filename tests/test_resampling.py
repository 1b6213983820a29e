"""Resamplers: unbiased offspring counts (E[count_i] = M·w̃_i), masks, fixed size, jit."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxz import resampling

SCHEMES = ["multinomial", "stratified", "systematic", "residual"]
with np.errstate(divide="ignore"):
    LOG_WEIGHTS = np.log(np.array([0.05, 0.3, 0.02, 0.13, 0.25, 0.0, 0.17, 0.08]))
NUM_KEYS = 4000


def _counts(scheme, log_weights, num_samples, mask=None, seed=0):
    keys = jax.random.split(jax.random.key(seed), NUM_KEYS)
    draw = jax.jit(jax.vmap(lambda key: scheme(key, log_weights, num_samples, mask)))
    indices = draw(keys)
    assert indices.shape == (NUM_KEYS, num_samples) and indices.dtype == jnp.int32
    return np.asarray(jax.vmap(lambda idx: jnp.bincount(idx, length=log_weights.shape[0]))(indices))


@pytest.mark.parametrize("name", SCHEMES)
def test_expected_offspring_counts_equal_num_samples_times_weights(name, num_samples=13):
    """Mean offspring count over many keys is within 4.5 standard errors of M·w̃_i
    for every slot (standard errors from the spread of the counts); M = 13 draws from
    8 slots also checks an output size different from the input size."""
    scheme = resampling.SCHEMES[name]
    log_weights = jnp.asarray(LOG_WEIGHTS, jnp.float32)
    counts = _counts(scheme, log_weights, num_samples)
    expected = num_samples * np.exp(LOG_WEIGHTS)
    stderr = counts.std(axis=0, ddof=1) / np.sqrt(NUM_KEYS)
    # Slots whose count is (near-)deterministic get a floor at float32 round-off.
    np.testing.assert_array_less(np.abs(counts.mean(axis=0) - expected), 4.5 * stderr + 1e-4)
    assert np.all(counts.sum(axis=1) == num_samples)
    assert np.all(counts[:, 5] == 0)  # a zero weight is never chosen


@pytest.mark.parametrize("name", SCHEMES)
def test_masked_slots_are_never_chosen_and_live_slots_are_unbiased(name):
    scheme = resampling.SCHEMES[name]
    mask = jnp.array([True, True, False, True, False, True, True, False])
    log_weights = jnp.where(mask, 0.0, 5.0)  # padding carries large garbage weights
    counts = _counts(scheme, log_weights, 10, mask, seed=1)
    assert np.all(counts[:, ~np.asarray(mask)] == 0)
    live = counts[:, np.asarray(mask)]
    stderr = live.std(axis=0, ddof=1) / np.sqrt(NUM_KEYS)
    np.testing.assert_array_less(np.abs(live.mean(axis=0) - 10 / 5), 4.5 * stderr + 1e-4)


@pytest.mark.parametrize("name", SCHEMES)
def test_resampling_is_jittable_deterministic_per_key_and_float64_safe(name):
    scheme = resampling.SCHEMES[name]
    key = jax.random.key(3)
    with jax.enable_x64(True):
        log_weights = jnp.asarray(LOG_WEIGHTS)
        jitted = jax.jit(scheme, static_argnums=2)
        eager = scheme(key, log_weights, 16)
        assert eager.shape == (16,)
        np.testing.assert_array_equal(eager, jitted(key, log_weights, 16))
        np.testing.assert_array_equal(jitted(key, log_weights, 16), jitted(key, log_weights, 16))
        # unnormalized weights give the same draws as normalized ones
        np.testing.assert_array_equal(jitted(key, log_weights + 3.0, 16), eager)


@pytest.mark.parametrize("name", ["stratified", "systematic", "residual"])
def test_low_variance_schemes_copy_exact_integer_weights(name):
    """With M·w̃_i all integers, stratified/systematic/residual return exactly those counts."""
    log_weights = jnp.log(jnp.array([0.5, 0.25, 0.25, 0.0]))
    counts = np.bincount(np.asarray(resampling.SCHEMES[name](jax.random.key(0), log_weights, 8)), minlength=4)
    np.testing.assert_array_equal(counts, [4, 2, 2, 0])
