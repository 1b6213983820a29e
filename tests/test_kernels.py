"""Each tempered kernel leaves f_β invariant: started from exact draws of f_β, the
chains keep its mean and variance (within standard errors over many chains)."""
import blackjax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz

NUM_CHAINS = 4000
BETA = 0.5


def _tempered_moments(gaussian):
    """f_β = N(0, I)^{1−β} · exp(−|x−μ|²/2σ²)^β is Gaussian with precision (1−β) + β/σ²."""
    precision = (1 - BETA) + BETA / gaussian.scale**2
    mean = BETA * gaussian.mean / gaussian.scale**2 / precision
    return mean, 1.0 / precision


def _varying_metric(x):
    """A position-dependent SPD metric: diag(1 + tanh(x)²) plus a constant coupling."""
    return jnp.array([[1.0, 0.3], [0.3, 1.0]]) + jnp.diag(jnp.tanh(x) ** 2)


KERNELS = {
    "hmc": lambda p: jaxz.kernels.hmc(p, 0.3, 5),
    "mala": lambda p: jaxz.kernels.mala(p, 0.3),
    "rwmh": lambda p: jaxz.kernels.rwmh(p, 0.6),
    "slice": lambda p: jaxz.kernels.slice(p, 1.0),
    "mwg": lambda p: jaxz.kernels.metropolis_within_gibbs(p, 0.8),
    "nuts": lambda p: jaxz.kernels.from_blackjax(blackjax.nuts, p, step_size=0.3, inverse_mass_matrix=jnp.ones(2)),
    "rmhmc": lambda p: jaxz.kernels.rmhmc(p, 0.3, lambda x: jnp.eye(2), 4),
    # a metric that varies with position: the generalized leapfrog's fixed points matter
    "rmhmc_varying": lambda p: jaxz.kernels.rmhmc(p, 0.3, _varying_metric, 4),
    "rmhmc_midpoint": lambda p: jaxz.kernels.rmhmc(p, 0.3, _varying_metric, 4, integrator="implicit_midpoint"),
    "repeat": lambda p: jaxz.kernels.repeat(jaxz.kernels.rwmh(p, 0.6), 3),
}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_leaves_tempered_gaussian_invariant(gaussian, name):
    path = gaussian.path()
    kernel = KERNELS[name](path)
    mean, variance = _tempered_moments(gaussian)
    key_init, key_run = jax.random.split(jax.random.key(0))
    start = mean + np.sqrt(variance) * jax.random.normal(key_init, (NUM_CHAINS, gaussian.dim))

    @jax.jit
    def chains(key, start):
        states = jax.vmap(kernel.init, in_axes=(0, None))(start, BETA)

        def body(states, key):
            states, info = jax.vmap(kernel.step, in_axes=(0, 0, None))(jax.random.split(key, NUM_CHAINS), states, BETA)
            return states, jnp.mean(info.acceptance_rate)

        states, acceptance = jax.lax.scan(body, states, jax.random.split(key, 5))
        return states.position, acceptance

    end, acceptance = chains(key_run, start)
    end = np.asarray(end, np.float64)
    moved = np.mean(np.any(np.asarray(end) != np.asarray(start), axis=1))
    assert moved > 0.3 and np.all(np.asarray(acceptance) > 0.2)
    mean_se = np.sqrt(variance / NUM_CHAINS)
    np.testing.assert_array_less(np.abs(end.mean(0) - mean), 4.5 * mean_se)
    variance_se = variance * np.sqrt(2.0 / (NUM_CHAINS - 1))
    np.testing.assert_array_less(np.abs(end.var(0, ddof=1) - variance), 4.5 * variance_se)


def test_repeat_multiplies_transition_count(gaussian):
    kernel = jaxz.kernels.repeat(jaxz.kernels.repeat(jaxz.kernels.rwmh(gaussian.path(), 0.5), 3), 2)
    assert kernel.num_transitions == 6


def test_kernel_rebuilds_cached_density_when_beta_changes(gaussian):
    """The blackjax state caches log f_β; moving the same state to a new β must use the
    new density (a stale cache would accept moves under the old β)."""
    path = gaussian.path()
    kernel = jaxz.kernels.hmc(path, 0.3, 5)
    state = kernel.init(jnp.zeros(2), 0.0)
    new_state, _ = kernel.step(jax.random.key(0), state, 1.0)
    assert float(new_state.beta) == 1.0
    np.testing.assert_allclose(new_state.inner.logdensity, path.log_density(new_state.position, 1.0), rtol=1e-5)
