"""SGAIS at its defaults on the held-out streams of tests/test_sgais_defaults.py (issue 29).

Each stream keeps the test's data and particle count; the runs differ in the prior draws and
the run key (``--seed`` + run index: seeds the tests do not use). No option is set: the step,
friction, burn_in and metric come from the particles, ``target_ess`` is its default fraction.
Every run records its relative error against the exact or reference log evidence at the end
of the stream and at its worst checkpoint (every chunk's online log Ẑ). Streams:

- ``scales``: linear regression, 8 features on scales 0.2 to 3, noise sd 0.5, 5,000 rows in
  chunks of 1,000, 100 particles (exact evidence, ``jaxz.models.regression``);
- ``rows20k``: linear regression, 5 features + bias, 20,000 rows in chunks of 500, 50
  particles (exact evidence, ``streaming.linear_exact_log_evidence``);
- ``logistic``: 4 classes, 10 features (44 parameters), 3,000 rows in chunks of 500, 100
  particles (benchmarks/results/sgais_logistic_reference.json);
- ``mixture``: 5 components in 2-D (25 parameters), 3,000 rows in chunks of 500, 40 particles
  (benchmarks/results/sgais_mixture_reference.json).

    PYTHONPATH=$PWD python benchmarks/sgais_defaults.py --streams logistic --runs 8
    PYTHONPATH=$PWD python benchmarks/sgais_defaults.py --table   # only rewrite the markdown

Merges each stream into benchmarks/results/sgais_defaults.json and writes the table
benchmarks/results/sgais_defaults.md from it.
"""
import argparse
import json
import os
import time

import jax
import numpy as np

import jaxz
from jaxz.models import regression, streaming
from _results import machine

jax.config.update("jax_enable_x64", True)

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
OUT_JSON = os.path.join(RESULTS, "sgais_defaults.json")
OUT_MD = os.path.join(RESULTS, "sgais_defaults.md")
TARGET_END, TARGET_EVERY = 5e-4, 2e-3  # issue 29


def _reference(name):
    with open(os.path.join(RESULTS, name)) as handle:
        return {row["num_rows"]: row["log_z"] for row in json.load(handle)["checkpoints"]}


def _scaled_regression(seed, num_rows, scales, noise_scale):  # as tests/test_sgais_defaults.py
    key_x, key_theta, key_noise = jax.random.split(jax.random.key(seed), 3)
    scales = jax.numpy.asarray(scales)
    inputs = jax.random.normal(key_x, (num_rows, scales.size)) * scales
    theta = jax.random.normal(key_theta, (scales.size,))
    return inputs, inputs @ theta + noise_scale * jax.random.normal(key_noise, (num_rows,))


def stream_setup(name):
    """(description, log_prior, log_likelihood, data, chunk_size, sample_prior(key), references(ends))."""
    if name == "scales":
        noise = 0.5
        data = _scaled_regression(50, 5_000, np.geomspace(0.2, 3.0, 8), noise)

        def log_likelihood(theta, datum):
            return regression.log_likelihood(theta, datum, noise_scale=noise)

        def references(ends):
            return [float(regression.exact_log_evidence((data[0][:e], data[1][:e]), noise_scale=noise)) for e in ends]
        return ("linear regression, 8 features on scales 0.2-3, noise sd 0.5, 5,000 rows / chunks of 1,000, "
                "100 particles, exact", streaming.linear_log_prior, log_likelihood, data, 1_000,
                lambda key: jax.random.normal(key, (100, 8)), references)
    if name == "rows20k":
        data, _ = streaming.linear_regression_data(jax.random.key(53), 20_000)

        def references(ends):
            return [float(streaming.linear_exact_log_evidence((data[0][:e], data[1][:e]))) for e in ends]
        return ("linear regression, 6 parameters, 20,000 rows / chunks of 500, 50 particles, exact",
                streaming.linear_log_prior, streaming.linear_log_likelihood, data, 500,
                lambda key: streaming.linear_sample_prior(key, 50), references)
    if name == "logistic":
        data, _ = streaming.logistic_data(jax.random.key(56), 3_000)
        reference = _reference("sgais_logistic_reference.json")
        return ("4-class logistic regression, 44 parameters, 3,000 rows / chunks of 500, 100 particles, "
                "importance-sampling reference", streaming.logistic_log_prior, streaming.logistic_log_likelihood,
                data, 500, lambda key: streaming.logistic_sample_prior(key, 100),
                lambda ends: [reference[int(e)] for e in ends])
    if name == "mixture":
        k = 5
        points, _ = streaming.gmm_data(jax.random.key(59), 3_000, k)
        reference = _reference("sgais_mixture_reference.json")
        return ("5-component 2-D Gaussian mixture, 25 parameters, 3,000 rows / chunks of 500, 40 particles, "
                "importance-sampling reference (x 5!)", lambda t: streaming.gmm_log_prior(t, k),
                lambda t, y: streaming.gmm_log_likelihood(t, y, k), points, 500,
                lambda key: streaming.gmm_sample_prior(key, 40, k), lambda ends: [reference[int(e)] for e in ends])
    raise ValueError(f"unknown stream {name!r}")


