"""An EP-free reference log Z for the GPC figure (paper_repro/arm_gpc.py, seed Fig. 2):
pooled randomized-QMC Genz runs, checked against long ARM runs and AIS.

The problem is arm_gpc.py's (the JSON's "problem": N digits 3-vs-5 at the hard point).
Z = P(y ∘ z ≥ 0), z ~ N(0, K + I) (seed eq. 10) is estimated by
``jaxz.models.gpc.genz_log_z``: Genz's (1992) separation of variables after Genz & Bretz's
variable ordering, Botev's (2017) minimax tilt, and a randomly shifted Richtmyer lattice;
every shift gives an unbiased Ẑ_s. The reference is log of the mean of all shifts of all
runs, ± its delta-method s.e. over the shifts; the spread of the per-run values is
written beside it as a check of that s.e.

Checks, each as (log mean Ẑ − reference) / √(s.e.² + s.e._ref²), "agrees" when |·| < 2:
new ARM runs at R = --arm-particles, new AIS-HMC-from-q* runs at B = --ais-steps (the
figure's kernel and schedule), and the largest committed settings of ARM, RM and AIS-HMC
in out/arm_gpc.json. The reference goes into out/arm_gpc.json ("reference"), the figure's
reading and panel (b) are redone against it (arm_gpc.reading, arm_gpc.plot), EP lines kept.
``--figure full`` does the same for the full figure (out/arm_gpc_full.json, N = 365).

--quick (default; the committed run, 40 minutes on 2 cores under a load of ~15, mostly ARM):
12 Genz runs of 8 shifts × 2¹⁵ points (60 s each), 6 ARM runs at R = 2·10⁴ (150 s each),
32 AIS runs at B = 2·10⁴ (14 s each). --full: 48 Genz runs, 16 ARM runs, 80 AIS runs.
Measured (N = 100): log Z = −13.7394 ± 0.0018 (the 12 runs' sd 0.0060 against their mean
s.e. 0.0060); every check agrees (|offset| < 2 s.e.); the corrected EP value is 0.039 high.
"""
import json
import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)  # cond(K + I) ≈ 10⁶–10⁷

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import arm_gpc  # noqa: E402
import jaxz  # noqa: E402
import jaxz.approx  # noqa: E402
from jaxz.models import gpc  # noqa: E402
from _cli import parse_mode  # noqa: E402

AGREE_IN_STDERR = 2.0


def add_arguments(parser):
    parser.add_argument("--genz-runs", type=int, default=None)
    parser.add_argument("--genz-points", type=int, default=2**15)
    parser.add_argument("--genz-shifts", type=int, default=8)
    parser.add_argument("--arm-runs", type=int, default=None, help="new ARM runs (0: none)")
    parser.add_argument("--arm-particles", type=int, default=20_000)
    parser.add_argument("--ais-runs", type=int, default=None, help="new AIS-HMC runs (0: none)")
    parser.add_argument("--ais-steps", type=int, default=20_000)
    parser.add_argument("--figure", choices=("quick", "full"), default="quick",
                        help="the figure whose JSON gets the reference: out/arm_gpc.json (quick, N = 100) or "
                             "out/arm_gpc_full.json (full, N = 365)")


def pooled(log_z):
    log_z = jnp.asarray(np.asarray(log_z, np.float64))
    return float(jaxz.weights.log_mean_exp(log_z)), float(jaxz.weights.stderr_log_mean_exp(log_z))


def check(name, log_z, seconds, reference, reference_stderr):
    log_mean, stderr = pooled(log_z)
    z = (log_mean - reference) / np.hypot(stderr, reference_stderr)
    entry = {"log_mean_z": log_mean, "stderr": stderr, "num_runs": int(np.size(log_z)),
             "offset": log_mean - reference, "offset_in_stderr": float(z), "agrees": bool(abs(z) < AGREE_IN_STDERR),
             "seconds_per_run": seconds}
    print(f"{name}: {log_mean:.4f} ± {stderr:.4f} ({np.size(log_z)} runs): {z:+.2f} s.e. from the reference",
          flush=True)
    return entry


