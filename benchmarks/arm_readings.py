"""ARM as Algorithm 2 reads and as we first read it, and whether its adaptive stop
biases Ẑ (issue 15; seed: Fraccaro, Paquet & Winther 2016, Alg. 2, §3).

On RBMs small enough for exact log Z (hidden layer enumerated), 400 independent
vmapped runs of each method at R = 100 particles, t = 10 Gibbs sweeps per move,
γ_thr = 0.7, i_max = 3 (the seed's settings):

- ``RM``: no generate loop (seed Alg. 1), unbiased;
- ``ARM``: seed Alg. 2 — when γ⁽⁰⁾ < γ_thr the pool is emptied and the same set is moved
  again each iteration (chains continue), resample when γ < γ_thr or R_n > R;
- ``ARM-restart``: the pool keeps the unmoved set and each iteration moves a fresh
  copy of it from scratch (what jaxz shipped first);
- ``ARM-0.9``: Alg. 2 with the seed's GP rule "resample when R_eff < 0.9R" (§4.2);
- ``ARM-fixed`` / ``ARM-restart-fixed``: γ_thr = 1, so the loop always runs i_max
  iterations. Nothing then depends on the weights except resampling, which happens at
  every level (R_n > R): Prop. 1 with a fixed α, hence an unbiased Ẑ. Comparing them with
  the adaptive runs isolates the adaptive stop.
- ``ARM-replay`` / ``ARM-restart-replay``: a pilot of 8 adaptive runs fixes the number
  of generate iterations at each level (the rounded mean of ``trace.num_generate``) and
  the runs replay it (``generate_counts=``): adaptive in where they spend, but the loop
  no longer depends on the weights it produces. The pilot's cost is reported apart.

For each: log of the mean of Ẑ minus log Z with its delta-method s.e. (unbiasedness is
log E[Ẑ]/Z = 0), the mean of log Ẑ minus log Z against −Var/2 (what a log-normal Ẑ with
an unbiased mean gives), sd, MSE, cost (full-sweep equivalents × particles, each move
at level n weighted n/V as the seed's O(tHn)), the number of particle moves, and the
wall time per run (compiled, vmapped in chunks of 100).

RBMs (binarized scikit-learn digits stand in for MNIST): ``tiny`` 14 × 10 (the 14
highest-variance pixels, CD-1, 10 epochs), ``digits16`` 64 × 16 (CD-1, 10 epochs),
``digits16-pcd`` 64 × 16 (PCD-1, 30 epochs: sharper, harder levels).

Run:  python benchmarks/arm_readings.py [--runs 400]
Writes benchmarks/results/arm_readings.json.
"""
import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

import jaxz
from jaxz.models import rbm as rbm_lib
from _results import machine, write

NUM_PARTICLES = 100
GIBBS_SWEEPS = 10
GAMMA_THRESHOLD = 0.7
MAX_GENERATE = 3
CHUNK = 100

METHODS = {
    "RM": dict(max_generate=0),
    "ARM": dict(),
    "ARM-restart": dict(generate="restart"),
    "ARM-0.9": dict(resample_ess=0.9),
    "ARM-fixed": dict(gamma_threshold=1.0),
    "ARM-restart-fixed": dict(gamma_threshold=1.0, generate="restart"),
    "ARM-replay": dict(replay=True),
    "ARM-restart-replay": dict(replay=True, generate="restart"),
}
PILOT_RUNS = 8
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "arm_readings.json")


def rbms():
    data = np.asarray(jaxz.data.digits_binarized().train)
    order = rbm_lib.variance_order(data)
    tiny = data[:, np.sort(order[:14])]
    settings = {
        "tiny": (tiny, 10, dict(method="cd", k=1, num_epochs=10)),
        "digits16": (data, 16, dict(method="cd", k=1, num_epochs=10)),
        "digits16-pcd": (data, 16, dict(method="pcd", k=1, num_epochs=30)),
    }
    for index, (name, (train_data, hidden, training)) in enumerate(settings.items()):
        rbm = rbm_lib.train(jax.random.key(index), jnp.asarray(train_data), hidden, **training).rbm
        yield name, rbm, train_data, {"visible": train_data.shape[1], "hidden": hidden, **training}


