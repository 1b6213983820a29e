"""The CONFUSING errors of the second audit (C1-C3, C6, C8, C15-C18): bad input that was
refused deep inside JAX ("dtype argument to `normal` must be a float", "Incompatible types
for broadcasting", "scan body carry types differ", a betainc TypeError) is now a ValueError
naming the argument and what is accepted. Tiny problems: the whole file runs in seconds."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz.models import lgssm, logistic, rbm


def _log_base(x):
    return -0.5 * jnp.sum(x**2)


def _log_target(x):
    return -0.5 * jnp.sum((x - 1.0) ** 2)


def _path():
    return jaxz.paths.geometric(_log_base, _log_target)


# --- C1 / C2: integer or bool positions ---------------------------------------------------

def _annealers(path, kernel):
    return {"ais": jaxz.ais(path, kernel, jaxz.schedules.linear(3)),
            "raise_": jaxz.raise_(path, kernel, jaxz.schedules.linear(3)),
            "rts": jaxz.rts(path, kernel, jaxz.schedules.linear(3), num_sweeps=4),
            "smc": jaxz.smc(path, kernel, betas=jaxz.schedules.linear(3))}


@pytest.mark.parametrize("name", ["ais", "raise_", "rts", "smc"])
@pytest.mark.parametrize("dtype", [jnp.int32, jnp.bool_])
def test_non_floating_positions_are_refused_by_name(name, dtype):
    """rwmh draws normal noise of the positions' dtype: int32 positions read "dtype argument
    to `normal` must be a float", bool ones blamed the rank of the positions."""
    path = _path()
    estimator = _annealers(path, jaxz.kernels.rwmh(path, 0.5))[name]
    with pytest.raises(ValueError, match=r"positions must be a floating array \(float32 or float64\), got "):
        estimator.init(jax.random.key(0), jnp.zeros((16, 2), dtype))


def test_non_floating_positions_are_refused_for_a_gradient_kernel_too():
    path = _path()
    estimator = jaxz.ais(path, jaxz.kernels.hmc(path, 0.2, 3), jaxz.schedules.linear(3))
    with pytest.raises(ValueError, match="positions must be a floating array.*got int32"):
        estimator.init(jax.random.key(0), jnp.zeros((16, 2), jnp.int32))


def test_integer_spins_still_run_with_a_discrete_kernel():
    """A Gibbs kernel moves int8 spins: those positions are not refused."""
    path = jaxz.paths.geometric(lambda x: jnp.zeros(()), lambda x: 0.3 * jnp.sum(x).astype(jnp.float32),
                                log_z0=4 * np.log(2.0))
    kernel = jaxz.kernels.gibbs(path, values=(-1, 1))
    spins = (2 * jax.random.bernoulli(jax.random.key(1), 0.5, (32, 4)) - 1).astype(jnp.int8)
    for estimator in _annealers(path, kernel).values():
        assert np.isfinite(float(jaxz.run(estimator, jax.random.key(0), spins).estimate.log_z))


def test_floating_positions_check_holds_under_jit():
    path = _path()
    estimator = jaxz.ais(path, jaxz.kernels.rwmh(path, 0.5), jaxz.schedules.linear(3))
    with pytest.raises(ValueError, match="positions must be a floating array"):
        jax.jit(lambda x: jaxz.run(estimator, jax.random.key(0), x).estimate)(jnp.zeros((16, 2), jnp.int32))
    estimate = jax.jit(lambda x: jaxz.run(estimator, jax.random.key(0), x).estimate)(jnp.zeros((16, 2)))
    assert np.isfinite(float(estimate.log_z))


# --- C3: a vector of scales of the wrong length -------------------------------------------

@pytest.mark.parametrize("make", [jaxz.kernels.rwmh, jaxz.kernels.metropolis_within_gibbs])
def test_scale_of_the_wrong_length_is_refused_at_init(make):
    path = _path()
    kernel = make(path, jnp.ones(3))
    with pytest.raises(ValueError, match=r"scale must be a scalar or have shape \(2,\)"):
        kernel.init(jnp.zeros(2), 0.0)
    with pytest.raises(ValueError, match="scale"):
        jaxz.run(jaxz.ais(path, kernel, jaxz.schedules.linear(3)), jax.random.key(0), jnp.zeros((16, 2)))
    assert make(path, jnp.ones(2)).init(jnp.zeros(2), 0.0).position.shape == (2,)


# --- C6: integer model parameters ---------------------------------------------------------

def test_lgssm_refuses_integer_parameters_by_name():
    model = lgssm.default(2, 1)
    _, observations = lgssm.simulate(jax.random.key(3), model, 5)
    with pytest.raises(ValueError, match="initial_mean must be a floating array"):
        lgssm.kalman_log_likelihood(model._replace(initial_mean=jnp.zeros(2, jnp.int32)), observations)
    with pytest.raises(ValueError, match="transition_cov must be a floating array"):
        lgssm.check(model._replace(transition_cov=jnp.eye(2, dtype=jnp.int32)))


def test_rbm_refuses_integer_parameters_by_name():
    weights = jnp.ones((4, 2), jnp.int32)
    with pytest.raises(ValueError, match=r"rbm\.W must be a floating array"):
        jaxz.arm(rbm.sequential_model(rbm.RBM(weights, jnp.zeros(4), jnp.zeros(2)), gibbs_sweeps=1), 4)
    with pytest.raises(ValueError, match=r"rbm\.b must be a floating array"):
        rbm.check_rbm(rbm.RBM(jnp.zeros((4, 2)), jnp.zeros(4), jnp.zeros(2, jnp.bool_)))


# --- C8: jaxz.evidence with a sample_base of the wrong dtype ------------------------------

@pytest.mark.parametrize("dtype", [jnp.float16, jnp.int32])
def test_evidence_names_a_sample_base_of_the_wrong_dtype(dtype):
    def sample_base(key, n):
        return jax.random.normal(key, (n, 1)).astype(dtype)

    path = jaxz.paths.geometric(_log_base, _log_target, sample_base=sample_base)
    with pytest.raises(ValueError, match=rf"sample_base must draw float32 or float64 .* got {jnp.dtype(dtype).name}"):
        jaxz.evidence(path, jax.random.key(0), num_runs=2, num_particles=16)


# --- C15: MBAR with no samples ------------------------------------------------------------

def test_mbar_with_no_samples_says_so():
    with pytest.raises(ValueError, match="u_kn must hold at least one sample"):
        jaxz.mbar(np.zeros((2, 0)), [0, 0])


# --- C16: log_z0 a string or a bool -------------------------------------------------------

@pytest.mark.parametrize("log_z0", ["1", True, np.bool_(False), jnp.asarray(True)])
def test_geometric_refuses_a_string_or_bool_log_z0(log_z0):
    with pytest.raises(ValueError, match="log_z0 must be a real number"):
        jaxz.paths.geometric(_log_base, _log_target, log_z0=log_z0)


# --- C17 / C18: counts of the simulators --------------------------------------------------

@pytest.mark.parametrize("num_classes", [0, 1, 2.5, -1])
def test_logistic_generate_names_num_classes(num_classes):
    with pytest.raises(ValueError, match="num_classes must be an integer >= 2"):
        logistic.generate(jax.random.key(0), 10, 2, num_classes)


@pytest.mark.parametrize("num_steps", [2.5, 0, "3", True])
def test_lgssm_simulate_names_num_steps(num_steps):
    with pytest.raises(ValueError, match="num_steps must be an integer >= 1"):
        lgssm.simulate(jax.random.key(0), lgssm.default(2, 1), num_steps)
