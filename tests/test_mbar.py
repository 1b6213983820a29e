"""MBAR against pymbar, against exact free energies of Gaussian states, and on the
inputs that used to give silently wrong numbers (nan, all-inf rows, no overlap, an
unconverged solve, negative counts).

pymbar 4.0.3 turns on JAX's 64-bit mode globally the first time it solves, so it runs
in a subprocess here: importing it in this process would change every later test's dtype.
"""
import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz.estimators.mbar import MBARInfo, MBARResult

PYMBAR_SCRIPT = """
import json, sys
import numpy as np
import pymbar
data = np.load(sys.argv[1])
mbar = pymbar.MBAR(data["u_kn"], data["n_k"])
result = mbar.compute_free_energy_differences()
print(json.dumps({"f_k": result["Delta_f"][0].tolist(), "stderr": result["dDelta_f"][0].tolist()}))
"""


def _gaussian_states(rng, n_k, means, scales):
    """Samples of N(μ_k, σ_k²) grouped by state and u_kn = (x − μ_k)² / 2σ_k², whose
    exact f_k = −log Z_k + log Z_0 with Z_k = √(2π) σ_k."""
    x = np.concatenate([rng.normal(m, s, n) for n, m, s in zip(n_k, means, scales)])
    u_kn = 0.5 * ((x[None, :] - means[:, None]) / scales[:, None]) ** 2
    exact = -(np.log(scales) - np.log(scales[0]))
    return u_kn, exact


def _overlapping_problem(seed=0):
    """Two sampled unit Gaussians one apart and an unsampled narrow state between them:
    every state overlaps the others well."""
    n_k = np.array([100, 100, 0])
    means, scales = np.array([0.0, 1.0, 0.5]), np.array([1.0, 1.0, 0.5])
    u_kn, exact = _gaussian_states(np.random.default_rng(seed), n_k, means, scales)
    return u_kn, n_k, exact


def _with_info(result):
    """An MBARResult as ((f_k, f_k_stderr), info)."""
    return tuple(result), result.info


def test_mbar_equals_pymbar_to_1e6_including_an_unsampled_state(tmp_path):
    rng = np.random.default_rng(0)
    n_k = np.array([150, 0, 90, 120, 60, 100])
    means, scales = np.linspace(0.0, 2.5, 6), np.linspace(1.0, 1.6, 6)
    u_kn, _ = _gaussian_states(rng, n_k, means, scales)
    u_kn = u_kn + 0.3 * np.arange(6)[:, None]  # arbitrary offsets: f_k shifts by them
    np.savez(tmp_path / "inputs.npz", u_kn=u_kn, n_k=n_k)
    output = subprocess.run(
        [sys.executable, "-c", PYMBAR_SCRIPT, str(tmp_path / "inputs.npz")],
        capture_output=True, text=True, check=True,
    )
    reference = json.loads(output.stdout.strip().splitlines()[-1])
    with jax.enable_x64(True):
        (f_k, stderr), info = _with_info(jaxz.mbar(jnp.asarray(u_kn), n_k))
        assert f_k.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(f_k), reference["f_k"], atol=1e-6, rtol=0)
    np.testing.assert_allclose(np.asarray(stderr), reference["stderr"], atol=1e-6, rtol=0)
    assert int(info.status) == jaxz.STATUS_OK and bool(info.converged)


def test_mbar_recovers_exact_free_energies_within_its_standard_error():
    """Gaussian states with exact Z_k: |f̂_k − f_k| < 4.5 × the asymptotic standard error, in float32."""
    rng = np.random.default_rng(1)
    num_states = 8
    n_k = np.full(num_states, 200)
    means, scales = np.linspace(0.0, 3.0, num_states), np.linspace(0.6, 2.0, num_states)
    u_kn, exact = _gaussian_states(rng, n_k, means, scales)
    f_k, stderr = jaxz.mbar(jnp.asarray(u_kn, jnp.float32), jnp.asarray(n_k))
    assert f_k.dtype == jnp.float32
    assert np.all(np.asarray(stderr)[1:] > 0) and np.all(np.isfinite(np.asarray(stderr)))
    assert np.all(np.abs(np.asarray(f_k) - exact) <= 4.5 * np.asarray(stderr) + 1e-5)


