"""Seed figure 5 (Cameron, Eggers & Kroon 2019): SGAIS on a non-stationary stream. 2-D
points come from 3 Gaussians for the first 1,000 observations, 5 up to 10,000 and 7 after
(simulated; ``jaxz.models.streaming.shifting_gmm_data``). Mixtures with 3, 5 and 7
components are fitted online, on the stream in order and shuffled; the online log
evidence of each (as log Bayes factors against the 5-component fit) and the number of
annealing steps per chunk show when a shift happens: in order, each new cluster makes
the chunk likelihood hard to absorb and the adaptive schedule takes many more steps.

--quick: 15,000 observations (CPU shared; scaled down); --full: 50,000.
Writes paper_repro/out/sgais_shift.{json,png}.
"""
import json
import os

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

from _sgais_common import OUT, gmm_model, machine, run_sgais_stream  # noqa: E402
from jaxz.models import streaming  # noqa: E402
from _cli import parse_mode  # noqa: E402


def main():
    args = parse_mode(__doc__)
    num_data = 50_000 if args.full else 15_000
    key_data, key_shuffle, key_run = jax.random.split(jax.random.key(5), 3)
    data = streaming.shifting_gmm_data(key_data, num_data)
    orders = {"in order": data, "shuffled": data[jax.random.permutation(key_shuffle, num_data)]}

    report = {"script": "sgais_shift", "mode": "full" if args.full else "quick", "num_data": num_data,
              "schedule": "3 components for n < 1000, 5 for n < 10000, 7 after", "machine": machine(), "runs": {}}
    runs = [(order, k) for order in orders for k in (3, 5, 7)]
    for order, num_components in tqdm(runs, desc="sgais_shift"):
        log_z, num_seen, seconds, steps, estimate = run_sgais_stream(
            gmm_model(num_components), key_run, orders[order], progress=False)
        report["runs"][f"{order}/K={num_components}"] = {
            "n": num_seen.tolist(), "log_z": log_z.tolist(), "annealing_steps": steps.tolist(),
            "seconds": float(seconds[-1]), "status": int(estimate.status),
        }

    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "sgais_shift.json"), "w") as handle:
        json.dump(report, handle, indent=1)

    fig, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
    for column, order in enumerate(orders):
        reference = np.asarray(report["runs"][f"{order}/K=5"]["log_z"])
        for num_components in (3, 5, 7):
            run = report["runs"][f"{order}/K={num_components}"]
            n = np.asarray(run["n"])
            axes[0, column].plot(n, np.asarray(run["log_z"]) - reference, label=f"K={num_components}")
            axes[1, column].plot(n, run["annealing_steps"], label=f"K={num_components}")
        for ax in axes[:, column]:
            for shift in (1_000, 10_000):
                ax.axvline(shift, color="gray", lw=0.6, ls=":")
        axes[0, column].set_title(f"{order}: log Z_K − log Z_5")
        axes[0, column].set_xscale("log")
        axes[0, column].legend()
        axes[1, column].set_title(f"{order}: annealing steps per chunk")
        axes[1, column].set_xlabel("n")
        axes[1, column].set_yscale("log")
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "sgais_shift.png"), dpi=120)
    print({name: (run["log_z"][-1], int(np.sum(run["annealing_steps"]))) for name, run in report["runs"].items()})


if __name__ == "__main__":
    main()
