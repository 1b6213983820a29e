"""Twisted SMC on the seed's 16 × 16 periodic Ising models (Lindsten, Helske & Vihola 2018,
Fig. 1): what the loopy-BP twist buys, and jaxz's speed against the authors' MATLAB.

(a) Particle efficiency: the spread (sd of log Ẑ over independent runs) of SMC-Twist at
    N = 64 and of SMC-Base at N = 64, 256, 1024, 4096; the N at which SMC-Base's sd
    (log-log interpolation, extrapolated with the fitted slope past the largest N)
    equals SMC-Twist's at N = 64, as a multiple of 64. The seed reads about 1024 (16×)
    off its figure; the same computation on the authors' published runs is reported
    beside ours. Both systematic resampling (the authors') and multinomial. The ratio's
    95 % interval: percentile bootstrap (2,000 resamples) of the runs of every setting,
    the sds and the matching N recomputed on each resample.
(b) Time per run at N = 64, 256, 1024 (model 0, systematic resampling, one compiled
    un-batched run, median of repeats; SMC-Twist with and without its loopy-BP pass,
    which the authors' timed runs include), as a ratio to the authors' mean MATLAB
    times (``published_cpu_seconds``, measured with tic/toc). Different machines: the
    ratio says how the implementations compare only roughly (ours: 2 CPU cores shared
    with other jobs; theirs: unknown), hence the machine info and load average in the JSON.
(c) Many vmapped runs of SMC-Twist at N = 1024 in one call: wall time, runs per second,
    against the un-batched time per run measured in (b).

All runs float32, raster order, fully adapted, resampling at every step.
--quick (default; tens of minutes on 2 shared cores, mostly compilation): 30 runs per
setting in (a), 3 repeats in (b), 250 runs in (c), extrapolated to 1,000 and said so.
--full: 100 runs in (a), 5 repeats in (b), 1,000 runs in (c).
--runs K sets (a)'s runs per setting, --resampling one scheme only, --only-efficiency runs
(a) alone and replaces its entries in the existing JSON. The committed (a) for systematic
resampling is ``--runs 300 --resampling systematic --only-efficiency`` (about 20 minutes on
2 idle cores: 1.0 s per SMC-Base run at N = 4096, 0.17 s at 1024, 0.01 s per SMC-Twist run
at 64; 40 minutes under the load it ran with; model 0's seconds per run include the
compilation); its multinomial entries are the earlier 30-run --quick ones.

Writes benchmarks/results/twisted_ising.json.
"""
import argparse
import json
import os
import resource
import time

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

import jaxz
import jaxz.approx
from jaxz.models import ising
from _results import machine

HERE = os.path.dirname(os.path.abspath(__file__))
DATA_NAME = "ising16_lindsten2018.npz"
LBP_SETTINGS = {"max_sweeps": 100, "tol": 1e-2}
BASE_COUNTS = (64, 256, 1024, 4096)
TWIST_COUNT = 64
BOOTSTRAP_RESAMPLES = 2000


def data_path():
    return jaxz.data.shared_file(DATA_NAME)


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def one_run_fn(method, num_particles, resampling):
    """run(field, J, log_messages, key) -> Estimate; the model is an argument, so one
    compiled program serves the three models."""

    def one_run(field, inverse_temperature, log_messages, key):
        model = ising.periodic_lattice(field, inverse_temperature)
        twist = log_messages if method == "SMC-Twist" else None
        estimator = jaxz.twisted_smc(ising.sequential_model(model, twist), resample_ess=1.0, resampling=resampling)
        return jaxz.run(estimator, key, num_particles).estimate

    return one_run


