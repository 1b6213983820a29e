"""Reference log evidence of the held-out Gaussian-mixture stream of tests/test_sgais_defaults.py.

5 components in 2-D (25 parameters: logits, means, log scales), ``streaming.gmm_data(key(59),
3_000, 5)``, the prior of ``streaming.gmm_log_prior``, at the checkpoints 500, 1,000, ..., 3,000.

The posterior has K! = 120 modes, the relabellings θ ↦ πθ of one mode, and both the prior and
the likelihood are invariant under them, so Z = K! · Z₁ with Z₁ the mass of one mode, as long
as the relabelled modes do not overlap (the components' means lie several posterior standard
deviations apart: ``mode_separation`` below records the smallest gap between two components'
means in units of the mode's standard deviations). Z₁ is estimated by importance sampling
with the proposal of benchmarks/sgais_logistic_reference.py: a multivariate Student-t (ν
dof) at the MAP θ* of the labelling that starts from the data-generating parameters, scale
H(θ*)⁻¹, so log Ẑ = log K! + log mean_i p(D, θ_i) / q(θ_i) (unbiased for Z₁ up to the other
modes' negligible share of q's mass). Its s.e. is the delta-method sd(w)/(mean(w)√S); the
Laplace value is recorded alongside (the test used it before: not a reference, a check).
Cross-checked at 500 rows against tempered SMC (``jaxz.evidence`` on likelihood tempering,
which meets the relabelled modes by itself: no K! added) with ``--smc-check``.

    PYTHONPATH=$PWD python benchmarks/sgais_mixture_reference.py [--draws 100000] [--smc-check]

Writes benchmarks/results/sgais_mixture_reference.json.
"""
import argparse
import json
import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxz.models import streaming
from _results import machine
from sgais_logistic_reference import importance_sample, laplace_fit

jax.config.update("jax_enable_x64", True)

NUM_COMPONENTS = 5


def log_prior(theta):
    return streaming.gmm_log_prior(theta, NUM_COMPONENTS)


def log_likelihood(theta, datum):
    return streaming.gmm_log_likelihood(theta, datum, NUM_COMPONENTS)


def mixture_negative_log_joint(points):
    def negative_log_joint(theta):
        return -(log_prior(theta) + jnp.sum(jax.vmap(log_likelihood, in_axes=(None, 0))(theta, points)))
    return negative_log_joint


def mode_separation(mode, hessian):
    """The smallest distance between two components' means over the larger of their posterior sds."""
    _, means, _ = streaming.gmm_unpack(mode, NUM_COMPONENTS)
    sd = np.sqrt(np.diag(np.linalg.inv(np.asarray(hessian))))
    _, mean_sd, _ = streaming.gmm_unpack(jnp.asarray(sd), NUM_COMPONENTS)
    means, mean_sd = np.asarray(means), np.asarray(mean_sd)
    gaps = [np.linalg.norm(means[i] - means[j]) / max(mean_sd[i].max(), mean_sd[j].max())
            for i in range(NUM_COMPONENTS) for j in range(i + 1, NUM_COMPONENTS)]
    return float(min(gaps))


def smc_check(points, num_runs, num_particles):
    import jaxz
    from jaxz.paths import likelihood_tempering

    def sample_prior(key, num):
        return streaming.gmm_sample_prior(key, num, NUM_COMPONENTS)

    path = likelihood_tempering(log_prior, lambda theta: jnp.sum(jax.vmap(log_likelihood, in_axes=(None, 0))(
        theta, points)), sample_prior=sample_prior)
    start = time.time()
    result = jaxz.evidence(path, jax.random.key(7), num_runs=num_runs, num_particles=num_particles, method="smc")
    return dict(num_rows=int(points.shape[0]), smc_log_z=float(result.log_z),
                smc_stderr=float(result.log_z_stderr), smc_runs=[float(v) for v in np.asarray(result.runs.log_z)],
                status=int(result.status), seconds=time.time() - start,
                smc=f"jaxz.evidence(method='smc') on likelihood_tempering, {num_runs} runs x {num_particles} "
                    "particles, float64")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--draws", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=2_000)
    parser.add_argument("--dof", type=float, default=10.0)
    parser.add_argument("--ends", type=int, nargs="*", default=[500, 1000, 1500, 2000, 2500, 3000])
    parser.add_argument("--smc-check", action="store_true", help="tempered SMC at the first checkpoint")
    parser.add_argument("--smc-runs", type=int, default=4)
    parser.add_argument("--smc-particles", type=int, default=1000)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                      "sgais_mixture_reference.json"))
    args = parser.parse_args()
    points, (weights, means, scales) = streaming.gmm_data(jax.random.key(59), 3_000, NUM_COMPONENTS)
    start_theta = jnp.concatenate([jnp.log(jnp.asarray(weights)), jnp.asarray(means).ravel(),
                                   jnp.log(jnp.asarray(scales)).ravel()])
    log_relabellings = math.lgamma(NUM_COMPONENTS + 1)
    rows = []
    for index, end in enumerate(args.ends):
        start = time.time()
        negative_log_joint = mixture_negative_log_joint(points[:end])
        mode, hessian, laplace, gradient_norm = laplace_fit(negative_log_joint, start_theta)
        log_z1, stderr, ess = importance_sample(jax.random.key(2_000 + index), lambda t: -negative_log_joint(t),
                                                mode, hessian, args.dof, args.draws, args.batch)
        rows.append(dict(num_rows=end, log_z=log_z1 + log_relabellings, stderr=stderr,
                         laplace=laplace + log_relabellings, ess=ess, ess_fraction=ess / args.draws,
                         map_gradient_norm=gradient_norm, mode_separation=mode_separation(mode, hessian),
                         seconds=time.time() - start))
        print(rows[-1], flush=True)
    record = dict(machine=machine(), script="benchmarks/sgais_mixture_reference.py", command=" ".join(
        ["python benchmarks/sgais_mixture_reference.py", f"--draws {args.draws}", f"--dof {args.dof}"]
        + (["--smc-check"] if args.smc_check else [])),
        data="streaming.gmm_data(jax.random.key(59), 3_000, 5), the first num_rows rows",
        method="log K! + Laplace importance sampling of one labelling: multivariate t (dof) at the MAP started "
               "from the data-generating parameters, scale H^-1, float64",
        draws=args.draws, dof=args.dof, log_relabellings=log_relabellings, checkpoints=rows)
    if args.smc_check:
        record["cross_check"] = smc_check(points[:args.ends[0]], args.smc_runs, args.smc_particles)
        print(record["cross_check"], flush=True)
    with open(args.out, "w") as handle:
        json.dump(record, handle, indent=1)


if __name__ == "__main__":
    main()
