"""Seed Figure 4 (Fraccaro, Paquet & Winther, "An Adaptive Resample-Move Algorithm for
Estimating Normalizing Constants"): log Ẑ of RBM partition functions against wall-clock
time for ARM, ARM-anticipate, ARM-reseed and RM, with RBM-AIS under the
Salakhutdinov–Murray schedule as the reference line.

The seed trains RBMs with 500 hidden units on MNIST; offline, scikit-learn's 8×8
digits binarized at half intensity (``jaxz.data.digits_binarized``, 64 visible units,
1,437 training images) stand in. Two RBMs with 500 hidden units: one trained with PCD,
one with CD-25. Settings as in the seed: t = 10 blocked Gibbs sweeps per move,
γ_thr = 0.7, i_max = 3 (reseed: i_max = 2, reseeds from Gibbs chains started at
training images), units added by decreasing data variance (§5.1), R particles per
level. Each point: independent vmapped runs (mean ± sd of log Ẑ) against the compiled
wall time of one run. ARM follows the seed's Algorithm 2 (``jaxz.arm`` defaults: the pool
starts empty, the chains continue, resample when γ < γ_thr or R_n > R) and a move at level
n costs t·n/64 full sweeps (the seed's O(tHn)).

Matched cost: the seed's Fig. 4 draws AIS values from Grosse et al., run at far higher
cost than ARM. Besides the long Salakhutdinov–Murray reference line, we run AIS at ARM's
own cost at each R ("AIS (matched cost)": 50 chains, sigmoidal schedule, steps = ARM's
mean cost / 50), so the figure compares the two at equal work. The fair tuned comparison
on RBMs with exact log Z is ``benchmarks/rbm_gibbs_roofline.py`` (part 2).

--quick (default; about ten minutes on 2 shared cores): R = 10², 10³, 4 runs each, reseed chains of 20 sweeps, RBMs
trained 10 epochs, AIS reference with 100 particles × 2 runs. --full: R = 10², 10³, 10⁴,
50 runs each, reseed chains of 100 sweeps, 30 epochs, AIS with 1,000 particles × 5 runs
(hours on a CPU).

Reading the quick run (4 runs per point, so sd's are rough; flagged runs are marked in the
figure): on the PCD RBM the S–M reference reads 138.69 ± 0.05 (100 particles × 2 runs; 1,000 ×
2 read 138.55 ± 0.03); AIS at ARM's cost is 1.9 nats low at R = 100 (136.79 ± 0.13) and level
at R = 1000 (138.72 ± 0.33), as are ARM and RM (138.62 ± 0.13, 138.70 ± 0.20). ARM-reseed lies
0.8 nat high at both R (139.46, 139.51): chains of 20 sweeps from training images are not draws
of p_n on this sharp RBM (chains of 200 sweeps agree with AIS), and 6 of its 8 runs are flagged
by the reseed checks (all 4 at R = 1000; ``jaxz.arm``, RESEED_DRIFT). On the CD-25 RBM every
method is within 0.2 nat of the reference at R = 100 and 0.06 at R = 1000, and matched-cost AIS
has the smallest sd at R = 1000 (0.029 vs ARM 0.032). Where log Z is known exactly (64 × 16
RBMs, ``benchmarks/rbm_gibbs_roofline.py``), tuned AIS beats tuned ARM 19–48× in MSE at equal cost.

Writes paper_repro/out/arm_rbm.{json,png}.
"""
import json
import os
import time

import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

import jaxz  # noqa: E402
from jaxz.models import rbm as rbm_lib  # noqa: E402
from _cli import machine, parse_mode  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
GIBBS_SWEEPS = 10
GAMMA_THRESHOLD = 0.7
MATCHED_AIS_CHAINS = 50


def timed_runs(one_run, key, num_runs, chunk):
    """num_runs vmapped runs of ``one_run(key) -> Estimate`` in chunks; compiled wall time per run."""
    batch = jax.jit(jax.vmap(one_run))
    keys = jax.random.split(key, num_runs)
    jax.block_until_ready(batch(keys[:chunk]))  # compile (and warm up) once
    start = time.perf_counter()
    parts = [batch(keys[i:i + chunk]) for i in range(0, num_runs, chunk)]
    estimates = jax.tree.map(lambda *xs: jnp.concatenate(xs)[:num_runs], *parts)
    jax.block_until_ready(estimates)
    return estimates, (time.perf_counter() - start) / num_runs


