"""Seed Figure 2 (Fraccaro, Paquet & Winther, "An Adaptive Resample-Move Algorithm for
Estimating Normalizing Constants"): log Ẑ of a probit GP classifier's marginal likelihood
against wall-clock time for ARM, RM, AIS-HMC from EP's q(f), and AIS-RMHMC from the prior
and from q(f), with the EP value and its second-order correction as reference lines.

Data: the seed uses USPS 3-vs-5 (16×16 pixels in [−1, 1], 767 training images);
offline, scikit-learn's 8×8 digits stand in (``jaxz.data.digits_3_vs_5``: the 365 3s and
5s, pixels scaled to [−1, 1]), in a fixed random order. --quick uses 100 of them (seed 0),
--full all 365.

Hyper-parameters: the seed's hardest point, log σ = 5.1, log ℓ = 4.85 for 256-pixel
inputs. A squared distance between images is a sum over pixels, so with 64 instead of 256
pixels (and a similar per-pixel spread) |ξ − ξ'|² is about four times smaller; keeping
|ξ − ξ'|²/ℓ² — the prior correlations — the same needs ℓ halved: log ℓ = 4.85 − log 2 =
4.157, log σ = 5.1. cond(K + I) ≈ σ² N then is 2.7·10⁶ (N = 100) or 9.8·10⁶ (N = 365),
near the seed's (σ² · 767 ≈ 2·10⁷); both are written to the JSON.

Methods (seed §4.2; differences said):
- ARM: γ_thr = 0.7, i_max = 50, residual resampling when R_eff < 0.9R; RM: the same
  with i_max = 0. One Gibbs sweep (slice sampling, App. A.2) per move, but a systematic
  scan instead of App. A.1's random order: under vmap a shared visiting order keeps the
  rows of S shared by all particles (about 3× faster at R = 10³); both are valid Gibbs
  kernels (the tests check both).
- AIS HMC from q* (eq. 11): geometric β grid (β_1 = 10⁻⁴) of B values, HMC with q's
  covariance as inverse mass matrix (the seed tuned an unpreconditioned HMC: ε = 0.02,
  200 leapfrog steps), ε = 0.3, 20 leapfrog steps.
- AIS RMHMC from p(f) (eq. 12) and from q* (eq. 11): blackjax's RMHMC with the metric
  G(f) = (K + δI)⁻¹ + Λ(f) and our generalized leapfrog (Girolami & Calderhead 2011,
  ``jaxz.kernels.riemannian``), whose fixed points are solved or the step rejected.
  At this hard point the dynamics are stiff: G's eigenvalues span 10⁻⁴…30, so velocities
  G⁻¹p reach ~10³ along the prior's long direction while Λ(f) changes within a few units
  of f near the decision boundary, and the momentum equation (16), quadratic in p through
  −½ Λ'(f)(G⁻¹p)², has a contracting fixed point only for ε ≲ 10⁻³ (none at all for the
  seed's ε = 0.1 on most draws). We run ε = 3·10⁻⁴, 10 steps: in the AIS runs every
  step was solved (acceptance 1.0; from unequilibrated prior draws at β = 0.3 half the
  chains still failed every step), but the chains barely move, so AIS here is close to
  importance sampling along the path: heavy-tailed from q (single runs down to −109),
  hopeless from the prior. blackjax's default implicit
  midpoint instead accepts unsolved steps (its 100 iterations' failure is discarded):
  such a kernel does not leave p_β invariant and AIS's Ẑ loses its unbiasedness, one
  way to land "from above" (the seed's reading is discretization bias; AIS's Ẑ is
  unbiased for any β grid when the kernel is exact).
- f-space uses the exact split K + δI, Φ(f/√(1 − δ)) with δ = 10⁻⁶σ² (same Z; see
  ``jaxz.models.gpc``).
- EP: R&W Algorithm 3.5 (dotted line). Corrected EP (solid line, the seed's [16]):
  log Z_EP + R₂, Opper, Paquet & Winther's (2013) second-order correction
  R₂ = Σ_{m<n} E_q[ε_m ε_n], its Hermite series summed to order 32
  (``jaxz.approx.gpc_ep(model, correction=True)``; the last order's part is in the JSON).
- Reference: the offsets (the JSON's "reading", panel b) are measured from the EP-free
  reference of paper_repro/gpc_reference.py (pooled randomized-QMC Genz runs, checked
  against long ARM and AIS runs; the JSON's "reference", kept across reruns of the same
  problem), in units of the combined s.e.; the EP and corrected EP lines stay drawn. Without
  a reference in the JSON they fall back to the corrected EP value.
Each AIS run is one chain (one Ẑ per run, as the seed's 80 Ẑ per setting); ARM/RM runs
have R particles. x-axis: compiled wall time per run (vmapped batches / runs).

--quick (default): N = 100; ARM/RM R = 10², 10³; AIS-HMC B = 10³, 2·10³, 5·10³;
AIS-RMHMC from q B = 25, 100, 500 and from the prior B = 500; 16 runs per setting (a
quarter, at least 4, for RMHMC).
--full: N = 365; R = 10², 10³, 10⁴, 10⁵ (ARM at 10⁵ needs (1 + i_max)·R·N·8 bytes = 15 GB
for its particle buffer and is skipped where that exceeds --max-buffer-gb, default 6; XLA's
compile-time memory analysis of one such run, float64, gives 18.5 GB of temporaries in
all, RM 3.5 GB: it fits a 24 GB accelerator, measured 2026-11-25 without running it); AIS-HMC
B up to 10⁴; AIS-RMHMC from q B up to 2·10³, from the prior 500, 2·10³; 80 runs. Days on a CPU.
--runs K and --max-particles R override the mode's run count and largest R; --only
arm|ais runs one group and merges it into the mode's JSON (written after every setting, so a
run cut short keeps what it measured; --resume then skips what the JSON holds); --methods
runs only the named methods, --max-rmhmc-steps B skips AIS-RMHMC settings above B rungs,
--max-seconds S starts no setting after S seconds. Each group's machine is recorded
("machines") and each setting's backend ("backend"); the time axes say when settings ran on
different ones. The committed quick output is
``--quick --runs 80 --max-particles 10000`` (the issue's R = 10²…10⁴ with the seed's 80
runs; the JSON's "command" records it), about 50 minutes on 2 cores. --replot (with
--full: the full figure) redraws the figure from the JSON.

The committed full output (out/arm_gpc_full.*; the JSON's "command" lists its runs, each
setting's "backend" its machine): on one H100 (2026-11-27), ARM and RM at N = 365,
R = 10²…10⁴, 8 runs each (11 s and 5 s per run at R = 10⁴), and R = 10⁵, one run each
(79 s and 37 s); AIS-HMC from q B = 10³…10⁴, 80 runs each, vmapped together (2 s per run at
B = 10⁴); AIS-RMHMC from the prior B = 500, 4 runs (8 s per run; log Ẑ near −12,600: the
chains cannot leave the prior at ε = 3·10⁻⁴; on the CPU this job had stopped making progress
after 20 minutes, every thread waiting on a lock). AIS-RMHMC from q B = 25…2·10³, 4 runs each,
ran on 2 CPU cores (``--full --only ais --runs 4``; 12 minutes), its seconds a CPU's.
Its EP-free reference
(``gpc_reference.py --figure full --genz-runs 16 --genz-points 16384 --arm-runs 0
--ais-runs 0``, 2 CPU cores): log Z = −25.201 ± 0.008; ARM and RM at R = 10⁴ agree with it
(+0.3 and +1.3 s.e.), and so does AIS-HMC at every B with 80 runs (−0.033 … +0.036, within
1 s.e.): neither "from below" nor "from above" shows; the corrected EP is 0.117 high. ARM's
memory at R = 10⁵: benchmarks/arm_gpc_scale.py (peak 16.4 GB on the GPU).

Writes paper_repro/out/arm_gpc.{json,png} (--quick) or arm_gpc_full.{json,png} (--full).
"""
import json
import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)  # cond(K + I) ≈ 10⁷: the GPC needs float64

