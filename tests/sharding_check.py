"""Run by tests/test_sharding.py in a subprocess with 4 forced CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=4``): each estimator once on
unsharded and once on sharded inputs, printing one JSON line per case."""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

from jax.sharding import NamedSharding, PartitionSpec

import jaxz
from sharding_check_problem import differing_leaves, gaussian_path, initial_positions, leaves_of
from jaxz.models import ising, lgssm, rbm as rbm_lib, streaming

assert jax.device_count() == 4, jax.devices()
EXTENDED = "all" in sys.argv[1:]  # core: the list (smc, ais, sgais, particle_filter, arm)
MESH = jaxz.sharding.mesh(4, axis="particles")
RUNS = jaxz.sharding.mesh(4, axis="runs")


MESH2 = jaxz.sharding.mesh(2, axis="particles")


def same_bits(a, b) -> bool:
    """Every leaf of two pytrees (results, traces) equal bit for bit."""
    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(leaves_a) == len(leaves_b) and all(
        np.asarray(x).tobytes() == np.asarray(y).tobytes() for x, y in zip(leaves_a, leaves_b))


def report(name, plain, sharded, output=None, stderr=None, **extra):
    plain, sharded = np.asarray(plain, np.float64), np.asarray(sharded, np.float64)
    line = dict(name=name, plain=plain.tolist(), sharded=sharded.tolist(), **extra)
    if stderr is not None:
        line["stderr"] = float(stderr)
    if output is not None:
        line["output_devices"] = len(output.sharding.device_set)
        line["output_fully_replicated"] = bool(output.sharding.is_fully_replicated)
    print(json.dumps(line))
    sys.stdout.flush()


path = gaussian_path()
positions = initial_positions()
sharded_positions = jaxz.sharding.shard_particles(positions, MESH)

# smc (tuned HMC, adaptive schedule) and ais: the particle axis sharded
for name, estimator in [
    ("smc", jaxz.smc(path, jaxz.kernels.hmc(path))),
    ("ais", jaxz.ais(path, jaxz.kernels.hmc(path, 0.2, 5), jaxz.schedules.linear(20))),
] + ([("raise_", jaxz.raise_(path, jaxz.kernels.hmc(path, 0.2, 5), jaxz.schedules.linear(20)))] if EXTENDED else []):
    run = jax.jit(lambda key, x, estimator=estimator: jaxz.run(estimator, key, x, max_steps=60))
    plain, sharded = run(jax.random.key(0), positions), run(jax.random.key(0), sharded_positions)
    extra = {}
    if EXTENDED:  # 2 devices too (CI time: the default check compares 1 and 4)
        two = run(jax.random.key(0), jaxz.sharding.shard_particles(positions, MESH2))
        extra = dict(two_devices=float(two.estimate.log_z), two_devices_trace_equal=same_bits(plain.trace, two.trace))
    report(name, plain.estimate.log_z, sharded.estimate.log_z, sharded.state.kernel_states.position,
           trace_equal=same_bits(plain.trace, sharded.trace), **extra,
           state_equal=same_bits((plain.estimate, plain.state), (sharded.estimate, sharded.state)))

# rts: its parallel chains sharded
if EXTENDED:
    rts = jaxz.rts(path, jaxz.kernels.rwmh(path, 0.5), np.linspace(0.0, 1.0, 6), num_sweeps=40,
                   initial_iterations=2, sweeps_per_iteration=10)
    run = jax.jit(lambda key, x: jaxz.run(rts, key, x))
    plain, sharded = run(jax.random.key(10), positions[:64]), run(jax.random.key(10), sharded_positions[:64])
    report("rts", plain.estimate.log_z, sharded.estimate.log_z)

# sgais: particles sharded
data, _ = streaming.linear_regression_data(jax.random.key(2), 400)
sgais = jaxz.sgais(streaming.linear_log_prior, streaming.linear_log_likelihood, chunk_size=100, num_particles=16,
                   target_ess=8.0)
prior_draws = streaming.linear_sample_prior(jax.random.key(3), 16)
run = jax.jit(lambda key, x: jaxz.run(sgais, key, x, data))
plain = run(jax.random.key(4), prior_draws)
sharded = run(jax.random.key(4), jaxz.sharding.shard_particles(prior_draws, MESH))
# sgais: its particles, log Ẑ and per-chunk log Ẑ may differ in their last bits, because the
# mini-batch gradients are matrix products over the (sharded) particle batch, which the CPU's
# BLAS blocks by matrix shape (per-particle arithmetic outside jaxz's reductions): those leaves
# are held to a few ulps (sharding_check_problem.MODEL_ROUNDING), every other one to its bits
plain_leaves, sharded_leaves = (leaves_of((r.estimate, r.state, r.trace)) for r in (plain, sharded))
differing = differing_leaves("sgais", plain_leaves, sharded_leaves)
report("sgais", plain.estimate.log_z, sharded.estimate.log_z,
       trace_equal=not [p for p in differing if p.startswith("[2]")],
       state_equal=not [p for p in differing if not p.startswith("[2]")])

# particle_filter and twisted_smc create their particles in init: particle_sharding lays
# them out over the particle axis
params = lgssm.default(dtype=jnp.float32)
_, observations = lgssm.simulate(jax.random.key(6), params, 30)
layout = NamedSharding(MESH, PartitionSpec("particles"))
cases = {"particle_filter": (lambda s: jaxz.particle_filter(*lgssm.particle_filter_callables(params),
                                                            particle_sharding=s), (128, observations))}
if EXTENDED:
    cases["twisted_smc"] = (lambda s: jaxz.twisted_smc(ising.sequential_model(ising.periodic_lattice(
        0.3 * jax.random.normal(jax.random.key(8), (4, 4)), 0.4)), particle_sharding=s), (128,))
for name, (make, args) in cases.items():
    plain = jax.jit(lambda key, make=make, args=args: jaxz.run(make(None), key, *args))(jax.random.key(9))
    sharded = jax.jit(lambda key, make=make, args=args: jaxz.run(make(layout), key, *args))(jax.random.key(9))
    output = jax.tree.leaves(sharded.state)[0]
    report(name, plain.estimate.log_z, sharded.estimate.log_z, output, plain.estimate.log_z_stderr,
           trace_equal=same_bits(plain.trace, sharded.trace),
           state_equal=same_bits((plain.estimate, plain.state), (sharded.estimate, sharded.state)))

# independent runs sharded (arm creates its particles in init)
keys = jax.random.split(jax.random.key(5), 8)
sharded_keys = jaxz.sharding.shard_runs(keys, RUNS)
if EXTENDED:
    filter_ = jaxz.particle_filter(*lgssm.particle_filter_callables(params))
    runs = jax.jit(jax.vmap(lambda key: jaxz.run(filter_, key, 128, observations).estimate.log_z))
    out = runs(sharded_keys)
    report("particle_filter_runs", runs(keys), out, out)

rbm = rbm_lib.RBM(0.5 * jax.random.normal(jax.random.key(7), (8, 4)), 0.1 * jnp.ones(8), -0.1 * jnp.ones(4))
arm = jaxz.arm(rbm_lib.sequential_model(rbm, np.arange(8), 2), 64, gamma_threshold=0.95, max_generate=2)
runs = jax.jit(jax.vmap(lambda key: jaxz.run(arm, key).estimate.log_z))
out = runs(sharded_keys)
report("arm_runs", runs(keys), out, out)
