"""Coverage of ``jaxz.evidence``'s error bars with its defaults, over many data sets whose
evidence is exact.

    python benchmarks/evidence_coverage.py [--quick | --full] [--only NAME ...]

Each model's data sets are simulated from its prior predictive and passed as one batch
(``batched=True``: one compiled program per model); every data set gets the default call
(method "auto", ``target_stderr=0.05``, 8 runs and more where the s.e. asks). Per model
the JSON and table report, over the pooled estimates and over the single runs: the share of
unflagged ones within 1.96 reported s.e. of the exact log Z (the promise: about 0.95), the
share beyond 3 and beyond 4, the share flagged, the median s.e. and the evaluations per data
set. Models (exact evidence in closed form, both kernels of ``method="auto"``):

- ``beta_bernoulli``: p ~ Beta(2, 2), 20 Bernoulli draws (d = 1, constrained: logit);
- ``regression2``: a, b ~ N(0, 1), y = a + b x + N(0, 0.5²), 12 points (d = 2: random walk);
- ``regression8``: w ~ N(0, I_8), y = X w + N(0, 1), 20 points (d = 8: HMC);
- ``mixture_prior``: θ ~ ½ N(−2, 0.3²) + ½ N(2, 0.3²), y_i ~ N(θ, 3²), 3 points: a posterior
  with two modes of comparable mass on most data sets (d = 1).

``--quick``: 40 data sets per model (a few minutes on 2 cores); ``--full``: 200.
Writes benchmarks/results/evidence_coverage.{json,md}.
"""
import argparse
import math
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from scipy import special, stats

import jaxz

try:
    from _results import machine, write
except ImportError:  # run from the repository root
    from benchmarks._results import machine, write

jax.config.update("jax_enable_x64", True)


def beta_bernoulli(rng, num_sets):
    n = 20
    p = rng.beta(2.0, 2.0, num_sets)
    y = (rng.random((num_sets, n)) < p[:, None]).astype(np.float64)

    def model(y):
        p = numpyro.sample("p", dist.Beta(2.0, 2.0))
        numpyro.sample("y", dist.Bernoulli(p).expand([y.shape[0]]).to_event(1), obs=y)

    k = y.sum(axis=1)
    exact = special.betaln(2.0 + k, 2.0 + n - k) - special.betaln(2.0, 2.0)
    return model, (y,), exact


def _gaussian_evidence(y, mean, covariance):
    return np.array([stats.multivariate_normal(m, c).logpdf(v) for v, m, c in zip(y, mean, covariance)])


def regression2(rng, num_sets):
    n, noise = 12, 0.5
    x = np.broadcast_to(np.linspace(-1.0, 1.0, n), (num_sets, n)).copy()
    y = rng.normal(size=(num_sets, 1)) + rng.normal(size=(num_sets, 1)) * x + noise * rng.normal(size=(num_sets, n))

    def model(x, y):
        a = numpyro.sample("a", dist.Normal(0.0, 1.0))
        b = numpyro.sample("b", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(a + b * x, noise).to_event(1), obs=y)

    design = np.stack([np.ones_like(x), x], axis=-1)
    covariance = noise**2 * np.eye(n) + design @ np.swapaxes(design, 1, 2)
    return model, (x, y), _gaussian_evidence(y, np.zeros((num_sets, n)), covariance)


def regression8(rng, num_sets):
    n, d = 20, 8
    x = rng.normal(size=(num_sets, n, d))
    y = np.einsum("snd,sd->sn", x, rng.normal(size=(num_sets, d))) + rng.normal(size=(num_sets, n))

    def model(x, y):
        w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([d]).to_event(1))
        numpyro.sample("y", dist.Normal(x @ w, 1.0).to_event(1), obs=y)

    covariance = np.eye(n) + x @ np.swapaxes(x, 1, 2)
    return model, (x, y), _gaussian_evidence(y, np.zeros((num_sets, n)), covariance)


def mixture_prior(rng, num_sets):
    n, noise, centre, width = 3, 3.0, 2.0, 0.3
    theta = np.where(rng.random(num_sets) < 0.5, -centre, centre) + width * rng.normal(size=num_sets)
    y = theta[:, None] + noise * rng.normal(size=(num_sets, n))

    def model(y):
        mixing = dist.Categorical(probs=jnp.array([0.5, 0.5]))
        theta = numpyro.sample("theta", dist.MixtureSameFamily(mixing, dist.Normal(jnp.array([-centre, centre]),
                                                                                   width)))
        numpyro.sample("y", dist.Normal(theta, noise).expand([y.shape[0]]).to_event(1), obs=y)

    covariance = np.broadcast_to(noise**2 * np.eye(n) + width**2, (num_sets, n, n))
    parts = [_gaussian_evidence(y, np.full((num_sets, n), m), covariance) for m in (-centre, centre)]
    return model, (y,), np.logaddexp(*parts) + math.log(0.5)


