"""Data-seeded chains for RAISE on RBMs (Burda, Grosse & Salakhutdinov 2015), the
upper-bound side of Carlson et al. (2016), Figure 3.

RAISE (``jaxz.raise_``) runs AIS down the ladder from draws of the RBM itself; it is
a stochastic upper bound on log Z when those draws are exact. For an RBM the chains
are seeded from training images and moved by ``burn_in`` blocked Gibbs sweeps of the
RBM: raw images are not model draws (a poorly fitting RBM gives them low f, which
biases RAISE down), while a short burn-in brings them close to the model.

    path, kernel = rbm.annealing(rbm.base_rate(data), model)
    chains = rbm_raise.data_seeded_chains(key, model, data, num_chains)
    estimate = jaxz.run(jaxz.raise_(path, kernel, betas), key, chains).estimate
    # cost: estimate.cost + num_chains * burn_in Gibbs sweeps
"""
import jax
import jax.numpy as jnp

from jaxz.models.rbm import RBM, gibbs_sweep
from jaxz.types import Array, PRNGKey


def data_seeded_chains(rng_key: PRNGKey, rbm: RBM, data, num_chains: int, burn_in: int = 50) -> Array:
    """``num_chains`` visible states (num_chains, V): training images drawn with
    replacement, each moved by ``burn_in`` blocked Gibbs sweeps of ``rbm`` (β = 1)."""
    data = jnp.asarray(data, jnp.result_type(rbm.W))
    if data.ndim != 2 or data.shape[1] != rbm.W.shape[0]:
        raise ValueError(f"data must have shape (num_examples, {rbm.W.shape[0]}), got {data.shape}")
    if int(num_chains) < 1:
        raise ValueError(f"num_chains must be >= 1, got {num_chains}")
    if int(burn_in) < 0:
        raise ValueError(f"burn_in must be >= 0, got {burn_in}")
    key_pick, key_sweeps = jax.random.split(rng_key)
    chains = data[jax.random.randint(key_pick, (int(num_chains),), 0, data.shape[0])]

    def sweep(v, key):
        return gibbs_sweep(key, rbm, v), None

    chains, _ = jax.lax.scan(sweep, chains, jax.random.split(key_sweeps, int(burn_in)))
    return chains


__all__ = ["data_seeded_chains"]