import jax.numpy as jnp  # noqa: E402
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

import jaxz  # noqa: E402
import jaxz.approx  # noqa: E402
from jaxz.models import gpc  # noqa: E402
from _cli import load_report, machine, parse_mode  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
LOG_AMPLITUDE = 5.1
LOG_LENGTHSCALE = 4.85 - np.log(2.0)
MAX_GENERATE = 50
GAMMA_THRESHOLD = 0.7
RESAMPLE_ESS = 0.9
MAX_BUFFER_BYTES = 6e9
CORRECTION_ORDER = 32  # Hermite orders summed in the corrected EP (jaxz.approx.gpc_ep)
HMC_STEP, HMC_LEAPFROG = 0.3, 20
RMHMC_STEP, RMHMC_LEAPFROG, RMHMC_ITERATIONS, RMHMC_TOLERANCE = 3e-4, 10, 30, 1e-6


def build_model(num_points):
    """The figure's problem: ``num_points`` digits 3-vs-5 (seed-0 random order) at the hard point."""
    data = jaxz.data.digits_3_vs_5()
    pick = np.random.RandomState(0).permutation(data.labels.shape[0])[:num_points]
    inputs, labels = data.inputs[pick], data.labels[pick].astype(np.float64)
    return gpc.probit(inputs, labels, amplitude=np.exp(LOG_AMPLITUDE), lengthscale=np.exp(LOG_LENGTHSCALE))


