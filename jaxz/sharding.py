"""Placing particles and independent runs across devices.

jaxz estimators are written over a leading particle axis with ``vmap``, ``scan`` and
``while_loop`` only, so they run unchanged on arrays sharded with
``jax.sharding.NamedSharding``: XLA's partitioner splits every per-particle
computation (log densities, kernel steps, the tuned kernels' moves) across the mesh
axis and inserts collectives only where the algorithm itself couples particles:

- reweighting: the log-sum-exp of the weights and the ESS (all-reduces of a scalar);
- the adaptive schedule: the same two reductions at each bisection step;
- tuned kernels: the weighted mean and covariance of the particles (an all-reduce of
  d or d² numbers per stage);
- resampling: the cumulative sum of the N weights (systematic, stratified,
  multinomial by inverse CDF) and the gather of the chosen ancestors, which moves
  particle states between devices (an all-to-all of up to N states, the one
  collective whose size grows with N);
- the genealogy standard error: segment sums of the weights over ancestor labels.

Independent runs (``vmap`` over keys) need no collective at all: shard the keys.
"""
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxz import _checks


def mesh(num_devices: int | None = None, axis: str = "particles", devices=None) -> Mesh:
    """A one-axis mesh named ``axis`` over the first ``num_devices`` devices (all of
    them by default)."""
    devices = list(jax.devices() if devices is None else devices)
    num_devices = len(devices) if num_devices is None else _checks.integer("num_devices", num_devices, 1)
    if not 1 <= num_devices <= len(devices):
        raise ValueError(f"num_devices must be in [1, {len(devices)}], got {num_devices}")
    return Mesh(np.array(devices[:num_devices]), (axis,))


def _shard_leading(tree, mesh_: Mesh, axis: str, what: str):
    if axis not in mesh_.axis_names:
        raise ValueError(f"the mesh has no axis {axis!r} (its axes: {mesh_.axis_names})")
    size = mesh_.shape[axis]
    for leaf in jax.tree.leaves(tree):
        if np.ndim(leaf) == 0 or np.shape(leaf)[0] % size:
            raise ValueError(f"every leaf of the {what} needs a leading axis divisible by the {size} devices of mesh "
                             f"axis {axis!r}, got shape {np.shape(leaf)}")
    return jax.device_put(tree, NamedSharding(mesh_, PartitionSpec(axis)))


def shard_particles(positions, mesh_: Mesh, axis: str = "particles"):
    """``positions`` (a pytree with a leading particle axis) split along that axis over
    ``mesh_``'s ``axis``; pass the result to ``init`` as usual."""
    return _shard_leading(positions, mesh_, axis, "positions")


def shard_runs(keys, mesh_: Mesh, axis: str = "runs"):
    """Keys of independent runs (leading axis = runs) split over ``mesh_``'s ``axis``,
    for ``jax.jit(jax.vmap(one_run))(keys)``."""
    return _shard_leading(keys, mesh_, axis, "run keys")


__all__ = ["mesh", "shard_particles", "shard_runs"]