MODELS = dict(beta_bernoulli=beta_bernoulli, regression2=regression2, regression8=regression8,
              mixture_prior=mixture_prior)


def coverage(log_z, stderr, status, exact):
    """Shares of the unflagged estimates within 1.96 / beyond 3 / beyond 4 s.e. of exact."""
    log_z, stderr, status = (np.asarray(a) for a in (log_z, stderr, status))
    exact = np.broadcast_to(exact.reshape(exact.shape + (1,) * (log_z.ndim - 1)), log_z.shape)
    clean = status == 0
    z = np.abs(log_z - exact)[clean] / stderr[clean]
    judged = int(clean.sum())

    def share(mask):
        return float(np.mean(mask)) if judged else None

    return dict(estimates=int(log_z.size), unflagged=judged, flagged=float(1.0 - clean.mean()),
                within_1_96=share(z <= 1.96), beyond_3=share(z > 3.0), beyond_4=share(z > 4.0),
                median_stderr=float(np.median(stderr)), rms_error=float(np.sqrt(np.mean((log_z - exact) ** 2))))


def run_model(name, num_sets, seed):
    model, arguments, exact = MODELS[name](np.random.default_rng(seed), num_sets)
    start = time.perf_counter()
    result = jaxz.evidence(model, jax.random.key(seed), model_args=tuple(jnp.asarray(a) for a in arguments),
                           batched=True)
    wall = time.perf_counter() - start
    runs = result.runs
    row = dict(num_sets=num_sets, seed=seed, wall_seconds=wall, compile_seconds=result.compile_seconds,
               pooled=coverage(result.log_z, result.log_z_stderr, result.status, exact),
               runs=coverage(runs.log_z, runs.log_z_stderr, runs.status, exact),
               runs_per_set=int(np.shape(runs.log_z)[-1]),
               evaluations_per_set=float(np.sum(result.num_log_density_evaluations + result.num_gradient_evaluations)
                                         / num_sets),
               flag_names=sorted({name for s in np.asarray(result.status).ravel() for name in jaxz.status_names(s)}))
    print(f"{name}: pooled {row['pooled']}\n    runs {row['runs']}\n    {wall:.1f} s "
          f"({result.compile_seconds:.1f} s compiling)", flush=True)
    return row


def markdown(results):
    lines = ["# Coverage of jaxz.evidence's error bars (defaults, exact evidences)", "",
             f"`{' '.join(['python benchmarks/evidence_coverage.py'] + results['argv'])}`; "
             f"{results['machine']['cpu_count']} cores. Unflagged estimates within 1.96 s.e. of the exact "
             "log Z (the promise: about 0.95), beyond 3 and 4; flagged share; median s.e.", "",
             "| model | data sets | estimate | unflagged | within 1.96 | beyond 3 | beyond 4 | flagged | median s.e. "
             "| rms error | evaluations / set | wall s |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, row in results["models"].items():
        for which in ("pooled", "runs"):
            c = row[which]
            cells = [f"{c[k]:.3f}" if c[k] is not None else "-" for k in ("within_1_96", "beyond_3", "beyond_4")]
            lines.append(f"| {name} | {row['num_sets']} | {which} | {c['unflagged']} of {c['estimates']} | "
                         f"{' | '.join(cells)} | {c['flagged']:.3f} | {c['median_stderr']:.4f} | {c['rms_error']:.4f} "
                         f"| {row['evaluations_per_set']:.3g} | {row['wall_seconds']:.0f} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="40 data sets per model (default)")
    mode.add_argument("--full", action="store_true", help="200 data sets per model")
    parser.add_argument("--only", nargs="+", choices=sorted(MODELS))
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    num_sets = 200 if options.full else 40
    results = dict(argv=sys.argv[1:], machine=machine(), models={})
    for name in options.only or MODELS:
        results["models"][name] = run_model(name, num_sets, options.seed)
    write(results, "evidence_coverage.json")
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "evidence_coverage.md")
    with open(out, "w") as handle:
        handle.write(markdown(results))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
