"""The generalized leapfrog of RMHMC (Girolami & Calderhead 2011, eqs. 16–18) in
``jaxz.kernels.riemannian``: exact reversibility, energy error of order ε², and the
rejection of a step whose fixed points are not solved. Invariance of the kernel it
builds is checked with the other kernels in test_kernels.py."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from blackjax.mcmc import metrics
from blackjax.mcmc.integrators import IntegratorState

import jaxz
from jaxz.kernels.riemannian import generalized_leapfrog

PRECISION = jnp.array([[2.0, 0.3], [0.3, 1.0]])


def log_density(x):
    return -0.5 * x @ PRECISION @ x


def metric_fn(x):
    return PRECISION + jnp.diag(1.0 + jnp.tanh(2.0 * x) ** 2)


def trajectory(step, state, step_size, num_steps):
    for _ in range(num_steps):
        state = step(state, step_size)
    return state


def energy(kinetic_energy, state):
    return -state.logdensity + kinetic_energy(state.momentum, position=state.position)


@pytest.fixture(autouse=True)
def float64():
    with jax.enable_x64(True):
        yield


def start_state():
    x, p = jnp.array([0.5, -0.3]), jnp.array([0.9, -1.2])
    return IntegratorState(x, p, *jax.value_and_grad(log_density)(x))


def test_generalized_leapfrog_is_reversible_and_second_order():
    """Flipping the momentum at the end and integrating again returns to the start
    (to 1e-10), and the energy error over a fixed time falls about 4× when ε halves."""
    kinetic = metrics.gaussian_riemannian(metric_fn).kinetic_energy
    step = jax.jit(generalized_leapfrog(metric_fn, max_iterations=100, tolerance=1e-13)(log_density, kinetic))
    start = start_state()
    errors = []
    for step_size, num_steps in ((0.1, 10), (0.05, 20), (0.025, 40)):
        end = trajectory(step, start, step_size, num_steps)
        errors.append(abs(float(energy(kinetic, end) - energy(kinetic, start))))
        back = trajectory(step, end._replace(momentum=-end.momentum), step_size, num_steps)
        np.testing.assert_allclose(back.position, start.position, atol=1e-10)
        np.testing.assert_allclose(-back.momentum, start.momentum, atol=1e-10)
    ratios = np.array(errors[:-1]) / np.array(errors[1:])
    assert np.all((ratios > 3.0) & (ratios < 5.5)), (errors, ratios)


def test_unsolved_step_ends_the_trajectory_and_is_rejected():
    """One fixed-point iteration cannot meet a 1e-14 tolerance on a varying metric: the
    integrator keeps the start and sets the log density to −inf, and the kernel rejects
    every proposal (the chain stays put) instead of accepting an unsolved step."""
    kinetic = metrics.gaussian_riemannian(metric_fn).kinetic_energy
    step = generalized_leapfrog(metric_fn, max_iterations=1, tolerance=1e-14)(log_density, kinetic)
    start = start_state()
    end = step(start, 0.2)
    assert float(end.logdensity) == -np.inf
    np.testing.assert_array_equal(end.position, start.position)
    path = jaxz.paths.geometric(lambda x: 0.0 * jnp.sum(x), log_density)
    kernel = jaxz.kernels.rmhmc(path, 0.2, metric_fn, 3, max_iterations=1, tolerance=1e-14)
    state = kernel.init(start.position, 1.0)
    new, info = jax.jit(kernel.step)(jax.random.key(0), state, 1.0)
    assert float(info.acceptance_rate) == 0.0
    np.testing.assert_array_equal(new.position, start.position)


def test_rmhmc_rejects_bad_integrator_settings():
    path = jaxz.paths.geometric(lambda x: 0.0 * jnp.sum(x), log_density)
    with pytest.raises(ValueError, match="integrator must be"):
        jaxz.kernels.rmhmc(path, 0.1, metric_fn, 3, integrator="leapfrog")
    with pytest.raises(ValueError, match="max_iterations must be an integer >= 1"):
        jaxz.kernels.rmhmc(path, 0.1, metric_fn, 3, max_iterations=0)
    with pytest.raises(ValueError, match="tolerance must be > 0"):
        jaxz.kernels.rmhmc(path, 0.1, metric_fn, 3, tolerance=0.0)
    with pytest.raises(ValueError, match="num_integration_steps must be an integer >= 1"):
        jaxz.kernels.rmhmc(path, 0.1, metric_fn, 0)
