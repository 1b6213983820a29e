"""Seed Figure 1 (Lindsten, Helske & Vihola, "Graphical model inference: Sequential Monte
Carlo meets deterministic approximations", NeurIPS 2018): log Ẑ of a 16 × 16 periodic
Ising model from SMC-Base and SMC-Twist (loopy-BP twisting) at N = 64, 256, 1024.

Data: the authors' own three models (../shared/data/ising16_lindsten2018.npz: one
Uniform(−1, 1) field, J = (0.9, 1.0, 1.1) × 0.4407), with their 50 published runs per
setting drawn beside ours. The seed's figure shows model 0 against an annealed-SMC
"ground truth" (255.927); here every model is measured against its exact log Z from
``jaxz.models.ising.exact_log_z`` (row-to-row transfer matrices in float64, about
2^32 · 224 multiply-adds per model: tens of minutes to hours on 2 shared CPU cores).
The exact values are stored in paper_repro/out/twisted_ising_exact.json with a
fingerprint of the field and temperatures, and reused when the fingerprint matches;
delete that file to recompute them.

Settings as in the seed: raster order, fully adapted proposals, resampling at every
step (resample_ess = 1.0), loopy BP with forward-backward sweeps (max 100 sweeps,
relative tolerance 1e-2), systematic resampling as in the authors' code (top row of
the figure). The bottom row repeats every setting with multinomial resampling, the
scheme whose single-run standard error (the genealogy estimator) is valid: it spreads
log Ẑ about twice as wide, and the JSON reports its standard errors against the
observed spread. Loopy BP runs once per model (the seed's timed SMC-Twist runs
include it; its time is in the JSON and in benchmarks/twisted_ising.py); particles are float32.
Runs are vmapped (one compiled program per method and N, shared by the three models).

--quick (default; 6 minutes on 2 shared cores, compilation included): N = 64, 256, 1024, 10 runs each.
--full: N = 64, 256, 1024, 50 runs each, as the seed.
--replot: redraw the figure from paper_repro/out/twisted_ising.json.

Writes paper_repro/out/twisted_ising.{json,png}.
"""
import hashlib
import json
import os
import resource
import time

import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

import jaxz  # noqa: E402
import jaxz.approx  # noqa: E402
from jaxz.models import ising  # noqa: E402
from _cli import load_report, machine, parse_mode  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")
DATA_NAME = "ising16_lindsten2018.npz"
EXACT_FILE = os.path.join(OUT, "twisted_ising_exact.json")
METHODS = ("SMC-Base", "SMC-Twist")
RESAMPLING = ("systematic", "multinomial")
LBP_SETTINGS = {"max_sweeps": 100, "tol": 1e-2}
MEDIAN = {"color": "black", "linewidth": 1.6}  # visible on filled and hatched boxes


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def data_path():
    return jaxz.data.shared_file(DATA_NAME)


def load_data():
    data = np.load(data_path())
    return {key: data[key] for key in data.files}


def fingerprint(field, inverse_temperatures):
    digest = hashlib.sha256(np.asarray(field, np.float64).tobytes()
                            + np.asarray(inverse_temperatures, np.float64).tobytes())
    return digest.hexdigest()


def exact_log_z_values(field, inverse_temperatures):
    """Exact log Z of each model (float64 transfer matrices), reused from EXACT_FILE when
    its fingerprint matches; computed (and stored there) otherwise."""
    key = fingerprint(field, inverse_temperatures)
    if os.path.exists(EXACT_FILE):
        with open(EXACT_FILE) as f:
            stored = json.load(f)
        if stored.get("fingerprint") == key:
            print(f"exact log Z reused from {os.path.relpath(EXACT_FILE)}: {stored['exact_log_z']}")
            return stored, "reused"
    values, seconds = [], []
    with jax.enable_x64(True):
        for inverse_temperature in tqdm(inverse_temperatures, desc="exact log Z (transfer matrices)"):
            model = ising.periodic_lattice(jnp.asarray(field, jnp.float64), float(inverse_temperature))
            start = time.perf_counter()
            values.append(float(ising.exact_log_z(model)))
            seconds.append(time.perf_counter() - start)
    stored = {"fingerprint": key, "inverse_temperatures": [float(j) for j in inverse_temperatures],
              "exact_log_z": values, "wall_seconds": seconds, "method": "transfer matrices, float64",
              "machine": machine()}
    os.makedirs(OUT, exist_ok=True)
    with open(EXACT_FILE, "w") as f:
        json.dump(stored, f, indent=1)
    return stored, "computed"


def compiled_runs(method, num_particles, resampling):
    """One compiled vmapped program for (method, N, resampling): field, J (and the
    twist's messages) are arguments, so the three models share it."""

    def one_run(field, inverse_temperature, log_messages, key):
        model = ising.periodic_lattice(field, inverse_temperature)
        twist = log_messages if method == "SMC-Twist" else None
        estimator = jaxz.twisted_smc(ising.sequential_model(model, twist), resample_ess=1.0, resampling=resampling)
        return jaxz.run(estimator, key, num_particles).estimate

    return jax.jit(jax.vmap(one_run, in_axes=(None, None, None, 0)))


