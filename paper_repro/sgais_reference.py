"""Reference log evidences for the SGAIS comparison (seed Figures 3–4 at N = 1,000),
where no exact value exists: multiclass logistic regression (44 parameters) and the
2-D Gaussian mixture with 5 components (25 parameters), same data and seeds as
``sgais_accuracy.py`` --quick (data drawn for N = 10,000, first 1,000 rows kept).

Reference: tempered SMC (``jaxz.smc``, adaptive conditional-ESS schedule on
``jaxz.paths.likelihood_tempering`` with the full-data likelihood, ``jaxz.kernels.hmc``
moves, many particles), several independent runs (vmapped) and a doubled budget to
show convergence. HMC metric: the Laplace covariance at the MAP (dense for logistic;
for the mixture a diagonal averaged over components, so every labelling of the
exchangeable components sees the same metric). The Laplace approximation itself (plus
log K! for the mixture's K! symmetric modes) is reported as an independent check.

Then SGAIS (``jaxz.sgais``; the settings of sgais_accuracy and a more accurate one)
runs on the same data, several seeds vmapped, and its error against the reference is
reported alongside the nested-sampling and AIS values of sgais_accuracy.json.

No external data. Writes paper_repro/out/sgais_reference.json. Run time: --quick took
about 30 minutes on 2 shared CPU cores (mostly the mixture's SMC and the accurate SGAIS
runs) — longer than the other scripts' --quick; --full is a GPU-sized job.
"""
import json
import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree
from tqdm.auto import tqdm

import jaxz
from _sgais_common import MODELS, OUT, machine, total_log_likelihood
from _cli import parse_mode  # noqa: E402

jax.config.update("jax_enable_x64", True)

NUM_DATA = 1_000
STREAM_LENGTH = 10_000  # sgais_accuracy --quick draws the data for its largest N, then slices
SGAIS_SEED = dict(num_particles=10, chunk_size=500, minibatch_size=500, target_ess=5.0, learning_rate=0.1,
                  resample=False,
                  alpha=0.2, burn_in=20, reservoir_size=100_000)  # as sgais_accuracy (stream defaults)
SGAIS_ACCURATE = dict(num_particles=100, chunk_size=500, minibatch_size=500, target_ess=90.0, learning_rate=0.02,
                      resample=False,
                      alpha=0.2, burn_in=100, reservoir_size=100_000)


def problem(name):
    """(model, data at N = 1,000) exactly as sgais_accuracy builds them."""
    model = MODELS[name]
    key = jax.random.key(sorted(MODELS).index(name))
    key_data, _, _, _ = jax.random.split(key, 4)
    data = model.make_data(key_data, STREAM_LENGTH)
    return model, jax.tree.map(lambda leaf: leaf[:NUM_DATA], data)


def laplace(model, data, key, num_starts, num_adam=2000):
    """MAP by Adam from prior draws then Newton; returns (flat MAP, covariance, Laplace log Z, unravel)."""
    log_likelihood = total_log_likelihood(model, data)
    starts = model.sample_prior(key, num_starts)
    _, unravel = ravel_pytree(jax.tree.map(lambda leaf: leaf[0], starts))
    flat = jax.vmap(lambda theta: ravel_pytree(theta)[0])(starts)

    def negative_log_joint(x):
        theta = unravel(x)
        return -(model.log_prior(theta) + log_likelihood(theta))

    optimizer = optax.adam(0.05)
    value_and_grad = jax.vmap(jax.value_and_grad(negative_log_joint))

    @jax.jit
    def descend(flat):
        def body(carry, _):
            x, opt_state = carry
            value, grad = value_and_grad(x)
            updates, opt_state = optimizer.update(grad, opt_state)
            return (optax.apply_updates(x, updates), opt_state), value

        (x, _), _ = jax.lax.scan(body, (flat, optimizer.init(flat)), None, length=num_adam)
        return x, jax.vmap(negative_log_joint)(x)

    ends, values = descend(flat)
    best = ends[jnp.argmin(values)]
    hessian = jax.jit(jax.hessian(negative_log_joint))
    gradient = jax.jit(jax.grad(negative_log_joint))
    for _ in range(20):
        best = best - jnp.linalg.solve(hessian(best), gradient(best))
    precision = hessian(best)
    _, log_det = jnp.linalg.slogdet(precision)
    dim = best.size
    log_z = -negative_log_joint(best) + 0.5 * dim * math.log(2 * math.pi) - 0.5 * log_det
    return best, jnp.linalg.inv(precision), float(log_z), unravel, np.sort(np.asarray(values))


