"""RBM blocked Gibbs sweeps against the machine's matrix-multiply roofline, and ARM vs RM
vs AIS at matched cost on the PCD digits RBM (seed: Fraccaro, Paquet & Winther, §5).

Part 1 — roofline. One blocked Gibbs sweep of 1,000 particles on a 784 × 500 RBM is two
matrix products, (1000×784)@(784×500) for h | v and (1000×500)@(500×784) for v | h,
plus sigmoids and 1.28 M uniforms. We time, in the same process, 20 sweeps (one jitted
``lax.scan``) of

- ``vmapped``: ``jaxz.models.rbm.gibbs_sweep`` vmapped over particles with one key per
  particle — what ARM's moves and the annealing kernel run;
- ``batched``: the same sweep on the (1000, 784) batch with one key (what training runs);
- ``annealing_kernel``: ``jaxz.models.rbm.annealing``'s kernel at β = 0.5, vmapped;
- ``matmul``: the two matrix products alone, chained (the roofline for these shapes);

and report sweeps/s and the fraction t_matmul / t_sweep. The RBM has random weights
(N(0, 0.01²), zero biases): timing does not depend on their values. MNIST-sized
shapes, no MNIST data needed.

Part 2 — a fair comparison at a fixed budget (issue 15). On the two 64-visible RBMs of
``benchmarks/arm_readings.py`` (16 hidden units, CD-1 and PCD-1 on the binarized digits:
exact log Z by enumerating the hidden layer), each method is tuned at the same budget of
30,000 full-sweep equivalents × particles:

- AIS (base-rate start, sigmoidal schedule): chains × steps ∈ {10 × 3000, 30 × 1000, 100 × 300};
- RM: t ∈ {2, 10} sweeps per move;
- ARM (seed Alg. 2): t ∈ {2, 10} × (γ_thr, i_max) ∈ {(0.5, 1), (0.7, 3), (0.9, 3)};

RM and ARM set R by an 8-run pilot so that their mean cost meets the budget, where a
move at level n costs t·n/V (the seed's O(tHn): our sweeps touch the included units
only). Each configuration runs ``tune_runs`` times; the one with the smallest MSE of
log Ẑ is run again on fresh keys (100 runs; 200 with --full). Reported per method: bias
(mean of log Ẑ − log Z, and log of the mean Ẑ), sd, MSE, cost both FLOP-weighted and as
counted (sweeps × particles, every sweep charged in full), wall time, and ratios
ARM/AIS, ARM/RM, RM/AIS of variance and MSE with 95% bootstrap intervals. The seed's
Fig. 4 compared ARM with AIS values from Grosse et al. run at far higher cost, not at a
matched one.

Run:  python benchmarks/rbm_gibbs_roofline.py [--quick | --full]
Writes benchmarks/results/rbm_gibbs_roofline.json.
"""
import argparse
import json
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

import jaxz
from jaxz.models import rbm as rbm_lib
from _results import machine, write

NUM_PARTICLES = 1000
NUM_VISIBLE, NUM_HIDDEN = 784, 500
NUM_SWEEPS = 20


