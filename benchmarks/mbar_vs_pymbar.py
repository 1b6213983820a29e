"""MBAR: jaxz.mbar vs pymbar 4 on the same inputs, in the same run.

K = 100 harmonic states u_k(x) = κ_k (x − μ_k)² / 2 with μ_k evenly spaced on [0, 10]
and spring constants κ_k geometric on [0.5, 4] (so the f_k differ), 100 exact samples
from each (N = 10,000), float64 for both. Timed: the full solve plus the
asymptotic uncertainty of f_k — plain eager ``jaxz.mbar(u_kn, n_k)``, its ``MBARInfo`` included
(jitted inside: the first call compiles, later calls at the same shape do not; the
first call's time is reported apart) against ``pymbar.MBAR(u_kn, N_k)`` followed by
``compute_free_energy_differences()`` (after one warm-up so its own JAX kernels are
compiled); 15 calls each with ``block_until_ready``, alternating so machine load hits
both alike. The headline ratio uses the fastest call of each (the least disturbed by
other processes on a shared machine); the ratio of medians is reported too. Also
reports the largest difference in f_k and in its standard error, and jaxz's MBARInfo
(status, iterations).

pymbar turns on JAX's 64-bit mode globally when it solves; this script enables it at
the start so both libraries run in float64 from the first call.

    python benchmarks/mbar_vs_pymbar.py          # writes benchmarks/results/mbar_vs_pymbar.json
"""
import importlib.metadata
import json
import os
import platform
import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)  # a script, not the library: match pymbar's float64

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pymbar  # noqa: E402
from tqdm import tqdm  # noqa: E402

import jaxz  # noqa: E402
from _results import machine  # noqa: E402

NUM_STATES, SAMPLES_PER_STATE, REPEATS = 100, 100, 15


def problem(seed=0):
    rng = np.random.default_rng(seed)
    means, springs = np.linspace(0.0, 10.0, NUM_STATES), np.geomspace(0.5, 4.0, NUM_STATES)
    x = np.concatenate([rng.normal(m, 1.0 / np.sqrt(k), SAMPLES_PER_STATE) for m, k in zip(means, springs)])
    u_kn = 0.5 * springs[:, None] * (x[None, :] - means[:, None]) ** 2
    return u_kn, np.full(NUM_STATES, SAMPLES_PER_STATE)


def main():
    about = machine(processor=platform.processor(), python=platform.python_version(),
                    pymbar=importlib.metadata.version("pymbar"), device=str(jax.devices()[0]))
    u_kn, n_k = problem()
    u_device = jnp.asarray(u_kn)

    def solve(u, n):
        return jaxz.mbar(u, n)

    start = time.perf_counter()
    jax.block_until_ready(solve(u_device, n_k))
    first_call_seconds = time.perf_counter() - start

    def run_pymbar():
        result = pymbar.MBAR(u_kn, n_k).compute_free_energy_differences()
        return result["Delta_f"][0], result["dDelta_f"][0]

    run_pymbar()  # warm-up: pymbar compiles its own JAX solver kernels
    jaxz_times, pymbar_times = [], []
    for _ in tqdm(range(REPEATS), desc="timing"):
        start = time.perf_counter()
        result = jax.block_until_ready(solve(u_device, n_k))
        f_k, stderr, info = result.free_energies, result.stderr, result.info
        jaxz_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        reference_f, reference_stderr = run_pymbar()
        pymbar_times.append(time.perf_counter() - start)
    jaxz_seconds, pymbar_seconds = min(jaxz_times), min(pymbar_times)
    report = {
        "problem": {"num_states": NUM_STATES, "num_samples": int(n_k.sum()), "dtype": "float64"},
        "jaxz_seconds": jaxz_seconds,
        "jaxz_first_call_seconds": first_call_seconds,
        "jaxz_repeat_call_seconds_median": statistics.median(jaxz_times),
        "first_over_repeat_call": first_call_seconds / statistics.median(jaxz_times),
        "jaxz_status": int(info.status),
        "jaxz_iterations": int(info.num_iterations),
        "jaxz_min_overlap_ess": float(np.min(np.asarray(info.overlap_ess))),
        "pymbar_seconds": pymbar_seconds,
        "speedup_jaxz_over_pymbar": pymbar_seconds / jaxz_seconds,
        "speedup_of_medians": statistics.median(pymbar_times) / statistics.median(jaxz_times),
        "target_speedup": 2.0,
        "max_abs_diff_f_k": float(np.max(np.abs(np.asarray(f_k) - reference_f))),
        "max_abs_diff_stderr": float(np.max(np.abs(np.asarray(stderr) - reference_stderr))),
        "timings": {"jaxz": jaxz_times, "pymbar": pymbar_times},
        "machine": {**about, "load_average_at_end": list(os.getloadavg())},
    }
    os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
    with open(os.path.join(os.path.dirname(__file__), "results", "mbar_vs_pymbar.json"), "w") as handle:
        json.dump(report, handle, indent=2)
    print(json.dumps({k: v for k, v in report.items() if k not in ("timings", "machine")}, indent=2))


if __name__ == "__main__":
    main()