def smc_runs(model, data, key, inverse_mass_matrix, *, num_particles, num_mcmc_steps, num_runs, target_ess,
             step_size, num_integration_steps, max_steps=1_000):
    """``num_runs`` independent adaptive tempered SMC runs (vmapped); per-run log Z and diagnostics."""
    path = jaxz.paths.likelihood_tempering(model.log_prior, total_log_likelihood(model, data))
    kernel = jaxz.kernels.hmc(path, step_size=step_size, num_integration_steps=num_integration_steps,
                              inverse_mass_matrix=inverse_mass_matrix)
    estimator = jaxz.smc(path, kernel, target_ess=target_ess, resample_ess=0.5, num_mcmc_steps=num_mcmc_steps)

    def one(key):
        key_prior, key_run = jax.random.split(key)
        result = jaxz.run(estimator, key_run, model.sample_prior(key_prior, num_particles), max_steps=max_steps)
        taken = jnp.arange(max_steps) < result.num_steps
        acceptance = jnp.sum(jnp.where(taken, result.trace.acceptance_rate, 0.0)) / result.num_steps
        return result.estimate.log_z, result.estimate.log_z_stderr, result.num_steps, acceptance, result.estimate.status

    start = time.perf_counter()
    log_z, stderr, steps, acceptance, status = jax.jit(jax.vmap(one))(jax.random.split(key, num_runs))
    log_z = np.asarray(log_z)
    return {"num_particles": num_particles, "num_mcmc_steps": num_mcmc_steps, "target_ess": target_ess,
            "step_size": step_size, "num_integration_steps": num_integration_steps,
            "log_z": log_z.tolist(), "mean": float(log_z.mean()), "sd": float(log_z.std(ddof=1)),
            "stderr_of_mean": float(log_z.std(ddof=1) / np.sqrt(num_runs)),
            "reported_stderr": np.asarray(stderr).tolist(), "num_steps": np.asarray(steps).tolist(),
            "acceptance": np.asarray(acceptance).tolist(), "status": np.asarray(status).tolist(),
            "seconds": time.perf_counter() - start}


def sgais_runs(model, data, key, num_runs, options):
    """``num_runs`` SGAIS runs over the 1,000 observations (vmapped jaxz.run; same bits as the stream)."""
    options = dict(options)
    num_particles = options["num_particles"]
    estimator = jaxz.sgais(model.log_prior, model.log_likelihood, **options)

    def one(key):
        key_prior, key_run = jax.random.split(key)
        result = jaxz.run(estimator, key_run, model.sample_prior(key_prior, num_particles), data)
        return result.estimate.log_z, result.trace.log_z_increment, result.trace.num_annealing_steps

    start = time.perf_counter()
    log_z, increments, steps = jax.jit(jax.vmap(one))(jax.random.split(key, num_runs))
    log_z = np.asarray(log_z)
    return {"options": options, "log_z": log_z.tolist(), "mean": float(log_z.mean()),
            "sd": float(log_z.std(ddof=1)), "chunk_increments_mean": np.asarray(increments).mean(0).tolist(),
            "annealing_steps_mean": np.asarray(steps).mean(0).tolist(), "seconds": time.perf_counter() - start}


# HMC settings per model: the metric is the Laplace covariance (see module docstring)
HMC = {"logistic": dict(step_size=0.5, num_integration_steps=8),
       "gmm": dict(step_size=0.3, num_integration_steps=10)}