def matching_count(counts, sds, target_sd):
    """N at which sd(N) = target_sd on the log-log line through the measured points
    (interpolated between neighbours; past the ends, the least-squares slope)."""
    log_n, log_sd = np.log(np.asarray(counts, float)), np.log(np.asarray(sds, float))
    slope = np.polyfit(log_n, log_sd, 1)[0]
    target = np.log(target_sd)
    if target > log_sd[0]:
        return float(np.exp(log_n[0] + (target - log_sd[0]) / slope)), slope, "extrapolated below"
    for i in range(len(counts) - 1):
        if log_sd[i] >= target >= log_sd[i + 1] and log_sd[i] != log_sd[i + 1]:
            fraction = (target - log_sd[i]) / (log_sd[i + 1] - log_sd[i])
            return float(np.exp(log_n[i] + fraction * (log_n[i + 1] - log_n[i]))), slope, "interpolated"
    return float(np.exp(log_n[-1] + (target - log_sd[-1]) / slope)), slope, "extrapolated above"


def bootstrap_ratio(base_log_z, twist_log_z, rng, num_resamples=BOOTSTRAP_RESAMPLES):
    """Percentile bootstrap of the particle ratio: the runs of every setting resampled
    with replacement (independently: the settings are independent runs), the sds and the
    matching N recomputed. Returns (2.5 %, 97.5 %) of the ratio and the resample count."""
    ratios = []
    for _ in range(num_resamples):
        base_sds = [np.std(rng.choice(runs, runs.size), ddof=1) for runs in base_log_z]
        twist_sd = np.std(rng.choice(twist_log_z, twist_log_z.size), ddof=1)
        ratios.append(matching_count(BASE_COUNTS, base_sds, twist_sd)[0] / TWIST_COUNT)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return float(low), float(high)


def particle_efficiency(data, models, twists, num_runs, resamplings=("systematic", "multinomial"), chunk=100):
    """(a): the runs of SMC-Twist at N = 64 and of SMC-Base at ``BASE_COUNTS`` on each
    model (vmapped in chunks of ``chunk`` runs), the matching N, and its bootstrap 95 %
    interval over the runs."""
    results = []
    key = jax.random.key(1)
    rng = np.random.default_rng(0)
    settings = [(r, m, n) for r in resamplings
                for m, n in [("SMC-Twist", TWIST_COUNT)] + [("SMC-Base", n) for n in BASE_COUNTS]]
    log_zs, seconds = {}, {}
    for resampling, method, num_particles in tqdm(settings, desc="(a) particle efficiency"):
        runner = jax.jit(jax.vmap(one_run_fn(method, num_particles, resampling), in_axes=(None, None, None, 0)))
        for index, model in enumerate(models):
            key, run_key = jax.random.split(key)
            keys = jax.random.split(run_key, num_runs)
            start, parts = time.perf_counter(), []
            for first in range(0, num_runs, chunk):
                estimate = runner(model.field.reshape(data["field"].shape), model.couplings[0],
                                  twists[index].log_messages, keys[first:first + chunk])
                parts.append(np.asarray(estimate.log_z, np.float64))
            log_zs[(resampling, method, num_particles, index)] = np.concatenate(parts)
            seconds[(resampling, method, num_particles, index)] = (time.perf_counter() - start) / num_runs
    published_counts = [int(n) for n in data["num_particles"]]
    for resampling in resamplings:
        for index in range(len(models)):
            base_log_z = [log_zs[(resampling, "SMC-Base", n, index)] for n in BASE_COUNTS]
            twist_log_z = log_zs[(resampling, "SMC-Twist", TWIST_COUNT, index)]
            base_sds = [float(np.std(runs, ddof=1)) for runs in base_log_z]
            twist_sd = float(np.std(twist_log_z, ddof=1))
            count, slope, how = matching_count(BASE_COUNTS, base_sds, twist_sd)
            low, high = bootstrap_ratio(base_log_z, twist_log_z, rng)
            entry = {"resampling": resampling, "model": index, "num_runs": num_runs,
                     "twist_sd_at_64": twist_sd, "base_sd": dict(zip(map(str, BASE_COUNTS), base_sds)),
                     "base_count_matching_twist_at_64": count, "particle_ratio": count / TWIST_COUNT,
                     "particle_ratio_bootstrap_95": [low, high], "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
                     "base_log_log_slope": slope, "how": how,
                     "seconds_per_run": {f"{m} {n}": seconds[(resampling, m, n, index)]
                                         for m, n in [("SMC-Twist", TWIST_COUNT)]
                                         + [("SMC-Base", n) for n in BASE_COUNTS]}}
            if resampling == "systematic":
                published = data["published_log_z"][index]
                pub_base = [float(np.std(published[c, 0], ddof=1)) for c in range(len(published_counts))]
                pub_twist = float(np.std(published[published_counts.index(TWIST_COUNT), 1], ddof=1))
                pub_count, pub_slope, pub_how = matching_count(published_counts, pub_base, pub_twist)
                entry["published"] = {"twist_sd_at_64": pub_twist,
                                      "base_sd": dict(zip(map(str, published_counts), pub_base)),
                                      "base_count_matching_twist_at_64": pub_count,
                                      "particle_ratio": pub_count / TWIST_COUNT,
                                      "base_log_log_slope": pub_slope, "how": pub_how}
            results.append(entry)
    return results