def summarize(estimates, trace, log_z, seconds, num_visible):
    log_z_hats = np.asarray(estimates.log_z, np.float64)
    errors = log_z_hats - log_z
    log_mean = float(jaxz.weights.log_mean_exp(jnp.asarray(log_z_hats)))
    stderr = float(jaxz.weights.stderr_log_mean_exp(jnp.asarray(log_z_hats)))
    num_generate = np.asarray(trace.num_generate)
    variance = float(errors.var(ddof=1))
    return {
        "log_mean_z_hat_minus_log_z": log_mean - log_z,
        "its_stderr": stderr,
        "z_score": (log_mean - log_z) / stderr,
        "mean_log_z_hat_minus_log_z": float(errors.mean()),
        "its_stderr_mean": float(errors.std(ddof=1) / np.sqrt(errors.size)),
        "minus_var_over_2": -variance / 2,
        "sd_log_z_hat": float(np.sqrt(variance)),
        "mse_log_z_hat": float(np.mean(errors**2)),
        "cost_mean": float(np.mean(estimates.cost)),
        "particle_moves_mean": float(np.mean(np.asarray(trace.num_moved).sum(axis=1))),
        "variance_x_cost": variance * float(np.mean(estimates.cost)),
        "mse_x_cost": float(np.mean(errors**2)) * float(np.mean(estimates.cost)),
        "generate_iterations_per_level": float(num_generate.mean()),
        "fraction_of_levels_at_i_max": float(np.mean(num_generate == MAX_GENERATE)),
        "mean_pool_over_r": float(np.mean(np.asarray(trace.num_particles)) / NUM_PARTICLES),
        "fraction_resampled": float(np.mean(np.asarray(trace.resampled))),
        "seconds_per_run": seconds,
        "status_max": int(np.max(estimates.status)),
        "num_runs": int(errors.size),
        "num_visible": num_visible,
    }


def measure(estimator, key, num_runs):
    batch = jax.jit(jax.vmap(lambda k: jaxz.run(estimator, k)))
    keys = jax.random.split(key, num_runs)
    jax.block_until_ready(batch(keys[:min(CHUNK, num_runs)]))  # compile
    start = time.perf_counter()
    parts = [batch(keys[i:i + CHUNK]) for i in range(0, num_runs, CHUNK)]
    result = jax.tree.map(lambda *xs: jnp.concatenate(xs), *parts)
    jax.block_until_ready(result)
    return result, (time.perf_counter() - start) / num_runs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--only", default=None, help="comma-separated methods to rerun, merged into the JSON")
    args = parser.parse_args()
    only = None if args.only is None else args.only.split(",")
    report = {
        "machine": machine(),
        "settings": {"particles": NUM_PARTICLES, "gibbs_sweeps": GIBBS_SWEEPS, "gamma_threshold": GAMMA_THRESHOLD,
                     "max_generate": MAX_GENERATE, "runs": args.runs,
                     "methods": {k: str(v) for k, v in METHODS.items()}},
        "rbms": {},
    }
    jobs = list(rbms())
    with tqdm(total=len(jobs) * len(METHODS), desc="arm readings") as bar:
        for rbm_index, (name, rbm, data, description) in enumerate(jobs):
            log_z = float(rbm_lib.exact_log_z(rbm))
            model = rbm_lib.sequential_model(rbm, rbm_lib.variance_order(data), GIBBS_SWEEPS)
            entry = {"rbm": description, "exact_log_z": log_z, "methods": {}}
            for method_index, (method, options) in enumerate(METHODS.items()):
                if only is not None and method not in only:
                    bar.update()
                    continue
                options = {"gamma_threshold": GAMMA_THRESHOLD, "max_generate": MAX_GENERATE, **options}
                pilot_cost = None
                if options.pop("replay", False):
                    pilot, _ = measure(jaxz.arm(model, NUM_PARTICLES, **options),
                                       jax.random.key(1000 * rbm_index + 500 + method_index), PILOT_RUNS)
                    options["generate_counts"] = np.rint(np.mean(np.asarray(pilot.trace.num_generate), 0)).astype(int)
                    pilot_cost = float(np.sum(pilot.estimate.cost))
                result, seconds = measure(jaxz.arm(model, NUM_PARTICLES, **options),
                                          jax.random.key(1000 * rbm_index + method_index), args.runs)
                entry["methods"][method] = summarize(result.estimate, result.trace, log_z, seconds, data.shape[1])
                if pilot_cost is not None:
                    entry["methods"][method]["pilot_cost_total"] = pilot_cost
                bar.update()
            if only is not None:  # merge into the results of the last full run
                with open(RESULTS) as handle:
                    previous = json.load(handle)
                previous["rbms"][name]["methods"].update(entry["methods"])
                entry = previous["rbms"][name]
                report["settings"]["methods"] = {**previous["settings"]["methods"], **report["settings"]["methods"]}
            report["rbms"][name] = entry
            for method, s in entry["methods"].items():
                print(f"{name:13s} {method:18s} logE[Z]/Z {s['log_mean_z_hat_minus_log_z']:+.3f} "
                      f"± {s['its_stderr']:.3f}"
                      f"  E[log]-logZ {s['mean_log_z_hat_minus_log_z']:+.3f} (-Var/2 {s['minus_var_over_2']:+.3f})"
                      f"  sd {s['sd_log_z_hat']:.3f}  cost {s['cost_mean']:.0f}"
                      f"  i/level {s['generate_iterations_per_level']:.2f}")
    write(report, "arm_readings.json")


if __name__ == "__main__":
    main()
