"""MBAR: is the overlap threshold (jaxz.mbar's ``min_overlap_ess`` = 10) where the
standard error stops being trustworthy?

One-dimensional Gaussian states with exact free energies f_k = −log(σ_k / σ_0); one
state of interest is pulled away from the others step by step, 400 independent runs
(vmapped) per distance, float64. For each distance: the median ``overlap_ess`` of that
state, the share of runs the default threshold leaves unflagged, and the calibration
ratio rms(reported s.e.) / rms(f̂ − f) over the unflagged runs and over all runs (the
s.e. taken with the flag switched off, ``min_overlap_ess=0``). A ratio near 1 is a
trustworthy error bar, well below 1 an overconfident one.

Scenarios: ``unsampled_narrow`` N(d, 0.4²), no draws, beside sampled N(0, 1) and
N(1, 1) (100 draws each); ``sampled_pair`` N(0, 1) and N(d, 1), 100 draws each;
``sampled_narrow`` N(d, 0.3²) with 50 draws beside the same two; and the known blind
spot of importance sampling, unsampled states with mass where no sample goes:
``unsampled_shifted`` N(d, 1) and ``unsampled_wide`` N(d, 2²), no draws.

    python benchmarks/mbar_overlap_threshold.py   # writes benchmarks/results/mbar_overlap_threshold.json
"""
import json
import os

import jax

jax.config.update("jax_enable_x64", True)  # a script, not the library

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from tqdm import tqdm  # noqa: E402

import jaxz  # noqa: E402
from _results import machine  # noqa: E402

NUM_RUNS, THRESHOLD = 400, 10.0
SCENARIOS = {  # name: (distances, means(d), scales, n_k, index of the state of interest)
    "unsampled_narrow": ([2.0, 2.5, 2.75, 3.0, 3.25, 3.5, 4.0], lambda d: [0.0, 1.0, d], [1.0, 1.0, 0.4],
                         [100, 100, 0], 2),
    "sampled_pair": ([2.0, 3.0, 4.0, 4.5, 5.0, 6.0], lambda d: [0.0, d], [1.0, 1.0], [100, 100], 1),
    "sampled_narrow": ([2.5, 3.0, 3.5, 4.0, 4.5], lambda d: [0.0, 1.0, d], [1.0, 1.0, 0.3], [100, 100, 50], 2),
    "unsampled_shifted": ([2.0, 2.5, 3.0, 3.5], lambda d: [0.0, 1.0, d], [1.0, 1.0, 1.0], [100, 100, 0], 2),
    "unsampled_wide": ([0.0, 2.0], lambda d: [0.0, 0.5, d], [1.0, 1.0, 2.0], [100, 100, 0], 2),
}


def scenario_runs(scales, n_k, target):
    """A jitted function (key, means) -> per-run (error, s.e., overlap_ess, unflagged)
    of the state ``target``: compiled once per scenario, reused for every distance."""
    scales, n_k = np.asarray(scales, dtype=float), np.asarray(n_k, dtype=float)

    def one(key, means):
        exact = -(jnp.log(scales) - jnp.log(scales[0]))[target]
        keys = jax.random.split(key, len(n_k))
        x = jnp.concatenate([means[k] + scales[k] * jax.random.normal(keys[k], (int(n_k[k]),))
                             for k in range(len(n_k)) if n_k[k] > 0])
        u_kn = 0.5 * ((x[None, :] - means[:, None]) / scales[:, None]) ** 2
        result = jaxz.mbar(u_kn, n_k, min_overlap_ess=0.0)
        f_k, stderr, info = result.free_energies, result.stderr, result.info
        unflagged = (info.overlap_ess[target] >= THRESHOLD) & (info.overlap_ess[0] >= THRESHOLD) & info.converged
        return f_k[target] - exact, stderr[target], info.overlap_ess[target], unflagged

    batched = jax.jit(jax.vmap(one, in_axes=(0, None)))
    return lambda key, means: [np.asarray(a) for a in batched(jax.random.split(key, NUM_RUNS), jnp.asarray(means))]


def ratio(errors, stderr):
    return float(np.sqrt(np.mean(stderr**2) / np.mean(errors**2))) if errors.size >= 20 else None


def main():
    key = jax.random.key(0)
    report = {"num_runs": NUM_RUNS, "threshold": THRESHOLD, "scenarios": {}, "machine": machine()}
    cases = [(name, d) for name, spec in SCENARIOS.items() for d in spec[0]]
    solvers = {name: scenario_runs(*spec[2:]) for name, spec in SCENARIOS.items()}
    for name, distance in tqdm(cases, desc="scenarios"):
        key, subkey = jax.random.split(key)
        errors, stderr, overlap, unflagged = solvers[name](subkey, SCENARIOS[name][1](distance))
        report["scenarios"].setdefault(name, []).append({
            "distance": distance,
            "median_overlap_ess": float(np.median(overlap)),
            "unflagged_share": float(unflagged.mean()),
            "ratio_unflagged": ratio(errors[unflagged], stderr[unflagged]),
            "ratio_all": ratio(errors, stderr),
            "mean_error": float(errors.mean()),
        })
    report["machine"]["load_average_at_end"] = list(os.getloadavg())
    os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
    with open(os.path.join(os.path.dirname(__file__), "results", "mbar_overlap_threshold.json"), "w") as handle:
        json.dump(report, handle, indent=1)
    for name, rows in report["scenarios"].items():
        print(name)
        for row in rows:
            print("  d={distance:<5} overlap_ess {median_overlap_ess:8.2f}  unflagged {unflagged_share:.2f}  "
                  "ratio unflagged {ratio_unflagged}  all {ratio_all:.2f}".format(**row))


if __name__ == "__main__":
    main()
