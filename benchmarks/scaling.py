"""Scaling (issue 14): particle throughput as N grows, the cost of vmapped runs, and
forced host devices.

Model: a 10-d Gaussian target (sd 0.3, shifted by 1) from a N(0, I) base along the
geometric path; HMC with a fixed step (0.2, 5 leapfrog steps) so that every N does the
same work per particle; float32.

(a) throughput: particle-steps per second (N × stages / compiled wall time, median of
    3) for ``jaxz.ais`` (10 rungs) and ``jaxz.smc`` (the same 10-rung fixed schedule,
    one move per stage, resampling when ESS < N/2), N = 10² … 10⁶ (--max-particles),
    and with ``batch_size=10⁴`` at the largest N (chunked: bounded memory).
(b) vmapped runs: R = 1, 10, 100, 1000 independent AIS runs of N = 100 particles in one
    ``jit(vmap(...))``; the time relative to R = 1 (R means perfect serialization).
(c) devices: AIS with N = 10⁵ particles sharded over 1, 2 and 4 forced host devices
    (``XLA_FLAGS=--xla_force_host_platform_device_count=4``, one subprocess), time
    relative to one device (strong scaling), and with 25,000 particles per device (weak
    scaling); the float32 log Ẑ's bits, which must not change with the layout; and the cost
    of the fixed-order sums (jaxz.reduction) at N = 10⁶ against jnp's and against one
    whole SMC stage. On a machine with fewer cores than devices this measures the overhead
    of the partitioning, not a speed-up. (Two processes: tests/test_sharding.py checks the
    bits; their timing on one 2-core machine says nothing and is not measured here.)

Writes benchmarks/results/scaling.json (or scaling_<label>.json with --label, e.g. for
a GPU run).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import jax
import jax.numpy as jnp

import _results
import jaxz

DIM, STAGES = 10, 10


def problem():
    def log_base(x):
        return -0.5 * jnp.sum(x**2) - 0.5 * DIM * jnp.log(2 * jnp.pi)

    def log_target(x):
        return -0.5 * jnp.sum((x - 1.0) ** 2) / 0.09

    path = jaxz.paths.geometric(log_base, log_target)
    return path, jaxz.kernels.hmc(path, 0.2, 5)


def timed(fn, *args, repeats=3):
    jax.block_until_ready(fn(*args))  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def throughput(max_particles):
    path, kernel = problem()
    betas = jaxz.schedules.linear(STAGES + 1)
    rows = []
    sizes = [n for n in (100, 1_000, 10_000, 100_000, 1_000_000) if n <= max_particles]
    for n in sizes:
        for batch_size in ([None, 10_000] if n == sizes[-1] and n > 10_000 else [None]):
            for name, estimator in (("ais", jaxz.ais(path, kernel, betas, batch_size=batch_size)),
                                    ("smc", jaxz.smc(path, kernel, betas=betas, batch_size=batch_size))):
                run = jax.jit(lambda key, x, estimator=estimator: jaxz.run(estimator, key, x).estimate.log_z)
                positions = jax.random.normal(jax.random.key(1), (n, DIM))
                seconds = timed(run, jax.random.key(0), positions)
                rows.append(dict(estimator=name, num_particles=n, batch_size=batch_size, seconds=seconds,
                                 particle_steps_per_second=n * STAGES / seconds))
                print(f"{name} N={n:>8} batch={batch_size}: {seconds:.3f} s, "
                      f"{n * STAGES / seconds:.3g} particle-steps/s")
    return rows


def vmapped_runs():
    path, kernel = problem()
    estimator = jaxz.ais(path, kernel, jaxz.schedules.linear(STAGES + 1))

    def one(key):
        return jaxz.run(estimator, key, jax.random.normal(jax.random.fold_in(key, 1), (100, DIM))).estimate.log_z

    rows, base = [], None
    for runs in (1, 10, 100, 1000):
        fn = jax.jit(jax.vmap(one))
        seconds = timed(fn, jax.random.split(jax.random.key(0), runs))
        base = seconds if base is None else base
        rows.append(dict(runs=runs, seconds=seconds, relative_to_one_run=seconds / base))
        print(f"{runs:>5} vmapped AIS runs: {seconds:.3f} s ({seconds / base:.1f}x one run)")
    return rows


DEVICE_SCRIPT = r"""
import json, time, statistics, sys
import jax, jax.numpy as jnp
sys.path.insert(0, sys.argv[1])
import scaling, jaxz
path, kernel = scaling.problem()
estimator = jaxz.ais(path, kernel, jaxz.schedules.linear(scaling.STAGES + 1))
positions = jax.random.normal(jax.random.key(1), (100_000, scaling.DIM))
run = jax.jit(lambda key, x: jaxz.run(estimator, key, x).estimate.log_z)
out = {}
for devices in (1, 2, 4):
    x = jaxz.shard_particles(positions, jaxz.sharding.mesh(devices))
    weak = jaxz.shard_particles(positions[: 25_000 * devices], jaxz.sharding.mesh(devices))
    out[devices] = dict(seconds=scaling.timed(run, jax.random.key(0), x), log_z=float(run(jax.random.key(0), x)),
                        weak_particles=25_000 * devices, weak_seconds=scaling.timed(run, jax.random.key(0), weak),
                        log_z_bits=jnp.asarray(run(jax.random.key(0), x)).tobytes().hex(),
                        **scaling.reduction_cost(devices))
