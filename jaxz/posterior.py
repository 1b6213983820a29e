"""The posterior from a ``jaxz.evidence`` call: equally weighted draws, and ArviZ.

``jaxz.evidence`` returns each run's final SMC particles with their normalized weights
(``Evidence.samples``, ``Evidence.log_weights``): weighted draws from f_1 / Z. Resampling
them (systematic resampling, ``jaxz.resampling.systematic``) gives equally weighted draws;
a run is one chain for ArviZ, so its diagnostics across chains compare the runs.
"""
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks
from jaxz._status import status_names
from jaxz.resampling import check_log_weights, systematic


def _check(result) -> tuple[int, int]:
    """(runs, particles) of an unbatched Evidence."""
    if np.ndim(result.log_z) != 0:
        raise ValueError(f"this Evidence holds {np.shape(result.log_z)[0]} data sets (batched=True): pick one with "
                         f"result.dataset(i)")
    return tuple(int(n) for n in np.shape(result.log_weights))


def _shuffled(rng_key, log_weights, num_draws):
    """Systematic resampling's indices in random order (it returns them sorted, and a chain
    of sorted duplicates would read as autocorrelated)."""
    key_resample, key_order = jax.random.split(rng_key)
    return jax.random.permutation(key_order, systematic(key_resample, log_weights, num_draws))


@partial(jax.jit, static_argnums=2)
def _indices_per_run(keys, log_weights, num_draws):
    """``_shuffled`` for each run, compiled as one program (run eagerly, its dozens of small
    ops each compiled on first use took seconds)."""
    return jax.vmap(lambda key, log_w: _shuffled(key, log_w, num_draws))(keys, log_weights)


@partial(jax.jit, static_argnums=2)
def _pooled_indices(rng_key, log_weights, num_draws):
    """``_shuffled`` over the runs' weights pooled, as one compiled program."""
    return _shuffled(rng_key, log_weights, num_draws)


def _checked(log_weights):
    """Each run's weights resampleable (no nan or +inf, not all −inf), checked on the host
    before the compiled resampling, which cannot raise."""
    for index, log_w in enumerate(np.asarray(log_weights)):
        check_log_weights(log_w, name=f"run {index}'s log-weights")
    return log_weights


def draws_per_run(result, rng_key, num_draws: int | None = None) -> Any:
    """Equally weighted draws of each run: ``num_draws`` (default: the run's particles)
    resampled from its weighted particles. Leaves of shape (runs, num_draws, ...)."""
    num_runs, num_particles = _check(result)
    num_draws = num_particles if num_draws is None else _checks.integer("num_draws", num_draws)
    indices = _indices_per_run(jax.random.split(rng_key, num_runs), _checked(result.log_weights), num_draws)
    return jax.tree.map(lambda leaf: jax.vmap(lambda x, i: x[i])(leaf, indices), result.samples)


def posterior_draws(result, rng_key, num_draws: int | None = None) -> Any:
    """Equally weighted posterior draws pooled over the runs: ``num_draws`` (default: runs x
    particles) resampled from every run's weighted particles, each run carrying the same
    total weight (the runs are independent draws of one posterior). Leaves of shape
    (num_draws, ...): a NumPyro model's sites, or a Path's positions."""
    num_runs, num_particles = _check(result)
    num_draws = num_runs * num_particles if num_draws is None else _checks.integer("num_draws", num_draws)
    log_weights = (result.log_weights - jnp.log(num_runs)).reshape(-1)
    check_log_weights(log_weights)  # a run whose weights are all −inf takes no share; nan or +inf raise
    indices = _pooled_indices(rng_key, log_weights, num_draws)
    return jax.tree.map(lambda leaf: leaf.reshape((num_runs * num_particles,) + leaf.shape[2:])[indices],
                        result.samples)


def to_arviz(result, rng_key, num_draws: int | None = None):
    """An ``arviz.InferenceData`` of the posterior: one chain per run (``draws_per_run``),
    log Z, its s.e. and the status (by name) in its attributes. Needs arviz (the
    "arviz" extra)."""
    try:
        import arviz
    except ImportError as error:
        raise ImportError("to_arviz needs arviz: pip install arviz (or jaxz[arviz])") from error
    draws = draws_per_run(result, rng_key, num_draws)
    if isinstance(draws, dict):
        posterior = {name: np.asarray(value) for name, value in draws.items()}
    else:
        posterior = {"x": np.asarray(draws)}
    names = status_names(result.status)
    attrs = dict(log_z=float(result.log_z), log_z_stderr=float(result.log_z_stderr), status=int(result.status),
                 status_names="|".join(names) if names else "OK", inference_library="jaxz")
    inference = arviz.from_dict(posterior=posterior, attrs=attrs)
    inference.posterior.attrs.update(attrs)  # beside the draws too, where plots and summaries read them
    return inference


__all__ = ["posterior_draws", "draws_per_run", "to_arviz"]
