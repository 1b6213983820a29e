"""Orthant probabilities P(w ≥ 0), w ~ N(0, Σ), and the truncated normal they are built
on: Genz's (1992) separation of variables with a randomly shifted lattice rule, Genz &
Bretz's variable order and Botev's (2017) minimax tilting. ``jaxz.models.gpc`` uses them
for the GPC evidence (seed eq. 10: Z is such a probability) and its samplers; the names
are importable from ``jaxz.models.gpc``. This module reads arrays only, so it does not
import the model module."""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr, ndtr, ndtri

from jaxz import weights as _weights
from jaxz.types import Array

_LOG_SQRT_2PI = float(0.5 * np.log(2.0 * np.pi))


def truncated_normal(rng_key, mean, scale, sign):
    """z ~ N(mean, scale²) restricted to sign·z ≥ 0 (sign = ±1), by inversion.

    With u = sign·(z − mean)/scale ~ N(0, 1) restricted to u ≥ a, a = −sign·mean/scale:
    a ≤ 0: u = Φ⁻¹(Φ(a) + V Φ(−a)); a > 0: u = −Φ⁻¹(V Φ(−a)), polished by Newton steps
    on log Φ(−u) = log V + log Φ(−a) (log space: exact also where Φ(−a) underflows,
    a ≳ 38, started from the exponential-tail guess u ≈ a − log V / a). Returns
    z = sign·scale·(u − a), which keeps sign·z ≥ 0 exactly.
    """
    dtype = jnp.result_type(mean, scale)
    v = jax.random.uniform(rng_key, jnp.shape(-sign * mean / scale), dtype, minval=jnp.finfo(dtype).tiny,
                           maxval=1.0)
    return _truncated_normal_inverse(v, mean, scale, sign)


def _truncated_normal_inverse(v, mean, scale, sign):
    """``truncated_normal`` at a given uniform v ∈ (0, 1]: the inverse of its cdf."""
    dtype = jnp.result_type(mean, scale)
    a = -sign * mean / scale
    v = jnp.clip(v, jnp.finfo(dtype).tiny, 1.0)
    lower = ndtri(jnp.minimum(ndtr(a) + v * ndtr(-a), 1.0 - jnp.finfo(dtype).epsneg))
    tail_probability = v * ndtr(-a)
    target = jnp.log(v) + log_ndtr(-a)
    usable = tail_probability > 1e3 * jnp.finfo(dtype).tiny
    safe_a = jnp.maximum(a, 1.0)
    upper = jnp.where(usable, -ndtri(jnp.where(usable, tail_probability, 0.5)), a - jnp.log(v) / safe_a)

    for _ in range(3):  # Newton on h(u) = log Φ(−u) − target, h'(u) = −φ(u)/Φ(−u)
        upper = jnp.maximum(upper, a)
        log_tail = log_ndtr(-upper)
        upper = upper + (log_tail - target) * jnp.exp(log_tail + 0.5 * upper**2 + _LOG_SQRT_2PI)
    u = jnp.where(a <= 0.0, lower, jnp.maximum(upper, a))
    return sign * scale * jnp.maximum(u - a, 0.0)



class GenzEstimate(NamedTuple):
    """Pooled randomized-QMC orthant probability: log Ẑ = log of the mean of the per-shift
    estimates (each an unbiased Ẑ), its delta-method s.e. over the shifts, the per-shift
    log Ẑ_s (num_shifts,), and the variable order used (a permutation)."""

    log_z: Array
    stderr: Array
    log_z_shifts: Array
    order: Array


