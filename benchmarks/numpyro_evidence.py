"""jaxz.evidence against NumPyro's nested sampler on six models with exact evidence.

The models of tests/test_evidence.py (normal–normal, Bayesian linear regression,
gamma–Poisson, beta–Bernoulli, Dirichlet–multinomial, and μ ~ N(0, 1), σ ~ HalfCauchy(1)
with a 2-D quadrature reference), each written once as a NumPyro model and handed
unchanged to

- ``jaxz.evidence(model, key, model_args=...)``: ``num_runs`` vmapped runs of adaptive
  tempered SMC with self-tuned HMC, pooled by ``jaxz.combine_runs``;
- ``numpyro.contrib.nested_sampling.NestedSampler`` (jaxns; its defaults: 25·d live
  points, dlogZ = 1e-4), one run per seed.

Per model and method: the error of log Ẑ against the exact log Z, the reported s.e.,
the spread (sd) of independent runs, the evaluations (jaxz: log densities + gradients,
every leapfrog step counted; jaxns: its likelihood evaluations), and seconds (jaxz:
after compilation, from ``Evidence.seconds``; jaxns: the whole ``run`` call, which
builds and compiles its sampler each time, and the second call on a new seed).
float64 throughout. Writes benchmarks/results/numpyro_evidence.json and .md.

Run: ``python benchmarks/numpyro_evidence.py`` (small: 8 runs x 300 particles, 2 jaxns
seeds); ``--particles 1000 --ns-seeds 5`` for a closer look.
"""
import argparse
import os
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
DIRICHLET_CONCENTRATION = np.array([1.0, 2.0, 1.5, 3.0])


def normal_normal(y):
    mu = numpyro.sample("mu", dist.Normal(0.5, 2.0))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


def regression(x, y):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([x.shape[1]]).to_event(1))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(x @ w, 0.5), obs=y)


def gamma_poisson(y):
    rate = numpyro.sample("rate", dist.Gamma(2.0, 0.5))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Poisson(rate), obs=y)


def beta_bernoulli(y):
    p = numpyro.sample("p", dist.Beta(2.0, 3.0))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Bernoulli(p), obs=y)


def dirichlet_multinomial(counts):
    probs = numpyro.sample("probs", dist.Dirichlet(jnp.asarray(DIRICHLET_CONCENTRATION)))
    with numpyro.plate("rows", counts.shape[0]):
        numpyro.sample("counts", dist.Multinomial(int(np.asarray(counts).sum(-1).max()), probs), obs=counts)


def two_supports(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    sigma = numpyro.sample("sigma", dist.HalfCauchy(1.0))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, sigma), obs=y)


def exact_log_z(name, *args):
    if name == "normal_normal":
        (y,) = args
        n = y.shape[0]
        return stats.multivariate_normal.logpdf(y, np.full(n, 0.5), np.eye(n) + 4.0 * np.ones((n, n)))
    if name == "regression":
        x, y = args
        return stats.multivariate_normal.logpdf(y, np.zeros(y.shape[0]), x @ x.T + 0.25 * np.eye(y.shape[0]))
    if name == "gamma_poisson":
        (y,) = args
        a, b, total, n = 2.0, 0.5, y.sum(), y.shape[0]
        return (a * np.log(b) - special.gammaln(a) + special.gammaln(a + total) - (a + total) * np.log(b + n)
                - special.gammaln(y + 1).sum())
    if name == "beta_bernoulli":
        (y,) = args
        k, n = y.sum(), y.shape[0]
        return special.betaln(2.0 + k, 3.0 + n - k) - special.betaln(2.0, 3.0)
    if name == "dirichlet_multinomial":
        (counts,) = args
        alpha = DIRICHLET_CONCENTRATION

        def log_beta(a):
            return special.gammaln(a).sum() - special.gammaln(a.sum())

        coefficients = (special.gammaln(counts.sum(-1) + 1) - special.gammaln(counts + 1).sum(-1)).sum()
        return coefficients + log_beta(alpha + counts.sum(0)) - log_beta(alpha)
    (y,) = args  # two_supports: 2-D quadrature in (μ, log σ)
    mu, log_sigma = np.linspace(-6.0, 6.0, 1201), np.linspace(-7.0, 5.0, 1201)
    sigma = np.exp(log_sigma)
    log_f = (stats.norm.logpdf(mu)[:, None] + stats.halfcauchy.logpdf(sigma)[None, :] + log_sigma[None, :]
             + stats.norm.logpdf(y[:, None, None], mu[None, :, None], sigma[None, None, :]).sum(0))
    top = log_f.max()
    return float(np.log(np.trapezoid(np.trapezoid(np.exp(log_f - top), log_sigma, axis=1), mu)) + top)