def summarize(log_z_hat, exact):
    log_z_hat = np.asarray(log_z_hat, np.float64)
    return {"mean": float(log_z_hat.mean()), "sd": float(log_z_hat.std(ddof=1)),
            "mean_error": float(log_z_hat.mean() - exact), "rmse": float(np.sqrt(np.mean((log_z_hat - exact) ** 2))),
            "median": float(np.median(log_z_hat))}


def main():
    args = parse_mode(__doc__, replot=True)
    data = load_data()
    if args.replot:
        report = load_report(os.path.join(OUT, "twisted_ising.json"))
        plot(report, data, os.path.join(OUT, "twisted_ising.png"))
        print_table(report)
        return
    full = bool(args.full)
    particle_counts = (64, 256, 1024)
    num_runs = 50 if full else 10
    field = data["field"]
    inverse_temperatures = data["inverse_temperatures"]
    published_counts = [int(n) for n in data["num_particles"]]
    exact, exact_source = exact_log_z_values(field, inverse_temperatures)
    exact_values = exact["exact_log_z"]

    models = [ising.periodic_lattice(jnp.asarray(field, jnp.float32), float(j)) for j in inverse_temperatures]
    lbp = []
    for model in models:
        start = time.perf_counter()
        result = jaxz.approx.loopy_bp(model, **LBP_SETTINGS)
        jax.block_until_ready(result)
        lbp.append((result, time.perf_counter() - start))

    results = []
    settings = [(resampling, method, n) for resampling in RESAMPLING for n in particle_counts for method in METHODS]
    key = jax.random.key(2018)
    for resampling, method, num_particles in tqdm(settings, desc="SMC settings (3 models each)"):
        runner = compiled_runs(method, num_particles, resampling)
        for index, model in enumerate(models):
            key, run_key = jax.random.split(key)
            keys = jax.random.split(run_key, num_runs)
            args_ = (model.field.reshape(field.shape), model.couplings[0], lbp[index][0].log_messages, keys)
            if index == 0:
                jax.block_until_ready(runner(*args_))  # compile once
            wall, cpu = time.perf_counter(), cpu_seconds()
            estimate = jax.block_until_ready(runner(*args_))
            wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
            log_z_hat = np.asarray(estimate.log_z, np.float64)
            stderr = np.asarray(estimate.log_z_stderr, np.float64)
            ours = summarize(log_z_hat, exact_values[index])
            has_stderr = bool(np.all(np.isfinite(stderr)))
            ours.update({
                "log_z": log_z_hat.tolist(),
                "rms_reported_stderr": float(np.sqrt(np.mean(stderr**2))) if has_stderr else None,
                "stderr_calibration": float(np.sqrt(np.mean(stderr**2)) / ours["sd"]) if has_stderr else None,
                "low_ess_runs": int(np.sum((np.asarray(estimate.status) & jaxz.STATUS_LOW_ESS) > 0)),
                # runs whose genealogy variance came out non-positive report a nan s.e. (and no calibration above)
                "finite_stderr_runs": int(np.sum(np.isfinite(stderr))),
                "stderr_unresolved_runs": int(np.sum((np.asarray(estimate.status)
                                                      & jaxz.STATUS_STDERR_UNRESOLVED) > 0)),
                "wall_seconds_per_run": wall / num_runs, "cpu_seconds_per_run": cpu / num_runs,
            })
            entry = {"model": index, "inverse_temperature": float(inverse_temperatures[index]), "method": method,
                     "resampling": resampling, "num_particles": num_particles, "num_runs": num_runs, "ours": ours}
            if num_particles in published_counts:
                column = published_counts.index(num_particles)
                published = data["published_log_z"][index, column, METHODS.index(method)]
                entry["published"] = summarize(published, exact_values[index])
                entry["published"]["log_z"] = published.tolist()
                published_seconds = data["published_cpu_seconds"][index, column, METHODS.index(method)]
                entry["published"]["cpu_seconds_per_run"] = float(published_seconds.mean())
            results.append(entry)

    report = {
        "figure": "seed Fig. 1: log Z of the 16 x 16 periodic Ising models, SMC-Base vs SMC-Twist (loopy BP)",
        "mode": "full" if full else "quick",
        "settings": {"particle_counts": list(particle_counts), "num_runs": num_runs, "resample_ess": 1.0,
                     "resampling": list(RESAMPLING), "order": "raster", "proposal": "fully adapted",
                     "loopy_bp": LBP_SETTINGS, "dtype": "float32 (exact log Z: float64)"},
        "exact_log_z": exact_values, "exact_log_z_source": exact_source,
        "exact_log_z_wall_seconds": exact["wall_seconds"],
        "authors_reference_log_z_model0": float(data["reference_log_z_model0"]),
        "loopy_bp": [{"sweeps": int(r.num_sweeps), "converged": bool(r.converged), "max_change": float(r.max_change),
                      "bethe_log_z": float(r.log_z), "wall_seconds": seconds} for r, seconds in lbp],
        "results": results,
        "machine": machine(),
    }
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "twisted_ising.json"), "w") as f:
        json.dump(report, f, indent=1)
    plot(report, data, os.path.join(OUT, "twisted_ising.png"))
    print_table(report)