def test_mbar_standard_error_is_calibrated_over_400_vmapped_replicates():
    """rms reported s.e. / observed sd of f̂_k over 400 replicates in [0.75, 1.33] for
    every state (three sampled Gaussians and an unsampled one between them, float32),
    the mean error within 4 s.e. of the mean, and no replicate flagged."""
    n_k = np.array([60, 60, 60, 0])
    means, scales = np.array([0.0, 1.2, 2.4, 1.8]), np.array([1.0, 1.3, 0.8, 0.7])
    exact = -(np.log(scales) - np.log(scales[0]))

    def replicate(key):
        x = jnp.concatenate([m + s * jax.random.normal(k, (int(n),)) for k, n, m, s in
                             zip(jax.random.split(key, 3), n_k[:3], means[:3], scales[:3])])
        u_kn = 0.5 * ((x[None, :] - means[:, None]) / scales[:, None]) ** 2
        return jaxz.mbar(u_kn, n_k)

    (f_k, stderr), info = _with_info(jax.jit(jax.vmap(replicate))(jax.random.split(jax.random.key(0), 400)))
    f_k, stderr = np.asarray(f_k), np.asarray(stderr)
    np.testing.assert_array_equal(np.asarray(info.status), jaxz.STATUS_OK)
    observed_sd = f_k.std(axis=0, ddof=1)[1:]
    ratio = np.sqrt(np.mean(stderr[:, 1:] ** 2, axis=0)) / observed_sd
    assert np.all((ratio > 0.75) & (ratio < 1.33)), ratio
    assert np.all(np.abs(f_k.mean(axis=0) - exact)[1:] < 4 * observed_sd / np.sqrt(400))


def test_mbar_treats_a_nan_potential_as_zero_density_and_flags_it():
    """One nan entry: every f_k finite, equal to the solve with that entry +inf, STATUS_NONFINITE."""
    with jax.enable_x64(True):
        u_kn, n_k, _ = _overlapping_problem()
        with_nan, with_inf = u_kn.copy(), u_kn.copy()
        with_nan[1, 7], with_inf[1, 7] = np.nan, np.inf
        (f_k, stderr), info = _with_info(jaxz.mbar(with_nan, n_k))
        reference, reference_stderr = jaxz.mbar(with_inf, n_k)
    assert np.all(np.isfinite(np.asarray(f_k))) and np.all(np.isfinite(np.asarray(stderr)))
    np.testing.assert_allclose(np.asarray(f_k), np.asarray(reference), rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(stderr), np.asarray(reference_stderr), rtol=0, atol=1e-12)
    assert int(info.status) == jaxz.STATUS_NONFINITE


def test_mbar_gives_a_state_with_zero_density_everywhere_f_inf_and_leaves_the_others_unchanged():
    """An all-+inf row (Z_k = 0): f_k = +inf with s.e. inf and STATUS_DEGENERATE; the other
    states equal the solve without that row."""
    u_kn, n_k, _ = _overlapping_problem()
    u_kn[2] = np.inf
    with jax.enable_x64(True):
        (f_k, stderr), info = _with_info(jaxz.mbar(u_kn, n_k))
        reference, reference_stderr = jaxz.mbar(u_kn[:2], n_k[:2])
    assert np.isposinf(float(f_k[2])) and np.isposinf(float(stderr[2]))
    np.testing.assert_allclose(np.asarray(f_k[:2]), np.asarray(reference), rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(stderr[:2]), np.asarray(reference_stderr), rtol=0, atol=1e-12)
    assert int(info.status) == jaxz.STATUS_DEGENERATE


def test_mbar_flags_minus_inf_under_jit_and_refuses_it_eagerly():
    u_kn, n_k, _ = _overlapping_problem()
    u_kn[2, 3] = -np.inf
    with pytest.raises(ValueError, match="u_kn must not contain -inf"):
        jaxz.mbar(u_kn, n_k)
    (f_k, stderr), info = _with_info(jax.jit(lambda u: jaxz.mbar(u, n_k))(jnp.asarray(u_kn, jnp.float32)))
    assert np.all(np.isfinite(np.asarray(f_k))) and np.all(np.isfinite(np.asarray(stderr)))
    assert int(info.status) & jaxz.STATUS_NONFINITE