def timed_runs(one_run, key, num_runs, chunk, label):
    """num_runs runs of ``one_run(key) -> (Estimate, extra)``, vmapped in chunks of
    ``chunk`` (1: plain jitted single runs); compiled wall time per run, with a progress
    bar over the chunks."""
    run = jax.jit(jax.vmap(one_run))
    keys = jax.random.split(key, num_runs)
    starts = list(range(0, num_runs, chunk))
    jax.block_until_ready(run.lower(keys[:chunk]).compile())
    parts, seconds = [], 0.0
    for first in tqdm(starts, desc=label, leave=False):
        batch = keys[first:first + chunk]
        if batch.shape[0] < chunk:  # pad the last chunk to the compiled size
            batch = jnp.concatenate([batch, keys[:chunk - batch.shape[0]]])
        start = time.perf_counter()
        parts.append(jax.block_until_ready(run(batch)))
        seconds += time.perf_counter() - start
    results = jax.tree.map(lambda *xs: jnp.concatenate(xs)[:num_runs], *parts)
    return results, seconds / (len(starts) * chunk)


def summary(estimates, seconds, extra=None):
    log_z = np.asarray(estimates.log_z, np.float64)
    entry = {"log_mean_z": float(jaxz.weights.log_mean_exp(jnp.asarray(log_z))),
             "log_mean_z_stderr": float(jaxz.weights.stderr_log_mean_exp(jnp.asarray(log_z))),
             "sd_log_z": float(log_z.std(ddof=1)) if log_z.size > 1 else float("nan"),
             "mean_log_z": float(log_z.mean()), "num_runs": int(log_z.size), "seconds_per_run": seconds,
             "cost_mean": float(np.mean(estimates.cost)), "status_max": int(np.max(estimates.status)),
             "log_z": log_z.tolist(), "backend": jax.default_backend()}
    if extra is not None:
        entry.update(extra)
    return entry


def add_arguments(parser):
    parser.add_argument("--runs", type=int, default=None,
                        help="runs per setting (default: 16 for --quick, 80 for --full; the seed: 80)")
    parser.add_argument("--max-particles", type=int, default=None,
                        help="largest R for ARM/RM (default: 10^3 for --quick, 10^5 for --full)")
    parser.add_argument("--max-buffer-gb", type=float, default=MAX_BUFFER_BYTES / 1e9,
                        help="skip ARM settings whose particle buffer exceeds this many GB (default 6; 24 fits "
                             "R = 10^5 at N = 365)")
    parser.add_argument("--max-rmhmc-steps", type=int, default=None,
                        help="skip AIS-RMHMC settings with more rungs than this (each rung costs fixed-point "
                             "solves: about 0.5 s per rung for 4 runs at N = 365 on 2 CPU cores)")
    parser.add_argument("--chunk", type=int, default=None,
                        help="AIS runs vmapped together (default 8 on a CPU; all of a setting's runs on an "
                             "accelerator, where a batch of 80 chains costs about what one does)")
    parser.add_argument("--max-seconds", type=float, default=None,
                        help="start no new setting after this many seconds (those left are marked skipped)")
    parser.add_argument("--methods", nargs="*", default=None,
                        help="run only these methods (names as in the JSON, e.g. \"AIS RMHMC from q*\")")
    parser.add_argument("--resume", action="store_true",
                        help="with --only: skip the settings the mode's JSON already holds measured (same problem); "
                             "the run adds the rest")
    parser.add_argument("--top-up", action="store_true",
                        help="with --only: settings the mode's JSON holds with fewer than --runs runs get the "
                             "missing runs (fresh keys) pooled with the earlier ones; the others are skipped")
    parser.add_argument("--only", choices=("arm", "ais"), default=None,
                        help="run one group and merge it into the mode's existing JSON in out/ (same problem)")