def plot(report, data, path):
    colors = {"SMC-Base": "tab:orange", "SMC-Twist": "tab:blue"}
    counts = sorted({r["num_particles"] for r in report["results"]} | {int(n) for n in data["num_particles"]})
    fig, grid = plt.subplots(2, 3, figsize=(15, 9), sharey="col")
    for (row, resampling), index in ((r, i) for r in enumerate(RESAMPLING) for i in range(3)):
        ax = grid[row, index]
        for position, n in enumerate(counts):
            for m, method in enumerate(METHODS):
                entry = next((r for r in report["results"] if r["model"] == index and r["method"] == method
                              and r["num_particles"] == n and r["resampling"] == resampling), None)
                centre = position * 5 + m * 2
                if entry is not None:
                    box = ax.boxplot([entry["ours"]["log_z"]], positions=[centre], widths=0.8, patch_artist=True,
                                     medianprops=MEDIAN)
                    box["boxes"][0].set_facecolor(colors[method])
                if n in [int(c) for c in data["num_particles"]]:
                    column = [int(c) for c in data["num_particles"]].index(n)
                    box = ax.boxplot([data["published_log_z"][index, column, m]], positions=[centre + 0.9], widths=0.8,
                                     patch_artist=True, medianprops=MEDIAN)
                    box["boxes"][0].set_facecolor("white")
                    box["boxes"][0].set_edgecolor(colors[method])
                    box["boxes"][0].set_hatch("//")
        ax.axhline(report["exact_log_z"][index], color="k", ls="--", lw=1, label="exact log Z (transfer matrices)")
        if index == 0 and row == 0:
            ax.axhline(report["authors_reference_log_z_model0"], color="tab:red", ls=":", lw=1,
                       label="authors' annealed-SMC reference")
        ax.set_xticks([p * 5 + 1.45 for p in range(len(counts))])
        ax.set_xticklabels([str(n) for n in counts])
        ax.set_xlabel("number of particles N")
        ax.set_title(f"model {index}: J = {float(data['inverse_temperatures'][index]):.4f}; "
                     f"ours: {resampling} resampling",
                     fontsize=9)
        if index == 0:
            ax.set_ylabel("log Ẑ")
    for index in range(3):  # every run of the column (ours, both resamplings, and the authors') inside the axes
        values = [v for r in report["results"] if r["model"] == index for v in r["ours"]["log_z"]]
        values += list(np.ravel(data["published_log_z"][index])) + [report["exact_log_z"][index]]
        low, high = min(values), max(values)
        pad = 0.04 * (high - low)
        grid[0, index].set_ylim(low - pad, high + pad)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[m]) for m in METHODS]
    handles += [plt.Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="gray", hatch="//")]
    labels = [f"{m} (jaxz)" for m in METHODS] + ["published runs (authors' MATLAB)"]
    line_handles, line_labels = grid[0, 0].get_legend_handles_labels()
    fig.legend(handles + line_handles, labels + line_labels, fontsize=9, loc="lower center", ncol=5)
    fig.suptitle(f"16 × 16 periodic Ising, {report['settings']['num_runs']} runs per box ({report['mode']}); "
                 "hatched: the seed's 50 runs; every run inside the axes")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=120)


def print_table(report):
    print(f"exact log Z: {report['exact_log_z']} ({report['exact_log_z_source']}); "
          f"authors' reference (model 0): {report['authors_reference_log_z_model0']}")
    print("resampling   model method     N    sd (ours / published)   mean error (ours / published)   rms s.e./sd "
          "(over runs, if every s.e. is finite)")
    for r in report["results"]:
        published = r.get("published", {})
        calibration = r["ours"]["stderr_calibration"]
        print(f"{r['resampling']:12s} {r['model']:5d} {r['method']:9s} {r['num_particles']:5d}   "
              f"{r['ours']['sd']:.3f} / {published.get('sd', float('nan')):.3f}              "
              f"{r['ours']['mean_error']:+.3f} / {published.get('mean_error', float('nan')):+.3f}                  "
              f"{'-' if calibration is None else f'{calibration:.2f}'}"
              f" ({r['ours'].get('finite_stderr_runs', '?')}/{r['num_runs']} runs with a finite s.e.)")


if __name__ == "__main__":
    main()