def summary(estimates, seconds):
    log_z = np.asarray(estimates.log_z, np.float64)
    return {"mean": float(log_z.mean()), "sd": float(log_z.std(ddof=1)) if log_z.size > 1 else float("nan"),
            "log_mean_exp": float(jaxz.weights.log_mean_exp(jnp.asarray(log_z))),
            "num_runs": int(log_z.size), "seconds_per_run": seconds,
            "cost_mean": float(np.mean(estimates.cost)), "status_max": int(np.max(estimates.status)),
            "flagged": int(np.sum(np.asarray(estimates.status) != 0)), "log_z": log_z.tolist(),
            "stderr": np.asarray(estimates.log_z_stderr, np.float64).tolist(),
            "status": np.asarray(estimates.status).tolist()}


def main():
    args = parse_mode(__doc__)
    full = args.full
    particle_grid = [100, 1_000, 10_000] if full else [100, 1_000]
    num_runs = 50 if full else 4
    num_epochs = 30 if full else 10
    ais_particles, ais_runs = (1_000, 5) if full else (100, 2)
    reseed_sweeps = 100 if full else 20

    data = jaxz.data.digits_binarized().train
    order = rbm_lib.variance_order(data)
    base = rbm_lib.base_rate(data)
    report = {"script": "arm_rbm", "mode": "full" if full else "quick", "machine": machine(),
              "settings": {"hidden": 500, "visible": 64, "gibbs_sweeps_per_move": GIBBS_SWEEPS,
                           "gamma_threshold": GAMMA_THRESHOLD, "max_generate": 3, "max_generate_reseed": 2,
                           "reseed": f"Gibbs chains of {reseed_sweeps} sweeps from training images",
                           "particles": particle_grid, "runs": num_runs, "training_epochs": num_epochs,
                           "ais": f"Salakhutdinov-Murray schedule (14,501 betas), {ais_particles} particles x "
                                  f"{ais_runs} runs, base-rate start"},
              "rbms": {}}
    trainings = {"PCD": dict(method="pcd", k=1), "CD-25": dict(method="cd", k=25)}
    for rbm_index, (rbm_name, training) in enumerate(trainings.items()):
        result = rbm_lib.train(jax.random.key(rbm_index), data, 500, num_epochs=num_epochs, **training)
        rbm = result.rbm
        entry = {"training": {**training, "epochs": num_epochs,
                              "reconstruction_error": np.asarray(result.reconstruction_error).tolist()}}

        # reference: RBM-AIS under the Salakhutdinov–Murray schedule
        path, kernel = rbm_lib.annealing(base, rbm)
        ais = jaxz.ais(path, kernel, jaxz.schedules.salakhutdinov_murray())

        def ais_run(key, ais=ais, path=path):
            key_base, key_run = jax.random.split(key)
            return jaxz.run(ais, key_run, path.sample_base(key_base, ais_particles)).estimate

        with tqdm(total=1, desc=f"{rbm_name}: AIS reference") as bar:
            estimates, seconds = timed_runs(ais_run, jax.random.key(100 + rbm_index), ais_runs, ais_runs)
            bar.update()
        entry["ais"] = summary(estimates, seconds)
        entry["ais"]["stderr_within_run"] = np.asarray(estimates.log_z_stderr).tolist()

        model = rbm_lib.sequential_model(rbm, order, GIBBS_SWEEPS)
        reseed_fn = rbm_lib.data_reseed(rbm, data, order, num_sweeps=reseed_sweeps)
        methods = {
            "ARM": dict(gamma_threshold=GAMMA_THRESHOLD, max_generate=3),
            "ARM-anticipate": dict(gamma_threshold=GAMMA_THRESHOLD, max_generate=3, variant="anticipate"),
            "ARM-reseed": dict(gamma_threshold=GAMMA_THRESHOLD, max_generate=2, variant="reseed",
                               reseed_fn=reseed_fn, reseed_cost=reseed_sweeps),
            "RM": dict(max_generate=0),
        }
        entry["methods"] = {name: {} for name in [*methods, "AIS (matched cost)"]}
        jobs = [(name, num) for num in particle_grid for name in methods]
        for job_index, (name, num) in enumerate(tqdm(jobs, desc=f"{rbm_name}: ARM/RM")):
            estimator = jaxz.arm(model, num, **methods[name])

            def run(key, estimator=estimator):
                return jaxz.run(estimator, key).estimate

            chunk = max(1, min(num_runs, 50_000 // num))  # bound memory of the vmapped buffers
            estimates, seconds = timed_runs(run, jax.random.key(1000 * rbm_index + job_index), num_runs, chunk)
            entry["methods"][name][str(num)] = summary(estimates, seconds)

        # AIS at ARM's cost: as many full sweeps × chains as ARM spent at each R
        for num in tqdm(particle_grid, desc=f"{rbm_name}: AIS at ARM's cost"):
            budget = entry["methods"]["ARM"][str(num)]["cost_mean"]
            steps = max(10, int(round(budget / MATCHED_AIS_CHAINS)))
            matched = jaxz.ais(path, kernel, jaxz.schedules.sigmoidal(steps + 1))

            def matched_run(key, matched=matched, path=path):
                key_base, key_run = jax.random.split(key)
                return jaxz.run(matched, key_run, path.sample_base(key_base, MATCHED_AIS_CHAINS)).estimate

            estimates, seconds = timed_runs(matched_run, jax.random.key(5000 + 10 * rbm_index + num % 7), num_runs,
                                            num_runs)
            entry["methods"]["AIS (matched cost)"][str(num)] = {**summary(estimates, seconds), "steps": steps,
                                                                "chains": MATCHED_AIS_CHAINS}
        report["rbms"][rbm_name] = entry

    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "arm_rbm.json"), "w") as handle:
        json.dump(report, handle, indent=1)
    plot(report)
    for rbm_name, entry in report["rbms"].items():
        print(rbm_name, "AIS", round(entry["ais"]["mean"], 3))
        for name, by_r in entry["methods"].items():
            print("  ", name, {r: (round(s["mean"], 3), round(s["sd"], 3), round(s["seconds_per_run"], 2))
                              for r, s in by_r.items()})