def one_time(fn, *args):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def roofline(repeats):
    key_w, key_v, key_run = jax.random.split(jax.random.key(0), 3)
    rbm = rbm_lib.RBM(
        0.01 * jax.random.normal(key_w, (NUM_VISIBLE, NUM_HIDDEN)), jnp.zeros(NUM_VISIBLE), jnp.zeros(NUM_HIDDEN)
    )
    v0 = (jax.random.uniform(key_v, (NUM_PARTICLES, NUM_VISIBLE)) < 0.5).astype(jnp.float32)
    _, kernel = rbm_lib.annealing(rbm_lib.RBM(jnp.zeros((NUM_VISIBLE, 0)), jnp.zeros(NUM_VISIBLE), jnp.zeros(0)), rbm)

    @jax.jit
    def vmapped(key, v):
        def body(v, key):
            keys = jax.random.split(key, NUM_PARTICLES)
            return jax.vmap(rbm_lib.gibbs_sweep, in_axes=(0, None, 0))(keys, rbm, v), None
        return jax.lax.scan(body, v, jax.random.split(key, NUM_SWEEPS))[0]

    @jax.jit
    def batched(key, v):
        def body(v, key):
            return rbm_lib.gibbs_sweep(key, rbm, v), None
        return jax.lax.scan(body, v, jax.random.split(key, NUM_SWEEPS))[0]

    @jax.jit
    def annealing_kernel(key, v):
        states = jax.vmap(kernel.init, in_axes=(0, None))(v, 0.5)

        def body(states, key):
            keys = jax.random.split(key, NUM_PARTICLES)
            return jax.vmap(kernel.step, in_axes=(0, 0, None))(keys, states, 0.5)[0], None
        return jax.lax.scan(body, states, jax.random.split(key, NUM_SWEEPS))[0].position

    # Same shapes; weights of scale 1/sqrt(784) keep the chained values O(1) (tiny values
    # drifting into float32 denormals would make the baseline artificially slow).
    matmul_weights = rbm.W / (0.01 * np.sqrt(NUM_VISIBLE))

    @jax.jit
    def matmul(key, v):
        del key

        def body(v, _):
            h = v @ matmul_weights  # (1000, 784) @ (784, 500)
            return h @ matmul_weights.T, None  # (1000, 500) @ (500, 784)
        return jax.lax.scan(body, v, None, length=NUM_SWEEPS)[0]

    flops_per_sweep = 2 * 2 * NUM_PARTICLES * NUM_VISIBLE * NUM_HIDDEN
    args = (key_run, v0)
    for fn in (matmul, vmapped, batched, annealing_kernel):
        jax.block_until_ready(fn(*args))  # compile + warm up
    # Each sampler is timed right after a matmul run, so that machine load (the machine
    # is shared) hits both alike; the fraction is the median of the per-pair ratios.
    samplers = {"vmapped": vmapped, "batched": batched, "annealing_kernel": annealing_kernel}
    ratios = {name: [] for name in samplers}
    sweep_times = {name: [] for name in samplers}
    matmul_times = []
    for _ in tqdm(range(repeats), desc="roofline"):
        for name, fn in samplers.items():
            t_matmul = one_time(matmul, *args) / NUM_SWEEPS
            t_sweep = one_time(fn, *args) / NUM_SWEEPS
            matmul_times.append(t_matmul)
            sweep_times[name].append(t_sweep)
            ratios[name].append(t_matmul / t_sweep)
    t_matmul = statistics.median(matmul_times)
    return {
        "shape": {"particles": NUM_PARTICLES, "visible": NUM_VISIBLE, "hidden": NUM_HIDDEN, "sweeps_timed": NUM_SWEEPS},
        "weights": "random N(0, 0.01^2), zero biases (timing does not depend on values)",
        "repeats": repeats,
        "matmul_seconds_per_sweep_median": t_matmul,
        "matmul_gflops_median": flops_per_sweep / t_matmul / 1e9,
        "sweep_seconds_median": {name: statistics.median(t) for name, t in sweep_times.items()},
        "particle_sweeps_per_second": {name: NUM_PARTICLES / statistics.median(t) for name, t in sweep_times.items()},
        "fraction_of_matmul_roofline": {name: statistics.median(r) for name, r in ratios.items()},
        "fraction_quartiles": {name: [float(q) for q in np.percentile(r, [25, 75])] for name, r in ratios.items()},
        "target_fraction": 0.6,
    }


def bootstrap_ratio(a, b, statistic, num=2000, seed=0):
    """95% percentile-bootstrap interval of statistic(a) / statistic(b), runs resampled."""
    rng = np.random.default_rng(seed)
    a, b = np.asarray(a), np.asarray(b)
    ratios = [statistic(a[rng.integers(0, a.size, a.size)]) / statistic(b[rng.integers(0, b.size, b.size)])
              for _ in range(num)]
    return [float(q) for q in np.percentile(ratios, [2.5, 97.5])]