def datasets():
    """The data of tests/test_evidence.py (same generator, same draws)."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(20, 3))
    return dict(
        normal_normal=(normal_normal, (rng.normal(1.0, 1.0, size=10),)),
        regression=(regression, (x, x @ np.array([1.0, -0.5, 0.3]) + 0.5 * rng.normal(size=20))),
        gamma_poisson=(gamma_poisson, (rng.poisson(3.0, size=12).astype(float),)),
        beta_bernoulli=(beta_bernoulli, ((rng.uniform(size=15) < 0.3).astype(float),)),
        dirichlet_multinomial=(dirichlet_multinomial,
                               (rng.multinomial(6, [0.1, 0.3, 0.2, 0.4], size=3).astype(float),)),
        two_supports=(two_supports, (rng.normal(0.5, 0.7, size=8),)),
    )


def run_jaxz(model, args, exact, num_runs, num_particles, seed):
    result = jaxz.evidence(model, jax.random.key(seed), model_args=tuple(jnp.asarray(a) for a in args),
                           num_runs=num_runs, num_particles=num_particles)
    runs = np.asarray(result.runs.log_z)
    return dict(
        log_z=float(result.log_z), error=float(result.log_z) - exact, stderr=float(result.log_z_stderr),
        error_in_stderr=(float(result.log_z) - exact) / float(result.log_z_stderr), status=int(result.status),
        run_errors=(runs - exact).tolist(), run_sd=float(runs.std(ddof=1)),
        run_stderr_rms=float(np.sqrt(np.mean(np.asarray(result.runs.log_z_stderr) ** 2))),
        evaluations_per_run=result.num_evaluations / num_runs,
        log_density_evaluations_per_run=result.num_log_density_evaluations / num_runs,
        gradient_evaluations_per_run=result.num_gradient_evaluations / num_runs,
        evaluations_total=result.num_evaluations, stages=np.asarray(result.num_stages).tolist(),
        seconds_all_runs=result.seconds, seconds_per_run=result.seconds / num_runs,
        compile_seconds=result.compile_seconds,
    )


def run_jaxns(model, args, exact, seeds):
    try:
        from numpyro.contrib.nested_sampling import NestedSampler
    except ImportError as error:
        return dict(available=False, reason=f"numpyro.contrib.nested_sampling failed to import: {error}")
    rows = []
    for seed in range(seeds):
        sampler = NestedSampler(model)
        start = time.perf_counter()
        try:
            sampler.run(jax.random.key(100 + seed), *(jnp.asarray(a) for a in args))
        except Exception as error:  # noqa: BLE001 - reported, not hidden
            return dict(available=False, reason=f"{type(error).__name__}: {str(error)[:300]}")
        seconds = time.perf_counter() - start
        results = sampler._results  # NestedSampler keeps jaxns's NestedSamplerResults here
        rows.append(dict(log_z=float(results.log_Z_mean), stderr=float(results.log_Z_uncert),
                         evaluations=int(results.total_num_likelihood_evaluations), seconds=seconds))
    log_z = np.array([row["log_z"] for row in rows])
    return dict(
        available=True, runs=rows, errors=(log_z - exact).tolist(), mean_error=float(log_z.mean() - exact),
        run_sd=float(log_z.std(ddof=1)) if log_z.size > 1 else None,
        stderr_mean=float(np.mean([row["stderr"] for row in rows])),
        evaluations_per_run=float(np.mean([row["evaluations"] for row in rows])),
        seconds_first=rows[0]["seconds"], seconds_later=float(np.mean([row["seconds"] for row in rows[1:]]))
        if len(rows) > 1 else None,
    )


def markdown(results):
    lines = [
        "# jaxz.evidence vs NumPyro's nested sampler (jaxns)",
        "",
        f"{results['settings']['num_runs']} jaxz runs x {results['settings']['num_particles']} particles (pooled); "
        f"{results['settings']['ns_seeds']} jaxns runs (defaults). float64. Machine load at start "
        f"{results['machine']['load_average_at_start'][0]:.1f} on {results['machine']['cpu_count']} cores: "
        "seconds are indicative only.",
        "",
        "| model | exact log Z | jaxz error (pooled s.e.) | jaxz run sd | jaxz evals/run (grad) | jaxz s/run | "
        "jaxns error (its s.e.) | jaxns run sd | jaxns evals/run | jaxns s/run (2nd call) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in results["models"].items():
        j, n = row["jaxz"], row["jaxns"]
        if n.get("available"):
            sd = "n/a" if n["run_sd"] is None else f"{n['run_sd']:.3f}"
            later = n["seconds_later"] if n["seconds_later"] is not None else n["seconds_first"]
            ns = (f"{n['mean_error']:+.3f} ({n['stderr_mean']:.3f}) | {sd} | {n['evaluations_per_run']:,.0f} "
                  f"| {later:.1f}")
        else:
            ns = f"failed: {n['reason'][:80]} | | |"
        lines.append(
            f"| {name} | {row['exact_log_z']:.3f} | {j['error']:+.3f} ({j['stderr']:.3f}) | {j['run_sd']:.3f} | "
            f"{j['evaluations_per_run']:,.0f} ({j['gradient_evaluations_per_run']:,.0f}) "
            f"| {j['seconds_per_run']:.2f} | "
            f"{ns} |")
    lines += ["", "jaxz evals = log densities (reweighting, every bisection point of the adaptive schedule) + "
              "gradients (every leapfrog step of the longest vmapped trajectory, one refresh per stage, the "
              "step-size rescue's trials); jaxns evals = its likelihood evaluations. "
              "jaxz s/run = the vmapped runs' wall time after compilation / runs; jaxns s/run includes building "
              "and compiling its sampler, which NestedSampler.run does on every call."]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--particles", type=int, default=300)
    parser.add_argument("--ns-seeds", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=None, help="model names (default: all six)")
    options = parser.parse_args()
    results = dict(machine=machine(), settings=dict(num_runs=options.runs, num_particles=options.particles,
                                                     ns_seeds=options.ns_seeds, dtype="float64"), models={})
    try:
        import jaxns
        results["settings"]["jaxns"] = jaxns.__version__ if hasattr(jaxns, "__version__") else "installed"
    except ImportError as error:
        results["settings"]["jaxns"] = f"not available: {error}"
    results["settings"]["numpyro"] = numpyro.__version__
    for name, (model, args) in datasets().items():
        if options.only and name not in options.only:
            continue
        exact = float(exact_log_z(name, *args))
        print(f"{name}: exact log Z = {exact:.4f}", flush=True)
        row = dict(exact_log_z=exact, jaxz=run_jaxz(model, args, exact, options.runs, options.particles, 0))
        print(f"  jaxz : {row['jaxz']['error']:+.4f} ± {row['jaxz']['stderr']:.4f}, sd {row['jaxz']['run_sd']:.3f}, "
              f"{row['jaxz']['evaluations_per_run']:,.0f} evals/run, {row['jaxz']['seconds_per_run']:.2f} s/run",
              flush=True)
        row["jaxns"] = run_jaxns(model, args, exact, options.ns_seeds)
        if row["jaxns"].get("available"):
            print(f"  jaxns: {row['jaxns']['mean_error']:+.4f} (s.e. {row['jaxns']['stderr_mean']:.4f}), "
                  f"{row['jaxns']['evaluations_per_run']:,.0f} evals/run, {row['jaxns']['seconds_first']:.1f} s",
                  flush=True)
        else:
            print(f"  jaxns: {row['jaxns']['reason']}", flush=True)
        results["models"][name] = row
        save(results)  # after every model: a long run interrupted keeps what it measured


def save(results):
    write(results, "numpyro_evidence.json")
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "numpyro_evidence.md")
    with open(out, "w") as handle:
        handle.write(markdown(results))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
