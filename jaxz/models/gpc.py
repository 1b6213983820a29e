"""Gaussian-process classification with the probit link: the ARM sequence over data
points (seed §4, App. A; Fraccaro, Paquet & Winther 2016) and the annealing paths of
its AIS baselines (seed eqs. 11–12).

Labels y_n ∈ {−1, +1} at inputs ξ_n; latent f ~ N(0, K) with the squared-exponential
kernel K_mn = σ² exp(−|ξ_m − ξ_n|² / (2ℓ²)) (``amplitude`` = σ, so the seed's
"log σ = 5.1" is ``amplitude=exp(5.1)``), and p(y | f) = ∏ Φ(y_n f_n). Writing
Φ(y f) = ∫ Θ(y z) N(z; f, 1) dz and integrating f out gives the orthant form (seed eq. 10)

    Z = p(y) = P(y_n z_n ≥ 0 for all n),   z ~ N(0, Σ),  Σ = K + I,

which ``sequential_model`` builds one data point at a time for ``jaxz.arm``.

f-space (EP, AIS): at the seed's hard hyper-parameters K is numerically singular
(ℓ ≫ the distances between inputs), so N(f; 0, K) has no usable density. The model
moves a sliver δ = ``jitter`` of the unit probit noise into the prior,

    f ~ N(0, K + δI),   p(y_n | f_n) = Φ(y_n f_n / √(1 − δ)),

which has exactly the same Z (z = f + √(1 − δ)·noise ~ N(0, K + I) again). Everything
in f-space (``log_prior``, ``log_likelihood``, the paths, ``fisher_metric``,
``jaxz.approx.gpc_ep``) uses this form; δ = 0 is the textbook model.

Arrays follow the dtype of ``inputs``; the hard hyper-parameters (cond(K + I) ≈ 10⁷)
need float64.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr

from jaxz import _checks
from jaxz.base import SequentialModel
from jaxz.models._orthant import (  # noqa: F401  (public here: gpc.truncated_normal, ...)
    GenzEstimate, minimax_tilt, orthant_log_probability, prioritized_cholesky, truncated_normal,
)
from jaxz.paths import Path, geometric, likelihood_tempering
from jaxz.types import Array

_LOG2 = float(np.log(2.0))
_LOG_SQRT_2PI = float(0.5 * np.log(2.0 * np.pi))


class GPC(NamedTuple):
    inputs: Array  # (N, D)
    labels: Array  # (N,) ±1, in the float dtype
    covariance: Array  # (N, N) K
    amplitude: Array  # σ: K = σ² exp(−|ξ − ξ'|² / (2ℓ²))
    lengthscale: Array  # ℓ
    jitter: Array  # δ: f-space prior K + δI, probit noise 1 − δ (same Z)


# ---------------------------------------------------------------------------------------
# The model and its f-space densities


def squared_exponential(inputs: Array, amplitude, lengthscale) -> Array:
    """K_mn = σ² exp(−|ξ_m − ξ_n|² / (2ℓ²)) for ``inputs`` (N, D); σ = ``amplitude``."""
    sq_norms = jnp.sum(inputs**2, axis=1)
    sq_distances = jnp.maximum(sq_norms[:, None] + sq_norms[None, :] - 2.0 * inputs @ inputs.T, 0.0)
    return amplitude**2 * jnp.exp(-0.5 * sq_distances / lengthscale**2)


def probit(inputs, labels, *, amplitude, lengthscale, jitter=None) -> GPC:
    """GP classifier with the probit link and a squared-exponential kernel (seed §4).

    inputs: (N, D); labels: (N,) with values −1 and +1 only.
    amplitude: σ > 0 (K = σ² k₀; the seed's log σ is log ``amplitude``).
    lengthscale: ℓ > 0.
    jitter: δ ∈ [0, 1), the part of the unit probit noise moved into the f-space prior
        (see the module docstring); default 10⁻⁶·σ², capped at 0.5, which keeps
        cond(K + δI) below ~10⁶·N.
    """
    inputs = jnp.asarray(inputs)
    if not jnp.issubdtype(inputs.dtype, jnp.floating):
        inputs = inputs.astype(jnp.result_type(float))
    if inputs.ndim != 2 or inputs.shape[0] < 1:
        raise ValueError(f"inputs must have shape (N, D) with N >= 1, got {inputs.shape}")
    _checks.finite("inputs", inputs)  # a nan input makes the whole covariance (and log Z) nan
    labels_np = np.asarray(labels)
    if labels_np.shape != (inputs.shape[0],):
        raise ValueError(f"labels must have shape ({inputs.shape[0]},), got {labels_np.shape}")
    if not np.all((labels_np == 1) | (labels_np == -1)):
        raise ValueError(f"labels must be -1 or +1, got values {sorted(set(np.unique(labels_np).tolist()))[:6]}")
    if not float(amplitude) > 0:
        raise ValueError(f"amplitude must be > 0, got {amplitude}")
    if not float(lengthscale) > 0:
        raise ValueError(f"lengthscale must be > 0, got {lengthscale}")
    if jitter is None:
        jitter = min(0.5, 1e-6 * float(amplitude) ** 2)
    if not 0.0 <= float(jitter) < 1.0:
        raise ValueError(f"jitter must be in [0, 1), got {jitter}")
    dtype = inputs.dtype
    amplitude, lengthscale = jnp.asarray(amplitude, dtype), jnp.asarray(lengthscale, dtype)
    covariance = squared_exponential(inputs, amplitude, lengthscale)
    return GPC(inputs, jnp.asarray(labels_np, dtype), covariance, amplitude, lengthscale, jnp.asarray(jitter, dtype))


def orthant_covariance(model: GPC) -> Array:
    """Σ = K + I, the covariance of z in the orthant form Z = P(y ∘ z ≥ 0) (seed eq. 10)."""
    return model.covariance + jnp.eye(model.covariance.shape[0], dtype=model.covariance.dtype)


def prior_covariance(model: GPC) -> Array:
    """K + δI, the covariance of f in the model's f-space."""
    return model.covariance + model.jitter * jnp.eye(model.covariance.shape[0], dtype=model.covariance.dtype)


def noise_scale(model: GPC) -> Array:
    """√(1 − δ): p(y_n | f_n) = Φ(y_n f_n / √(1 − δ))."""
    return jnp.sqrt(1.0 - model.jitter)


def log_likelihood(model: GPC, f: Array) -> Array:
    """Σ_n log Φ(y_n f_n / √(1 − δ)) (log_ndtr: finite far in the tails)."""
    return jnp.sum(log_ndtr(model.labels * f / noise_scale(model)))


def _prior_factor(model: GPC) -> Array:
    return jnp.linalg.cholesky(prior_covariance(model))


def _gaussian_log_density(cholesky: Array, x: Array) -> Array:
    """log N(x; 0, L Lᵀ)."""
    white = jax.scipy.linalg.solve_triangular(cholesky, x, lower=True)
    return -0.5 * jnp.sum(white**2) - jnp.sum(jnp.log(jnp.diag(cholesky))) - x.shape[0] * _LOG_SQRT_2PI


def log_prior_fn(model: GPC):
    """f ↦ log N(f; 0, K + δI), with the Cholesky factor computed once."""
    cholesky = _prior_factor(model)
    return lambda f: _gaussian_log_density(cholesky, f)


def sample_prior_fn(model: GPC):
    """(rng_key, num) ↦ num draws of f ~ N(0, K + δI), shape (num, N)."""
    cholesky = _prior_factor(model)

    def sample(rng_key, num):
        noise = jax.random.normal(rng_key, (num, cholesky.shape[0]), cholesky.dtype)
        return noise @ cholesky.T

    return sample


def fisher_metric(model: GPC):
    """metric_fn(f) -> G(f) = (K + δI)⁻¹ + Λ(f), the RMHMC metric of the seed's AIS
    baselines: the prior precision plus the expected Fisher information of the probit
    likelihood, Λ_nn = φ(t)² / (s² Φ(t) Φ(−t)) with t = f_n/s, s = √(1 − δ) (diagonal,
    label-free). Computed in log space so it tends to 0, not nan, far in the tails."""
    precision = jax.scipy.linalg.cho_solve((_prior_factor(model), True), jnp.eye(model.covariance.shape[0],
                                                                                   dtype=model.covariance.dtype))
    precision = 0.5 * (precision + precision.T)
    scale = noise_scale(model)

    def metric_fn(f):
        t = f / scale
        log_phi = -0.5 * t**2 - _LOG_SQRT_2PI
        log_fisher = 2.0 * log_phi - 2.0 * jnp.log(scale) - log_ndtr(t) - log_ndtr(-t)
        return precision + jnp.diag(jnp.exp(log_fisher))

    return metric_fn


def path_from_prior(model: GPC) -> Path:
    """Seed eq. (12): f_β(f) = N(f; 0, K + δI) · (∏_n Φ(y_n f_n/s))^β, from the prior
    (log Z_0 = 0, exact prior draws) to the posterior; Z_1 = p(y)."""
    return likelihood_tempering(
        log_prior_fn(model), lambda f: log_likelihood(model, f), sample_prior=sample_prior_fn(model)
    )


def path_from_ep(model: GPC, ep) -> Path:
    """Seed eq. (11): f_β(f) = (∏_n Φ(y_n f_n/s) · N(f; 0, K + δI))^β q(f)^{1−β}, from the
    Gaussian q(f) = N(ep.mean, ep.covariance) of ``jaxz.approx.gpc_ep`` (normalized:
    log Z_0 = 0, exact draws from q) to the posterior."""
    mean = jnp.asarray(ep.mean)
    cholesky = jnp.asarray(ep.covariance_cholesky)
    log_prior = log_prior_fn(model)

    def log_q(f):
        return _gaussian_log_density(cholesky, f - mean)

    def log_joint(f):
        return log_prior(f) + log_likelihood(model, f)

    def sample_q(rng_key, num):
        return mean + jax.random.normal(rng_key, (num, mean.shape[0]), mean.dtype) @ cholesky.T

    return geometric(log_q, log_joint, log_z0=0.0, sample_base=sample_q)


# ---------------------------------------------------------------------------------------
# The sequence over data points (seed §4.1, App. A), orthant form


class Levels(NamedTuple):
    """What the block-inverse growth of S^(n) = Σ_[n]⁻¹ (seed App. A.3) yields per level,
    indexed by the 0-based point k = n (the point added by the step n → n + 1):

    regression: (N, N), row k = b_k = S^(k) Σ_[k],k (zero from column k on): the mean
        of z_k given z_[k] is m = b_k · z. In App. A.3's notation s = −ς b_k.
    conditional_variance: (N,), d_k = 1/ς = Σ_kk − Σ_[k],kᵀ b_k (d_0 = Σ_00).
    drift: (N,), the relative size of the one-step refinement of b_k: how far the
        incrementally grown S^(k) was from an inverse of Σ_[k] at that level.
    refreshed: (N,) bool, levels after which S was rebuilt from the Cholesky factor.

    S^(n) itself is Wᵀ D_n⁻¹ W with W = I − regression and D_n⁻¹ = diag(1/d_k, k < n):
    App. A.3's recursion S^(n+1) = S^(n) + w wᵀ/d_n, w = (−b_n, 1), unrolled. So the
    sequence needs O(N²) memory, shared by every particle and every level.
    """

    regression: Array
    conditional_variance: Array
    drift: Array
    refreshed: Array


def block_inverse_levels(covariance: Array, *, drift_tolerance: float = 1e-6) -> Levels:
    """Grow S^(n) = Σ_[n]⁻¹ one point at a time by block inversion (seed App. A.3):

        b = S^(n) Σ_[n],n+1,   ς = 1/(Σ_{n+1,n+1} − Σ_[n],n+1ᵀ b),   s = −ς b,
        S^(n+1) = [[S^(n) + s sᵀ/ς, s], [sᵀ, ς]],

    O(n²) per level. Ill-conditioning guard: each b gets one step of iterative
    refinement against Σ_[n] (O(n²)); its relative size measures the drift of S from
    Σ_[n]⁻¹ (errors of S are carried, not damped, by the recursion), and where it
    exceeds ``drift_tolerance`` S^(n+1) is rebuilt from the Cholesky factor L of Σ as
    M_[n+1]ᵀ M_[n+1], M = L⁻¹ (the leading block of L is the factor of Σ_[n+1]).
    covariance: (N, N) Σ, symmetric positive definite. Returns ``Levels``.
    """
    covariance = jnp.asarray(covariance)
    size, dtype = covariance.shape[0], covariance.dtype
    index = jnp.arange(size)
    inverse_factor = jax.scipy.linalg.solve_triangular(
        jnp.linalg.cholesky(covariance), jnp.eye(size, dtype=dtype), lower=True
    )  # M = L⁻¹, lower triangular

    def refresh(level):  # S^(level) from the Cholesky factor
        rows = jnp.where((index < level)[:, None], inverse_factor, 0.0)
        return rows.T @ rows

    def grow(precision, k):  # precision = S^(k) (zero outside the leading k × k block)
        included = index < k
        column = jnp.where(included, covariance[:, k], 0.0)
        block = jnp.where(included[:, None] & included[None, :], covariance, 0.0)
        b = precision @ column
        correction = precision @ (column - block @ b)  # one refinement step
        b = b + correction
        drift = jnp.max(jnp.abs(correction)) / jnp.maximum(jnp.max(jnp.abs(b)), jnp.finfo(dtype).tiny)
        variance = covariance[k, k] - column @ b
        w = jnp.where(index == k, 1.0, -b)
        grown = precision + jnp.outer(w, w) / variance
        refreshed = ~(drift < drift_tolerance)
        precision = jax.lax.cond(refreshed, lambda: refresh(k + 1), lambda: grown)
        return precision, (b, variance, drift, refreshed)

    start = jnp.zeros((size, size), dtype).at[0, 0].set(1.0 / covariance[0, 0])
    _, (rows, variances, drifts, refreshed) = jax.lax.scan(grow, start, jnp.arange(1, size))
    regression = jnp.concatenate([jnp.zeros((1, size), dtype), rows])
    return Levels(
        regression,
        jnp.concatenate([covariance[:1, 0], variances]),
        jnp.concatenate([jnp.zeros((1,), dtype), drifts]),
        jnp.concatenate([jnp.zeros((1,), bool), refreshed]),
    )


def slice_truncated_normal(rng_key, z, mean, variance, sign):
    """One slice-sampling update of z ~ N(mean, variance) restricted to sign·z ≥ 0,
    the four steps of seed eq. (A.2): the slice under a uniform height is the interval
    mean ± v, clipped at zero on the side the label forbids."""
    uniforms = jax.random.uniform(rng_key, (2,), jnp.result_type(z))
    return _slice_step(z, mean, variance, sign, uniforms[0], uniforms[1])


def _slice_step(z, mean, variance, sign, height_uniform, point_uniform):
    # step 1: v = ((z − μ)² − 2 σ² log U), with U = 1 − height_uniform ∈ (0, 1]
    v = jnp.sqrt((z - mean) ** 2 - 2.0 * variance * jnp.log1p(-height_uniform))
    low = jnp.where((sign < 0) | (mean > v), mean - v, 0.0)  # step 2
    high = jnp.where((sign > 0) | (mean < -v), mean + v, 0.0)  # step 3
    return low + (high - low) * point_uniform  # step 4


def sequential_model(
    model: GPC, gibbs_sweeps: int = 1, *, order=None, drift_tolerance: float = 1e-6, random_scan: bool = True
) -> SequentialModel:
    """The orthant form of GPC as a ``jaxz.SequentialModel`` over data points (seed
    §4.1, App. A): p_n(z_[n]) ∝ N(z_[n]; 0, Σ_[n]) ∏_{i≤n} Θ(y_i z_i), Z_n = P(y_[n] ∘ z_[n] ≥ 0).

    p_1: z_1 ~ N(0, Σ_11) on y_1 z_1 ≥ 0, Z_1 = 1/2.
    smooth weight (App. A.3): W(z_[n]) = Φ(y_{n+1} m/σ) with m = b_{n+1}·z_[n] and
        σ² = d_{n+1}, the conditional mean and variance of z_{n+1} given z_[n].
    augment: z_{n+1} ~ N(m, σ²) on y_{n+1} z_{n+1} ≥ 0 (``truncated_normal``).
    move: ``gibbs_sweeps`` Gibbs sweeps over z_1..z_n in a random order (App. A.1), each
        conditional N(μ_i, 1/S_ii) on y_i z_i ≥ 0 updated by the slice step (A.2).

    The per-level quantities come from ``block_inverse_levels`` once, shared by every
    particle; a particle is just z (N,), entries past n unused. The Gibbs conditionals use
    (S^(n) z)_i = Σ_{k<n} W_ki e_k / d_k with the residuals e = W z (W = I − regression),
    updated in O(N) per coordinate, so a sweep is O(nN) per particle and no S is stored;
    ``move_cost(n)`` = t·n/N full sweeps is what ``jaxz.arm`` charges per move (the seed's
    sweep is O(n²) with S stored: another factor n/N that we do not claim).

    gibbs_sweeps: sweeps per move (the seed's RM uses one).
    order: the order in which data points are added (a permutation; default as given).
    drift_tolerance: see ``block_inverse_levels``.
    """
    if int(gibbs_sweeps) < 1:
        raise ValueError(f"gibbs_sweeps must be >= 1, got {gibbs_sweeps}")
    size = model.labels.shape[0]
    if order is None:
        order = np.arange(size)
    order = np.asarray(order)
    if order.shape != (size,) or not np.array_equal(np.sort(order), np.arange(size)):
        raise ValueError(f"order must be a permutation of range({size})")
    covariance = orthant_covariance(model)[order][:, order]
    labels = model.labels[order]
    dtype = covariance.dtype
    levels = block_inverse_levels(covariance, drift_tolerance=drift_tolerance)
    regression, variances = levels.regression, levels.conditional_variance
    unit_lower = jnp.eye(size, dtype=dtype) - regression  # W: e = W z
    columns = unit_lower.T  # columns[i] = W[:, i]
    index = jnp.arange(size)

    def conditional(z, n):  # mean and sd of z_{n+1} | z_[n] (0-based point n)
        return regression[n] @ z, jnp.sqrt(variances[n])

    def sample_initial(rng_key):
        z0 = truncated_normal(rng_key, jnp.zeros((), dtype), jnp.sqrt(variances[0]), labels[0])
        return jnp.zeros((size,), dtype).at[0].set(z0)

    def log_smooth_weight(z, n):  # App. A.3: W = Φ(y_{n+1} m / σ)
        mean, scale = conditional(z, n)
        return log_ndtr(labels[n] * mean / scale)

    def augment(rng_key, z, n):
        mean, scale = conditional(z, n)
        return z.at[n].set(truncated_normal(rng_key, mean, scale, labels[n]))

    def move(rng_key, z, n):
        included = index < n
        inverse_variances = jnp.where(included, 1.0 / variances, 0.0)  # 1/d_k for the levels k < n
        weighted_columns = columns * inverse_variances[None, :]
        precision_diagonal = jnp.sum(weighted_columns * columns, axis=1)  # S^(n)_ii = Σ_{k<n} W_ki² / d_k

        def sweep(z, key):
            # one draw per sweep: the visiting order, the slice heights, the points
            order_keys, heights, points = jax.random.uniform(key, (3, size), dtype)
            # App. A.1: the coordinates of [n] in random order
            visit = jnp.argsort(jnp.where(included, order_keys, 2.0)) if random_scan else index
            residuals = unit_lower @ z

            def update(j, carry):
                z, residuals = carry
                i = visit[j]
                precision = precision_diagonal[i]
                mean = z[i] - (weighted_columns[i] @ residuals) / precision  # μ_i of (A.1)
                new = _slice_step(z[i], mean, 1.0 / precision, labels[i], heights[j], points[j])
                residuals = residuals + columns[i] * (new - z[i])
                return z.at[i].set(new), residuals

            z, _ = jax.lax.fori_loop(0, n, update, (z, residuals))
            return z, None

        return jax.lax.scan(sweep, z, jax.random.split(rng_key, int(gibbs_sweeps)))[0]

    def move_cost(n):  # a sweep visits the n included points (O(N) each here): t·n/N full sweeps
        return int(gibbs_sweeps) * jnp.asarray(n, jnp.float32) / size

    return SequentialModel(size, sample_initial, jnp.asarray(-_LOG2, dtype), log_smooth_weight, augment, move,
                           int(gibbs_sweeps), move_cost)


def exact_log_z(model: GPC, *, relative_error: float = 1e-4, repeats: int = 4):
    """log Z = log P(y ∘ z ≥ 0), z ~ N(0, K + I), by scipy's randomized quasi-Monte Carlo
    Genz integration (``scipy.stats.multivariate_normal.cdf``), for small N (≲ 20).
    Host-side numpy. The absolute tolerance handed to scipy is ``relative_error`` times a
    first rough value; returns ``(log_z, error)``: log of the mean of ``repeats``
    independent evaluations and the largest deviation of one evaluation's log from it
    (scipy returns no error estimate of its own)."""
    from scipy import stats

    labels = np.asarray(model.labels, np.float64)
    size = labels.shape[0]
    covariance = np.asarray(orthant_covariance(model), np.float64) * labels[:, None] * labels[None, :]
    # y ∘ z ~ N(0, Y Σ Y) and the orthant y ∘ z ≥ 0 has the probability of −(y ∘ z) ≤ 0
    rough = stats.multivariate_normal.cdf(np.zeros(size), cov=covariance, maxpts=100_000 * size, abseps=1e-6,
                                          rng=np.random.default_rng(0))
    values = np.array([
        stats.multivariate_normal.cdf(np.zeros(size), cov=covariance, maxpts=10_000_000, abseps=relative_error * rough,
                                      releps=0.0, rng=np.random.default_rng(1 + seed))
        for seed in range(repeats)
    ])
    log_z = float(np.log(np.mean(values)))
    return log_z, float(np.max(np.abs(np.log(values) - log_z)))



# ---------------------------------------------------------------------------------------
# A reference independent of EP: randomized-QMC separation of variables (Genz 1992)


def genz_log_z(model: GPC, rng_key, num_points: int = 4096, num_shifts: int = 16, *,
               reorder: bool = True, tilting: bool = True) -> GenzEstimate:
    """log Z = log P(y ∘ z ≥ 0), z ~ N(0, K + I) (seed eq. 10), by ``orthant_log_probability``
    on y ∘ z ~ N(0, Y Σ Y): a reference independent of EP and of the samplers, in JAX
    (float64 at the hard hyper-parameters)."""
    labels = model.labels
    covariance = orthant_covariance(model) * labels[:, None] * labels[None, :]
    return orthant_log_probability(covariance, rng_key, num_points, num_shifts, reorder=reorder, tilting=tilting)


__all__ = [
    "GPC", "Levels", "probit", "squared_exponential", "orthant_covariance", "prior_covariance", "noise_scale",
    "log_likelihood", "log_prior_fn", "sample_prior_fn", "fisher_metric", "path_from_prior", "path_from_ep",
    "block_inverse_levels", "truncated_normal", "slice_truncated_normal", "sequential_model", "exact_log_z",
    "GenzEstimate", "prioritized_cholesky", "minimax_tilt", "orthant_log_probability", "genz_log_z",
]