def median_time(fn, args, repeats):
    jax.block_until_ready(fn(*args))  # compile
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), cpu_seconds()
        jax.block_until_ready(fn(*args))
        walls.append(time.perf_counter() - wall)
        cpus.append(cpu_seconds() - cpu)
    return float(np.median(walls)), float(np.median(cpus))


def time_per_run(data, model, repeats):
    field, coupling = model.field.reshape(data["field"].shape), model.couplings[0]
    lbp = jax.jit(lambda field, j: jaxz.approx.loopy_bp(ising.periodic_lattice(field, j), **LBP_SETTINGS).log_messages)
    lbp_wall, lbp_cpu = median_time(lbp, (field, coupling), repeats)
    log_messages = lbp(field, coupling)
    published_counts = [int(n) for n in data["num_particles"]]
    results = []
    for num_particles in tqdm(published_counts, desc="(b) time per run"):
        for m, method in enumerate(("SMC-Base", "SMC-Twist")):
            run = jax.jit(one_run_fn(method, num_particles, "systematic"))
            wall, cpu = median_time(run, (field, coupling, log_messages, jax.random.key(num_particles)), repeats)
            published = float(np.mean(data["published_cpu_seconds"][0, published_counts.index(num_particles), m]))
            total = wall + (lbp_wall if method == "SMC-Twist" else 0.0)
            results.append({"method": method, "num_particles": num_particles, "smc_wall_seconds": wall,
                            "smc_cpu_seconds": cpu, "wall_seconds_including_lbp": total,
                            "published_seconds": published, "ratio_ours_to_published": total / published})
    return {"loopy_bp_wall_seconds": lbp_wall, "loopy_bp_cpu_seconds": lbp_cpu, "runs": results}