def test_mbar_unconverged_solve_is_flagged_with_infinite_standard_error():
    """max_iterations=1 cannot reach the tolerance from f = 0 on states with different
    normalizers: STATUS_MAX_STEPS, converged False, and the pair's s.e. is inf."""
    u_kn, n_k, _ = _overlapping_problem()
    with jax.enable_x64(True):
        (f_k, stderr), info = _with_info(jaxz.mbar(u_kn, n_k, max_iterations=1))
        _, pair_stderr = jaxz.mbar(u_kn, n_k, max_iterations=1)
        converged_info = jaxz.mbar(u_kn, n_k).info
    assert int(info.status) & jaxz.STATUS_MAX_STEPS and not bool(info.converged)
    assert int(info.num_iterations) == 1
    assert np.all(np.isposinf(np.asarray(stderr)[1:]))
    assert np.all(np.isposinf(np.asarray(pair_stderr)[1:]))
    info = converged_info
    assert bool(info.converged) and int(info.status) == jaxz.STATUS_OK


@pytest.mark.parametrize("num_far_samples", [0, 50])
def test_mbar_flags_a_state_without_overlap_and_not_the_others(num_far_samples):
    """A narrow Gaussian 8 sd away from the two sampled ones, unsampled or sampled:
    its overlap_ess is < 10, STATUS_FEW_PARTICLES, its s.e. inf; the overlapping states keep
    overlap_ess > 10 and their finite s.e., equal to the solve without the far state."""
    with jax.enable_x64(True):
        n_k = np.array([100, 100, num_far_samples])
        means, scales = np.array([0.0, 1.0, 8.0]), np.array([1.0, 1.0, 0.3])
        u_kn, _ = _gaussian_states(np.random.default_rng(2), n_k, means, scales)
        # tolerance 1e-9: with the far state sampled, the Hessian is near-singular and the
        # near states' gradient stalls at 1-2e-10, where the compiler's rounding decides
        # whether it passes the default 1e-10 (LLVM at -O0, as the tests compile: 2.1e-10)
        (f_k, stderr), info = _with_info(jaxz.mbar(u_kn, n_k, tolerance=1e-9))
        near = slice(None, 200)  # the far state's own samples have no density elsewhere
        reference, reference_stderr = jaxz.mbar(u_kn[:2, near], n_k[:2])
    overlap = np.asarray(info.overlap_ess)
    assert overlap[2] < 10 and np.all(overlap[:2] > 10), overlap
    assert int(info.status) == jaxz.STATUS_FEW_PARTICLES
    assert np.isposinf(float(stderr[2]))
    np.testing.assert_allclose(np.asarray(f_k[:2]), np.asarray(reference), atol=1e-8)
    np.testing.assert_allclose(np.asarray(stderr[:2]), np.asarray(reference_stderr), atol=1e-6)
    info = jaxz.mbar(*_overlapping_problem()[:2]).info
    assert int(info.status) == jaxz.STATUS_OK and np.all(np.asarray(info.overlap_ess) > 10)


def test_mbar_float32_converges_with_free_energies_in_the_hundreds():
    """float32 cannot reach |∇F|/n < 1e-5 when f_k ~ ±500 (its spacing there is 3e-5);
    the solve stops at the rounding level instead, unflagged, and agrees with the
    float64 solve (the offsets shift f_k exactly) to float32 resolution of f."""
    u_kn, n_k, _ = _overlapping_problem()
    offsets = np.array([0.0, 1000.0, 500.0])
    (f32, stderr), info = _with_info(jaxz.mbar(jnp.asarray(u_kn + offsets[:, None] + 1000.0, jnp.float32), n_k))
    with jax.enable_x64(True):
        f64, _ = jaxz.mbar(u_kn, n_k)
    assert int(info.status) == jaxz.STATUS_OK and bool(info.converged), info
    assert np.all(np.isfinite(np.asarray(stderr)))
    resolution = 20 * 1000 * np.finfo(np.float32).eps  # 20 float32 spacings at |f| = 1000
    np.testing.assert_allclose(np.asarray(f32), np.asarray(f64) + offsets, rtol=0, atol=resolution)


@jax.enable_x64(True)
def test_mbar_repeated_eager_calls_do_not_recompile():
    """The solver is one jitted function: a second eager call at the same shape and
    dtype, with other values and settings, triggers no XLA compilation (the old code
    recompiled its while_loop on every call, ~2.5 s each)."""
    u_kn, n_k, _ = _overlapping_problem(seed=4)
    jax.block_until_ready(jaxz.mbar(u_kn, n_k))
    compiled = []

    def listener(name, duration, **kwargs):
        if name == "/jax/core/compile/backend_compile_duration":
            compiled.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        other, _, _ = _overlapping_problem(seed=5)
        jax.block_until_ready(jaxz.mbar(other, n_k))
        jax.block_until_ready(jaxz.mbar(other + 1.0, n_k, max_iterations=50, min_overlap_ess=5.0))
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert compiled == []


