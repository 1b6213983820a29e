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
- AIS RMHMC from p(f) (eq. 12) and from q* (eq. 11): blackjax's RMHMC (implicit midpoint)
  with G(f) = (K + δI)⁻¹ + Λ(f), 10 leapfrog steps of ε = 0.02: at the seed's ε = 0.1 the
  implicit-midpoint fixed point does not converge here (blackjax caps it at 100 iterations
  and discards the failure). Fewer and shorter β grids than the seed (its B = 500–2000):
  a transition costs ~60 Cholesky factorizations with their gradients.
- f-space uses the exact split K + δI, Φ(f/√(1 − δ)) with δ = 10⁻⁶σ² (same Z; see
  ``jaxz.models.gpc``).
- EP: R&W Algorithm 3.5 (dotted line). Corrected EP (solid line, the seed's [16]):
  log Z_EP + R₂, Opper, Paquet & Winther's (2013) second-order correction
  R₂ = Σ_{m<n} E_q[ε_m ε_n], its Hermite series summed to order 32
  (``jaxz.approx.gpc_ep(model, correction=True)``; the last order's part is in the JSON).
Each AIS run is one chain (one Ẑ per run, as the seed's 80 Ẑ per setting); ARM/RM runs
have R particles. x-axis: compiled wall time per run (vmapped batches / runs).

--quick (default): N = 100; ARM/RM R = 10², 10³ (16 and 8 runs); AIS-HMC B = 10³, 2·10³,
5·10³ (16 runs); AIS-RMHMC from q B = 25, 50 and from the prior B = 50 (4 runs each).
--full: N = 365; R = 10², 10³, 10⁴, 10⁵, 80 runs (ARM at 10⁵ needs (1 + i_max)·R·N·8 bytes
= 15 GB for its particle buffer and is skipped where that exceeds MAX_BUFFER_BYTES);
AIS-HMC B = 10³, 2·10³, 5·10³, 10⁴; AIS-RMHMC from q B = 25, 50, 100, from the prior
B = 100, 200 (20 runs). Days on a CPU.

Writes paper_repro/out/arm_gpc.{json,png}.
"""
import json
import os
import platform
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
from _cli import parse_mode  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
LOG_AMPLITUDE = 5.1
LOG_LENGTHSCALE = 4.85 - np.log(2.0)
MAX_GENERATE = 50
GAMMA_THRESHOLD = 0.7
RESAMPLE_ESS = 0.9
MAX_BUFFER_BYTES = 6e9
CORRECTION_ORDER = 32  # Hermite orders summed in the corrected EP (jaxz.approx.gpc_ep)


def machine():
    return {"platform": platform.platform(), "cpu_count": os.cpu_count(), "jax": jax.__version__,
            "backend": jax.default_backend(), "load_average": list(os.getloadavg())}


def timed_runs(one_run, key, num_runs, chunk):
    """num_runs vmapped runs of ``one_run(key) -> (Estimate, extra)`` in chunks; compiled
    wall time per run."""
    batch = jax.jit(jax.vmap(one_run))
    keys = jax.random.split(key, num_runs)
    jax.block_until_ready(batch.lower(keys[:chunk]).compile())
    start = time.perf_counter()
    parts = [batch(keys[i:i + chunk]) for i in range(0, num_runs, chunk)]
    results = jax.tree.map(lambda *xs: jnp.concatenate(xs)[:num_runs], *parts)
    jax.block_until_ready(results)
    return results, (time.perf_counter() - start) / num_runs


def summary(estimates, seconds, extra=None):
    log_z = np.asarray(estimates.log_z, np.float64)
    entry = {"log_mean_z": float(jaxz.weights.log_mean_exp(jnp.asarray(log_z))),
             "sd_log_z": float(log_z.std(ddof=1)) if log_z.size > 1 else float("nan"),
             "mean_log_z": float(log_z.mean()), "num_runs": int(log_z.size), "seconds_per_run": seconds,
             "cost_mean": float(np.mean(estimates.cost)), "status_max": int(np.max(estimates.status)),
             "log_z": log_z.tolist()}
    if extra is not None:
        entry.update(extra)
    return entry


def main():
    args = parse_mode(__doc__)
    full = args.full
    num_points = 365 if full else 100
    particle_grid = [100, 1_000, 10_000, 100_000] if full else [100, 1_000]
    arm_runs = {100: 80, 1_000: 80, 10_000: 80, 100_000: 80} if full else {100: 16, 1_000: 8}
    hmc_grid, hmc_runs = ([1_000, 2_000, 5_000, 10_000], 80) if full else ([1_000, 2_000, 5_000], 16)
    rmhmc_q_grid, rmhmc_prior_grid, rmhmc_runs = ([25, 50, 100], [100, 200], 20) if full else ([25, 50], [50], 4)

    data = jaxz.data.digits_3_vs_5()
    pick = np.random.RandomState(0).permutation(data.labels.shape[0])[:num_points]
    inputs, labels = data.inputs[pick], data.labels[pick].astype(np.float64)
    model = gpc.probit(inputs, labels, amplitude=np.exp(LOG_AMPLITUDE), lengthscale=np.exp(LOG_LENGTHSCALE))
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
                     "ais_hmc_q": {"step_size": 0.3, "leapfrog": 20, "inverse_mass": "EP covariance",
                                   "betas": "geometric from 1e-4"},
                     "ais_rmhmc": {"step_size": 0.02, "leapfrog": 10, "metric": "(K + jitter I)^-1 + Fisher"}},
        "methods": {},
    }
    print(f"N = {num_points}, cond(K + I) = {report['problem']['condition_number_K_plus_I']:.3g}, "
          f"log Z_EP = {float(ep.log_z):.3f}, corrected {float(corrected.log_z_corrected):.3f}")

    sequence = gpc.sequential_model(model, 1, random_scan=False)
    jobs = []
    for num in particle_grid:
        jobs.append(("ARM", num, dict(gamma_threshold=GAMMA_THRESHOLD, max_generate=MAX_GENERATE)))
        jobs.append(("RM", num, dict(max_generate=0)))
    for job_index, (name, num, options) in enumerate(tqdm(jobs, desc="ARM / RM")):
        slots = (1 + options["max_generate"]) * num
        if slots * num_points * 8 > MAX_BUFFER_BYTES:
            report["methods"].setdefault(name, {})[str(num)] = {"skipped": f"particle buffer of {slots} slots "
                                                                           f"exceeds {MAX_BUFFER_BYTES:.0e} bytes"}
            continue
        estimator = jaxz.arm(sequence, num, resample_ess=RESAMPLE_ESS, **options)

        def run(key, estimator=estimator, num=num):
            result = jaxz.run(estimator, key)
            return result.estimate, jnp.mean(result.trace.num_particles) / num

        chunk = max(1, min(arm_runs[num], int(MAX_BUFFER_BYTES // (slots * num_points * 8 * 4))))
        (estimates, particles), seconds = timed_runs(run, jax.random.key(10 + job_index), arm_runs[num], chunk)
        report["methods"].setdefault(name, {})[str(num)] = summary(
            estimates, seconds, {"mean_particles_over_R": float(np.mean(particles))}
        )

    path_q, path_prior = gpc.path_from_ep(model, ep), gpc.path_from_prior(model)
    metric = gpc.fisher_metric(model)
    ais_jobs = [("AIS HMC from q*", num, path_q, jaxz.kernels.hmc(path_q, 0.3, 20, inverse_mass_matrix=ep.covariance),
                 hmc_runs) for num in hmc_grid]
    ais_jobs += [("AIS RMHMC from q*", num, path_q, jaxz.kernels.rmhmc(path_q, 0.02, metric, 10), rmhmc_runs)
                 for num in rmhmc_q_grid]
    ais_jobs += [("AIS RMHMC from p", num, path_prior, jaxz.kernels.rmhmc(path_prior, 0.02, metric, 10), rmhmc_runs)
                 for num in rmhmc_prior_grid]
    for job_index, (name, num, path, kernel, runs) in enumerate(tqdm(ais_jobs, desc="AIS")):
        estimator = jaxz.ais(path, kernel, jaxz.schedules.geometric(num, 1e-4))

        def run(key, estimator=estimator, path=path):
            key_base, key_run = jax.random.split(key)
            result = jaxz.run(estimator, key_run, path.sample_base(key_base, 1))
            return result.estimate, jnp.mean(result.trace.acceptance_rate)

        (estimates, acceptance), seconds = timed_runs(run, jax.random.key(100 + job_index), runs, runs)
        report["methods"].setdefault(name, {})[str(num)] = summary(
            estimates, seconds, {"acceptance_rate": float(np.mean(acceptance))}
        )

    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "arm_gpc.json"), "w") as handle:
        json.dump(report, handle, indent=1)
    plot(report)
    print("EP", round(report["ep"]["log_z"], 3), "corrected EP", round(report["ep_corrected"]["log_z"], 3))
    for name, by_size in report["methods"].items():
        print(name, {size: (round(s["log_mean_z"], 3), round(s["sd_log_z"], 3), round(s["seconds_per_run"], 2))
                     for size, s in by_size.items() if "skipped" not in s})


def unit_of(name):
    return "R" if name in ("ARM", "RM") else "B"


STYLE = {"ARM": ("tab:blue", "o"), "RM": ("tab:orange", "x"), "AIS HMC from q*": ("tab:green", "s"),
         "AIS RMHMC from q*": ("tab:purple", "D"), "AIS RMHMC from p": ("tab:red", "^")}


def plot(report):
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, by_size in report["methods"].items():
        points = [(s["seconds_per_run"], s["log_mean_z"], s["sd_log_z"], size) for size, s in by_size.items()
                  if "skipped" not in s]
        if not points:
            continue
        seconds, log_mean, sd, sizes = zip(*points)
        color, marker = STYLE[name]
        unit = "R" if name in ("ARM", "RM") else "B"
        left.plot(seconds, log_mean, marker=marker, color=color, label=name)
        right.plot(seconds, sd, marker=marker, color=color, label=name)
        for x, y, size in zip(seconds, log_mean, sizes):
            left.annotate(f"{unit}={size}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ep = report["ep"]["log_z"]
    left.axhline(ep, color="k", ls=":", lw=1, label="EP")
    if report.get("ep_corrected"):
        left.axhline(report["ep_corrected"]["log_z"], color="k", ls="-", lw=1, label="EP, 2nd-order corrected")
    # keep the scale readable: points far from EP (an under-budgeted AIS) are named, not drawn to scale
    left.set_ylim(ep - 3.0, ep + 3.0)
    far = [f"{name} {unit_of(name)}={size}: {s['log_mean_z']:.1f}" for name, by_size in report["methods"].items()
           for size, s in by_size.items() if "skipped" not in s and abs(s["log_mean_z"] - ep) > 3.0]
    if far:
        left.text(0.02, 0.02, "off scale: " + "; ".join(far), transform=left.transAxes, fontsize=7)
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_xlabel("wall-clock seconds per run (compiled)")
    right.set_yscale("log")
    left.set_ylabel("log mean Ẑ over runs")
    right.set_ylabel("sd of log Ẑ over runs")
    left.legend(fontsize=7)
    problem = report["problem"]
    fig.suptitle(f"GPC, digits 3-vs-5 (N = {problem['num_points']}), log σ = {problem['log_amplitude']}, "
                 f"log ℓ = {problem['log_lengthscale']:.3f} ({report['mode']}; analog of seed Fig. 2)")
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "arm_gpc.png"), dpi=120)


if __name__ == "__main__":
    main()
