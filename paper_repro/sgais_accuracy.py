"""Seed figures 2–4 (Cameron, Eggers & Kroon 2019): log evidence and run time against the
number of observations N for SGAIS, nested sampling and full-data AIS, on the three
models of §6 — Bayesian linear regression (6 parameters, exact evidence), multiclass
logistic regression (10-D inputs, 4 classes, 44 parameters) and a 2-D Gaussian mixture
with 5 components (25 parameters). Data are simulated as in §6 (no external datasets).

Reference line in every panel: the exact evidence (linear regression, conjugate); for
logistic regression and the mixture, the Laplace approximation at the MAP (plus log K!
for the mixture's K! label-switched modes) at every N of the grid, checked at N = 1,000
against the long tempered-SMC reference of ``sgais_reference.py``
(out/sgais_reference.json: Laplace − SMC = −0.07 and +0.17 nats there, within the SMC
s.e. 0.16 and 0.21; the Laplace error shrinks like 1/N).

SGAIS runs once per model as a stream (seed defaults: 10 particles, target ESS 5, lr 0.1,
burn-in 20, chunks = mini-batches of 500); its online trace gives log Z and the elapsed
time at every N. Baselines, run separately at each N:
- AIS as in the seed: SGAIS's settings on the full data, i.e. ``jaxz.sgais`` with one
  chunk of all N observations (AIS from the prior with the adaptive ESS-5 schedule and 20
  full-data SGHMC steps per temperature); skipped at larger N once a run exceeds the cap.
- nested sampling: NOT the seed's (2 live points moved by 20 SGHMC steps on the
  constrained prior); blackjax nested slice sampling with 50 (quick) / 500 (full) live
  points, stopping when the live points' share of Z falls below e^-3.
Accuracy is reported two ways: the seed's measure, the relative error of log Z at the
largest N, and the error in nats at small N (N = 1,000, where the first chunk — plain AIS
from the prior with 10 particles — dominates).
--quick: N up to 10^4 (CPU shared with other jobs; scaled down), nested sampling at
N <= 3,000 (linear) or 1,000 (others); --full: N up to 10^6 with 500 live points.

Writes paper_repro/out/sgais_accuracy.{json,png}.
"""
import json
import math
import os
import time

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

import jaxz  # noqa: E402
from _sgais_common import MODELS, OUT, machine, run_nested, run_sgais_stream  # noqa: E402
from _cli import parse_mode  # noqa: E402
from sgais_reference import laplace  # noqa: E402

jax.config.update("jax_enable_x64", True)

SEED_SETTINGS = dict(num_particles=10, target_ess=5.0, learning_rate=0.1, alpha=0.2, burn_in=20,
                     resample=False)  # the seed never resamples (jaxz.sgais does by default)
SMALL_N = 1_000
NUM_COMPONENTS = 5


def run_ais_seed(model, key, data):
    """The seed's AIS: SGAIS's settings with every SGHMC step on the full data (one chunk of
    all N rows: no mini-batch term, the adaptive ESS schedule from the prior). Returns
    (log Z, seconds incl. compile)."""
    num_rows = jax.tree.leaves(data)[0].shape[0]
    estimator = jaxz.sgais(model.log_prior, model.log_likelihood, chunk_size=num_rows, minibatch_size=1,
                           **SEED_SETTINGS)
    key_prior, key_run = jax.random.split(key)
    positions = model.sample_prior(key_prior, SEED_SETTINGS["num_particles"])
    start = time.perf_counter()
    result = jax.jit(lambda k: jaxz.run(estimator, k, positions, data))(key_run)
    return float(result.estimate.log_z), time.perf_counter() - start


def reference_at(model, name, data, key):
    """(log Z reference, how): exact for the conjugate model, else Laplace (+ log K!)."""
    if model.exact is not None:
        return float(model.exact(data)), "exact"
    num_starts = 16 if name == "gmm" else 4
    _, _, log_z, _, _ = laplace(model, data, key, num_starts=num_starts)
    if name == "gmm":
        return log_z + math.lgamma(NUM_COMPONENTS + 1.0), "laplace + log K!"
    return log_z, "laplace"


def smc_reference():
    """The tempered-SMC references at N = 1,000 from sgais_reference.py, if it has run."""
    path = os.path.join(OUT, "sgais_reference.json")
    if not os.path.exists(path):
        return {}
    report = json.load(open(path))
    return {name: entry["reference"] for name, entry in report["models"].items()}


def accuracy(n, log_z, reference_n, reference):
    """The seed's relative error at the largest N with a reference, and nats at N = SMALL_N."""
    lookup = dict(zip(n, log_z))
    ref = dict(zip(reference_n, reference))
    common = [m for m in reference_n if m in lookup]
    out = {}
    if common:
        largest = max(common)
        out["largest_n"] = largest
        out["relative_error_at_largest_n"] = (lookup[largest] - ref[largest]) / abs(ref[largest])
    if SMALL_N in lookup and SMALL_N in ref:
        out["error_nats_at_small_n"] = lookup[SMALL_N] - ref[SMALL_N]
    return out