@jax.enable_x64(True)
def test_mbar_returns_one_result_that_unpacks_as_the_pair_and_carries_its_info():
    """One return type: MBARResult unpacks and indexes as (f_k, f_k_stderr) (DESIGN.md §3),
    has .free_energies, .stderr and .info (an MBARInfo of the documented dtypes), and
    passes through jit unchanged. The old return_info=True three-tuple still works, with
    a DeprecationWarning."""
    u_kn, n_k, _ = _overlapping_problem()
    result = jaxz.mbar(u_kn, n_k)
    assert isinstance(result, MBARResult) and len(result) == 2
    f_k, stderr = result
    assert f_k is result.free_energies and stderr is result.stderr and result[1] is result.stderr
    info = result.info
    assert isinstance(info, MBARInfo)
    assert info.status.dtype == jnp.int32 and info.num_iterations.dtype == jnp.int32
    assert info.converged.dtype == jnp.bool_ and info.overlap_ess.shape == (3,)
    assert float(info.gradient_norm) <= 1e-10
    jitted = jax.jit(jaxz.mbar)(jnp.asarray(u_kn), jnp.asarray(n_k))
    assert isinstance(jitted, MBARResult)
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(jitted), jax.tree.leaves(result)))
    with pytest.warns(DeprecationWarning, match="return_info"):
        old_f_k, old_stderr, old_info = jaxz.mbar(u_kn, n_k, return_info=True)
    assert np.array_equal(old_f_k, f_k) and np.array_equal(old_stderr, stderr) and isinstance(old_info, MBARInfo)


def test_mbar_refuses_counts_that_do_not_match_the_grouping_of_the_samples():
    """Columns grouped by state, n_k of them from state k: a sample with zero density
    under the state the counts assign it to cannot have been drawn there. State 0 lives
    on x < 1, state 1 on x > −1; 3 + 5 samples: n_k = [5, 3] (it sums to N) is refused
    by name, and so are the right counts with the columns in the wrong order; the right
    grouping solves."""
    x = np.array([-3.0, -2.0, -0.5, 0.5, 2.0, 3.0, 4.0, 5.0])
    u_kn = np.stack([np.where(x < 1, 0.5 * x**2, np.inf), np.where(x > -1, 0.5 * x**2, np.inf)])
    with pytest.raises(ValueError, match="n_k does not match the grouping of u_kn's columns"):
        jaxz.mbar(u_kn, [5, 3])
    with pytest.raises(ValueError, match="n_k does not match the grouping"):
        jaxz.mbar(u_kn[:, ::-1], [3, 5])
    result = jaxz.mbar(u_kn, [3, 5])
    assert np.all(np.isfinite(np.asarray(result.free_energies))) and not result.info.status & jaxz.STATUS_NONFINITE


def test_mbar_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="n_k"):
        jaxz.mbar(np.zeros((3, 10)), np.array([5, 5]))
    with pytest.raises(ValueError, match="n_k must sum"):
        jaxz.mbar(np.zeros((2, 10)), np.array([5, 4]))
    with pytest.raises(ValueError, match="u_kn"):
        jaxz.mbar(np.zeros(10), np.array([10]))


def test_mbar_rejects_negative_or_fractional_counts_and_bad_settings():
    with pytest.raises(ValueError, match="n_k must be non-negative integers"):
        jaxz.mbar(np.zeros((2, 10)), np.array([12, -2]))
    with pytest.raises(ValueError, match="n_k must be non-negative integers"):
        jaxz.mbar(np.zeros((2, 10)), np.array([5.5, 4.5]))
    with pytest.raises(ValueError, match="max_iterations"):
        jaxz.mbar(np.zeros((2, 10)), np.array([5, 5]), max_iterations=0)
    with pytest.raises(ValueError, match="tolerance"):
        jaxz.mbar(np.zeros((2, 10)), np.array([5, 5]), tolerance=0.0)
    with pytest.raises(ValueError, match="u_kn\\[0\\]"):
        jaxz.mbar(np.concatenate([np.full((1, 10), np.inf), np.zeros((1, 10))]), np.array([0, 10]))