print(json.dumps(out))
"""


def reduction_cost(devices: int, num_particles: int = 1_000_000) -> dict:
    """What the fixed-order sums cost (issue 26), at N particles on ``devices`` devices: the
    reductions of one SMC stage (log-sum-exp, ESS and the inverse-CDF cumulative sum of
    resampling) through jaxz.reduction against the same with jnp's layout-dependent sums,
    and one whole stage of tempered SMC (reweight, resample, one HMC move) for scale."""
    from jaxz import reduction
    mesh_ = jaxz.sharding.mesh(devices)
    log_weights = jaxz.shard_particles(jax.random.normal(jax.random.key(2), (num_particles,)), mesh_)

    def fixed(w):
        return reduction.logsumexp(w), reduction.logsumexp(2.0 * w), reduction.cumsum(jnp.exp(w))[-1]

    def plain(w):
        return jax.nn.logsumexp(w), jax.nn.logsumexp(2.0 * w), jnp.cumsum(jnp.exp(w))[-1]

    path, kernel = problem()
    stage = jax.jit(lambda key, x: jaxz.run(jaxz.smc(path, kernel, betas=jnp.asarray([0.0, 0.5]),
                                                     resample_ess=1.0), key, x).estimate.log_z)
    positions = jaxz.shard_particles(jax.random.normal(jax.random.key(1), (num_particles, DIM)), mesh_)
    fixed_s, plain_s = timed(jax.jit(fixed), log_weights), timed(jax.jit(plain), log_weights)
    stage_s = timed(stage, jax.random.key(0), positions)
    return dict(reduction_particles=num_particles, fixed_order_seconds=fixed_s, jnp_seconds=plain_s,
                smc_stage_seconds=stage_s, fixed_over_jnp=fixed_s / plain_s, fixed_over_stage=fixed_s / stage_s)


def devices():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                           os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", DEVICE_SCRIPT, os.path.dirname(os.path.abspath(__file__))],
                         env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    result = json.loads(out.stdout.strip().splitlines()[-1])
    base, weak_base = result["1"]["seconds"], result["1"]["weak_seconds"]
    rows = [dict(devices=int(d), relative_to_one_device=r["seconds"] / base,
                 weak_relative_to_one_device=r["weak_seconds"] / weak_base, **r) for d, r in result.items()]
    for row in rows:
        print(f"{row['devices']} forced host devices: strong {row['seconds']:.3f} s "
              f"({row['relative_to_one_device']:.2f}x), weak ({row['weak_particles']} particles) "
              f"{row['weak_relative_to_one_device']:.2f}x, log Z {row['log_z']:.4f} (bits {row['log_z_bits']}); "
              f"fixed-order sums at N = 10^6: {row['fixed_over_jnp']:.2f}x jnp's, "
              f"{row['fixed_over_stage']:.3f} of an SMC stage")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-particles", type=int, default=1_000_000)
    parser.add_argument("--label", default="", help="suffix of the output file (e.g. the device)")
    parser.add_argument("--no-devices", action="store_true", help="skip the forced-host-devices part (c)")
    parser.add_argument("--only-devices", action="store_true",
                        help="run part (c) alone and merge it into the existing JSON")
    args = parser.parse_args()
    if args.only_devices:
        name = f"scaling_{args.label}.json" if args.label else "scaling.json"
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", name)
        with open(path) as handle:
            results = json.load(handle)
        results["forced_host_devices"] = devices()
        results["forced_host_devices_machine"] = _results.machine()
        _results.write(results, name)
        return
    results = dict(machine=_results.machine(),
                   model=f"{DIM}-d Gaussian, geometric path, HMC step 0.2 x 5 leapfrog, {STAGES} stages, float32")
    results["throughput"] = throughput(args.max_particles)
    results["vmapped_runs"] = vmapped_runs()
    if not args.no_devices and jax.default_backend() == "cpu":
        results["forced_host_devices"] = devices()
    _results.write(results, f"scaling_{args.label}.json" if args.label else "scaling.json")


if __name__ == "__main__":
    main()
