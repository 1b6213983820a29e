"""Seed Figure 2 (Carlson et al., ICML 2016, §4.1): RMSE of log Ẑ against the number of
samples for RTS, MBAR, TI (Riemann and trapezoid rules) and TI-RB on the 10-dimensional
mixture of two Gaussians (``jaxz.models.gmm10``: exact log Z; a broad Gaussian base on
a geometric path), all from the same simulated-tempering runs.

Sampler: ``jaxz.kernels.tempered_hmc`` with one step size per temperature, adapted
toward acceptance 0.65 during the initial iterations only (seed App. E). Every run:
initial iterations of §2.4, then the long run; the estimates after n long-run sweeps
are read off the run's trace (each sweep's ``RTSInfo``: the β = 1 end of what
``jaxz.rts_estimates`` gives), and MBAR (``jaxz.mbar``, eq. 18) is solved on the first
n·C draws (x, β) of the long run (``rts(..., record_draws=True)``). No dataset is needed.

--quick (default; a couple of minutes on 2 shared cores): K = 20, 20 chains, 6 runs,
1,000 long-run sweeps, 8 leapfrog steps. --full: K = 50, 100 chains, 20 runs, 5,000
sweeps, 10 leapfrog steps.

Writes paper_repro/out/rts_gmm.{json,png}.
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
from jaxz.models import gmm10  # noqa: E402
from _cli import machine, parse_mode  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
METHODS = ("rts", "ti_riemann", "ti_trapezoid", "ti_rb", "ts")
# each method's log Ẑ at β = 1 after every sweep, as the run's trace (jaxz.estimators.rts.RTSInfo) holds it
TRACE_FIELDS = {"rts": "log_z", "ti_riemann": "log_z_ti_riemann", "ti_trapezoid": "log_z_ti_trapezoid",
                "ti_rb": "log_z_ti_rb", "ts": "log_z_ts"}


def main():
    args = parse_mode(__doc__)
    if args.full:
        num_temperatures, num_chains, num_runs, num_sweeps, leapfrog = 50, 100, 20, 5000, 10
    else:
        num_temperatures, num_chains, num_runs, num_sweeps, leapfrog = 20, 20, 6, 1000, 8
    initial_iterations, sweeps_per_iteration = 10, 50

    model = gmm10.make()
    exact = float(gmm10.exact_log_z(model))
    path = gmm10.path(model)
    betas = jaxz.schedules.linear(num_temperatures) ** 2
    kernel, adapt = jaxz.kernels.tempered_hmc(path, betas, 0.5, leapfrog)
    estimator = jaxz.rts(path, kernel, betas, num_sweeps=num_sweeps, initial_iterations=initial_iterations,
                         sweeps_per_iteration=sweeps_per_iteration, adapt=adapt, record_draws=True)

    @jax.jit
    def one(key):
        key_init, key_run = jax.random.split(key)
        return jaxz.run(estimator, key_run, path.sample_base(key_init, num_chains)).trace

    checkpoints = np.unique(np.geomspace(10, num_sweeps, 8).astype(int))
    log_f = jax.jit(jax.vmap(jax.vmap(path.log_density, in_axes=(0, None)), in_axes=(None, 0)))
    solve = jax.jit(jaxz.mbar)
    errors = {m: np.zeros((num_runs, checkpoints.size)) for m in METHODS + ("mbar",)}
    for run in tqdm(range(num_runs), desc="runs"):
        trace = jax.device_get(one(jax.random.key(run)))
        long_run, draws = np.asarray(trace.long_run), trace.draws
        fresh = np.asarray(draws.in_long_run)
        for j, n in enumerate(checkpoints):
            step = np.flatnonzero(long_run & (np.cumsum(long_run) == n))[0]  # the n-th long-run sweep
            for m in METHODS:
                errors[m][run, j] = float(getattr(trace, TRACE_FIELDS[m])[step]) - exact
            samples = draws.position[fresh][:n].reshape(-1, draws.position.shape[-1])
            labels = draws.beta_index[fresh][:n].reshape(-1)
            order = np.argsort(labels, kind="stable")
            u_kn = -log_f(jnp.asarray(samples[order]), jnp.asarray(betas, jnp.float32))
            f_k, _ = solve(u_kn, jnp.asarray(np.bincount(labels, minlength=num_temperatures)))
            errors["mbar"][run, j] = float(path.log_z0) - float(f_k[-1]) - exact

    samples = (checkpoints * num_chains).tolist()
    rmse = {m: np.sqrt(np.nanmean(e**2, axis=0)).tolist() for m, e in errors.items()}
    report = {"seed_figure": 2, "exact_log_z": exact, "K": num_temperatures, "num_chains": num_chains,
              "num_runs": num_runs, "num_samples": samples, "rmse": rmse,
              "mean_error": {m: np.nanmean(e, axis=0).tolist() for m, e in errors.items()},
              "mode": "full" if args.full else "quick",
              "machine": machine()}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "rts_gmm.json"), "w") as handle:
        json.dump(report, handle, indent=1)
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    labels = {"rts": "RTS", "mbar": "MBAR", "ti_riemann": "TI (Riemann)", "ti_trapezoid": "TI (trapezoid)",
              "ti_rb": "TI-RB", "ts": "TS"}
    for m in ("rts", "mbar", "ti_riemann", "ti_trapezoid", "ti_rb"):
        ax.loglog(samples, rmse[m], marker="o", label=labels[m])
    ax.set_xlabel("number of samples (long-run sweeps × chains)")
    ax.set_ylabel("RMSE of log Ẑ")
    ax.set_title(f"10-D two-Gaussian mixture, K = {num_temperatures}, {num_runs} runs")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "rts_gmm.png"), dpi=110)
    print({m: round(v[-1], 4) for m, v in rmse.items()})


if __name__ == "__main__":
    main()