def configurations(budget):
    """The settings each method may tune over at one budget (full-sweep equivalents ×
    particles): AIS chains × steps = budget; ARM/RM over t, γ_thr, i_max with R set by a
    pilot so that the mean cost meets the budget."""
    ais = {f"AIS K={k} T={budget // k}": dict(chains=k, steps=budget // k) for k in (10, 30, 100)}
    rm = {f"RM t={t}": dict(gibbs_sweeps=t, max_generate=0) for t in (2, 10)}
    arm = {f"ARM t={t} g={g} i={i}": dict(gibbs_sweeps=t, gamma_threshold=g, max_generate=i)
           for t in (2, 10) for g, i in ((0.5, 1), (0.7, 3), (0.9, 3))}
    return {"AIS": ais, "RM": rm, "ARM": arm}


def run_config(family, config, rbm, data, budget, key, num_runs, chunk):
    """num_runs vmapped runs; returns (log Ẑ, FLOP-weighted cost, counted cost, seconds/run, description)."""
    if family == "AIS":
        path, kernel = rbm_lib.annealing(rbm_lib.base_rate(data), rbm)
        ais = jaxz.ais(path, kernel, jaxz.schedules.sigmoidal(config["steps"] + 1))

        def one(key):
            key_base, key_run = jax.random.split(key)
            estimate = jaxz.run(ais, key_run, path.sample_base(key_base, config["chains"])).estimate
            return estimate.log_z, estimate.cost, estimate.cost
        described = dict(config)
    else:
        model = rbm_lib.sequential_model(rbm, rbm_lib.variance_order(data), config["gibbs_sweeps"])
        options = {k: v for k, v in config.items() if k != "gibbs_sweeps"}

        def estimator(num):
            return jaxz.arm(model, num, **options)

        def one_with(estimator):
            def one(key):
                result = jaxz.run(estimator, key)
                counted = jnp.sum(result.trace.num_moved) * config["gibbs_sweeps"]
                return result.estimate.log_z, result.estimate.cost, counted.astype(result.estimate.cost.dtype)
            return one
        pilot_particles = 50  # the pilot fixes R so that the mean FLOP-weighted cost meets the budget
        pilot = jax.jit(jax.vmap(one_with(estimator(pilot_particles))))(jax.random.split(jax.random.fold_in(key, 1), 8))
        particles = max(4, int(round(pilot_particles * budget / float(np.mean(pilot[1])))))
        one = one_with(estimator(particles))
        described = dict(config, particles=particles)
    batch = jax.jit(jax.vmap(one))
    keys = jax.random.split(key, num_runs)
    jax.block_until_ready(batch(keys[:chunk]))  # compile
    start = time.perf_counter()
    parts = [batch(keys[i:i + chunk]) for i in range(0, num_runs, chunk)]
    log_z, cost, counted = (np.concatenate([np.asarray(p[j], np.float64) for p in parts]) for j in range(3))
    seconds = (time.perf_counter() - start) / num_runs
    return log_z, cost, counted, seconds, described


def fair_comparison(budget, tune_runs, eval_runs, chunk):
    """ARM, RM and AIS each tuned at the same budget on RBMs with exact log Z: every
    method's configurations run ``tune_runs`` times, the one with the smallest MSE of
    log Ẑ is kept and run again ``eval_runs`` times on fresh keys."""
    from arm_readings import rbms  # the same exact RBMs as the readings study

    report = {"budget_full_sweeps_x_particles": budget, "tune_runs": tune_runs, "eval_runs": eval_runs,
              "configurations": {family: list(c) for family, c in configurations(budget).items()}, "rbms": {}}
    jobs = list(rbms())[1:]  # the 64-visible RBMs
    total = len(jobs) * (sum(len(c) for c in configurations(budget).values()) + 3)
    with tqdm(total=total, desc="fair comparison") as bar:
        for rbm_index, (name, rbm, data, description) in enumerate(jobs):
            log_z = float(rbm_lib.exact_log_z(rbm))
            entry = {"rbm": description, "exact_log_z": log_z, "tuning": {}, "best": {}}
            for family, configs in configurations(budget).items():
                scores = {}
                for index, (label, config) in enumerate(configs.items()):
                    key = jax.random.key(10_000 * rbm_index + 100 * index + len(family))
                    log_z_hats, cost, _, _, described = run_config(family, config, rbm, data, budget, key,
                                                                   tune_runs, chunk)
                    scores[label] = {"mse": float(np.mean((log_z_hats - log_z) ** 2)), "cost": float(np.mean(cost)),
                                     **described}
                    bar.update()
                entry["tuning"][family] = scores
                best = min(scores, key=lambda label: scores[label]["mse"])
                key = jax.random.key(10_000 * rbm_index + 9_999 - len(family))
                log_z_hats, cost, counted, seconds, described = run_config(
                    family, configs[best], rbm, data, budget, key, eval_runs, chunk)
                errors = log_z_hats - log_z
                entry["best"][family] = {
                    "configuration": best, **described,
                    "bias_mean_log_z_hat": float(errors.mean()),
                    "bias_stderr": float(errors.std(ddof=1) / np.sqrt(errors.size)),
                    "log_mean_z_hat_minus_log_z": float(jaxz.weights.log_mean_exp(jnp.asarray(log_z_hats))) - log_z,
                    "sd_log_z_hat": float(errors.std(ddof=1)),
                    "mse_log_z_hat": float(np.mean(errors**2)),
                    "cost_flop_weighted": float(np.mean(cost)),
                    "cost_counted": float(np.mean(counted)),
                    "variance_x_cost_flop_weighted": float(errors.var(ddof=1) * np.mean(cost)),
                    "variance_x_cost_counted": float(errors.var(ddof=1) * np.mean(counted)),
                    "seconds_per_run": seconds,
                    "errors": errors.tolist(),
                }
                bar.update()
            best = entry["best"]
            var = lambda e: float(np.var(e, ddof=1))  # noqa: E731
            mse = lambda e: float(np.mean(np.square(e)))  # noqa: E731
            entry["ratios"] = {}
            for a, b in (("ARM", "AIS"), ("ARM", "RM"), ("RM", "AIS")):
                ea, eb = best[a]["errors"], best[b]["errors"]
                entry["ratios"][f"{a}/{b}"] = {
                    "variance": var(ea) / var(eb), "variance_95": bootstrap_ratio(ea, eb, var),
                    "mse": mse(ea) / mse(eb), "mse_95": bootstrap_ratio(ea, eb, mse),
                    "cost_flop_weighted": best[a]["cost_flop_weighted"] / best[b]["cost_flop_weighted"],
                    "cost_counted": best[a]["cost_counted"] / best[b]["cost_counted"],
                    "wall_time": best[a]["seconds_per_run"] / best[b]["seconds_per_run"],
                }
            report["rbms"][name] = entry
            print(name, json.dumps(entry["ratios"], indent=1))
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", default=True, help="a few minutes on 2 cores (default)")
    mode.add_argument("--full", action="store_true", help="more runs and repeats")
    parser.add_argument("--skip-roofline", action="store_true",
                        help="keep part 1 from the existing results file and rerun part 2 only")
    args = parser.parse_args()
    full = args.full
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "rbm_gibbs_roofline.json")
    report = {"mode": "full" if full else "quick", "machine": machine()}
    if args.skip_roofline:
        with open(out) as handle:
            previous = json.load(handle)
        report["roofline"] = previous["roofline"]
        report["roofline_machine"] = previous["machine"]
    else:
        report["roofline"] = roofline(repeats=25 if full else 9)
    print(json.dumps(report["roofline"], indent=1))
    report["fair_comparison"] = fair_comparison(
        budget=30_000, tune_runs=50 if full else 24, eval_runs=200 if full else 100, chunk=25 if full else 24
    )
    write(report, "rbm_gibbs_roofline.json")


if __name__ == "__main__":
    main()
