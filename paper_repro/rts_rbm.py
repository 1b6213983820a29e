"""Seed Figure 3 (Carlson et al., ICML 2016): mean and RMSE of log Ẑ against Gibbs
sweeps for RTS, AIS and RAISE on RBMs with 500 and 100 hidden units.

The seed trains RBMs on MNIST; offline, scikit-learn's 8×8 digits binarized at half
intensity (``jaxz.data.digits_binarized``, 64 visible units) stand in. Settings as in
the seed: 100 parallel chains per run, K = 100 temperatures, 10 initial iterations of
50 sweeps (counted in RTS's cost), and AIS / RAISE ladders whose length matches the
sweeps per chain (RAISE: data-seeded chains, ``jaxz.models.rbm_raise``, after 50 Gibbs
sweeps that are counted too). Ladders for AIS/RAISE: Salakhutdinov–Murray proportions
(1/29 of the rungs on [0, .5], 8/29 on [.5, .9], 20/29 on [.9, 1]). The reference log Z
is the mean of a long AIS run and a long RTS run, reported with their difference.
RTS is read off one long run per seed at each budget (its estimate after b total sweeps
is what a run stopped there returns).

--quick (default; several minutes on 2 shared cores): only the 100-hidden RBM (trained
10 epochs), budgets of 1,000 and 3,000 sweeps per chain, 8 runs, reference from 10,000
sweeps. --full: both RBMs (30 epochs), budgets 10³ to 10⁵, 10 runs, reference 10⁵ sweeps.

Writes paper_repro/out/rts_rbm.{json,png}.
"""
import json
import os

import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

import jaxz  # noqa: E402
from jaxz.models import rbm as rbm_lib  # noqa: E402
from jaxz.models import rbm_raise  # noqa: E402
from _cli import machine, parse_mode  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
NUM_CHAINS, NUM_TEMPERATURES, BURN_IN = 100, 100, 50


