"""Expectation propagation for probit GP classification (Rasmussen & Williams 2006,
Algorithm 3.5, in its numerically stable form; Minka 2001).

The posterior p(f | y) ∝ N(f; 0, K̃) ∏_n Φ(y_n f_n / s) (the f-space of
``jaxz.models.gpc``: K̃ = K + δI, s² = 1 − δ) is approximated by
q(f) ∝ N(f; 0, K̃) ∏_n t̃_n(f_n) with Gaussian sites t̃_n ∝ exp(−½ τ̃_n f_n² + ν̃_n f_n).
Each site is refitted in turn so that cavity × site matches the first two moments of
cavity × Φ (R&W eqs. 3.56–3.59), with a rank-one update of Σ (eq. 3.70); after every
sweep Σ and μ are recomputed from B = I + S̃^½ K̃ S̃^½ = L Lᵀ (R&W Alg. 3.5), which never
inverts K̃, to stop round-off from accumulating.

log Z_EP (R&W eq. 3.65) in a form that stays finite as any τ̃_n → 0: with q_{−n} the
cavity N(m_n, v_n), Ẑ_n = Φ(y_n m_n / √(s² + v_n)) the tilted normalizers and μ, Σ the
mean and covariance of q,

    log Z_EP = Σ_n log Ẑ_n − Σ_n log L_nn + ½ μᵀν̃
               + Σ_n [½ log(1 + τ̃_n v_n) − ½ μ_n²/Σ_nn + ½ m_n²/v_n],

i.e. Σ log Ẑ_n + log ∫ N(f; 0, K̃) ∏ e^{−½τ̃f²+ν̃f} df − Σ_n log ∫ q_{−n}(f) e^{−½τ̃_n f²+ν̃_n f} df:
each site's unknown scale cancels between the global and the local integrals.
"""
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import log_ndtr

from jaxz.models.gpc import GPC, noise_scale, prior_covariance
from jaxz.types import Array

_LOG_SQRT_2PI = 0.9189385332046727


class GPCEPResult(NamedTuple):
    log_z: Array  # log Z_EP
    mean: Array  # (N,) μ of q(f)
    covariance: Array  # (N, N) Σ of q(f)
    covariance_cholesky: Array  # (N, N) lower Cholesky factor of Σ (for sampling q, log q)
    site_precision: Array  # (N,) τ̃
    site_shift: Array  # (N,) ν̃ (site mean ν̃/τ̃)
    cavity_mean: Array  # (N,) m_n of q_{−n}
    cavity_variance: Array  # (N,) v_n of q_{−n}
    num_iterations: Array  # sweeps run
    converged: Array  # |Δ log Z_EP| < tol within max_iterations
    log_z_change: Array  # |Δ log Z_EP| of the last sweep


def _posterior(covariance, site_precision, site_shift):
    """Σ = K̃ − Vᵀ V, V = L⁻¹ S̃^½ K̃, μ = Σ ν̃, with L Lᵀ = I + S̃^½ K̃ S̃^½ (R&W Alg. 3.5)."""
    root = jnp.sqrt(site_precision)
    factor = jnp.linalg.cholesky(jnp.eye(root.shape[0], dtype=root.dtype) + root[:, None] * covariance * root[None, :])
    v = jax.scipy.linalg.solve_triangular(factor, root[:, None] * covariance, lower=True)
    sigma = covariance - v.T @ v
    sigma = 0.5 * (sigma + sigma.T)
    return sigma, sigma @ site_shift, factor


def _cavity(sigma_diagonal, mean, site_precision, site_shift):
    """R&W eq. (3.56): q_{−n} = N(m_n, v_n) from the marginal of q and the site."""
    precision = 1.0 / sigma_diagonal - site_precision
    shift = mean / sigma_diagonal - site_shift
    return shift / precision, 1.0 / precision


def _tilted(label, cavity_mean, cavity_variance, noise_variance):
    """Tilted normalizer and the moment-matched site (R&W eqs. 3.58–3.59), written so
    that neither 1 − v β nor the site parameters are formed by cancellation:
    z = y m/√(s² + v), r = φ(z)/Φ(z), and with ρ = r (z + r) ∈ (0, 1)
        τ̃ = ρ / (s² + v (1 − ρ)),   ν̃ = (y r √(s² + v) + m ρ) / (s² + v (1 − ρ))."""
    total = noise_variance + cavity_variance
    z = label * cavity_mean / jnp.sqrt(total)
    log_z = log_ndtr(z)
    ratio = jnp.exp(-0.5 * z**2 - _LOG_SQRT_2PI - log_z)
    rho = ratio * (z + ratio)
    denominator = noise_variance + cavity_variance * (1.0 - rho)
    site_precision = rho / denominator
    site_shift = (label * ratio * jnp.sqrt(total) + cavity_mean * rho) / denominator
    return log_z, site_precision, site_shift


