"""Seed Figure 4 (Carlson et al., ICML 2016): RMSE of log Ẑ against the number of
temperatures K for RTS, TS, MBAR, TI and TI-RB, each K from one long simulated-tempering
run, the RMSE by bootstrap over its (independent) chains.

The seed uses an RBM trained on MNIST; offline, scikit-learn's 8×8 digits binarized at
half intensity (``jaxz.data.digits_binarized``) stand in, with a small RBM whose log Z
is exact by enumeration. For each K: ``jaxz.rts`` (§2.4 initial iterations, then the
long run at frozen Ẑ, ``record_draws=True``) keeps every 5th sweep of every chain; from those draws
(x, β) every estimator is recomputed on bootstrap resamples of the chains:
RTS (eq. 12 with ĉ_k the mean of q(β_k | x)), TS (visit counts + 0.1), MBAR (eq. 18),
TI (trapezoid on the mean of d/dβ log f_β over draws at each β_k) and TI-RB (eq. 21).

--quick (default; a few minutes on 2 shared cores): 12 hidden units, K ∈ {10, 25, 50,
100}, 40 chains, 1,000 long-run sweeps, 20 bootstrap resamples. --full: 20 hidden
units, K ∈ {10, 25, 50, 100, 200}, 100 chains, 10,000 sweeps, 100 resamples.

Writes paper_repro/out/rts_temps.{json,png}.
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
from _cli import machine, parse_mode  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
THIN = 5
METHODS = ("rts", "ts", "mbar", "ti", "ti_rb")


def estimates_from_draws(log_f, derivative, labels, log_z_hat, log_prior, betas, log_z0):
    """Every estimator of log Z at β = 1 from draws (x_n, β_{labels_n}) of the RTS joint:
    log_f, derivative (N, K) are log f_k(x_n) and d/dβ log f_β(x_n) at β_k."""
    num_temperatures = betas.shape[0]
    log_q = jax.nn.log_softmax(log_f + log_prior - log_z_hat, axis=1)  # eq. (7)
    counts = jnp.bincount(labels, length=num_temperatures).astype(log_f.dtype)

    def eq12(log_c):
        return log_z_hat[-1] - log_z_hat[0] + log_prior[0] - log_prior[-1] + log_c[-1] - log_c[0] + log_z0

    rts = eq12(jax.nn.logsumexp(log_q, axis=0))
    ts = eq12(jnp.log(counts + 0.1))
    one_hot = jax.nn.one_hot(labels, num_temperatures, dtype=log_f.dtype)
    mean_du = jnp.sum(one_hot * derivative, axis=0) / counts
    rb_du = jnp.sum(jax.nn.softmax(log_q, axis=0) * derivative, axis=0)
    widths = jnp.diff(betas)
    ti = log_z0 + jnp.sum(widths * 0.5 * (mean_du[1:] + mean_du[:-1]))
    ti_rb = log_z0 + jnp.sum(widths * 0.5 * (rb_du[1:] + rb_du[:-1]))
    order = jnp.argsort(labels, stable=True)
    f_k, _ = jaxz.mbar(-log_f[order].T, counts)
    return {"rts": rts, "ts": ts, "mbar": log_z0 - f_k[-1], "ti": ti, "ti_rb": ti_rb}


def main():
    args = parse_mode(__doc__)
    if args.full:
        num_hidden, ladder_sizes, num_chains, num_sweeps, num_boot = 20, (10, 25, 50, 100, 200), 100, 10000, 100
    else:
        num_hidden, ladder_sizes, num_chains, num_sweeps, num_boot = 12, (10, 25, 50, 100), 40, 1000, 20

    data = jnp.asarray(jaxz.data.digits_binarized().train)
    model = rbm_lib.train(jax.random.key(0), data, num_hidden, method="pcd", num_epochs=10).rbm
    exact = float(rbm_lib.exact_log_z(model))
    path, kernel = rbm_lib.annealing(rbm_lib.base_rate(data), model)
    value_and_derivative = jax.vmap(jax.vmap(jax.value_and_grad(path.log_density, argnums=1), in_axes=(None, 0)),
                                    in_axes=(0, None))
    results = {m: [] for m in METHODS}
    for num_temperatures in tqdm(ladder_sizes, desc="K"):
        betas = jnp.asarray(jaxz.schedules.linear(num_temperatures), jnp.float32)
        estimator = jaxz.rts(path, kernel, np.asarray(betas), num_sweeps=num_sweeps, initial_iterations=10,
                             sweeps_per_iteration=50, record_draws=True)

        @jax.jit
        def simulate(key):
            key_init, key_run = jax.random.split(key)
            result = jaxz.run(estimator, key_run, path.sample_base(key_init, num_chains))
            return result.state, jax.tree.map(lambda record: record[THIN - 1::THIN], result.trace.draws)

        state, draws = simulate(jax.random.key(num_temperatures))
        fresh = np.asarray(draws.in_long_run)
        positions, labels = draws.position[fresh], draws.beta_index[fresh]  # (records, chains, ...)

        @jax.jit
        def bootstrap(key):
            chains = jax.random.randint(key, (num_chains,), 0, num_chains)
            x = positions[:, chains].reshape(-1, positions.shape[-1])
            log_f, derivative = value_and_derivative(x, betas)
            return estimates_from_draws(log_f, derivative, labels[:, chains].reshape(-1), state.log_z_hat,
                                        state.log_prior, betas, path.log_z0)

        boots = [jax.device_get(bootstrap(key)) for key in jax.random.split(jax.random.key(99), num_boot)]
        for m in METHODS:
            errors = np.array([float(b[m]) for b in boots]) - exact
            results[m].append({"rmse": float(np.sqrt(np.nanmean(errors**2))), "mean_error": float(np.nanmean(errors))})

    report = {"seed_figure": 4, "exact_log_z": exact, "num_hidden": num_hidden, "K": list(ladder_sizes),
              "num_chains": num_chains, "num_sweeps": num_sweeps, "bootstrap_resamples": num_boot,
              "results": results, "mode": "full" if args.full else "quick",
              "machine": machine()}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "rts_temps.json"), "w") as handle:
        json.dump(report, handle, indent=1)
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    names = {"rts": "RTS", "ts": "TS", "mbar": "MBAR", "ti": "TI (trapezoid)", "ti_rb": "TI-RB"}
    for m in METHODS:
        ax.loglog(ladder_sizes, [r["rmse"] for r in results[m]], marker="o", label=names[m])
    ax.set_xlabel("number of temperatures K")
    ax.set_ylabel("RMSE of log Ẑ (bootstrap over chains)")
    ax.set_title(f"digits RBM ({num_hidden} hidden), {num_chains} chains × {num_sweeps} sweeps")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "rts_temps.png"), dpi=110)
    print({m: [round(r["rmse"], 4) for r in results[m]] for m in METHODS})


if __name__ == "__main__":
    main()