def main():
    args = parse_mode(__doc__)
    if args.full:
        grid, num_live, ais_cap, models = [1_000, 10_000, 100_000, 1_000_000], 500, 600.0, ["linear", "logistic", "gmm"]
    else:
        grid, num_live, ais_cap, models = [1_000, 3_000, 10_000], 50, 60.0, ["linear", "logistic", "gmm"]
    # quick: nested sampling only on the smaller sizes (44- and 25-D slice sampling on the full data is slow)
    nested_cap_n = {name: grid[-1] for name in models} if args.full else {"linear": 3_000, "logistic": 1_000,
                                                                          "gmm": 1_000}
    smc = smc_reference()

    report = {"script": "sgais_accuracy", "mode": "full" if args.full else "quick", "grid": grid,
              "sgais_settings": {**SEED_SETTINGS, "chunk_size": 500, "minibatch_size": 500},
              "nested": f"blackjax.nss, {num_live} live points (the seed: 2 live points moved by SGHMC)",
              "ais": "jaxz.sgais with one chunk of all N rows: the seed's AIS (SGAIS settings, full-data SGHMC)",
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
        # reference: exact at every SGAIS checkpoint (linear), else Laplace on the grid
        reference_n = num_seen.tolist() if model.exact is not None else grid
        values = []
        for n in tqdm(reference_n, desc=f"{name}: reference"):
            value, how = reference_at(model, name, jax.tree.map(lambda leaf: leaf[:n], data),
                                      jax.random.fold_in(key, n))
            values.append(value)
        entry["reference"] = {"n": reference_n, "log_z": values, "kind": how}
        if name in smc:
            entry["smc_reference"] = {"n": SMALL_N, **smc[name],
                                      "laplace_minus_smc": values[reference_n.index(SMALL_N)] - smc[name]["log_z"]}
        ais_alive = True
        for n in tqdm(grid, desc=f"{name}: baselines"):
            subset = jax.tree.map(lambda leaf: leaf[:n], data)
            if n <= nested_cap_n[name]:
                value, elapsed = run_nested(model, key_ns, subset, num_live=num_live)
                entry["nested"]["n"].append(n)
                entry["nested"]["log_z"].append(value)
                entry["nested"]["seconds"].append(elapsed)
            if ais_alive:
                value, elapsed = run_ais_seed(model, key_ais, subset)
                entry["ais"]["n"].append(n)
                entry["ais"]["log_z"].append(value)
                entry["ais"]["seconds"].append(elapsed)
                ais_alive = elapsed < ais_cap
        entry["accuracy"] = {method: accuracy(entry[method]["n"], entry[method]["log_z"], reference_n, values)
                             for method in ("sgais", "nested", "ais")}
        report["models"][name] = entry

    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "sgais_accuracy.json"), "w") as handle:
        json.dump(report, handle, indent=1)

    fig, axes = plt.subplots(3, len(models), figsize=(4.5 * len(models), 10), squeeze=False)
    styles = {"nested": ("s", f"NS (blackjax nss, {num_live} live)"), "ais": ("^", "AIS (SGAIS settings, full data)")}
    for column, name in enumerate(models):
        entry = report["models"][name]
        top, middle, bottom = axes[:, column]
        sg_n = np.asarray(entry["sgais"]["n"])
        ref_n, ref = np.asarray(entry["reference"]["n"]), np.asarray(entry["reference"]["log_z"])
        # top: log Z / N so all sizes share one scale (the seed's plots)
        top.plot(sg_n, np.asarray(entry["sgais"]["log_z"]) / sg_n, label="SGAIS (online)")
        for method, (marker, label) in styles.items():
            n = np.asarray(entry[method]["n"])
            if len(n):
                top.plot(n, np.asarray(entry[method]["log_z"]) / n, marker, label=label)
        top.plot(ref_n, ref / ref_n, "k--", lw=0.8, marker="." if len(ref_n) < 10 else None,
                 label=f"reference ({entry['reference']['kind']})")
        if "smc_reference" in entry:
            top.errorbar([SMALL_N], [entry["smc_reference"]["log_z"] / SMALL_N],
                         yerr=[2 * entry["smc_reference"]["stderr_of_mean"] / SMALL_N], fmt="kx",
                         label="tempered SMC (sgais_reference)")
        top.set_xscale("log")
        top.set_title(f"{name}: log Z / N")
        top.legend(fontsize=6)
        # middle: error against the reference in nats, at the reference's N
        lookup = dict(zip(ref_n.tolist(), ref.tolist()))
        for method, marker, label in [("sgais", "o-", "SGAIS")] + [(m, s[0], s[1]) for m, s in styles.items()]:
            pairs = [(n, v - lookup[n]) for n, v in zip(entry[method]["n"], entry[method]["log_z"]) if n in lookup]
            if pairs:
                middle.plot(*zip(*pairs), marker, label=label)
        middle.axhline(0.0, color="k", lw=0.5)
        middle.set_xscale("log")
        middle.set_yscale("symlog", linthresh=1.0)
        middle.set_ylabel("log Z − reference (nats)")
        middle.legend(fontsize=6)
        bottom.plot(sg_n, entry["sgais"]["seconds"], label="SGAIS (cumulative)")
        for method, (marker, label) in styles.items():
            if entry[method]["n"]:
                bottom.plot(entry[method]["n"], entry[method]["seconds"], marker, label=label)
        bottom.set_xscale("log")
        bottom.set_yscale("log")
        bottom.set_xlabel("N")
        bottom.set_ylabel("seconds")
        bottom.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "sgais_accuracy.png"), dpi=120)
    print(json.dumps({name: entry["accuracy"] for name, entry in report["models"].items()}, indent=1))


if __name__ == "__main__":
    main()
