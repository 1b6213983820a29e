"""Waste-free SMC's per-run error bars: how often does (log Ẑ − log Z) / s.e. land beyond 3?

Two rows of the evidence suite with an exact log Z (benchmarks/evidence_suite.py), many
vmapped runs each, float64, at several chain lengths P (N = 1000 particles as M = N / P
chains of P states, Dau & Chopin 2022):

- ``rosenbrock`` (d = 2): ``jaxz.smc(path, multiscale_rwmh(path), waste_free=True,
  decorrelation="log_density", target_ess=0.9)``, the SMC that ``jaxz.evidence(...,
  waste_free=True)`` runs at d <= 5, 256 runs per P. Also recorded per run: the part of
  the s.e. that the per-stage chain variances give (``SMCState.log_z_variance``), the
  larger of the two terms the waste-free s.e. takes.
- ``two-mode d=20``: ``jaxz.evidence(path, key, waste_free=True, target_stderr=None)``
  (HMC), 32 runs per P, one call each (its runs pooled and checked against each other).

Per row: coverage of the unflagged runs (|z| <= 1.96), runs beyond 3 and 4 s.e., the s.d.
of the error against the rms of the s.e., evaluations and seconds per run (after
compiling). The finding it records (docs/error-bars.md, waste-free SMC): the s.e. is right
on average and noisy run to run, and the runs in the tail are those whose s.e. came out low.

    python benchmarks/waste_free_tails.py   # writes benchmarks/results/waste_free_tails.{json,md}; ~7 min on 2 cores
"""
import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)  # a script, not the library

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evidence_suite  # noqa: E402
import jaxz  # noqa: E402
from _results import machine, write  # noqa: E402
from jaxz.kernels.multiscale import multiscale_rwmh  # noqa: E402

NUM_PARTICLES = 1000
ROWS = (("rosenbrock", "smc", 256, (50, 20, 10)), ("two-mode d=20", "evidence", 32, (50, 10)))


def smc_runs(problem, num_runs, chain_length, seed):
    """(log Z, s.e., status, chain-variance s.d., evaluations, seconds) per run of waste-free
    SMC with multiscale random-walk moves, vmapped in one compiled call."""
    path, sample = evidence_suite.tempering_path(problem)
    estimator = jaxz.smc(path, multiscale_rwmh(path), waste_free=True, decorrelation="log_density",
                         target_ess=0.9, chain_length=chain_length)

    def one(key):
        key_base, key_run = jax.random.split(key)
        result = jaxz.run(estimator, key_run, sample(key_base, NUM_PARTICLES), max_steps=1000)
        state = result.state
        return (result.estimate, jnp.sqrt(state.log_z_variance),
                state.log_density_evaluations + state.gradient_evaluations)

    keys = jax.random.split(jax.random.key(seed), num_runs)
    compiled = jax.jit(jax.vmap(one)).lower(keys).compile()
    start = time.perf_counter()
    estimate, chain_sd, evaluations = jax.block_until_ready(compiled(keys))
    seconds = (time.perf_counter() - start) / num_runs
    return (np.asarray(estimate.log_z), np.asarray(estimate.log_z_stderr), np.asarray(estimate.status),
            np.asarray(chain_sd), np.asarray(evaluations, np.float64), seconds)


def evidence_runs(problem, num_runs, chain_length, seed):
    """The same per run from one ``jaxz.evidence(waste_free=True)`` call (no chain-variance
    term: nan)."""
    path, _ = evidence_suite.tempering_path(problem)
    result = jaxz.evidence(path, jax.random.key(seed), num_runs=num_runs, num_particles=NUM_PARTICLES,
                           target_stderr=None, waste_free=True, chain_length=chain_length)
    runs = result.runs
    evaluations = np.full(num_runs, result.num_evaluations / num_runs)
    return (np.asarray(runs.log_z), np.asarray(runs.log_z_stderr), np.asarray(runs.status),
            np.full(num_runs, np.nan), evaluations, result.seconds / num_runs)