def many_runs(data, model, num_runs, single_run_seconds):
    field, coupling = model.field.reshape(data["field"].shape), model.couplings[0]
    log_messages = jaxz.approx.loopy_bp(model, **LBP_SETTINGS).log_messages
    batch = jax.jit(jax.vmap(one_run_fn("SMC-Twist", 1024, "systematic"), in_axes=(None, None, None, 0)))
    keys = jax.random.split(jax.random.key(7), num_runs)
    start = time.perf_counter()
    compiled = batch.lower(field, coupling, log_messages, keys).compile()
    compile_seconds = time.perf_counter() - start
    wall, cpu = time.perf_counter(), cpu_seconds()
    estimate = jax.block_until_ready(compiled(field, coupling, log_messages, keys))
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    log_z = np.asarray(estimate.log_z)
    return {"num_runs": num_runs, "num_particles": 1024, "compile_seconds": compile_seconds, "wall_seconds": wall,
            "cpu_seconds": cpu, "runs_per_second": num_runs / wall,
            "wall_seconds_for_1000_runs": wall * 1000 / num_runs,
            "extrapolated_to_1000": num_runs != 1000,
            "speedup_over_unbatched_runs": single_run_seconds * num_runs / wall,
            "particle_state_bytes": num_runs * 1024 * 256,  # int8 spins
            "log_z_mean": float(log_z.mean()), "log_z_sd": float(log_z.std(ddof=1)),
            "all_finite": bool(np.all(np.isfinite(log_z)))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", default=True)
    mode.add_argument("--full", action="store_true")
    parser.add_argument("--runs", type=int, default=None, help="runs per setting in (a) (default 30 / 100)")
    parser.add_argument("--resampling", choices=("systematic", "multinomial"), default=None,
                        help="(a) with one resampling scheme only (default: both)")
    parser.add_argument("--only-efficiency", action="store_true",
                        help="run (a) only and replace its entries in an existing results/twisted_ising.json")
    args = parser.parse_args()
    full = bool(args.full)
    efficiency_runs, repeats, batch_runs = (100, 5, 1000) if full else (30, 3, 250)
    efficiency_runs = args.runs or efficiency_runs
    resamplings = (args.resampling,) if args.resampling else ("systematic", "multinomial")
    about = machine()

    data = np.load(data_path())
    data = {key: data[key] for key in data.files}
    models = [ising.periodic_lattice(jnp.asarray(data["field"], jnp.float32), float(j))
              for j in data["inverse_temperatures"]]
    twists = [jaxz.approx.loopy_bp(model, **LBP_SETTINGS) for model in models]

    efficiency = particle_efficiency(data, models, twists, efficiency_runs, resamplings)
    path = os.path.join(HERE, "results", "twisted_ising.json")
    if args.only_efficiency:
        with open(path) as f:
            report = json.load(f)
        kept = [e for e in report["a_particle_efficiency"] if e["resampling"] not in resamplings]
        report["a_particle_efficiency"] = kept + efficiency
        report["a_machine"] = {**about, "load_average_at_end": list(os.getloadavg())}
        timing, batched = report["b_time_per_run"], report["c_vmapped_runs"]
    else:
        timing = time_per_run(data, models[0], repeats)
        twist_1024 = next(r for r in timing["runs"] if r["method"] == "SMC-Twist" and r["num_particles"] == 1024)
        batched = many_runs(data, models[0], batch_runs, twist_1024["smc_wall_seconds"])
        report = {"benchmark": "twisted SMC on the seed's 16 x 16 Ising models", "mode": "full" if full else "quick",
                  "a_particle_efficiency": efficiency, "b_time_per_run": timing, "c_vmapped_runs": batched,
                  "machine": {**about, "load_average_at_end": list(os.getloadavg())}}
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(path, "w") as f:
        json.dump(report, f, indent=1)

    print("(a) N that SMC-Base needs to match SMC-Twist's sd at N = 64 (ratio to 64):")
    for e in efficiency:
        published = e.get("published")
        print(f"  {e['resampling']:11s} model {e['model']}: twist sd {e['twist_sd_at_64']:.3f}, base sd "
              f"{[round(v, 3) for v in e['base_sd'].values()]} -> N = {e['base_count_matching_twist_at_64']:.0f} "
              f"({e['particle_ratio']:.0f}x, 95 % {e['particle_ratio_bootstrap_95'][0]:.0f}-"
              f"{e['particle_ratio_bootstrap_95'][1]:.0f}x, {e['how']})"
              + (f"; published runs: {published['particle_ratio']:.0f}x ({published['how']})" if published else ""))
    print(f"(b) loopy BP {timing['loopy_bp_wall_seconds']:.3f} s; per run (ours incl. LBP / authors):")
    for r in timing["runs"]:
        print(f"  {r['method']:9s} N={r['num_particles']:5d}: {r['wall_seconds_including_lbp']:.3f} s / "
              f"{r['published_seconds']:.3f} s = {r['ratio_ours_to_published']:.2f}")
    print(f"(c) {batched['num_runs']} vmapped SMC-Twist runs at N = 1024: {batched['wall_seconds']:.1f} s "
          f"({batched['runs_per_second']:.1f} runs/s; "
          f"{batched['speedup_over_unbatched_runs']:.2f}x the un-batched rate)")


if __name__ == "__main__":
    main()