def metric(name, covariance):
    if name == "gmm":  # average the variance over the K components of each block: permutation invariant
        k = 5
        variance = np.asarray(jnp.diag(covariance))
        blocks = [variance[:k], variance[k:3 * k].reshape(k, 2), variance[3 * k:].reshape(k, 2)]
        averaged = [np.full(k, blocks[0].mean()), np.tile(blocks[1].mean(0), (k, 1)).ravel(),
                    np.tile(blocks[2].mean(0), (k, 1)).ravel()]
        return jnp.asarray(np.concatenate(averaged))
    return covariance


def main():
    args = parse_mode(__doc__)
    if args.full:
        budgets, num_runs, sgais_num_runs = [(2_000, 5), (4_000, 10)], 8, 16
    else:
        budgets, num_runs, sgais_num_runs = [(300, 3), (600, 6)], 4, 8

    accuracy_path = os.path.join(OUT, "sgais_accuracy.json")
    previous = json.load(open(accuracy_path)) if os.path.exists(accuracy_path) else None
    report = {"script": "sgais_reference", "mode": "full" if args.full else "quick", "num_data": NUM_DATA,
              "machine": machine(), "models": {}}
    tasks = [(name, kind, index) for name in ("logistic", "gmm")
             for kind, index in [("laplace", 0)] + [("smc", i) for i in range(len(budgets))]
             + [("sgais_seed", 0), ("sgais_accurate", 0)]]
    bar = tqdm(tasks, desc="sgais_reference")
    for name, kind, index in bar:
        bar.set_postfix(model=name, task=kind)
        model, data = problem(name)
        entry = report["models"].setdefault(name, {"smc": []})
        key = jax.random.fold_in(jax.random.key(2026), sorted(MODELS).index(name))
        if kind == "laplace":
            best, covariance, log_z, _, values = laplace(model, data, jax.random.fold_in(key, 0),
                                                         num_starts=64 if name == "gmm" else 4)
            entry["laplace"] = {"log_z": log_z, "log_z_plus_log_k_factorial": log_z + math.lgamma(6.0)
                                if name == "gmm" else None, "best_local_optima": values[:8].tolist()}
            entry["_metric"] = metric(name, covariance)
        elif kind == "smc":
            num_particles, num_mcmc_steps = budgets[index]
            entry["smc"].append(smc_runs(model, data, jax.random.fold_in(key, 1 + index), entry["_metric"],
                                         num_particles=num_particles, num_mcmc_steps=num_mcmc_steps,
                                         num_runs=num_runs, target_ess=0.7, **HMC[name]))
        else:
            options = SGAIS_SEED if kind == "sgais_seed" else SGAIS_ACCURATE
            entry[kind] = sgais_runs(model, data, jax.random.fold_in(key, 10), sgais_num_runs, options)
    for name, entry in report["models"].items():
        del entry["_metric"]
        reference = entry["smc"][-1]
        entry["reference"] = {"log_z": reference["mean"], "sd_over_runs": reference["sd"],
                              "stderr_of_mean": reference["stderr_of_mean"]}
        errors = {"laplace": entry["laplace"]["log_z_plus_log_k_factorial" if name == "gmm" else "log_z"],
                  "sgais_seed_mean": entry["sgais_seed"]["mean"],
                  "sgais_accurate_mean": entry["sgais_accurate"]["mean"]}
        if previous is not None:
            old = previous["models"][name]
            trace_n = old["sgais"]["n"]
            errors["sgais_accuracy_json_sgais"] = old["sgais"]["log_z"][trace_n.index(NUM_DATA)]
            for method in ("nested", "ais"):
                if NUM_DATA in old[method]["n"]:
                    errors[f"sgais_accuracy_json_{method}"] = old[method]["log_z"][old[method]["n"].index(NUM_DATA)]
        entry["error_vs_reference"] = {method: value - reference["mean"] for method, value in errors.items()}
        entry["values"] = errors

    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "sgais_reference.json"), "w") as handle:
        json.dump(report, handle, indent=1)
    print(json.dumps({name: {"reference": entry["reference"], "smc_means": [s["mean"] for s in entry["smc"]],
                             "error_vs_reference": entry["error_vs_reference"]}
                      for name, entry in report["models"].items()}, indent=1))


if __name__ == "__main__":
    main()
