"""jaxz.posterior: equally weighted draws from an Evidence's weighted particles."""
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz


def _evidence(log_weights):
    """The fields jaxz.posterior reads: one data set, runs x particles of a 1-d site."""
    log_weights = jnp.asarray(log_weights, jnp.float32)
    samples = {"mu": jnp.arange(log_weights.size, dtype=jnp.float32).reshape(log_weights.shape)}
    return types.SimpleNamespace(log_z=jnp.zeros(()), log_weights=log_weights, samples=samples)


def test_draws_follow_each_runs_weights_and_a_dead_run_is_named():
    """Run 0 puts all its weight on particle 2, run 1 is uniform: run 0's draws are all that
    particle, run 1's cover its particles; the pooled draws split evenly between the runs. A
    run whose weights are all −inf cannot be resampled alone (ValueError naming it), and
    takes no share of the pooled draws."""
    log_w = np.full((2, 4), np.log(0.25), np.float32)
    log_w[0] = [-np.inf, -np.inf, 0.0, -np.inf]
    result = _evidence(log_w)
    per_run = np.asarray(jaxz.posterior.draws_per_run(result, jax.random.key(0), 400)["mu"])
    assert per_run.shape == (2, 400) and np.all(per_run[0] == 2.0)
    assert sorted(np.unique(per_run[1])) == [4.0, 5.0, 6.0, 7.0]
    pooled = np.asarray(jaxz.posterior.posterior_draws(result, jax.random.key(1), 1000)["mu"])
    assert np.mean(pooled == 2.0) == pytest.approx(0.5, abs=1e-3)
    log_w[1] = -np.inf
    with pytest.raises(ValueError, match="run 1"):
        jaxz.posterior.draws_per_run(_evidence(log_w), jax.random.key(0))
    pooled = np.asarray(jaxz.posterior.posterior_draws(_evidence(log_w), jax.random.key(1), 100)["mu"])
    assert np.all(pooled == 2.0)
    with pytest.raises(ValueError, match="nan"):
        jaxz.posterior.posterior_draws(_evidence(np.full((2, 4), np.nan)), jax.random.key(1))
