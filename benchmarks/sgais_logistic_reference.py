"""Reference log evidence of the held-out logistic stream of tests/test_sgais_defaults.py.

4-class softmax regression, 10 features + bias (44 parameters), N(0, I) prior,
``streaming.logistic_data(key(56), 3_000)``, at the checkpoints 500, 1,000, ..., 3,000.

Laplace importance sampling: the proposal q is a multivariate Student-t (ν dof) at the
MAP θ* with scale matrix H(θ*)⁻¹ (H the Hessian of the negative log joint), so

    Z = ∫ p(D, θ) dθ = E_q[p(D, θ) / q(θ)],   log Ẑ = log mean_i p(D, θ_i) / q(θ_i)

is unbiased for Z; the t's tails are heavier than the log-concave posterior's, so the
weights have finite variance. Its s.e. is the delta-method sd(w)/(mean(w)√S) over S
draws; the Laplace value log p(D, θ*) + d/2 log 2π − ½ log|H| is recorded alongside.
Cross-checked at 500 rows against tempered SMC (jaxz.evidence on likelihood_tempering,
4 runs × 500 particles: −384.089 ± 0.120).

    PYTHONPATH=$PWD python benchmarks/sgais_logistic_reference.py [--draws 200000]

Writes benchmarks/results/sgais_logistic_reference.json.
"""
import argparse
import json
import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxz.models import logistic, streaming
from _results import machine

jax.config.update("jax_enable_x64", True)

SHAPE = (11, 4)
DIM = 44


def laplace_fit(negative_log_joint, start, iterations=40):
    """(θ*, H(θ*), Laplace log Z, ‖∇‖ at θ*): damped Newton (never uphill) from ``start``."""
    value, gradient, hessian = (jax.jit(f) for f in (negative_log_joint, jax.grad(negative_log_joint),
                                                     jax.hessian(negative_log_joint)))
    x = start
    for _ in range(iterations):
        step, scale = jnp.linalg.solve(hessian(x), gradient(x)), 1.0
        while float(value(x - scale * step)) > float(value(x)) and scale > 1e-4:
            scale /= 2
        x = x - scale * step
    h = hessian(x)
    _, log_det = jnp.linalg.slogdet(h)
    laplace = float(-value(x) + 0.5 * x.size * math.log(2 * math.pi) - 0.5 * log_det)
    return x, h, laplace, float(jnp.linalg.norm(gradient(x)))


def logistic_negative_log_joint(inputs, labels):
    def negative_log_joint(flat):
        theta = flat.reshape(SHAPE)
        return -(logistic.log_prior(theta) + logistic.total_log_likelihood(theta, (inputs, labels)))
    return negative_log_joint


def student_t_log_density(z, dof):
    """log t_ν(z; 0, I) in d = z.shape[-1] dimensions (z = Lᵀ(θ − θ*) whitened; the caller adds log |Lᵀ|)."""
    d = z.shape[-1]
    return (math.lgamma((dof + d) / 2) - math.lgamma(dof / 2) - 0.5 * d * math.log(dof * math.pi)
            - 0.5 * (dof + d) * jnp.log1p(jnp.sum(z**2, axis=-1) / dof))


def importance_sample(key, log_joint, mode, hessian, dof, draws, batch):
    """(log Ẑ, its delta-method s.e., ESS) of S = ``draws`` t draws; ``log_joint(θ)`` = log p(D, θ)."""
    dim = mode.size
    chol_precision = jnp.linalg.cholesky(hessian)  # H = L Lᵀ; θ = θ* + L⁻ᵀ z: covariance H⁻¹ for z ~ N(0, I)
    log_jacobian = jnp.sum(jnp.log(jnp.diag(chol_precision)))  # q(θ) = t(z) |dz/dθ| = t(z) |Lᵀ|

    @jax.jit
    def log_weights(key):
        key_z, key_chi = jax.random.split(key)
        normal = jax.random.normal(key_z, (batch, dim))
        chi = jax.random.chisquare(key_chi, dof, (batch,))
        z = normal * jnp.sqrt(dof / chi)[:, None]
        thetas = mode + jax.scipy.linalg.solve_triangular(chol_precision.T, z.T, lower=False).T
        joint = jax.vmap(log_joint)(thetas)
        return joint - (student_t_log_density(z, dof) + log_jacobian)

    values = np.concatenate([np.asarray(log_weights(k)) for k in jax.random.split(key, draws // batch)])
    top = values.max()
    w = np.exp(values - top)
    log_z = float(top + np.log(w.mean()))
    stderr = float(w.std(ddof=1) / (w.mean() * math.sqrt(w.size)))
    ess = float(w.sum() ** 2 / (w**2).sum())
    return log_z, stderr, ess


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--draws", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=2_000)
    parser.add_argument("--dof", type=float, default=10.0)
    parser.add_argument("--ends", type=int, nargs="*", default=[500, 1000, 1500, 2000, 2500, 3000])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                      "sgais_logistic_reference.json"))
    args = parser.parse_args()
    (inputs, labels), _ = streaming.logistic_data(jax.random.key(56), 3_000)
    rows = []
    for index, end in enumerate(args.ends):
        start = time.time()
        negative_log_joint = logistic_negative_log_joint(inputs[:end], labels[:end])
        mode, hessian, laplace, gradient_norm = laplace_fit(negative_log_joint, jnp.zeros(DIM))
        log_z, stderr, ess = importance_sample(jax.random.key(1_000 + index), lambda t: -negative_log_joint(t), mode,
                                               hessian, args.dof, args.draws, args.batch)
        rows.append(dict(num_rows=end, log_z=log_z, stderr=stderr, laplace=laplace, ess=ess,
                         ess_fraction=ess / args.draws, map_gradient_norm=gradient_norm, seconds=time.time() - start))
        print(rows[-1], flush=True)
    record = dict(machine=machine(), script="benchmarks/sgais_logistic_reference.py", command=" ".join(
        ["python benchmarks/sgais_logistic_reference.py", f"--draws {args.draws}", f"--dof {args.dof}"]),
        data="streaming.logistic_data(jax.random.key(56), 3_000), the first num_rows rows",
        method="Laplace importance sampling: multivariate t (dof) at the MAP with scale H^-1, float64",
        draws=args.draws, dof=args.dof, checkpoints=rows,
        cross_check=dict(num_rows=500, smc_log_z=-384.0888175566987, smc_stderr=0.11971617517503982,
                         smc="jaxz.evidence on likelihood_tempering, 4 runs x 500 particles, float64"))
    with open(args.out, "w") as handle:
        json.dump(record, handle, indent=1)


if __name__ == "__main__":
    main()