def prioritized_cholesky(covariance: Array) -> tuple[Array, Array]:
    """Cholesky factor L of Π Σ Πᵀ with the variables put in Genz & Bretz's (2002, §4.1.3;
    Gibson, Glasbey & Elston 1994) order for the orthant w ≥ 0, w ~ N(0, Σ): step i
    picks, among the variables left, the one whose conditional probability Φ(m_j/σ_j) of
    w_j ≥ 0 is smallest, with m_j, σ_j² the mean and variance of w_j given the earlier
    standardized variables e_k (k < i) at their truncated means E[e_k | e_k ≥ a_k] =
    φ(a_k)/Φ(−a_k). Returns (L, order): L lower triangular, w_order = L e.
    covariance: (N, N), symmetric positive definite."""
    covariance = jnp.asarray(covariance)
    size, dtype = covariance.shape[0], covariance.dtype
    index = jnp.arange(size)
    tiny = jnp.finfo(dtype).tiny

    def step(i, carry):
        cov, factor, order, expected = carry
        known = index < i  # columns k < i of L are filled; expected[k] = E[e_k | e_k ≥ a_k]
        variance = jnp.diag(cov) - jnp.sum(jnp.where(known[None, :], factor, 0.0) ** 2, axis=1)
        mean = factor @ jnp.where(known, expected, 0.0)
        log_probability = log_ndtr(mean / jnp.sqrt(jnp.maximum(variance, tiny)))
        pick = jnp.argmin(jnp.where(index >= i, log_probability, jnp.inf))
        swap = index.at[i].set(pick).at[pick].set(i)
        cov, factor, order = cov[swap][:, swap], factor[swap], order[swap]
        mean = mean[swap]
        diagonal = jnp.sqrt(jnp.maximum(variance[swap][i], tiny))
        column = (cov[:, i] - jnp.where(known[None, :], factor, 0.0) @ factor[i]) / diagonal
        factor = factor.at[:, i].set(jnp.where(index > i, column, jnp.where(index == i, diagonal, 0.0)))
        lower = -mean[i] / diagonal  # w_i = m_i + L_ii e_i ≥ 0  ⇔  e_i ≥ a_i
        expected = expected.at[i].set(jnp.exp(-0.5 * lower**2 - _LOG_SQRT_2PI - log_ndtr(-lower)))
        return cov, factor, order, expected

    start = (covariance, jnp.zeros_like(covariance), index, jnp.zeros((size,), dtype))
    _, factor, order, _ = jax.lax.fori_loop(0, size, step, start)
    return factor, order


def minimax_tilt(factor: Array, *, iterations: int = 100, tolerance: float = 1e-10) -> tuple[Array, Array]:
    """Botev's (2017, §3) minimax exponential tilt for the orthant w = L e ≥ 0: the saddle
    point (x*, μ*) of ψ(x; μ) = Σ_k μ_k²/2 − x_k μ_k + log Φ(μ_k + Σ_{j<k} L_kj x_j / L_kk)
    (μ_N = 0, x_N unused), by Newton's method on ∇ψ = 0 with halving steps on |∇ψ|.
    Returns (ψ(x*; μ*), μ* (N,)); exp ψ* bounds the probability from above (Botev's
    Theorem 2) and μ* is the mean shift of the tilted sampler. factor: (N, N) L."""
    size, dtype = factor.shape[0], factor.dtype
    scaled = factor / jnp.diag(factor)[:, None] - jnp.eye(size, dtype=dtype)  # strictly lower L_kj / L_kk

    def unpack(params):
        zero = jnp.zeros((1,), dtype)
        return jnp.concatenate([params[:size - 1], zero]), jnp.concatenate([params[size - 1:], zero])

    def psi(params):
        x, mu = unpack(params)
        return jnp.sum(0.5 * mu**2 - x * mu + log_ndtr(mu + scaled @ x))

    gradient, hessian = jax.grad(psi), jax.hessian(psi)

    def newton(carry):
        params, norm, count = carry
        step = jnp.linalg.solve(hessian(params), gradient(params))

        def halve(state):
            length, _ = state
            return length / 2, jnp.linalg.norm(gradient(params - length / 2 * step))

        def worse(state):
            length, new_norm = state
            return (length > 1e-8) & ~(new_norm < norm)

        length, new_norm = jax.lax.while_loop(worse, halve, (jnp.ones((), dtype),
                                                             jnp.linalg.norm(gradient(params - step))))
        return params - length * step, new_norm, count + 1

    def going(carry):
        _, norm, count = carry
        return (norm > tolerance) & (count < iterations)

    start = jnp.zeros((2 * (size - 1),), dtype)
    params, _, _ = jax.lax.while_loop(going, newton, (start, jnp.linalg.norm(gradient(start)), 0))
    return psi(params), unpack(params)[1]


def _first_primes(count: int) -> np.ndarray:
    limit = max(16, int(count * (np.log(count + 2) + np.log(np.log(count + 3)) + 3)))
    sieve = np.ones(limit, bool)
    sieve[:2] = False
    for n in range(2, int(limit**0.5) + 1):
        if sieve[n]:
            sieve[n * n::n] = False
    return np.flatnonzero(sieve)[:count]


