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
    of the partitioning, not a speed-up.
(d) processes: the AIS run of (c) at N = 10⁵ by 2 local processes joined by
    ``jax.distributed`` (127.0.0.1, gloo collectives), 2 forced host devices each, the
    particle axis split over all 4 (``jaxz.sharding.shard_particles_across_processes``):
    the time relative to one process with 4 forced devices, and whether the float32 log Ẑ
    has the same bits. Both processes share the machine's cores, so on a small machine
    this measures the cost of the cross-process collectives, not a speed-up.

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
    def one_stage(key, x):
        result = jaxz.run(jaxz.smc(path, kernel, betas=jnp.asarray([0.0, 0.5]), resample_ess=1.0), key, x)
        # the moved particles too: with log Ẑ alone the move is dead code that XLA removes
        return result.estimate.log_z, result.state.kernel_states.position

    stage = jax.jit(one_stage)
    positions = jaxz.shard_particles(jax.random.normal(jax.random.key(1), (num_particles, DIM)), mesh_)
    # jnp's cumulative sum over a split axis is very slow on forced CPU devices (minutes at
    # N = 10⁶ on 2 shared cores): one timed run there
    fixed_s = timed(jax.jit(fixed), log_weights)
    plain_s = timed(jax.jit(plain), log_weights, repeats=3 if devices == 1 else 1)
    stage_s = timed(stage, jax.random.key(0), positions)
    return dict(reduction_particles=num_particles, fixed_order_seconds=fixed_s, jnp_seconds=plain_s,
                smc_stage_seconds=stage_s, fixed_over_jnp=fixed_s / plain_s, fixed_over_stage=fixed_s / stage_s)


PROCESS_SCRIPT = r"""
import json, sys
import jax
process_id, port = int(sys.argv[2]), int(sys.argv[3])
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(f"127.0.0.1:{port}", 2, process_id)  # before importing jaxz
sys.path.insert(0, sys.argv[1])
import scaling, jaxz
path, kernel = scaling.problem()
estimator = jaxz.ais(path, kernel, jaxz.schedules.linear(scaling.STAGES + 1))
positions = jax.random.normal(jax.random.key(1), (100_000, scaling.DIM))
x = jaxz.sharding.shard_particles_across_processes(jaxz.sharding.process_block(positions))
run = jax.jit(lambda key, x: jaxz.run(estimator, key, x).estimate.log_z)
seconds = scaling.timed(run, jax.random.key(0), x)
log_z = run(jax.random.key(0), x).addressable_data(0)  # replicated over every device
if process_id == 0:
    print(json.dumps(dict(processes=jax.process_count(), devices=jax.device_count(), seconds=seconds,
                          log_z=float(log_z), log_z_bits=log_z.tobytes().hex())))
jax.distributed.shutdown()
"""


def _environment(num_devices: int) -> dict:
    """Forced host devices; a device waits up to 10 minutes (not XLA's 40 s) for the others at
    a collective, which a loaded machine can need."""
    flags = (f"--xla_force_host_platform_device_count={num_devices} "
             "--xla_cpu_collective_call_terminate_timeout_seconds=600")
    return dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu",
                PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                            os.environ.get("PYTHONPATH", "")]))


def processes(four_devices: dict) -> dict:
    """Part (d): the AIS run of (c) by 2 processes x 2 forced devices, against ``four_devices``
    (the row of (c) for one process with 4)."""
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    here = os.path.dirname(os.path.abspath(__file__))
    workers = [subprocess.Popen([sys.executable, "-c", PROCESS_SCRIPT, here, str(pid), str(port)], env=_environment(2),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for pid in (0, 1)]
    try:
        outputs = [worker.communicate(timeout=1800) for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
    for worker, (_, err) in zip(workers, outputs):
        if worker.returncode:
            raise RuntimeError(err[-3000:])
    row = json.loads([line for line in outputs[0][0].splitlines() if line.startswith("{")][-1])
    row.update(relative_to_one_process_four_devices=row["seconds"] / four_devices["seconds"],
               same_log_z_bits_as_one_process=row["log_z_bits"] == four_devices["log_z_bits"])
    print(f"2 processes x 2 forced host devices: {row['seconds']:.3f} s "
          f"({row['relative_to_one_process_four_devices']:.2f}x one process with 4), log Z {row['log_z']:.4f} "
          f"(bits {row['log_z_bits']}, the same as one process: {row['same_log_z_bits_as_one_process']})")
    return row


def devices():
    out = subprocess.run([sys.executable, "-c", DEVICE_SCRIPT, os.path.dirname(os.path.abspath(__file__))],
                         env=_environment(4), capture_output=True, text=True, timeout=1800)
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
    parser.add_argument("--no-devices", action="store_true", help="skip the forced-host-devices parts (c) and (d)")
    parser.add_argument("--only-devices", action="store_true",
                        help="run parts (c) and (d) alone and merge them into the existing JSON")
    args = parser.parse_args()
    if args.only_devices:
        name = f"scaling_{args.label}.json" if args.label else "scaling.json"
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", name)
        with open(path) as handle:
            results = json.load(handle)
        results["forced_host_devices"] = devices()
        results["two_processes"] = processes(next(r for r in results["forced_host_devices"] if r["devices"] == 4))
        results["forced_host_devices_machine"] = _results.machine()
        _results.write(results, name)
        return
    results = dict(machine=_results.machine(),
                   model=f"{DIM}-d Gaussian, geometric path, HMC step 0.2 x 5 leapfrog, {STAGES} stages, float32")
    results["throughput"] = throughput(args.max_particles)
    results["vmapped_runs"] = vmapped_runs()
    if not args.no_devices and jax.default_backend() == "cpu":
        results["forced_host_devices"] = devices()
        results["two_processes"] = processes(next(r for r in results["forced_host_devices"] if r["devices"] == 4))
    _results.write(results, f"scaling_{args.label}.json" if args.label else "scaling.json")


if __name__ == "__main__":
    main()
