"""ARM and RM at the GPC figure's full size (issue 28 item 2): N = 365 digits, the hard
point of ``paper_repro/arm_gpc.py``, one run per method and particle count, timed after
compilation. Reports per run: log Ẑ, the counted transitions (``Estimate.cost``), the
particle moves made, wall seconds, seconds per counted transition and ARM's ratio of it
to RM's at the same R, XLA's compile-time memory analysis (temporaries + arguments +
outputs) and, on an accelerator, the device's peak memory in use.

    python benchmarks/arm_gpc_scale.py [--points 365] [--particles 10000 100000] [--runs 1]

Writes benchmarks/results/arm_gpc_scale[_<backend>].json. On 2 CPU cores a run at
R = 10⁴, N = 365 takes tens of minutes; the committed figures come from an accelerator.
"""
import argparse
import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)  # cond(K + I) ≈ 10⁷: the GPC needs float64

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxz  # noqa: E402
from jaxz.models import gpc  # noqa: E402
from _results import machine, write  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "paper_repro"))
import arm_gpc  # noqa: E402


def memory(compiled) -> dict:
    analysis = compiled.memory_analysis()
    if analysis is None:
        return {}
    return dict(temp_bytes=int(analysis.temp_size_in_bytes), argument_bytes=int(analysis.argument_size_in_bytes),
                output_bytes=int(analysis.output_size_in_bytes))


def peak_bytes():
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=365)
    parser.add_argument("--particles", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    model = arm_gpc.build_model(args.points)
    sequence = gpc.sequential_model(model, 1, random_scan=False)
    results = dict(machine=machine(), num_points=args.points, settings=dict(
        gamma_threshold=arm_gpc.GAMMA_THRESHOLD, max_generate=arm_gpc.MAX_GENERATE,
        resample_ess=arm_gpc.RESAMPLE_ESS, gibbs_sweeps=1, scan="systematic"), runs=[])
    for num in args.particles:
        per_method = {}
        arm_options = dict(gamma_threshold=arm_gpc.GAMMA_THRESHOLD, max_generate=arm_gpc.MAX_GENERATE)
        for name, options in (("RM", dict(max_generate=0)), ("ARM", arm_options)):
            estimator = jaxz.arm(sequence, num, resample_ess=arm_gpc.RESAMPLE_ESS, **options)

            def one(key, estimator=estimator):
                result = jaxz.run(estimator, key)
                return result.estimate, jnp.sum(result.trace.num_moved), jnp.mean(result.trace.num_particles)

            start = time.perf_counter()
            compiled = jax.jit(one).lower(jax.random.key(0)).compile()
            compile_seconds = time.perf_counter() - start
            for run_index in range(args.runs):
                start = time.perf_counter()
                estimate, moved, particles = jax.block_until_ready(compiled(jax.random.key(1 + run_index)))
                seconds = time.perf_counter() - start
                entry = dict(method=name, num_particles=num, run=run_index, log_z=float(estimate.log_z),
                             log_z_stderr=float(estimate.log_z_stderr), status=int(estimate.status),
                             cost=float(estimate.cost), particle_moves=int(moved),
                             mean_pool_over_R=float(particles) / num, seconds=seconds,
                             compile_seconds=compile_seconds, seconds_per_transition=seconds / float(estimate.cost),
                             peak_device_bytes=peak_bytes(), **memory(compiled))
                results["runs"].append(entry)
                per_method.setdefault(name, []).append(entry["seconds_per_transition"])
                print({k: entry[k] for k in ("method", "num_particles", "log_z", "cost", "seconds",
                                             "seconds_per_transition", "peak_device_bytes")}, flush=True)
                backend = jax.default_backend()
                write(results, "arm_gpc_scale.json" if backend == "cpu" else f"arm_gpc_scale_{backend}.json")
        if "ARM" in per_method and "RM" in per_method:
            ratio = float(np.mean(per_method["ARM"]) / np.mean(per_method["RM"]))
            results.setdefault("arm_over_rm_seconds_per_transition", {})[str(num)] = ratio
            print(f"R={num}: ARM / RM seconds per counted transition = {ratio:.2f}", flush=True)
    backend = jax.default_backend()
    write(results, "arm_gpc_scale.json" if backend == "cpu" else f"arm_gpc_scale_{backend}.json")


if __name__ == "__main__":
    main()
