"""Seed figures 6–8 (Cameron, Eggers & Kroon 2019): sensitivity of SGAIS to its settings —
number of particles, target ESS, burn-in, learning rate, learning rate with burn-in at a
fixed product, and mini-batch size — on Bayesian linear regression (6 parameters; the
exact evidence gives the error). Data simulated as in §6. As in the seed, the chunk size
equals the mini-batch size (500 by default, and in the mini-batch sweep); target ESS 1
(Fig. 6's no-annealing point) is included; the lr × burn-in sweep keeps the product at 2,
so lr = 1.0 runs 2 burn-in steps (Fig. 8). A last sweep, not in the seed, compares
Algorithm 1's weighting/resampling options (``weighting``, ``resample`` of jaxz.sgais).

Each setting runs on several seeds at once (vmap over keys of the offline estimator, one
compile per setting); reported: relative error of log Z against the exact evidence
(mean and spread over seeds; the seed's measure) and in nats, run time (compiled, all
seeds) and SGHMC cost.
--quick: N = 3,000, 4 seeds (CPU shared; scaled down); --full: N = 10^5, 16 seeds.
Writes paper_repro/out/sgais_sensitivity.{json,png}.
"""
import json
import os
import time

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

import jaxz  # noqa: E402
from _sgais_common import OUT, machine  # noqa: E402
from jaxz.models import streaming  # noqa: E402
from _cli import parse_mode  # noqa: E402

jax.config.update("jax_enable_x64", True)

# the seed's defaults (§6): chunks of data the same size as the mini-batches
BASE = dict(num_particles=10, target_ess=5.0, burn_in=20, learning_rate=0.1, minibatch_size=500, chunk_size=500,
            resample=False)  # the seed never resamples (jaxz.sgais resamples at every move by default)
SWEEPS = {
    "num_particles": [dict(num_particles=p, target_ess=p / 2) for p in (4, 10, 20, 40)],
    # Fig. 6: target ESS 1 = 0.1 M takes each chunk in one step (no annealing); 0.1 = a fraction
    # (target_ess <= 1 is a fraction of the particles, > 1 a count)
    "target_ess": [dict(target_ess=e) for e in (0.1, 2.0, 5.0, 8.0, 9.5)],
    "burn_in": [dict(burn_in=b) for b in (5, 10, 20, 40)],
    "learning_rate": [dict(learning_rate=lr) for lr in (0.03, 0.1, 0.3, 1.0)],
    # Fig. 8: lr × burn-in held at the defaults' 0.1 × 20 = 2, so lr = 1.0 runs 2 burn-in steps
    "learning_rate_x_burn_in=2": [
        dict(learning_rate=lr, burn_in=int(round(2 / lr))) for lr in (0.025, 0.05, 0.1, 0.2, 0.4, 1.0)],
    # §6: "we add chunks of data at a time that are the same size as the mini-batches"
    "minibatch_size": [dict(minibatch_size=b, chunk_size=b) for b in (100, 250, 500, 1000)],
    # not a seed figure: Algorithm 1's weighting / resampling options (see jaxz.sgais)
    "variant": [dict(), dict(weighting="carried"), dict(resample="every_move"), dict(resample="chunk"),
                dict(weighting="carried", resample="chunk")],
}
VARIANT_LABELS = ["per_chunk", "carried", "every_move", "chunk", "carried+chunk"]


def run_setting(data, exact, keys, options):
    settings = {**BASE, **options}
    estimator = jaxz.sgais(streaming.linear_log_prior, streaming.linear_log_likelihood, **settings)
    positions_key = jax.random.key(11)

    def one(key):
        positions = streaming.linear_sample_prior(positions_key, settings["num_particles"])
        return jaxz.run(estimator, key, positions, data).estimate

    compiled = jax.jit(jax.vmap(one)).lower(keys).compile()
    start = time.perf_counter()
    estimate = jax.block_until_ready(compiled(keys))
    elapsed = time.perf_counter() - start
    errors = np.asarray(estimate.log_z) - exact
    relative = errors / abs(exact)
    return {"settings": settings, "relative_error_mean": float(np.mean(relative)),
            "relative_error_sd": float(np.std(relative)), "abs_relative_error_max": float(np.max(np.abs(relative))),
            "error_nats_mean": float(np.mean(errors)), "error_nats_sd": float(np.std(errors)),
            "seconds_all_seeds": elapsed, "cost_mean": float(np.mean(estimate.cost))}


def main():
    args = parse_mode(__doc__)
    num_data, num_seeds = (100_000, 16) if args.full else (3_000, 4)
    data, _ = streaming.linear_regression_data(jax.random.key(3), num_data)
    exact = float(streaming.linear_exact_log_evidence(data))
    keys = jax.random.split(jax.random.key(4), num_seeds)
    report = {"script": "sgais_sensitivity", "mode": "full" if args.full else "quick", "num_data": num_data,
              "num_seeds": num_seeds, "exact_log_z": exact, "base": BASE, "machine": machine(), "sweeps": {}}
    jobs = [(name, options) for name, values in SWEEPS.items() for options in values]
    for name, options in tqdm(jobs, desc="sgais_sensitivity"):
        report["sweeps"].setdefault(name, []).append(run_setting(data, exact, keys, options))

    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "sgais_sensitivity.json"), "w") as handle:
        json.dump(report, handle, indent=1)

    fig, axes = plt.subplots(2, len(SWEEPS), figsize=(3.2 * len(SWEEPS), 6), squeeze=False)
    for column, (name, results) in enumerate(report["sweeps"].items()):
        key = "learning_rate" if name.startswith("learning_rate_x") else name
        x = list(range(len(results))) if name == "variant" else [r["settings"][key] for r in results]
        axes[0, column].errorbar(x, [100 * r["relative_error_mean"] for r in results],
                                 yerr=[100 * r["relative_error_sd"] for r in results], marker="o")
        axes[0, column].axhline(0.0, color="k", lw=0.5)
        axes[0, column].set_title(name, fontsize=9)
        axes[1, column].plot(x, [r["seconds_all_seeds"] for r in results], marker="o")
        axes[1, column].set_xlabel(key)
        for ax in axes[:, column]:
            if name == "variant":
                ax.set_xticks(x)
                ax.set_xticklabels(VARIANT_LABELS, rotation=30, fontsize=7)
            else:
                ax.set_xscale("log")
    axes[0, 0].set_ylabel("relative error of log Z (%)")
    axes[1, 0].set_ylabel(f"seconds ({num_seeds} seeds)")
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "sgais_sensitivity.png"), dpi=120)
    for name, results in report["sweeps"].items():
        print(name, [(round(100 * r["relative_error_mean"], 3), round(r["seconds_all_seeds"], 2)) for r in results])


if __name__ == "__main__":
    main()
