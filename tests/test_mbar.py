"""MBAR against pymbar and against exact free energies of Gaussian states.

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
        f_k, stderr = jax.jit(jaxz.mbar)(jnp.asarray(u_kn), jnp.asarray(n_k))
        assert f_k.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(f_k), reference["f_k"], atol=1e-6, rtol=0)
    np.testing.assert_allclose(np.asarray(stderr), reference["stderr"], atol=1e-6, rtol=0)


def test_mbar_recovers_exact_free_energies_within_its_standard_error():
    """Gaussian states with exact Z_k: |f̂_k − f_k| < 4.5 × the asymptotic standard error, in float32."""
    rng = np.random.default_rng(1)
    num_states = 8
    n_k = np.full(num_states, 200)
    means, scales = np.linspace(0.0, 3.0, num_states), np.linspace(0.6, 2.0, num_states)
    u_kn, exact = _gaussian_states(rng, n_k, means, scales)
    f_k, stderr = jaxz.mbar(jnp.asarray(u_kn, jnp.float32), jnp.asarray(n_k))
    assert f_k.dtype == jnp.float32
    assert np.all(np.asarray(stderr)[1:] > 0)
    assert np.all(np.abs(np.asarray(f_k) - exact) <= 4.5 * np.asarray(stderr) + 1e-5)


def test_mbar_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="n_k"):
        jaxz.mbar(np.zeros((3, 10)), np.array([5, 5]))
    with pytest.raises(ValueError, match="n_k must sum"):
        jaxz.mbar(np.zeros((2, 10)), np.array([5, 4]))
    with pytest.raises(ValueError, match="u_kn"):
        jaxz.mbar(np.zeros(10), np.array([10]))
