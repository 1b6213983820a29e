"""RTS vs AIS at matched Gibbs sweeps on an RBM with exact log Z (the seed's Figure 3
claim: AIS needs at least 10× the sweeps of RTS to reach RTS's accuracy).

Model: an RBM with 20 hidden units trained by PCD on scikit-learn's binarized 8×8
digits (``jaxz.data.digits_binarized``, the offline stand-in for MNIST); log Z exact by
enumeration of the hidden layer. Both estimators use the same Salakhutdinov–Murray path
from the base-rate model and the same blocked Gibbs kernel, 100 chains per run:

- RTS (``jaxz.rts``): K = 100 linear temperatures, 10 initial iterations of 50 sweeps
  (counted), then the long run; its estimate at b total sweeps per chain is read off
  one long run per seed (what a run stopped there returns).
- AIS (``jaxz.ais``): b + 1 temperatures in Salakhutdinov–Murray proportions, one
  sweep per temperature: b sweeps per chain.

RMSE over independent runs against the exact log Z at each budget, in one process.
The sweep ratio: for each RTS budget b, the AIS sweeps at which AIS's RMSE (log-log
interpolation of its curve, extrapolated with its fitted slope beyond the largest
budget) equals RTS's RMSE at b, divided by b.

--quick (default; about five minutes on 2 shared cores): budgets 10³, 3·10³, 10⁴
sweeps per chain, 6 RTS runs and 24 AIS runs (AIS runs are cheap; more of them steady
its RMSE curve). --full: 10³ to 10⁵, 10 RTS and 40 AIS runs.

Writes benchmarks/results/rts_vs_ais.json.
"""
import argparse
import json
import os
import platform

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

import jaxz
from jaxz.models import rbm as rbm_lib
from _results import machine

NUM_CHAINS, NUM_TEMPERATURES, NUM_HIDDEN = 100, 100, 20


def sm_ladder(num_rungs):
    low, mid = max(2, num_rungs // 29), max(2, 8 * num_rungs // 29)
    high = num_rungs - low - mid + 2
    return np.unique(np.concatenate([np.linspace(0, 0.5, low), np.linspace(0.5, 0.9, mid), np.linspace(0.9, 1, high)]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", default=True)
    mode.add_argument("--full", action="store_true")
    args = parser.parse_args()
    about = machine(processor=platform.processor(), python=platform.python_version(), device=str(jax.devices()[0]))
    if args.full:
        budgets, rts_runs, ais_runs = (1000, 3000, 10000, 30000, 100000), 10, 40
    else:
        budgets, rts_runs, ais_runs = (1000, 3000, 10000), 6, 24

    data = jnp.asarray(jaxz.data.digits_binarized().train)
    model = rbm_lib.train(jax.random.key(0), data, NUM_HIDDEN, method="pcd", num_epochs=20).rbm
    exact = float(rbm_lib.exact_log_z(model))
    path, kernel = rbm_lib.annealing(rbm_lib.base_rate(data), model)

    estimator = jaxz.rts(path, kernel, jaxz.schedules.linear(NUM_TEMPERATURES), num_sweeps=max(budgets) - 500,
                         initial_iterations=10, sweeps_per_iteration=50)

    @jax.jit
    @jax.vmap
    def rts_trace(key):
        key_init, key_run = jax.random.split(key)
        return jaxz.run(estimator, key_run, path.sample_base(key_init, NUM_CHAINS)).trace

    with tqdm(total=1, desc="RTS runs") as bar:
        trace = jax.device_get(rts_trace(jax.random.split(jax.random.key(1), rts_runs)))
        bar.update()
    # log Ẑ after b sweeps: the latest long-run sweep's estimate (a run that finished sooner idles)
    sweeps = np.arange(trace.long_run.shape[1])
    latest = np.maximum.accumulate(np.where(trace.long_run, sweeps, -1), axis=1)
    trajectory = np.where(latest >= 0, np.take_along_axis(trace.log_z, np.maximum(latest, 0), axis=1), np.nan)
    rts_rmse, ais_rmse, rts_values, ais_values = [], [], [], []
    for budget in tqdm(budgets, desc="AIS budgets"):
        values = trajectory[:, budget - 1]
        rts_values.append(values.tolist())
        rts_rmse.append(float(np.sqrt(np.nanmean((values - exact) ** 2))))
        ais = jaxz.ais(path, kernel, sm_ladder(budget + 1))
        one = jax.jit(jax.vmap(lambda key: jaxz.run(ais, key, path.sample_base(key, NUM_CHAINS)).estimate.log_z))
        values = np.asarray(one(jax.random.split(jax.random.key(budget), ais_runs)))
        ais_values.append(values.tolist())
        ais_rmse.append(float(np.sqrt(np.mean((values - exact) ** 2))))

    # AIS sweeps needed to match RTS's RMSE: interpolate log RMSE against log sweeps
    log_b, log_ais = np.log(budgets), np.log(ais_rmse)
    slope = np.polyfit(log_b, log_ais, 1)[0]
    ratios = []
    for budget, target in zip(budgets, rts_rmse):
        log_target = np.log(target)
        if log_target >= log_ais[0]:
            needed = budgets[0] * np.exp((log_target - log_ais[0]) / slope)
        elif log_target <= log_ais[-1]:
            needed = budgets[-1] * np.exp((log_target - log_ais[-1]) / slope)
        else:
            needed = float(np.exp(np.interp(-log_target, -log_ais, log_b)))
        ratios.append(float(needed / budget))
    report = {
        "exact_log_z": exact, "num_hidden": NUM_HIDDEN, "num_chains": NUM_CHAINS, "K": NUM_TEMPERATURES,
        "budgets_sweeps_per_chain": list(budgets), "num_runs": {"rts": rts_runs, "ais": ais_runs},
        "mode": "full" if args.full else "quick",
        "rmse": {"rts": rts_rmse, "ais": ais_rmse}, "values": {"rts": rts_values, "ais": ais_values},
        "ais_rmse_loglog_slope": float(slope),
        "ais_sweeps_to_match_rts_ratio": ratios, "target_ratio": 10.0,
        "machine": {**about, "load_average_at_end": list(os.getloadavg())},
    }
    os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
    with open(os.path.join(os.path.dirname(__file__), "results", "rts_vs_ais.json"), "w") as handle:
        json.dump(report, handle, indent=2)
    print(json.dumps({k: report[k] for k in ("exact_log_z", "rmse", "ais_rmse_loglog_slope",
                                             "ais_sweeps_to_match_rts_ratio")}, indent=1))


if __name__ == "__main__":
    main()
