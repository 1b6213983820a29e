"""Run by tests/test_sharding.py: one of two local processes (``jax.distributed`` to
127.0.0.1, gloo collectives), each with 2 forced CPU devices. Each case of
``sharding_check_problem.case`` runs with its particle axis (or, for arm, its independent
runs) split over all 4 devices; process 0 prints one JSON line per case: the bytes of every
leaf of the gathered (estimate, final state, trace), and which of the state's leaves
along the particle axis came back whole on every device. Arguments: process_id port case...
where a case is estimator:dtype (e.g. smc:float32)."""
import json
import sys

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding, PartitionSpec

process_id, port, cases = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
# join the job before importing jaxz: blackjax starts the XLA backend at import
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(f"127.0.0.1:{port}", 2, process_id)

import jaxz  # noqa: E402
assert jax.device_count() == 4 and jax.local_device_count() == 2, jax.devices()

from sharding_check_problem import case, fingerprint  # noqa: E402

mesh = jaxz.sharding.mesh(axis="particles")  # all 4 devices of both processes


def split(tree):
    """This process's block of the leading axis, laid out over its 2 of the 4 devices."""
    return jaxz.sharding.shard_particles_across_processes(jaxz.sharding.process_block(tree), mesh)


for name, dtype in (text.split(":") for text in cases):
    with jax.enable_x64(dtype == "float64"):
        fn, args = case(name, dtype, split, NamedSharding(mesh, PartitionSpec("particles")))
        estimate, state, trace = fn(*args)  # jaxz.run's Result order
        # the particles (arm: the runs): the positions where the state has them, else its largest leaf
        kernel_states = getattr(state, "kernel_states", None)
        positions = getattr(kernel_states, "position", getattr(state, "positions", None))
        largest = max(jax.tree.leaves(positions if positions is not None else state), key=lambda leaf: leaf.size)
        # the state's other leaves along the particle (or run) axis: which came back whole
        unsplit = [jax.tree_util.keystr(where) for where, leaf in jax.tree_util.tree_flatten_with_path(state)[0]
                   if leaf.ndim and leaf.shape[0] == largest.shape[0] and leaf.sharding.is_fully_replicated]
        gathered = multihost_utils.process_allgather((estimate, state, trace), tiled=True)
    if process_id == 0:
        print(json.dumps(dict(name=name, dtype=dtype, log_z=np.asarray(gathered[0].log_z, np.float64).tolist(),
                              leaves=fingerprint(gathered), devices=len(largest.sharding.device_set),
                              replicated=bool(largest.sharding.is_fully_replicated),
                              unsplit=unsplit)))
        sys.stdout.flush()
multihost_utils.sync_global_devices("results read")
jax.distributed.shutdown()