def orthant_log_probability(covariance: Array, rng_key, num_points: int = 4096, num_shifts: int = 16, *,
                            reorder: bool = True, tilting: bool = True) -> GenzEstimate:
    """log P(w ≥ 0), w ~ N(0, Σ), by Genz's (1992) separation of variables with a randomly
    shifted quasi-Monte Carlo rule (Genz & Bretz 2009, §4.2).

    With Σ = L Lᵀ (after ``prioritized_cholesky``'s reordering if ``reorder``) and w = L e,
    P = E_u[∏_i Φ(m_i/L_ii)], m_i = Σ_{k<i} L_ik e_k, e_i = the standard normal truncated to
    e_i ≥ −m_i/L_ii at the uniform u_i (inversion: ``truncated_normal``), u ∈ [0, 1)^{N−1}.
    The points: the Richtmyer generators q_j = frac(√p_j) (p_j the j-th prime) of Genz's
    QSIMVN, x_k = frac(k q + Δ), k = 1..num_points, periodized by the baker's map
    u = |2x − 1|; each shift Δ ~ U[0, 1)^{N−1} makes every point uniform, so each shift's
    mean is an unbiased Ẑ_s. Pooled: log mean Ẑ_s ± its delta-method s.e. over the shifts,
    widened by t_{S−1}(0.975)/1.96 for S = num_shifts (a Student-t interval; 1.07 at S = 16).
    k·q mod 1 is exact in uint32 fixed point (q rounded to 2⁻³²), in any float dtype.
    covariance: (N, N), symmetric positive definite. Returns ``GenzEstimate``.
    """
    covariance = jnp.asarray(covariance)
    size, dtype = covariance.shape[0], covariance.dtype
    if int(num_points) < 1 or int(num_shifts) < 2:
        raise ValueError(f"need num_points >= 1 and num_shifts >= 2, got {num_points}, {num_shifts}")
    if reorder:
        factor, order = prioritized_cholesky(covariance)
    else:
        factor, order = jnp.linalg.cholesky(covariance), jnp.arange(size)
    tilt = minimax_tilt(factor)[1] if tilting else jnp.zeros((size,), dtype)
    dimension = max(size - 1, 1)
    generators = np.mod(np.sqrt(_first_primes(dimension).astype(np.float64)), 1.0)
    fixed_point = jnp.asarray(np.round(generators * 2.0**32).astype(np.uint64).astype(np.uint32))
    counts = jnp.arange(1, int(num_points) + 1, dtype=jnp.uint32)
    lattice = (counts[:, None] * fixed_point[None, :]).astype(dtype) / jnp.asarray(2.0**32, dtype)

    def shift_log_z(shift):
        uniforms = 1.0 - jnp.abs(2.0 * jnp.mod(lattice + shift, 1.0) - 1.0)  # baker's map, in [0, 1]
        uniforms = jnp.concatenate([uniforms, jnp.full((num_points, 1), 0.5, dtype)], axis=1)

        def variable(carry, i):
            standardized, log_p = carry
            mean, scale = standardized @ factor[i], factor[i, i]
            # e_i ~ N(μ_i, 1) on e_i ≥ −m_i/L_ii, i.e. w_i ~ N(m_i + L_ii μ_i, L_ii²) on w_i ≥ 0;
            # likelihood ratio Φ(μ_i + m_i/L_ii) exp(μ_i²/2 − μ_i e_i) (Botev 2017, eq. 8)
            tilted = mean + scale * tilt[i]
            w = _truncated_normal_inverse(uniforms[:, i], tilted, scale, 1.0)
            e = (w - mean) / scale
            log_p = log_p + log_ndtr(tilted / scale) + 0.5 * tilt[i] ** 2 - tilt[i] * e
            return (standardized.at[:, i].set(e), log_p), None

        start = (jnp.zeros((num_points, size), dtype), jnp.zeros((num_points,), dtype))
        (_, log_p), _ = jax.lax.scan(variable, start, jnp.arange(size))
        return _weights.log_mean_exp(log_p)

    shifts = jax.random.uniform(rng_key, (int(num_shifts), dimension), dtype)
    log_z_shifts = jax.lax.map(shift_log_z, shifts)
    # the spread is read from num_shifts values: Student-t with num_shifts − 1 degrees of freedom
    widen = _weights.student_t_factor(jnp.asarray(int(num_shifts) - 1, log_z_shifts.dtype))
    return GenzEstimate(_weights.log_mean_exp(log_z_shifts), _weights.stderr_log_mean_exp(log_z_shifts) * widen,
                        log_z_shifts, order)