def plot(report):
    markers = {"ARM": "o", "ARM-anticipate": "s", "ARM-reseed": "^", "RM": "x", "AIS (matched cost)": "D"}
    fig, axes = plt.subplots(1, len(report["rbms"]), figsize=(6 * len(report["rbms"]), 4.5))
    for ax, (rbm_name, entry) in zip(np.atleast_1d(axes), report["rbms"].items()):
        ais = entry["ais"]
        flagged = f", {ais['flagged']}/{ais['num_runs']} runs flagged" if ais.get("flagged") else ""
        label = f"AIS (S–M schedule), {ais['seconds_per_run']:.0f} s/run{flagged}"
        ax.axhline(ais["mean"], color="k", lw=1, label=label)
        if np.isfinite(ais["sd"]):
            ax.axhspan(ais["mean"] - ais["sd"], ais["mean"] + ais["sd"], color="k", alpha=0.1)
        for name, by_r in entry["methods"].items():
            xs = [s["seconds_per_run"] for s in by_r.values()]
            ys = [s["mean"] for s in by_r.values()]
            sds = [s["sd"] for s in by_r.values()]
            ax.errorbar(xs, ys, yerr=sds, marker=markers[name], capsize=3, label=name)
            for x, y, (r, s) in zip(xs, ys, by_r.items()):
                flagged = f", {s['flagged']}/{s['num_runs']} flagged" if s.get("flagged") else ""
                ax.annotate(f"R={r}{flagged}", (x, y), textcoords="offset points", xytext=(4, -10), fontsize=7)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("wall-clock seconds per run (compiled)")
        ax.set_ylabel("log Ẑ (mean ± sd over runs)")
        ax.set_title(f"digits RBM, 500 hidden, {rbm_name}")
        ax.legend(fontsize=7)
    fig.suptitle(f"ARM vs RM vs AIS ({report['mode']}; analog of seed Fig. 4)")
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "arm_rbm.png"), dpi=120)


if __name__ == "__main__":
    main()
