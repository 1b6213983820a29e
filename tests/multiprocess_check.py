"""Run by tests/test_sharding.py: one of two local processes (``jax.distributed`` to
127.0.0.1, gloo collectives), each with 2 forced CPU devices. The particle axis of an
adaptive tempered SMC run is split over all 4 devices; process 0 prints the result as one
JSON line. Arguments: process_id port."""
import json
import sys

import jax
import numpy as np
from jax.experimental import multihost_utils

process_id, port = int(sys.argv[1]), int(sys.argv[2])
# join the job before importing jaxz: blackjax starts the XLA backend at import
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(f"127.0.0.1:{port}", 2, process_id)

import jaxz  # noqa: E402
assert jax.device_count() == 4 and jax.local_device_count() == 2, jax.devices()

from sharding_check_problem import gaussian_path, initial_positions  # noqa: E402

path = gaussian_path()
positions = initial_positions()
sharded = jaxz.sharding.shard_particles_across_processes(jaxz.sharding.process_block(positions))
run = jax.jit(lambda key, x: jaxz.run(jaxz.smc(path, jaxz.kernels.hmc(path)), key, x, max_steps=60))
result = run(jax.random.key(0), sharded)


def replicated_value(array):
    """The value of an array every device holds whole (a scalar result, the schedule)."""
    assert array.sharding.is_fully_replicated, array.sharding
    return np.asarray(array.addressable_data(0))


log_z, betas = replicated_value(result.estimate.log_z), replicated_value(result.trace.beta)
multihost_utils.sync_global_devices("results read")
if process_id == 0:
    print(json.dumps({"log_z": float(log_z), "betas": betas.tolist()}))
jax.distributed.shutdown()