def sm_ladder(num_rungs):
    """Salakhutdinov–Murray proportions with ``num_rungs`` temperatures."""
    low, mid = max(2, num_rungs // 29), max(2, 8 * num_rungs // 29)
    high = num_rungs - low - mid + 2
    return np.unique(np.concatenate([np.linspace(0, 0.5, low), np.linspace(0.5, 0.9, mid), np.linspace(0.9, 1, high)]))


def rts_trajectory(path, kernel, total_sweeps, key, num_runs):
    """log Ẑ after every sweep (initial iterations included) of ``num_runs`` vmapped RTS
    runs: the estimate of the latest long-run sweep, nan before the long run (a run that
    finished sooner keeps its final estimate: its steps after that are idle)."""
    estimator = jaxz.rts(path, kernel, jaxz.schedules.linear(NUM_TEMPERATURES), num_sweeps=total_sweeps - 500,
                         initial_iterations=10, sweeps_per_iteration=50)

    @jax.jit
    @jax.vmap
    def one(key):
        key_init, key_run = jax.random.split(key)
        return jaxz.run(estimator, key_run, path.sample_base(key_init, NUM_CHAINS)).trace

    trace = jax.device_get(one(jax.random.split(key, num_runs)))
    sweeps = np.arange(trace.long_run.shape[1])
    latest = np.maximum.accumulate(np.where(trace.long_run, sweeps, -1), axis=1)  # latest long-run sweep
    return np.where(latest >= 0, np.take_along_axis(trace.log_z, np.maximum(latest, 0), axis=1), np.nan)


def annealed(path, kernel, model, data, num_sweeps, key, num_runs, reverse):
    """AIS (or data-seeded RAISE) log Ẑ with ``num_sweeps`` Gibbs sweeps per chain in all."""
    rungs = num_sweeps - BURN_IN + 1 if reverse else num_sweeps + 1
    betas = sm_ladder(rungs)
    estimator = (jaxz.raise_ if reverse else jaxz.ais)(path, kernel, betas)

    @jax.jit
    @jax.vmap
    def one(key):
        key_start, key_run = jax.random.split(key)
        if reverse:
            start = rbm_raise.data_seeded_chains(key_start, model, data, NUM_CHAINS, burn_in=BURN_IN)
        else:
            start = path.sample_base(key_start, NUM_CHAINS)
        return jaxz.run(estimator, key_run, start).estimate.log_z

    return np.asarray(one(jax.random.split(key, num_runs)))


def main():
    args = parse_mode(__doc__)
    if args.full:
        hidden_sizes, epochs, num_runs, reference_sweeps = (500, 100), 30, 10, 100000
        budgets = (1000, 3000, 10000, 30000, 100000)
    else:
        hidden_sizes, epochs, budgets, num_runs, reference_sweeps = (100,), 10, (1000, 3000), 8, 10000

    data = jnp.asarray(jaxz.data.digits_binarized().train)
    report = {"seed_figure": 3, "mode": "full" if args.full else "quick", "num_chains": NUM_CHAINS,
              "K": NUM_TEMPERATURES, "budgets_sweeps_per_chain": list(budgets), "num_runs": num_runs, "rbms": {}}
    for num_hidden in hidden_sizes:
        model = rbm_lib.train(jax.random.key(num_hidden), data, num_hidden, method="pcd", num_epochs=epochs).rbm
        path, kernel = rbm_lib.annealing(rbm_lib.base_rate(data), model)
        with tqdm(total=2, desc=f"{num_hidden} hidden: reference") as bar:
            reference_ais = float(annealed(path, kernel, model, data, reference_sweeps, jax.random.key(7), 1, False)[0])
            bar.update()
            reference_rts = float(rts_trajectory(path, kernel, reference_sweeps, jax.random.key(8), 1)[0, -1])
            bar.update()
        reference = 0.5 * (reference_ais + reference_rts)
        trajectory = rts_trajectory(path, kernel, max(budgets), jax.random.key(1), num_runs)
        results = {"rts": [], "ais": [], "raise": []}
        for budget in tqdm(budgets, desc=f"{num_hidden} hidden: budgets"):
            estimates = {
                "rts": trajectory[:, budget - 1],
                "ais": annealed(path, kernel, model, data, budget, jax.random.key(budget), num_runs, False),
                "raise": annealed(path, kernel, model, data, budget, jax.random.key(budget + 1), num_runs, True),
            }
            for name, values in estimates.items():
                errors = np.asarray(values, float) - reference
                results[name].append({"sweeps": budget, "mean": float(np.nanmean(values)),
                                      "rmse": float(np.sqrt(np.nanmean(errors**2))),
                                      "values": np.asarray(values).tolist()})
        report["rbms"][str(num_hidden)] = {"reference_log_z": reference, "reference_ais": reference_ais,
                                           "reference_rts": reference_rts, "reference_sweeps": reference_sweeps,
                                           "results": results}
        print(num_hidden, "reference AIS", round(reference_ais, 3), "RTS", round(reference_rts, 3),
              {n: [round(r["rmse"], 3) for r in v] for n, v in results.items()})
    report["machine"] = machine()
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "rts_rbm.json"), "w") as handle:
        json.dump(report, handle, indent=1)
    fig, axes = plt.subplots(2, len(hidden_sizes), figsize=(5.5 * len(hidden_sizes), 7), squeeze=False)
    for column, num_hidden in enumerate(hidden_sizes):
        entry = report["rbms"][str(num_hidden)]
        for name, label in (("rts", "RTS"), ("ais", "AIS"), ("raise", "RAISE")):
            sweeps = [r["sweeps"] for r in entry["results"][name]]
            axes[0, column].semilogx(sweeps, [r["mean"] for r in entry["results"][name]], marker="o", label=label)
            axes[1, column].loglog(sweeps, [r["rmse"] for r in entry["results"][name]], marker="o", label=label)
        axes[0, column].axhline(entry["reference_log_z"], color="k", ls="--", lw=1, label="reference")
        axes[0, column].set_title(f"digits RBM, {num_hidden} hidden units")
        axes[0, column].set_ylabel("mean log Ẑ")
        axes[1, column].set_ylabel("RMSE of log Ẑ")
        axes[1, column].set_xlabel("Gibbs sweeps per chain")
        axes[0, column].legend()
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "rts_rbm.png"), dpi=110)


if __name__ == "__main__":
    main()
