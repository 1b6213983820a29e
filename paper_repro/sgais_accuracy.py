"""Seed figures 2–4 (Cameron, Eggers & Kroon 2019): log evidence and run time against the
number of observations N for SGAIS, nested sampling and full-data AIS, on the three
models of §6 — Bayesian linear regression (6 parameters, exact evidence), multiclass
logistic regression (10-D inputs, 4 classes, 44 parameters) and a 2-D Gaussian mixture
with 5 components (25 parameters). Data are simulated as in §6 (no external datasets).

SGAIS runs once per model as a stream; its online trace gives log Z and the elapsed
time at every N. Nested sampling (blackjax.nss) and AIS (jaxz.ais with HMC on the
full-data likelihood) run separately at each N; AIS is skipped at larger N once one run
exceeds the time cap. --quick: N up to 10^4 (CPU shared with other jobs; scaled down),
nested sampling with 50 live points at N <= 3,000 (linear) or 1,000 (others); --full: N up
to 10^6 with 500 live points.

Writes paper_repro/out/sgais_accuracy.{json,png}.
"""
import json
import os

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

from _sgais_common import MODELS, OUT, machine, run_ais, run_nested, run_sgais_stream  # noqa: E402
from _cli import parse_mode  # noqa: E402

jax.config.update("jax_enable_x64", True)


def main():
    args = parse_mode(__doc__)
    if args.full:
        grid, num_live, ais_cap, models = [1_000, 10_000, 100_000, 1_000_000], 500, 600.0, ["linear", "logistic", "gmm"]
    else:
        grid, num_live, ais_cap, models = [1_000, 3_000, 10_000], 50, 30.0, ["linear", "logistic", "gmm"]
    # quick: nested sampling only on the smaller sizes (44- and 25-D slice sampling on the full data is slow)
    nested_cap_n = {name: grid[-1] for name in models} if args.full else {"linear": 3_000, "logistic": 1_000,
                                                                          "gmm": 1_000}

    report = {"script": "sgais_accuracy", "mode": "full" if args.full else "quick", "grid": grid,
              "machine": machine(), "models": {}}
    for name in models:
        model = MODELS[name]
        key = jax.random.key(sorted(MODELS).index(name))
        key_data, key_sgais, key_ns, key_ais = jax.random.split(key, 4)
        data = model.make_data(key_data, grid[-1])
        log_z, num_seen, seconds, steps, estimate = run_sgais_stream(model, key_sgais, data)
        entry = {"sgais": {"n": num_seen.tolist(), "log_z": log_z.tolist(), "seconds": seconds.tolist(),
                           "annealing_steps": steps.tolist()},
                 "nested": {"n": [], "log_z": [], "seconds": []}, "ais": {"n": [], "log_z": [], "seconds": []}}
        if model.exact is not None:
            exact = [float(model.exact(jax.tree.map(lambda leaf: leaf[:n], data))) for n in num_seen]
            entry["exact"] = {"n": num_seen.tolist(), "log_z": exact}
            entry["sgais"]["relative_error"] = (np.abs(log_z - exact) / np.abs(exact)).tolist()
        ais_alive = True
        for n in tqdm(grid, desc=f"{name}: baselines"):
            subset = jax.tree.map(lambda leaf: leaf[:n], data)
            if n <= nested_cap_n[name]:
                value, elapsed = run_nested(model, key_ns, subset, num_live=num_live)
                entry["nested"]["n"].append(n)
                entry["nested"]["log_z"].append(value)
                entry["nested"]["seconds"].append(elapsed)
            if ais_alive:
                value, elapsed = run_ais(model, key_ais, subset)
                entry["ais"]["n"].append(n)
                entry["ais"]["log_z"].append(value)
                entry["ais"]["seconds"].append(elapsed)
                ais_alive = elapsed < ais_cap
        report["models"][name] = entry

    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "sgais_accuracy.json"), "w") as handle:
        json.dump(report, handle, indent=1)

    fig, axes = plt.subplots(2, len(models), figsize=(4.5 * len(models), 7), squeeze=False)
    for column, name in enumerate(models):
        entry = report["models"][name]
        top, bottom = axes[0, column], axes[1, column]
        sg_n = np.asarray(entry["sgais"]["n"])
        # plot log Z / N so all sizes share one scale
        top.plot(sg_n, np.asarray(entry["sgais"]["log_z"]) / sg_n, label="SGAIS (online)")
        for method, marker in (("nested", "s"), ("ais", "^")):
            n = np.asarray(entry[method]["n"])
            if len(n):
                top.plot(n, np.asarray(entry[method]["log_z"]) / n, marker, label=method)
        if "exact" in entry:
            top.plot(sg_n, np.asarray(entry["exact"]["log_z"]) / sg_n, "k--", lw=0.8, label="exact")
        top.set_xscale("log")
        top.set_title(f"{name}: log Z / N")
        top.legend(fontsize=7)
        bottom.plot(sg_n, entry["sgais"]["seconds"], label="SGAIS (cumulative)")
        for method, marker in (("nested", "s"), ("ais", "^")):
            if entry[method]["n"]:
                bottom.plot(entry[method]["n"], entry[method]["seconds"], marker, label=method)
        bottom.set_xscale("log")
        bottom.set_yscale("log")
        bottom.set_xlabel("N")
        bottom.set_ylabel("seconds")
        bottom.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "sgais_accuracy.png"), dpi=120)
    print(json.dumps({name: {"sgais_last": report["models"][name]["sgais"]["log_z"][-1],
                             "nested": report["models"][name]["nested"]["log_z"],
                             "ais": report["models"][name]["ais"]["log_z"]} for name in models}, indent=1))


if __name__ == "__main__":
    main()