def summary(exact, log_z, stderr, status, chain_sd, evaluations, seconds):
    error = log_z - exact
    z = error / stderr
    unflagged = status == 0
    tail = np.argsort(-np.abs(z))[:5]
    return dict(
        runs=int(z.size), unflagged=int(unflagged.sum()),
        coverage=float(np.mean(np.abs(z[unflagged]) <= 1.96)) if unflagged.any() else None,
        beyond_3=int(np.sum(np.abs(z[unflagged]) > 3)), beyond_4=int(np.sum(np.abs(z[unflagged]) > 4)),
        error_sd=float(error.std()), rms_stderr=float(np.sqrt(np.mean(stderr**2))), mean_error=float(error.mean()),
        evaluations_per_run=float(np.mean(evaluations)), seconds_per_run=float(seconds),
        flags=sorted({name for s in status for name in jaxz.status_names(int(s))}),
        tail=[dict(error=float(error[i]), stderr=float(stderr[i]), z=float(z[i]), chain_sd=float(chain_sd[i]),
                   status=int(status[i])) for i in tail],
        runs_detail=dict(log_z=log_z.tolist(), stderr=stderr.tolist(), status=status.tolist()))


def markdown(report) -> str:
    lines = ["# Waste-free SMC: per-run error bars in the tails", "",
             f"`python benchmarks/waste_free_tails.py`: {NUM_PARTICLES} particles as M = N / P chains of P states, "
             "float64, 2 cores. z = (log Ẑ − log Z) / s.e.; coverage over the unflagged runs. rosenbrock: "
             "`jaxz.smc` waste-free with multiscale random-walk moves (what `jaxz.evidence(waste_free=True)` runs at "
             "d <= 5); two-mode d=20: one `jaxz.evidence(waste_free=True, target_stderr=None)` call (HMC).", "",
             "| problem | P (chains) | runs | coverage | beyond 3 / 4 | error s.d. / rms s.e. | mean error "
             "| evals / run | s / run | flags |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, rows in report["rows"].items():
        for row in rows:
            coverage = "n/a" if row["coverage"] is None else f"{row['coverage']:.3f}"
            lines.append(f"| {name} | {row['chain_length']} ({NUM_PARTICLES // row['chain_length']}) | {row['runs']} "
                         f"| {coverage} ({row['unflagged']} unflagged) | {row['beyond_3']} / {row['beyond_4']} "
                         f"| {row['error_sd']:.3f} / {row['rms_stderr']:.3f} | {row['mean_error']:+.4f} "
                         f"| {row['evaluations_per_run']:,.0f} | {row['seconds_per_run']:.2f} "
                         f"| {', '.join(row['flags']) or 'none'} |")
    lines += ["", "The five runs farthest out, per row (error, s.e., z; the chain-variance part of the s.e.):", ""]
    for name, rows in report["rows"].items():
        for row in rows:
            tail = "; ".join(f"{t['error']:+.3f} / {t['stderr']:.3f} = {t['z']:+.2f}"
                             + ("" if np.isnan(t["chain_sd"]) else f" (chain {t['chain_sd']:.3f})")
                             for t in row["tail"])
            lines.append(f"- {name}, P = {row['chain_length']}: {tail}")
    return "\n".join(lines) + "\n"


def main():
    problems = evidence_suite.problems(None)
    report = dict(num_particles=NUM_PARTICLES, rows={}, machine=machine())
    for seed, (name, how, num_runs, lengths) in enumerate(ROWS):
        problem = problems[name]
        for chain_length in lengths:
            runs = (smc_runs if how == "smc" else evidence_runs)(problem, num_runs, chain_length, 7 + seed)
            row = dict(chain_length=chain_length, how=how, **summary(problem.exact, *runs))
            report["rows"].setdefault(name, []).append(row)
            print(f"{name} P={chain_length}: coverage {row['coverage']}, beyond 3: {row['beyond_3']}, "
                  f"error sd {row['error_sd']:.3f}, rms s.e. {row['rms_stderr']:.3f}", flush=True)
    out = write(report, "waste_free_tails.json")
    with open(out.replace(".json", ".md"), "w") as handle:
        handle.write(markdown(report))


if __name__ == "__main__":
    main()
