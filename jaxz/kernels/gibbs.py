"""Gibbs samplers for discrete states at a given β (lecture notes §Gibbs sampling).

A position is a vector of d sites, each taking one of K ``values`` (spins ±1, bits,
categories). A Gibbs update of a block B of sites that are conditionally independent
given the rest draws each x_i, i ∈ B, from

    p_β(x_i = v | x_{−i}) ∝ f_β(x_1, ..., x_{i−1}, v, x_{i+1}, ..., x_d),

computed by evaluating the tempered log density at the K values of each site: exact
for any target on a finite product space, with no model structure assumed. One
``step`` is one sweep over all blocks in order (systematic scan), which leaves f_β
invariant since every block update does.

- ``blocks=None``: single-site sweeps (d blocks of one site), for any target. A sweep
  costs d · K density evaluations, done one site at a time.
- ``blocks`` = a colour per site (``checkerboard(shape)`` for a 2-D lattice): every
  site of one colour is updated at once from the state before that colour's update.
  This is exact blocked Gibbs when no two sites of a colour interact (a proper
  colouring of a pairwise model's graph), and costs 2 colours × (d/2) × K evaluations
  vectorized into two parallel steps. It is *not* checked: a wrong colouring samples
  the wrong distribution.
"""
import jax
import jax.numpy as jnp
import numpy as np

from jaxz.kernels.base import Kernel, from_transition
from jaxz.paths import Path


def checkerboard(shape) -> np.ndarray:
    """Colours 0/1 of a row-major lattice of ``shape`` (sites (i, j) with i + j even
    get 0): a proper two-colouring of the nearest-neighbour graph, also with periodic
    boundaries when every side is even."""
    grids = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
    return (sum(grids) % 2).reshape(-1).astype(np.int32)


def _conditional_logits(log_density, x, site, values):
    """log f_β(x with x_site = v) for each of the K values v."""
    return jax.vmap(lambda v: log_density(x.at[site].set(v)))(values)


def _draw(key, logits):
    """One categorical draw per row of logits; −inf rows (every value impossible)
    leave index 0, and nan logits are treated as −inf."""
    logits = jnp.where(jnp.isnan(logits), -jnp.inf, logits)
    return jax.random.categorical(key, logits, axis=-1)


def gibbs(path: Path, values=(-1, 1), *, blocks=None) -> Kernel:
    """A Gibbs kernel over sites taking ``values`` (a sequence of K numbers), tempered
    by β: one step is one systematic sweep (see the module docstring for ``blocks``).

    Positions are (d,) arrays (any dtype holding ``values``: int8 spins work).
    ``acceptance_rate`` in the Info is the fraction of sites whose value changed in the
    sweep (Gibbs proposals are always accepted; the change rate is what tells a frozen
    sampler). ``num_transitions`` = 1 sweep.
    """
    values = np.asarray(values)
    if values.ndim != 1 or values.shape[0] < 2:
        raise ValueError(f"values must be a sequence of at least 2 states, got {values!r}")
    if len(np.unique(values)) != values.shape[0]:
        raise ValueError(f"values must be distinct, got {values!r}")
    colours = None if blocks is None else np.asarray(blocks)
    if colours is not None and (colours.ndim != 1 or not np.issubdtype(colours.dtype, np.integer)):
        raise ValueError(f"blocks must be a (d,) integer array of colours, got shape {colours.shape} "
                         f"and dtype {colours.dtype}")
    groups = None if colours is None else [np.flatnonzero(colours == c) for c in np.unique(colours)]

    def check(x):
        if jnp.ndim(x) != 1:
            raise ValueError(f"gibbs: positions must be (d,) vectors of sites, got shape {jnp.shape(x)}")
        if groups is not None and colours.shape[0] != x.shape[0]:
            raise ValueError(f"blocks has {colours.shape[0]} colours for positions of {x.shape[0]} sites")

    def transition(rng_key, x, beta):
        check(x)
        states = jnp.asarray(values, x.dtype)

        def log_density(y):
            return path.log_density(y, beta)

        if groups is None:
            def update(site, carry):
                y, key = carry
                key, key_draw = jax.random.split(key)
                choice = _draw(key_draw, _conditional_logits(log_density, y, site, states))
                return y.at[site].set(states[choice]), key

            new, _ = jax.lax.fori_loop(0, x.shape[0], update, (x, rng_key))
        else:
            new = x
            for key, sites in zip(jax.random.split(rng_key, len(groups)), groups):
                sites = jnp.asarray(sites)
                logits = jax.vmap(lambda site, y=new: _conditional_logits(log_density, y, site, states))(sites)
                new = new.at[sites].set(states[_draw(key, logits)])
        return new, jnp.mean((new != x).astype(jnp.result_type(float)))

    return from_transition(transition)


__all__ = ["gibbs", "checkerboard"]
