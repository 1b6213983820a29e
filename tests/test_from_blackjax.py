"""``jaxz.kernels.from_blackjax`` without a step size: smc and ais tune it (issue 27 item 3)
like ``jaxz.kernels.hmc(path)``, or a ValueError names the parameters still needed.

The target is a 4-d Gaussian 10 times narrower than its base, off-centre (for AIS 3 times,
centred): log Z = ½ log det(2π σ² I) (the base is normalized), so each estimate is checked against
the exact value within 4 of its own reported standard errors."""
import blackjax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz

DIM, SCALE = 4, 0.1


def _exact(scale):
    return 0.5 * DIM * np.log(2 * np.pi * scale**2)


def _path(dtype=jnp.float64, scale=SCALE, shift=0.5):
    def log_base(x):
        return -0.5 * jnp.sum(x**2) - 0.5 * DIM * jnp.log(2 * jnp.pi).astype(x.dtype)

    def log_target(x):
        return -0.5 * jnp.sum((x - shift) ** 2) / scale**2

    return jaxz.paths.geometric(log_base, log_target,
                                sample_base=lambda key, n: jax.random.normal(key, (n, DIM), dtype))


@pytest.mark.slow  # CI time (default selection under ~10 minutes on 2 cores)
def test_nuts_without_step_size_is_tuned_inside_smc():
    with jax.enable_x64(True):
        path = _path()
        # other parameters pass through to blackjax (a short tree keeps the test cheap)
        smc = jaxz.smc(path, jaxz.kernels.from_blackjax(blackjax.nuts, path, max_num_doublings=3), num_mcmc_steps=2)
        result = jax.jit(lambda key: jaxz.run(smc, key, path.sample_base(jax.random.key(1), 128), max_steps=100))(
            jax.random.key(0))
        estimate, steps = result.estimate, int(result.num_steps)
        assert int(estimate.status) == 0
        assert abs(float(estimate.log_z) - _exact(SCALE)) < 4 * float(estimate.log_z_stderr)
        step_sizes = np.asarray(result.trace.kernel_parameters.step_size[:steps])
        assert np.all(np.isfinite(step_sizes)) and not np.allclose(step_sizes, DIM**-0.25)  # moved from the start
        # the mass matrix found the target's scale (whitened: the step is O(1), not O(σ))
        scales = np.sqrt(np.asarray(result.trace.kernel_parameters.inverse_mass_matrix[steps - 1]))
        np.testing.assert_allclose(scales, SCALE, rtol=0.5)
        assert step_sizes[-1] > 5 * SCALE


def test_mala_without_step_size_is_tuned_inside_ais():
    path = _path(jnp.float32, scale=0.3, shift=0.0)  # one MALA move per temperature: an easier target
    ais = jaxz.ais(path, jaxz.kernels.from_blackjax(blackjax.mala, path), jaxz.schedules.geometric(128))
    result = jax.jit(lambda key: jaxz.run(ais, key, path.sample_base(jax.random.key(3), 128)))(jax.random.key(2))
    assert int(result.estimate.status) == 0
    # bounded too, so that an inflated s.e. cannot pass: twice the spread of log Ẑ (sd 0.100 over 200 runs)
    assert abs(float(result.estimate.log_z) - _exact(0.3)) < 4 * float(result.estimate.log_z_stderr) < 4 * 2 * 0.100
    step_sizes = np.asarray(result.trace.kernel_parameters.step_size)
    assert np.all(step_sizes > 0) and np.ptp(step_sizes) > 0  # adapted between stages


def test_missing_parameters_that_cannot_be_tuned_are_named():
    path = _path(jnp.float32)
    with pytest.raises(ValueError, match="num_integration_steps"):
        jaxz.kernels.from_blackjax(blackjax.hmc, path)  # the number of leapfrog steps is not tuned here
    with pytest.raises(ValueError, match="inverse_mass_matrix=.*leave out step_size"):
        jaxz.kernels.from_blackjax(blackjax.nuts, path, step_size=0.1)
    with pytest.raises(ValueError, match="needs step_size, inverse_mass_matrix"):
        jaxz.kernels.base.blackjax_kernel(blackjax.nuts, path)  # the plain adapter tunes nothing
    with pytest.raises(ValueError, match="target_acceptance"):
        jaxz.kernels.from_blackjax(blackjax.mala, path, step_size=0.1, target_acceptance=0.5)
