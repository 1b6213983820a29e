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

Part 2 — variance × cost. On an RBM with 500 hidden units trained by PCD on the
binarized digits (64 visible units; stands in for MNIST), independent vmapped runs
of RM (R = 200), ARM (R = 180, γ_thr = 0.7, i_max = 3; t = 10 Gibbs sweeps per move)
and RBM-AIS (50 particles, base-rate start, sigmoidal schedule of 2,520 steps) at about
the same cost (Gibbs sweeps × particles,
``Estimate.cost``). Var(log Ẑ) × cost is the cost-normalized variance (it is constant
in the number of particles to first order); lower is better. The seed claims ARM
beats RM and AIS on it. No exact log Z exists for 500 hidden units over 64 visible
ones (2^64 states); the means are reported for reference.

Run:  python benchmarks/rbm_gibbs_roofline.py [--quick | --full]
Writes benchmarks/results/rbm_gibbs_roofline.json.
"""
import argparse
import json
import os
import platform
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

import jaxz
from jaxz.models import rbm as rbm_lib

NUM_PARTICLES = 1000
NUM_VISIBLE, NUM_HIDDEN = 784, 500
NUM_SWEEPS = 20


def machine_info():
    return {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jax_backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "load_average_at_start": list(os.getloadavg()),
    }


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
            return jax.vmap(rbm_lib.gibbs_sweep, in_axes=(0, None, 0))(jax.random.split(key, NUM_PARTICLES), rbm, v), None
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


def train_pcd_rbm(num_epochs):
    data = jaxz.data.digits_binarized().train
    result = rbm_lib.train(jax.random.key(1), data, 500, method="pcd", k=1, num_epochs=num_epochs, batch_size=100)
    return result.rbm, data, result.reconstruction_error


def variance_times_cost(num_runs, num_epochs, rm_particles, arm_particles, ais_particles, ais_steps, chunk):
    rbm, data, errors = train_pcd_rbm(num_epochs)
    order = rbm_lib.variance_order(data)
    model = rbm_lib.sequential_model(rbm, order, gibbs_sweeps=10)
    path, kernel = rbm_lib.annealing(rbm_lib.base_rate(data), rbm)
    ais = jaxz.ais(path, kernel, jaxz.schedules.sigmoidal(ais_steps + 1))

    def ais_run(key):
        key_base, key_run = jax.random.split(key)
        return jaxz.run(ais, key_run, path.sample_base(key_base, ais_particles)).estimate

    methods = {
        "RM": jaxz.arm(model, rm_particles, max_generate=0),
        "ARM": jaxz.arm(model, arm_particles, gamma_threshold=0.7, max_generate=3),
        "AIS": None,
    }
    results = {}
    for name, estimator in tqdm(methods.items(), desc="variance x cost"):
        one = ais_run if estimator is None else (lambda key, est=estimator: jaxz.run(est, key).estimate)
        batch = jax.jit(jax.vmap(one))
        keys = jax.random.split(jax.random.key(1 + list(methods).index(name)), num_runs)
        jax.block_until_ready(batch(keys[:chunk]))  # compile
        start = time.perf_counter()
        estimates = [batch(keys[i:i + chunk]) for i in range(0, num_runs, chunk)]
        estimates = jax.tree.map(lambda *xs: jnp.concatenate(xs), *estimates)
        jax.block_until_ready(estimates)
        seconds = time.perf_counter() - start
        log_z = np.asarray(estimates.log_z, np.float64)
        cost = float(np.mean(estimates.cost))
        results[name] = {
            "num_runs": int(num_runs),
            "particles": {"RM": rm_particles, "ARM": arm_particles, "AIS": ais_particles}[name],
            "mean_log_z": float(log_z.mean()),
            "sd_log_z": float(log_z.std(ddof=1)),
            "variance_log_z": float(log_z.var(ddof=1)),
            "mean_cost_gibbs_sweeps_x_particles": cost,
            "variance_x_cost": float(log_z.var(ddof=1) * cost),
            "seconds_per_run": seconds / num_runs,
            "status_max": int(np.max(estimates.status)),
        }
    results["AIS"]["schedule"] = f"sigmoidal, {ais_steps} steps"
    ais_vc = results["AIS"]["variance_x_cost"]
    rm_vc = results["RM"]["variance_x_cost"]
    return {
        "rbm": {"visible": 64, "hidden": 500, "training": f"PCD-1, {num_epochs} epochs, batch 100, SGD 0.05 momentum 0.9",
                "final_reconstruction_error": float(errors[-1])},
        "moves": "t = 10 blocked Gibbs sweeps per move (ARM/RM); one sweep per AIS step",
        "methods": results,
        "variance_relative_uncertainty": float(np.sqrt(2.0 / (num_runs - 1))),  # sd of a sample variance / variance
        "ratios": {
            "ARM_over_RM_variance_x_cost": results["ARM"]["variance_x_cost"] / rm_vc,
            "ARM_over_AIS_variance_x_cost": results["ARM"]["variance_x_cost"] / ais_vc,
            "RM_over_AIS_variance_x_cost": rm_vc / ais_vc,
        },
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", default=True, help="a few minutes on 2 cores (default)")
    mode.add_argument("--full", action="store_true", help="more runs and repeats")
    args = parser.parse_args()
    full = args.full
    report = {"mode": "full" if full else "quick", "machine": machine_info()}
    report["roofline"] = roofline(repeats=25 if full else 9)
    print(json.dumps(report["roofline"], indent=1))
    report["variance_x_cost"] = variance_times_cost(
        num_runs=50 if full else 16, num_epochs=30 if full else 10, rm_particles=200, arm_particles=180,
        ais_particles=50, ais_steps=2520, chunk=50 if full else 16,
    )
    print(json.dumps(report["variance_x_cost"], indent=1))
    report["machine"]["load_average_at_end"] = list(os.getloadavg())
    os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
    out = os.path.join(os.path.dirname(__file__), "results", "rbm_gibbs_roofline.json")
    with open(out, "w") as handle:
        json.dump(report, handle, indent=1)
    print("wrote", out)


if __name__ == "__main__":
    main()
