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

Every sum over particles adds in one fixed order (``jaxz.reduction``), so the same key
gives the same bits on one device, on several, and across processes.

Several processes (a cluster, or several hosts of GPUs): each process first joins the job
with ``jax.distributed.initialize(...)`` (no arguments under SLURM; on CPU also
``jax.config.update("jax_cpu_collectives_implementation", "gloo")``), and does so BEFORE
``import jaxz``: blackjax, which jaxz builds on, starts the XLA backend when it is
imported, and JAX refuses to join a job after that. Each process then builds the same
global positions (or its own block of them, ``process_block``) and hands its block to
``shard_particles_across_processes``; the estimator runs under ``jit`` exactly as on one
device, and every process gets the same result.
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


def shard_particles_across_processes(local_positions, mesh_: Mesh | None = None, axis: str = "particles"):
    """One global array of positions from each process's block (a pytree whose leaves have
    this process's share of the particle axis, in process order), laid out over ``mesh_``
    (by default every device of every process, one axis named ``axis``)."""
    mesh_ = mesh(axis=axis) if mesh_ is None else mesh_
    layout = NamedSharding(mesh_, PartitionSpec(axis))
    return jax.tree.map(lambda leaf: jax.make_array_from_process_local_data(layout, np.asarray(leaf)),
                        local_positions)


def process_block(positions, process_index: int | None = None, num_processes: int | None = None):
    """This process's block of ``positions`` (the same global positions built in every
    process): leading-axis rows [i N/P, (i + 1) N/P), for process i = ``process_index`` in
    [0, P) of P = ``num_processes`` >= 1 (by default this process and the job's count;
    ValueError otherwise, and where P does not divide N)."""
    count = jax.process_count() if num_processes is None else _checks.integer("num_processes", num_processes, 1)
    index = jax.process_index() if process_index is None else _checks.integer("process_index", process_index, 0)
    if index >= count:
        raise ValueError(f"process_index must be in [0, {count - 1}] (one of the {count} processes), got {index}")

    def block(leaf):
        if np.ndim(leaf) == 0:
            raise ValueError(f"every leaf of positions needs a leading particle axis, got shape {np.shape(leaf)}")
        size = np.shape(leaf)[0]
        if size % count:
            raise ValueError(f"the particle axis ({size}) must divide evenly over {count} processes")
        return np.asarray(leaf)[index * size // count:(index + 1) * size // count]
    return jax.tree.map(block, positions)


__all__ = ["mesh", "shard_particles", "shard_runs", "shard_particles_across_processes",
           "process_block"]