def main():
    args = parse_mode(__doc__, add_arguments, replot=True)
    full = args.full
    if args.replot:
        plot(load_report(os.path.join(OUT, output_name(full) + ".json")))
        return
    num_points = 365 if full else 100
    runs = args.runs or (80 if full else 16)
    max_particles = args.max_particles or (100_000 if full else 1_000)
    particle_grid = [r for r in (100, 1_000, 10_000, 100_000) if r <= max_particles]
    hmc_grid = [1_000, 2_000, 5_000, 10_000] if full else [1_000, 2_000, 5_000]
    rmhmc_q_grid, rmhmc_prior_grid = ([25, 100, 500, 2_000], [500, 2_000]) if full else ([25, 100, 500], [500])
    rmhmc_runs = max(4, runs // 4)

    model = build_model(num_points)
    inputs = np.asarray(model.inputs)
    covariance = np.asarray(gpc.orthant_covariance(model))
    eigenvalues = np.linalg.eigvalsh(covariance)
    sq_distances = ((inputs[:, None, :] - inputs[None, :, :]) ** 2).sum(-1)[np.triu_indices(num_points, 1)]

    start = time.perf_counter()
    ep = jaxz.approx.gpc_ep(model)
    ep_seconds = time.perf_counter() - start
    start = time.perf_counter()
    corrected = jaxz.approx.gpc_ep(model, correction=True, correction_order=CORRECTION_ORDER)
    corrected_seconds = time.perf_counter() - start
    report = {
        "script": "arm_gpc", "mode": "full" if full else "quick", "machine": machine(),
        "command": " ".join(["paper_repro/arm_gpc.py"] + sys.argv[1:]),
        "problem": {"data": "sklearn digits 3 (+1) vs 5 (-1), pixels scaled to [-1, 1], random order (seed 0)",
                    "num_points": num_points, "log_amplitude": LOG_AMPLITUDE, "log_lengthscale": LOG_LENGTHSCALE,
                    "hard_point_rule": "seed's log l = 4.85 for 256 pixels; 64 pixels shrink |x - x'|^2 about 4x, "
                                       "so l is halved to keep |x - x'|^2 / l^2",
                    "condition_number_K_plus_I": float(eigenvalues[-1] / eigenvalues[0]),
                    "median_sq_distance_over_2l2": float(np.median(sq_distances) / (2 * np.exp(2 * LOG_LENGTHSCALE))),
                    "jitter": float(model.jitter)},
        "ep": {"log_z": float(ep.log_z), "iterations": int(ep.num_iterations), "converged": bool(ep.converged),
               "seconds": ep_seconds},
        "ep_corrected": {"log_z": float(corrected.log_z_corrected), "correction": float(corrected.correction),
                         "method": "Opper, Paquet & Winther (2013) second order: log Z_EP + sum_{m<n} E_q[eps_m eps_n]",
                         "correction_order": CORRECTION_ORDER,
                         "last_order_term": float(corrected.correction_terms[-1]),
                         "seconds": corrected_seconds},
        "settings": {"arm": {"gamma_threshold": GAMMA_THRESHOLD, "max_generate": MAX_GENERATE,
                             "resample_ess": RESAMPLE_ESS, "resampling": "residual", "gibbs_sweeps": 1,
                             "scan": "systematic"},
                     "ais_hmc_q": {"step_size": HMC_STEP, "leapfrog": HMC_LEAPFROG, "inverse_mass": "EP covariance",
                                   "betas": "geometric from 1e-4"},
                     "ais_rmhmc": {"step_size": RMHMC_STEP, "leapfrog": RMHMC_LEAPFROG,
                                   "integrator": "generalized leapfrog (Girolami & Calderhead 2011), unsolved "
                                                 f"steps rejected, {RMHMC_ITERATIONS} fixed-point iterations, "
                                                 f"tolerance {RMHMC_TOLERANCE}",
                                   "metric": "(K + jitter I)^-1 + Fisher"}},
        "methods": {},
    }
    path_json = os.path.join(OUT, output_name(full) + ".json")
    print(f"N = {num_points}, cond(K + I) = {report['problem']['condition_number_K_plus_I']:.3g}, "
          f"log Z_EP = {float(ep.log_z):.3f}, corrected {float(corrected.log_z_corrected):.3f}")

    started = time.perf_counter()

    def not_now(name, num):
        """Whether a setting is not run now: measured earlier (--resume), not among --methods, or
        past --max-seconds (then marked skipped)."""
        if (name, str(num)) in measured or (args.methods is not None and name not in args.methods):
            return True
        if args.max_seconds is not None and time.perf_counter() - started > args.max_seconds:
            report["methods"].setdefault(name, {})[str(num)] = {"skipped": f"--max-seconds {args.max_seconds:g}"}
            return True
        return False

    def checkpoint():
        """The JSON as it stands after each setting (merged with the mode's file under --only), so that a run
        cut short keeps what it measured; --resume then adds the rest."""
        snapshot = json.loads(json.dumps(report))
        if args.only is not None:
            merge_earlier(snapshot, path_json, args.only)
        keep_reference(snapshot, path_json)
        snapshot["reading"] = reading(snapshot)
        os.makedirs(OUT, exist_ok=True)
        with open(path_json, "w") as handle:
            json.dump(snapshot, handle, indent=1)
        return snapshot

    measured = set()  # --resume: settings the mode's JSON already holds
    earlier = read_earlier(path_json)
    if not (args.only is not None and earlier and same_problem(earlier.get("problem"), report["problem"])):
        earlier = None
    if args.resume and earlier:
        measured = {(name, size) for name, by_size in earlier["methods"].items()
                    for size, entry in by_size.items() if "skipped" not in entry}

    def runs_to_add(name, num, wanted, seed):
        """(runs to run now, runs held earlier, their key): --top-up runs only what the earlier
        entry lacks, on keys the earlier runs did not use."""
        held = (earlier or {}).get("methods", {}).get(name, {}).get(str(num), {})
        before = held.get("num_runs", 0) if args.top_up else 0
        key = jax.random.key(seed)
        return max(wanted - before, 0), before, (jax.random.fold_in(key, before) if before else key)

    def record(name, num, entry, before):
        """Store a setting's summary, pooled with the earlier entry's runs under --top-up."""
        if before:
            entry = pooled(earlier["methods"][name][str(num)], entry)
        report["methods"].setdefault(name, {})[str(num)] = entry

    if args.only in (None, "arm"):
        sequence = gpc.sequential_model(model, 1, random_scan=False)
        jobs = []
        for num in particle_grid:
            jobs.append(("ARM", num, dict(gamma_threshold=GAMMA_THRESHOLD, max_generate=MAX_GENERATE)))
            jobs.append(("RM", num, dict(max_generate=0)))
        for job_index, (name, num, options) in enumerate(jobs):
            if not_now(name, num):
                continue
            slots = (1 + options["max_generate"]) * num
            if slots * num_points * 8 > args.max_buffer_gb * 1e9:
                report["methods"].setdefault(name, {})[str(num)] = {
                    "skipped": f"particle buffer of {slots} slots exceeds {args.max_buffer_gb:g} GB"}
                continue
            estimator = jaxz.arm(sequence, num, resample_ess=RESAMPLE_ESS, **options)

            def run(key, estimator=estimator, num=num):
                result = jaxz.run(estimator, key)
                return result.estimate, jnp.mean(result.trace.num_particles) / num

            todo, before, key = runs_to_add(name, num, runs, 10 + job_index)
            if todo == 0:
                continue
            chunk = args.chunk or max(1, min(todo, 2_000 // num))  # vmapping runs of large R costs more than it saves
            (estimates, particles), seconds = timed_runs(run, key, todo, min(todo, chunk), f"{name} R={num}")
            record(name, num, summary(estimates, seconds, {"mean_particles_over_R": float(np.mean(particles))}), before)
            print(name, num, round(report["methods"][name][str(num)]["log_mean_z"], 3), flush=True)
            checkpoint()

    if args.only in (None, "ais"):
        path_q, path_prior = gpc.path_from_ep(model, ep), gpc.path_from_prior(model)
        metric = gpc.fisher_metric(model)

        def rmhmc(path):
            return jaxz.kernels.rmhmc(path, RMHMC_STEP, metric, RMHMC_LEAPFROG, max_iterations=RMHMC_ITERATIONS,
                                      tolerance=RMHMC_TOLERANCE)

        hmc = jaxz.kernels.hmc(path_q, HMC_STEP, HMC_LEAPFROG, inverse_mass_matrix=ep.covariance)
        ais_jobs = [("AIS HMC from q*", num, path_q, hmc, runs) for num in hmc_grid]
        ais_jobs += [("AIS RMHMC from q*", num, path_q, rmhmc(path_q), rmhmc_runs) for num in rmhmc_q_grid]
        ais_jobs += [("AIS RMHMC from p", num, path_prior, rmhmc(path_prior), rmhmc_runs) for num in rmhmc_prior_grid]
        for job_index, (name, num, path, kernel, num_runs) in enumerate(ais_jobs):
            if not_now(name, num):
                continue
            if "RMHMC" in name and args.max_rmhmc_steps is not None and num > args.max_rmhmc_steps:
                report["methods"].setdefault(name, {})[str(num)] = {
                    "skipped": f"B = {num} rungs exceeds --max-rmhmc-steps {args.max_rmhmc_steps}"}
                continue
            estimator = jaxz.ais(path, kernel, jaxz.schedules.geometric(num, 1e-4))

            def run(key, estimator=estimator, path=path):
                key_base, key_run = jax.random.split(key)
                result = jaxz.run(estimator, key_run, path.sample_base(key_base, 1))
                return result.estimate, jnp.mean(result.trace.acceptance_rate)

            todo, before, key = runs_to_add(name, num, num_runs, 100 + job_index)
            if todo == 0:
                continue
            chunk = args.chunk or (8 if jax.default_backend() == "cpu" else todo)
            (estimates, acceptance), seconds = timed_runs(run, key, todo, min(todo, chunk), f"{name} B={num}")
            record(name, num, summary(estimates, seconds, {"acceptance_rate": float(np.mean(acceptance))}), before)
            print(name, num, round(report["methods"][name][str(num)]["log_mean_z"], 3), flush=True)
            checkpoint()

    report = checkpoint()
    plot(report)
    print("EP", round(report["ep"]["log_z"], 3), "corrected EP", round(report["ep_corrected"]["log_z"], 3))
    for name, by_size in report["methods"].items():
        print(name, {size: (round(s["log_mean_z"], 3), round(s["sd_log_z"], 3), round(s["seconds_per_run"], 2))
                     for size, s in by_size.items() if "skipped" not in s})


def output_name(full: bool) -> str:
    """The files a mode writes in paper_repro/out (the quick and full figures side by side)."""
    return "arm_gpc_full" if full else "arm_gpc"


def pooled(earlier, now):
    """One setting's summary over the earlier runs and the ones just added (--top-up): the
    log Z statistics recomputed from both lists of runs, per-run means weighted by runs,
    the largest status, each part's runs, seconds and machine in "parts" (see fastest_part)."""
    before, added = earlier["num_runs"], now["num_runs"]
    log_z = np.asarray(earlier["log_z"] + now["log_z"], np.float64)
    entry = dict(now)
    entry.update(
        log_mean_z=float(jaxz.weights.log_mean_exp(jnp.asarray(log_z))),
        log_mean_z_stderr=float(jaxz.weights.stderr_log_mean_exp(jnp.asarray(log_z))),
        sd_log_z=float(log_z.std(ddof=1)), mean_log_z=float(log_z.mean()), num_runs=int(log_z.size),
        log_z=log_z.tolist(), status_max=max(earlier["status_max"], now["status_max"]))
    for key in ("cost_mean", "acceptance_rate", "mean_particles_over_R"):
        if key in earlier and key in now:
            entry[key] = (earlier[key] * before + now[key] * added) / (before + added)
    entry["parts"] = earlier.get("parts", [{"num_runs": before, "seconds_per_run": earlier["seconds_per_run"],
                                            "backend": earlier.get("backend")}]) + [
        {"num_runs": added, "seconds_per_run": now["seconds_per_run"], "backend": now["backend"]}]
    return fastest_part(entry)


def fastest_part(entry):
    """A pooled setting's seconds per run: its fastest part's on the first part's machine (parts
    vmapped in other chunk sizes cost differently per run: on one H100, ARM at R = 10⁴ took
    10.7 s per run alone and 15.0 s in chunks of 8; at R = 10³, 3.0 s in pairs and 1.9 s in
    chunks of 24), so that the time axis shows the cost a user would get."""
    backend = entry["parts"][0]["backend"]
    entry["backend"] = backend
    entry["seconds_per_run"] = min(part["seconds_per_run"] for part in entry["parts"] if part["backend"] == backend)
    return entry


def same_problem(earlier, now) -> bool:
    """The same figure problem: equal entries, floats to 1e-6 relative (the condition number is
    computed anew on each machine, and its last digits follow that machine's LAPACK)."""
    if earlier is None or earlier.keys() != now.keys():
        return False
    return all(np.isclose(earlier[key], now[key], rtol=1e-6, atol=0.0) if isinstance(now[key], float)
               else earlier[key] == now[key] for key in now)


def read_earlier(path_json):
    """The mode's JSON as it is on disk now, or None."""
    if not os.path.exists(path_json):
        return None
    with open(path_json) as handle:
        return json.load(handle)


def keep_reference(report, path_json):
    """Carry the EP-free reference (paper_repro/gpc_reference.py) over from an earlier
    out/arm_gpc.json of the same problem."""
    earlier = read_earlier(path_json)
    if earlier and same_problem(earlier.get("problem"), report["problem"]) and "reference" in earlier:
        report["reference"] = earlier["reference"]


def merge_earlier(report, path_json, only):
    """--only: keep the other group's entries from the mode's JSON (read now, at the
    end, so two groups run one after the other both land), if it holds the same problem."""
    earlier = read_earlier(path_json)
    if earlier is None:
        return
    if not same_problem(earlier.get("problem"), report["problem"]):
        raise SystemExit(f"--only: {path_json} holds another problem; run without --only first")
    for name, entry in earlier["methods"].items():
        for setting in entry.values():  # each setting keeps its machine's backend when the group's moves on
            if "skipped" not in setting and "backend" not in setting:
                setting["backend"] = backend_of(earlier, name, setting)
        if (name in ("ARM", "RM")) != (only == "arm"):
            report["methods"][name] = entry
        else:  # this group: a setting measured earlier and not run now (skipped, or --resume) stays
            for size, setting in entry.items():
                now = report["methods"].setdefault(name, {}).get(size)
                if "skipped" not in setting and (now is None or "skipped" in now):
                    report["methods"][name][size] = setting
    # the runs that made the file, each once (the latest run of a command last): a checkpoint of
    # this run wrote it already, and a rerun of both groups replaces what the earlier pair measured
    runs = [part.strip() for part in (earlier.get("command", "") + " ; " + report["command"]).split(" ; ")]
    report["command"] = " ; ".join(part for i, part in enumerate(runs) if part and part not in runs[i + 1:])
    # the groups' seconds come from the machines that ran them (an H100 and a 2-core CPU, say)
    other = "ais" if only == "arm" else "arm"
    report["machines"] = {other: earlier.get("machines", {}).get(other, earlier.get("machine")),
                          only: report["machine"]}


def backend_of(report, name, setting):
    """The backend that ran one setting: its own record, else its group's machine (older JSON)."""
    if "backend" in setting:
        return setting["backend"]
    machines = report.get("machines", {"arm": report["machine"], "ais": report["machine"]})
    return (machines.get("arm" if name in ("ARM", "RM") else "ais") or {}).get("backend", "?")


def time_axis_label(report):
    """Panel (a)'s x label, naming each machine's methods where the settings ran on different ones."""
    label = "wall-clock seconds per run (compiled)"
    by_backend = {}
    for name, by_size in report["methods"].items():
        for setting in by_size.values():
            if "skipped" in setting:
                continue
            names = by_backend.setdefault(backend_of(report, name, setting), [])
            if name not in names:
                names.append(name)
    if len(by_backend) > 1:
        label += "\n" + "; ".join(f"{backend}: {', '.join(names)}" for backend, names in by_backend.items())
        label += " (not comparable across machines)"
    return label


def reference_of(report):
    """(value, s.e., label) of the reference the reading and panel (b) measure against: the
    EP-free reference of paper_repro/gpc_reference.py where it is in the JSON, else the
    corrected EP value (s.e. 0)."""
    if "reference" in report:
        return report["reference"]["log_z"], report["reference"]["stderr"], "reference (Genz)"
    return report["ep_corrected"]["log_z"], 0.0, "corrected EP"


def reading(report):
    """Where each setting's log mean Ẑ lies against the reference (``reference_of``), in
    units of the combined s.e. (its own delta-method s.e. over the runs and the
    reference's; above > 0): the seed's 'AIS from above, ARM/RM from below' checked on
    our runs."""
    reference, reference_stderr, label = reference_of(report)

    def in_stderr(s):
        combined = np.hypot(s.get("log_mean_z_stderr", 0.0), reference_stderr)
        return (s["log_mean_z"] - reference) / combined if combined > 0 else float("nan")

    offsets = {name: {size: {"offset": s["log_mean_z"] - reference, "offset_in_stderr": in_stderr(s)}
                      for size, s in by_size.items() if "skipped" not in s}
               for name, by_size in report["methods"].items()}
    return {"against": label, "reference_log_z": reference, "reference_stderr": reference_stderr,
            "offsets": offsets}


def unit_of(name):
    return "R" if name in ("ARM", "RM") else "B"


STYLE = {"ARM": ("tab:blue", "o"), "RM": ("tab:orange", "x"), "AIS HMC from q*": ("tab:green", "s"),
         "AIS RMHMC from q*": ("tab:purple", "D"), "AIS RMHMC from p": ("tab:red", "^")}


ZOOM_MAX_STDERR = 0.1  # the zoom's range fits the settings with s.e. below this (and their error bars)


def _points(report):
    """Per method: (size, seconds per run, log mean Ẑ, its s.e., sd of log Ẑ), settings that ran."""
    return {name: [(size, s["seconds_per_run"], s["log_mean_z"], s.get("log_mean_z_stderr", 0.0), s["sd_log_z"])
                   for size, s in sorted(by_size.items(), key=lambda item: int(item[0])) if "skipped" not in s]
            for name, by_size in report["methods"].items()}


def plot(report):
    """Three panels: (a) log mean Ẑ against time per run (all settings within 1.5 nats of the
    reference; the others named), (b) the same values minus the reference (``reference_of``:
    the Genz value, its ± 1 s.e. band in gold, the corrected EP value as a black line),
    zoomed to the few-hundredths-of-a-nat differences that decide "above or below", one slot
    per setting (off-axis points named), (c) the sd of log Ẑ. Error bars: ± 1 delta-method
    s.e. of log mean Ẑ over the runs."""
    points = {name: p for name, p in _points(report).items() if p}
    reference, reference_stderr, reference_label = reference_of(report)
    ep, corrected = report["ep"]["log_z"], report["ep_corrected"]["log_z"]
    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(19, 5.6), gridspec_kw={"width_ratios": [4, 4, 3]})

    # (a) overview against time
    far = []
    for name, rows in points.items():
        sizes, seconds, log_mean, stderr, _ = zip(*rows)
        color, marker = STYLE[name]
        near = [i for i in range(len(rows)) if abs(log_mean[i] - reference) <= 1.5]
        far += [f"{name} {unit_of(name)}={sizes[i]}: {log_mean[i]:.1f}" for i in range(len(rows)) if i not in near]
        if not near:
            continue
        left.errorbar([seconds[i] for i in near], [log_mean[i] for i in near], yerr=[stderr[i] for i in near],
                      marker=marker, color=color, capsize=2)
    left.axhline(ep, color="k", ls=":", lw=1)
    left.axhline(corrected, color="k", ls="-", lw=1)
    if reference_stderr > 0:
        left.axhspan(reference - reference_stderr, reference + reference_stderr, color="gold", alpha=0.5, lw=0)
    left.set_xscale("log")
    left.set_xlabel(time_axis_label(report), fontsize=8)
    left.set_ylabel("log mean Ẑ over runs (± 1 s.e.)")
    left.set_title("(a) against time; R or B grows along each line (values in b)", fontsize=10)
    if far:
        left.text(0.02, 0.02, f"{len(far)} off-axis: " + "; ".join(far), transform=left.transAxes, fontsize=7)

    # (b) zoom on log mean Ẑ − corrected EP, one slot per setting
    slots, labels, position = [], [], 0
    for name, rows in points.items():
        for size, seconds, log_mean, stderr, _ in sorted(rows, key=lambda row: int(row[0])):
            slots.append((position, name, size, log_mean - reference, stderr))
            labels.append(f"{unit_of(name)}={size}, {seconds:.2g} s")
            position += 1
        position += 0.6
    for label, entry in report.get("reference", {}).get("checks", {}).items():
        if label.endswith("(new)"):  # gpc_reference.py's own long runs, beside the figure's settings
            name = next(name for name in STYLE if label.startswith(name + " "))
            slots.append((position, name, label.split()[-2], entry["offset"], entry["stderr"]))
            labels.append(f"ref. check {unit_of(name)}={label.split()[-2]}, {entry['seconds_per_run']:.2g} s")
            position += 1
    tight = [abs(offset) + stderr for _, _, _, offset, stderr in slots if stderr < ZOOM_MAX_STDERR]
    half = 1.15 * max(tight + [abs(corrected - reference) + 0.005, 0.05])
    off_axis = []
    for x, name, size, offset, stderr in slots:
        color, marker = STYLE[name]
        if abs(offset) <= half:
            middle.errorbar([x], [offset], yerr=[stderr], marker=marker, color=color, capsize=3)
        else:  # drawn at the edge, pointing the way it lies
            middle.plot([x], [np.sign(offset) * 0.97 * half], marker="^" if offset > 0 else "v", color=color,
                        markerfacecolor="none", clip_on=False)
            off_axis.append(f"{name} {unit_of(name)}={size}: {offset:+.2f}")
    if reference_stderr > 0:  # the reference ± 1 s.e.; the corrected EP value drawn against it
        middle.axhspan(-reference_stderr, reference_stderr, color="gold", alpha=0.5, lw=0)
        middle.axhline(corrected - reference, color="k", lw=1)
        middle.axhline(0.0, color="goldenrod", lw=1.2)
    else:
        middle.axhline(0.0, color="k", lw=1)
    middle.set_ylim(-half, half)
    middle.set_xticks([slot[0] for slot in slots], labels, rotation=60, ha="right", rotation_mode="anchor",
                      fontsize=7)
    for tick, slot in zip(middle.get_xticklabels(), slots):
        tick.set_color(STYLE[slot[1]][0])
    middle.set_ylabel(f"log mean Ẑ − {reference_label} (± 1 s.e.)")
    middle.grid(axis="y", alpha=0.3)
    clipped = sum(abs(offset) <= half < abs(offset) + stderr for _, _, _, offset, stderr in slots)
    note = (f"EP (uncorrected): {ep - reference:+.2f}; corrected EP: {corrected - reference:+.3f}; "
            f"{clipped} error bars run off-axis")
    if off_axis:
        note = f"{len(off_axis)} points off-axis (open triangles at the edge): " + "; ".join(off_axis) + "\n" + note
    middle.set_xlabel(note, fontsize=7)
    middle.set_title(f"(b) zoom: above (> 0) or below the {reference_label}"
                     + (f" {reference:.3f} ± {reference_stderr:.3f} (band)" if reference_stderr > 0 else ""),
                     fontsize=10)

    # (c) spread
    for name, rows in points.items():
        _, seconds, _, _, sd = zip(*rows)
        color, marker = STYLE[name]
        right.plot(seconds, sd, marker=marker, color=color)
    right.set_xscale("log")
    right.set_yscale("log")
    first, *machines_line = time_axis_label(report).split("\n")
    right.set_xlabel(first + ("; machines as in (a)" if machines_line else ""), fontsize=8)
    right.set_ylabel("sd of log Ẑ over runs")
    right.set_title("(c) spread of log Ẑ", fontsize=10)

    handles = [plt.Line2D([], [], color=STYLE[name][0], marker=STYLE[name][1]) for name in points]
    handles += [plt.Line2D([], [], color="k", ls=":", lw=1), plt.Line2D([], [], color="k", ls="-", lw=1)]
    names = list(points) + ["EP", "EP, 2nd-order corrected"]
    if reference_stderr > 0:
        handles.append(plt.Rectangle((0, 0), 1, 1, color="gold", alpha=0.5))
        names.append("reference ± 1 s.e. (Genz, gpc_reference.py)")
    fig.legend(handles, names, loc="lower center", ncol=len(handles), fontsize=9)
    problem = report["problem"]
    fig.suptitle(f"GPC, digits 3-vs-5 (N = {problem['num_points']}), log σ = {problem['log_amplitude']}, "
                 f"log ℓ = {problem['log_lengthscale']:.3f} ({report['mode']}; analog of seed Fig. 2)")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(os.path.join(OUT, output_name(report["mode"] == "full") + ".png"), dpi=120)


if __name__ == "__main__":
    main()