def run_stream(name, runs, seed, save):
    """``runs`` runs of stream ``name`` (seeds ``seed``, ``seed`` + 1, ...); ``save(description, row)``
    after each run."""
    description, log_prior, log_likelihood, data, chunk_size, sample_prior, references = stream_setup(name)
    num_rows = jax.tree.leaves(data)[0].shape[0]
    host = jax.tree.map(np.asarray, data)
    for run in range(runs):
        key_prior, key_run = jax.random.split(jax.random.key(seed + run))
        chunks = (jax.tree.map(lambda leaf: leaf[s:s + chunk_size], host) for s in range(0, num_rows, chunk_size))
        start = time.time()
        result = jaxz.sgais_stream(log_prior, log_likelihood, key_run, sample_prior(key_prior), chunks,
                                   chunk_size=chunk_size, progress=False)
        ends = np.asarray(result.trace.num_seen)
        refs = np.asarray(references(ends))
        errors = (np.asarray(result.trace.log_z) - refs) / np.abs(refs)
        row = dict(seed=seed + run, status=int(result.estimate.status), end=float(errors[-1]),
                   worst=float(np.max(np.abs(errors))), end_nats=float(errors[-1] * abs(refs[-1])),
                   increments_error_nats=(np.asarray(result.trace.log_z_increment)
                                          - np.diff(np.concatenate([[0.0], refs]))).tolist(),
                   annealing_steps=np.asarray(result.trace.num_annealing_steps).tolist(),
                   seconds=time.time() - start)
        print(name, {k: v for k, v in row.items() if k != "increments_error_nats"}, flush=True)
        save(description, row)


def summarize(rows):
    ends = np.array([r["end"] for r in rows])
    worst = np.array([r["worst"] for r in rows])
    return dict(
        runs=len(rows), end_mean=float(ends.mean()), end_sd=float(ends.std(ddof=1)) if len(rows) > 1 else None,
        end_worst=float(ends[np.argmax(np.abs(ends))]), worst_checkpoint=float(worst.max()),
        within_end_target=int(np.sum(np.abs(ends) < TARGET_END)),
        within_both_targets=int(np.sum((np.abs(ends) < TARGET_END) & (worst < TARGET_EVERY))),
        flagged=int(sum(r["status"] != 0 for r in rows)), seconds_per_run=float(np.mean([r["seconds"] for r in rows])))


def machine_line(about) -> str:
    """The table's machine: from the dict ``machine()`` records, or the string older JSON holds."""
    if isinstance(about, dict):
        return f"{about['platform']}, {about['cpu_count']} cores, jax {about['jax']}"
    return about or ""


def write_table(results):
    lines = ["# SGAIS at its defaults (issue 29)", "",
             "Generated by `benchmarks/sgais_defaults.py` from `sgais_defaults.json`; relative error of the online",
             f"log Ẑ, targets |end| < {TARGET_END:.2%} and every checkpoint < {TARGET_EVERY:.1%}. Runs differ in",
             "their prior draws and run key; defaults: " + results.get("defaults", ""), "",
             "| stream | runs | end: mean ± sd | end: worst | worst checkpoint | runs meeting both | s/run |",
             "|---|---|---|---|---|---|---|"]
    for name, entry in results["streams"].items():
        s = entry["summary"]
        sd = "" if s["end_sd"] is None else f" ± {s['end_sd']:.3%}"
        lines.append(f"| {entry['description']} | {s['runs']} | {s['end_mean']:+.3%}{sd} | {s['end_worst']:+.3%} | "
                     f"{s['worst_checkpoint']:.3%} | {s['within_both_targets']} of {s['runs']} | "
                     f"{s['seconds_per_run']:.0f} |")
    lines += ["", f"Machine: {machine_line(results.get('machine'))} (shared; times indicative)."]
    with open(OUT_MD, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    print(f"wrote {OUT_MD}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", nargs="*", default=["scales", "rows20k", "logistic", "mixture"])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1_000)
    parser.add_argument("--table", action="store_true", help="only rewrite the markdown from the JSON")
    args = parser.parse_args()
    results = dict(streams={})
    if os.path.exists(OUT_JSON):
        with open(OUT_JSON) as handle:
            results = json.load(handle)
    if not args.table:
        results["defaults"] = ", ".join(f"{k}={v}" for k, v in jaxz.sgais_defaults().items() if v is not None)
        results["machine"] = machine()

        def save(name, description, row):  # merge by seed: streams and seeds may run in separate calls
            merged = dict(results)
            if os.path.exists(OUT_JSON):
                with open(OUT_JSON) as handle:
                    merged["streams"] = json.load(handle)["streams"]
            entry = merged["streams"].setdefault(name, dict(description=description, runs=[]))
            entry["description"] = description
            entry["runs"] = sorted([r for r in entry["runs"] if r["seed"] != row["seed"]] + [row],
                                   key=lambda r: r["seed"])
            entry["summary"] = summarize(entry["runs"])
            with open(OUT_JSON, "w") as handle:
                json.dump(merged, handle, indent=1)
            results["streams"] = merged["streams"]

        for name in args.streams:
            run_stream(name, args.runs, args.seed, lambda description, row, name=name: save(name, description, row))
    write_table(results)


if __name__ == "__main__":
    main()