def main():
    args = parse_mode(__doc__, add_arguments)
    full = args.full
    genz_runs = args.genz_runs or (48 if full else 12)
    arm_runs = (16 if full else 6) if args.arm_runs is None else args.arm_runs
    ais_runs = (80 if full else 32) if args.ais_runs is None else args.ais_runs
    path_json = os.path.join(arm_gpc.OUT, arm_gpc.output_name(args.figure == "full") + ".json")
    with open(path_json) as handle:
        report = json.load(handle)
    num_points = report["problem"]["num_points"]
    model = arm_gpc.build_model(num_points)

    # the Genz reference: pooled shifts of independent runs
    genz = jax.jit(lambda key: gpc.genz_log_z(model, key, args.genz_points, args.genz_shifts))
    jax.block_until_ready(genz(jax.random.key(0)))
    start, runs = time.perf_counter(), []
    for index in range(genz_runs):
        runs.append(jax.block_until_ready(genz(jax.random.key(1000 + index))))
        print(f"Genz run {index}: {float(runs[-1].log_z):.4f} ± {float(runs[-1].stderr):.4f}", flush=True)
    genz_seconds = (time.perf_counter() - start) / genz_runs
    shifts = np.concatenate([np.asarray(run.log_z_shifts) for run in runs])
    log_z, stderr = pooled(shifts)
    run_values = np.array([float(run.log_z) for run in runs])
    psi, _ = gpc.minimax_tilt(gpc.prioritized_cholesky(
        gpc.orthant_covariance(model) * model.labels[:, None] * model.labels[None, :])[0])
    reference = {
        "log_z": log_z, "stderr": stderr,
        "method": "gpc.genz_log_z: Genz (1992) separation of variables, Genz-Bretz ordering, Botev (2017) minimax "
                  "tilt, randomly shifted Richtmyer lattice (baker's map); log mean of all shifts, delta-method s.e.",
        "genz": {"num_runs": genz_runs, "num_shifts_per_run": args.genz_shifts, "num_points": args.genz_points,
                 "seconds_per_run": genz_seconds, "run_log_z": run_values.tolist(),
                 "sd_of_run_log_z": float(run_values.std(ddof=1)),
                 "mean_run_stderr": float(np.mean([float(run.stderr) for run in runs])),
                 "minimax_upper_bound_log_z": float(psi)},
        "agree_rule": f"|log mean Z - reference| < {AGREE_IN_STDERR} x sqrt(s.e.^2 + s.e._ref^2)",
        "checks": {},
        "command": " ".join(["paper_repro/gpc_reference.py"] + sys.argv[1:]),
        "machine": arm_gpc.machine(),
    }
    print(f"reference log Z = {log_z:.4f} ± {stderr:.4f} ({genz_runs} runs × {args.genz_shifts} shifts × "
          f"{args.genz_points} points; sd of the runs {reference['genz']['sd_of_run_log_z']:.4f} vs their mean s.e. "
          f"{reference['genz']['mean_run_stderr']:.4f})", flush=True)
    checks = reference["checks"]
    for name, size in (("ARM", "10000"), ("RM", "10000"), ("AIS HMC from q*", "5000")):
        entry = report["methods"].get(name, {}).get(size)
        if entry and "skipped" not in entry:
            checks[f"{name} {size} ({os.path.basename(path_json)})"] = check(name + " " + size, entry["log_z"],
                                                            entry["seconds_per_run"], log_z, stderr)

    if arm_runs:
        sequence = gpc.sequential_model(model, 1, random_scan=False)
        estimator = jaxz.arm(sequence, args.arm_particles, resample_ess=arm_gpc.RESAMPLE_ESS,
                             gamma_threshold=arm_gpc.GAMMA_THRESHOLD, max_generate=arm_gpc.MAX_GENERATE)
        (estimates, _), seconds = arm_gpc.timed_runs(lambda key: (jaxz.run(estimator, key).estimate, 0.0),
                                                     jax.random.key(7), arm_runs, 1, f"ARM R={args.arm_particles}")
        checks[f"ARM {args.arm_particles} (new)"] = check(f"ARM {args.arm_particles}", estimates.log_z, seconds,
                                                          log_z, stderr)
        checks[f"ARM {args.arm_particles} (new)"]["log_z"] = np.asarray(estimates.log_z).tolist()
    if ais_runs:
        ep = jaxz.approx.gpc_ep(model)
        path = gpc.path_from_ep(model, ep)
        kernel = jaxz.kernels.hmc(path, arm_gpc.HMC_STEP, arm_gpc.HMC_LEAPFROG, inverse_mass_matrix=ep.covariance)
        estimator = jaxz.ais(path, kernel, jaxz.schedules.geometric(args.ais_steps, 1e-4))

        def run(key):
            key_base, key_run = jax.random.split(key)
            return jaxz.run(estimator, key_run, path.sample_base(key_base, 1)).estimate, 0.0

        (estimates, _), seconds = arm_gpc.timed_runs(run, jax.random.key(8), ais_runs, min(ais_runs, 8),
                                                     f"AIS B={args.ais_steps}")
        name = f"AIS HMC from q* {args.ais_steps} (new)"
        checks[name] = check(name, estimates.log_z, seconds, log_z, stderr)
        checks[name]["log_z"] = np.asarray(estimates.log_z).tolist()

    report["reference"] = reference
    report["reading"] = arm_gpc.reading(report)
    with open(path_json, "w") as handle:
        json.dump(report, handle, indent=1)
    arm_gpc.plot(report)
    print("corrected EP", round(report["ep_corrected"]["log_z"], 4), "offset",
          round(report["ep_corrected"]["log_z"] - log_z, 4))


if __name__ == "__main__":
    main()