def _log_z_ep(covariance, labels, noise_variance, site_precision, site_shift):
    sigma, mean, factor = _posterior(covariance, site_precision, site_shift)
    diagonal = jnp.diag(sigma)
    cavity_mean, cavity_variance = _cavity(diagonal, mean, site_precision, site_shift)
    log_tilted, _, _ = _tilted(labels, cavity_mean, cavity_variance, noise_variance)
    log_z = (
        jnp.sum(log_tilted) - jnp.sum(jnp.log(jnp.diag(factor))) + 0.5 * mean @ site_shift
        + jnp.sum(0.5 * jnp.log1p(site_precision * cavity_variance) - 0.5 * mean**2 / diagonal
                  + 0.5 * cavity_mean**2 / cavity_variance)
    )
    return log_z, sigma, mean, cavity_mean, cavity_variance


def gpc_ep(model: GPC, *, tol: float = 1e-8, max_iterations: int = 100) -> GPCEPResult:
    """EP for the probit GP classifier ``model`` (R&W Algorithm 3.5, sequential updates).

    tol: stop when a sweep changes log Z_EP by less than ``tol``.
    max_iterations: at most this many sweeps over the data points.
    Returns ``GPCEPResult``: log Z_EP, the Gaussian q(f) = N(mean, covariance), the sites
    (τ̃, ν̃), the cavities at the fixed point and convergence information. The second-order
    correction of Opper, Paquet & Winther (2013) is not implemented.
    """
    if not float(tol) > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    if int(max_iterations) < 1:
        raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
    return _gpc_ep(prior_covariance(model), model.labels, noise_scale(model) ** 2, float(tol), int(max_iterations))


@functools.partial(jax.jit, static_argnames=("tol", "max_iterations"))
def _gpc_ep(covariance, labels, noise_variance, tol, max_iterations):
    size, dtype = labels.shape[0], covariance.dtype

    def site_update(i, carry):
        sigma, mean, site_precision, site_shift = carry
        cavity_mean, cavity_variance = _cavity(sigma[i, i], mean[i], site_precision[i], site_shift[i])
        _, new_precision, new_shift = _tilted(labels[i], cavity_mean, cavity_variance, noise_variance)
        proper = cavity_variance > 0  # a site whose cavity is improper is left as it is
        delta_precision = jnp.where(proper, new_precision - site_precision[i], 0.0)
        delta_shift = jnp.where(proper, new_shift - site_shift[i], 0.0)
        # R&W eq. (3.70): Σ ← Σ − Δτ̃/(1 + Δτ̃ Σ_ii) s sᵀ, and μ = Σ ν̃ updated alike
        column = sigma[:, i]
        scale = 1.0 + delta_precision * sigma[i, i]
        mean = mean + column * (delta_shift - delta_precision * mean[i]) / scale
        sigma = sigma - (delta_precision / scale) * jnp.outer(column, column)
        return sigma, mean, site_precision.at[i].add(delta_precision), site_shift.at[i].add(delta_shift)

    def sweep(carry):
        iteration, site_precision, site_shift, sigma, mean, log_z, _ = carry
        sigma, mean, site_precision, site_shift = jax.lax.fori_loop(
            0, size, site_update, (sigma, mean, site_precision, site_shift)
        )
        new_log_z, sigma, mean, _, _ = _log_z_ep(covariance, labels, noise_variance, site_precision, site_shift)
        return iteration + 1, site_precision, site_shift, sigma, mean, new_log_z, jnp.abs(new_log_z - log_z)

    def cond(carry):
        iteration, *_, change = carry
        return (iteration < max_iterations) & ~(change < tol)

    zeros = jnp.zeros((size,), dtype)
    log_z0, sigma0, mean0, _, _ = _log_z_ep(covariance, labels, noise_variance, zeros, zeros)
    init = (jnp.int32(0), zeros, zeros, sigma0, mean0, log_z0, jnp.asarray(jnp.inf, dtype))
    iterations, site_precision, site_shift, _, _, _, change = jax.lax.while_loop(cond, sweep, init)
    log_z, sigma, mean, cavity_mean, cavity_variance = _log_z_ep(
        covariance, labels, noise_variance, site_precision, site_shift
    )
    return GPCEPResult(
        log_z, mean, sigma, jnp.linalg.cholesky(sigma), site_precision, site_shift, cavity_mean, cavity_variance,
        iterations, change < tol, change,
    )


__all__ = ["gpc_ep", "GPCEPResult"]
