"""Gaussian mixtures fitted to weighted particles: proposals for importance sampling.

A tempered SMC run ends with weighted particles {x_i, W_i} of the target π = f/Z.
``fit_mixture`` fits q(x) = Σ_k a_k N(x; μ_k, Σ_k) to them by weighted EM (Dempster,
Laird & Rubin 1977), which raises Σ_i W_i log q(x_i), a Monte Carlo estimate of
−KL(π ‖ q) up to a constant: the criterion of population Monte Carlo's mixture
adaptation (Cappé, Douc, Guillin, Marin & Robert 2008, Stat. Comput. 18, §3), here
read off the SMC particles instead of earlier importance draws. ``select_mixture``
picks the number of components by two-fold cross-validation of that criterion (the
held-out half's weighted log q), so a thin or curved target gets as many components
as its particles support and a Gaussian one gets one.

Everything is static-shaped: a mixture of K components is stored with ``max_components``
slots, the unused ones with log a_k = −inf, so candidates stack, jit and vmap.
"""
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks
from jaxz.types import Array, PRNGKey

EM_ITERATIONS = 60
LLOYD_ITERATIONS = 20
# Each covariance gets RIDGE × the particles' own variance on its diagonal (a component
# on a few nearly equal particles would otherwise be singular).
RIDGE = 1e-6
MIN_COMPONENT_WEIGHT = 1e-3  # components whose mass falls below this (relative) are dropped


def _cholesky(matrix: Array) -> Array:
    """Lower Cholesky factor of a (d, d) positive-definite matrix, column by column in
    plain XLA operations (no LAPACK call: LAPACK custom calls inside these loops wedged
    XLA's CPU thread pool, the process waiting forever, in stress runs of two processes
    on two cores)."""
    dim = matrix.shape[-1]
    index = jnp.arange(dim)
    tiny = jnp.finfo(matrix.dtype).tiny

    def column(j, factor):
        row = factor[j]  # zero from column j on
        pivot = jnp.sqrt(jnp.maximum(matrix[j, j] - row @ row, tiny))
        below = (matrix[:, j] - factor @ row) / pivot
        return factor.at[:, j].set(jnp.where(index > j, below, jnp.where(index == j, pivot, 0.0)))

    return jax.lax.fori_loop(0, dim, column, jnp.zeros_like(matrix))


def _solve_lower(factor: Array, rows: Array) -> Array:
    """y with L y = b for every row b of ``rows`` (n, d), by forward substitution."""

    def entry(i, solved):  # solved is zero from column i on
        return solved.at[:, i].set((rows[:, i] - solved @ factor[i]) / factor[i, i])

    return jax.lax.fori_loop(0, factor.shape[-1], entry, jnp.zeros_like(rows))


class GaussianMixture(NamedTuple):
    log_weights: Array  # (K,) log a_k, normalized; −inf for unused slots
    means: Array  # (K, d)
    cholesky: Array  # (K, d, d) lower-triangular factors of Σ_k


def _component_log_densities(mixture: GaussianMixture, points: Array) -> Array:
    """(n, K) log N(x_i; μ_k, Σ_k)."""
    dim = points.shape[-1]
    # L_k⁻¹ once per component (d × d), then one batched product over the points: cheaper than
    # a triangular solve per point inside the (n, K) loop, which would dominate an EM step
    identity = jnp.eye(dim, dtype=points.dtype)
    inverse = jax.vmap(lambda factor: _solve_lower(factor, identity).T)(mixture.cholesky)  # (K, d, d): L_k⁻¹
    solved = jnp.einsum("kij,nkj->nki", inverse, points[:, None, :] - mixture.means[None])  # (n, K, d)
    log_det = jnp.sum(jnp.log(jnp.diagonal(mixture.cholesky, axis1=-2, axis2=-1)), axis=-1)  # (K,)
    return -0.5 * jnp.sum(solved ** 2, axis=-1) - log_det - 0.5 * dim * jnp.log(2 * jnp.pi)


def log_density(mixture: GaussianMixture, points: Array) -> Array:
    """log q(x) at each row of ``points`` (n, d)."""
    joint = _component_log_densities(mixture, points) + mixture.log_weights
    return jax.nn.logsumexp(jnp.where(jnp.isneginf(mixture.log_weights), -jnp.inf, joint), axis=-1)


class PMCStatistics(NamedTuple):
    """Importance-weighted sufficient statistics of a mixture's components (``pmc_statistics``),
    each scaled by e^{−log_scale}: mass Σ_i u_ik, Σ_i u_ik², first and second moments of
    x_i − μ_k, with u_ik = w_i ρ_k(x_i)."""
    log_scale: Array  # ()
    mass: Array  # (K,)
    mass_squares: Array  # (K,)
    first: Array  # (K, d)
    second: Array  # (K, d, d)


def pmc_statistics(mixture: GaussianMixture, points: Array, log_weights: Array) -> PMCStatistics:
    """The statistics of one population Monte Carlo step from draws x_i ~ q with importance
    weights w_i = π(x_i)/q(x_i) (log, any scale; nan counts nothing): ρ_k(x) = a_k N(x; μ_k,
    Σ_k) / Σ_j a_j N(x; μ_j, Σ_j) is component k's responsibility, and Σ_i w_i ρ_k(x_i) g(x_i) /
    Σ_i w_i estimates E_π[ρ_k(X) g(X)] (Cappé, Douc, Guillin, Marin & Robert 2008, Stat.
    Comput. 18, §3: the Rao-Blackwellised update of a Gaussian mixture)."""
    joint = jnp.where(jnp.isneginf(mixture.log_weights), -jnp.inf,
                      _component_log_densities(mixture, points) + mixture.log_weights)
    log_resp = joint - jax.nn.logsumexp(joint, axis=-1, keepdims=True)
    log_w = jnp.where(jnp.isnan(log_weights), -jnp.inf, log_weights)
    log_scale = jnp.max(log_w)
    log_scale = jnp.where(jnp.isfinite(log_scale), log_scale, 0.0)
    terms = log_w[:, None] - log_scale + log_resp
    u = jnp.exp(jnp.where(jnp.isnan(terms), -jnp.inf, terms))  # (n, K)
    centred = points[:, None, :] - mixture.means[None]  # (n, K, d)
    return PMCStatistics(log_scale, jnp.sum(u, axis=0), jnp.sum(u ** 2, axis=0), jnp.einsum("nk,nkd->kd", u, centred),
                         jnp.einsum("nk,nkd,nke->kde", u, centred, centred))


def pmc_update(mixture: GaussianMixture, statistics: PMCStatistics, step: float, prior_count: float) -> GaussianMixture:
    """One damped population Monte Carlo step from ``statistics`` summed over batches (a
    leading batch axis is combined here): a_k ← (1 − s) a_k + s α_k, α_k the target's
    estimated mass on component k, s = ``step``; μ_k ← μ_k + s_k δ_k and Σ_k ← (1 − s_k) Σ_k
    + s_k S_k + s_k (1 − s_k) δ_k δ_kᵀ (δ_k and S_k the weighted mean shift and covariance;
    the moments of the two Gaussians' mixture), with s_k = s·e_k / (e_k + a_k·``prior_count``)
    and e_k = (Σ_i u_ik)² / Σ_i u_ik² the effective number of draws behind component k: the
    fitted component counts as a_k·prior_count draws (its share of the particles it was
    fitted to), so a component seen by a few heavy weights moves a little toward them and
    one seen by thousands of draws moves the full step. Unchanged where no weight was seen.

    ``step`` must lie in (0, 1] (a larger one extrapolates past the draws' reading, and the
    covariances stop being positive definite) and ``prior_count`` be finite and >= 0:
    ValueError for concrete values; a traced step outside (0, 1] gives a nan mixture."""
    if _checks.is_traced(step):
        step = jnp.where((step > 0) & (step <= 1), step, jnp.nan)
    elif np.ndim(step) != 0 or not 0 < float(step) <= 1:
        raise ValueError(f"step must be a number in (0, 1] (the share of the way toward the draws' reading), "
                         f"got {step!r}")
    if not _checks.is_traced(prior_count) and not np.all(np.isfinite(prior_count) & (np.asarray(prior_count) >= 0)):
        raise ValueError(f"prior_count must be finite and >= 0 (the draws the fitted mixture counts as), "
                         f"got {prior_count!r}")
    if statistics.log_scale.ndim:  # batches: onto one scale
        shift = statistics.log_scale - jnp.max(statistics.log_scale)
        factor = jnp.exp(shift)
        statistics = PMCStatistics(jnp.max(statistics.log_scale), factor @ statistics.mass,
                                   jnp.exp(2 * shift) @ statistics.mass_squares,
                                   jnp.einsum("b,bkd->kd", factor, statistics.first),
                                   jnp.einsum("b,bkde->kde", factor, statistics.second))
    used = ~jnp.isneginf(mixture.log_weights)
    mass = jnp.where(used, statistics.mass, 0.0)
    total = jnp.sum(mass)
    seen = (total > 0) & jnp.isfinite(total)
    share = mass / jnp.where(seen, total, 1.0)
    log_weights = jnp.where(used & seen, jnp.log((1 - step) * jnp.exp(mixture.log_weights) + step * share),
                            mixture.log_weights)
    ess = mass ** 2 / jnp.maximum(statistics.mass_squares, jnp.finfo(mass.dtype).tiny)
    moves = used & seen & (mass > 0)
    rate = jnp.where(moves, step * ess / (ess + jnp.exp(mixture.log_weights) * prior_count), 0.0)  # s_k
    safe_mass = jnp.where(moves, mass, 1.0)[:, None]
    shift = statistics.first / safe_mass  # (K, d)
    outer = shift[:, :, None] * shift[:, None, :]
    spread = statistics.second / safe_mass[..., None] - outer
    old = jnp.einsum("kij,klj->kil", mixture.cholesky, mixture.cholesky)
    r = rate[:, None, None]
    covariance = (1 - r) * old + r * spread + r * (1 - r) * outer
    cholesky = jnp.where(moves[:, None, None], jax.vmap(_cholesky)(jnp.where(moves[:, None, None], covariance, old)),
                         mixture.cholesky)
    return GaussianMixture(log_weights - jax.nn.logsumexp(log_weights), mixture.means + rate[:, None] * shift, cholesky)


def sample(mixture: GaussianMixture, rng_key: PRNGKey, num: int) -> Array:
    """``num`` draws (num, d)."""
    key_component, key_normal = jax.random.split(rng_key)
    component = jax.random.categorical(key_component, mixture.log_weights, shape=(num,))
    noise = jax.random.normal(key_normal, (num, mixture.means.shape[-1]), mixture.means.dtype)
    return mixture.means[component] + jnp.einsum("nij,nj->ni", mixture.cholesky[component], noise)


def _seed_means(rng_key, points, log_weights, num_components, max_components):
    """k-means++ seeding (Arthur & Vassilvitskii 2007) with the particle weights: each
    new centre drawn with probability ∝ W_i × squared distance to the nearest chosen one."""
    scaled = points / _scale(points, log_weights)

    def pick(carry, key_index):
        nearest, chosen = carry
        key, index = key_index
        logits = log_weights + jnp.log(jnp.maximum(nearest, 0.0))
        logits = jnp.where(index == 0, log_weights, logits)
        logits = jnp.where(jnp.all(jnp.isneginf(logits)), log_weights, logits)
        choice = jax.random.categorical(key, logits)
        distance = jnp.sum((scaled - scaled[choice]) ** 2, axis=-1)
        nearest = jnp.where(index < num_components, jnp.minimum(nearest, distance), nearest)
        return (nearest, chosen.at[index].set(choice.astype(chosen.dtype))), None  # int64 under x64

    keys = jax.random.split(rng_key, max_components)
    start = (jnp.full(points.shape[:1], jnp.inf, points.dtype), jnp.zeros((max_components,), jnp.int32))
    (_, chosen), _ = jax.lax.scan(pick, start, (keys, jnp.arange(max_components)))
    return points[chosen]


def _lloyd(points, log_w, means, active, ridge, iterations=LLOYD_ITERATIONS):
    """Weighted k-means (Lloyd) from the seeds, in coordinates scaled by the points' sd,
    then each cluster's weighted mass, mean and covariance as EM's starting mixture
    (EM started from broad covariances settles with one component over several modes)."""
    scale = _scale(points, log_w)

    def assign(centres):
        distance = jnp.sum(((points[:, None, :] - centres[None]) / scale) ** 2, axis=-1)
        return jnp.argmin(jnp.where(active[None], distance, jnp.inf), axis=-1)

    def update(centres, _):
        label = assign(centres)
        resp = jax.nn.one_hot(label, means.shape[0], dtype=points.dtype) * jnp.exp(log_w)[:, None]
        mass = jnp.sum(resp, axis=0)
        moved = (resp.T @ points) / jnp.maximum(mass, jnp.finfo(points.dtype).tiny)[:, None]
        return jnp.where((mass > 0)[:, None], moved, centres), None

    centres, _ = jax.lax.scan(update, means, None, length=iterations)
    resp = jax.nn.one_hot(assign(centres), means.shape[0], dtype=points.dtype) * jnp.exp(log_w)[:, None]
    return _m_step(points, resp, active & (jnp.sum(resp, axis=0) > 0), ridge,
                   jnp.broadcast_to(jnp.diag(jnp.sqrt(ridge)), (means.shape[0],) + ridge.shape * 2), centres)


def _m_step(points, weighted_resp, keep, ridge, old_cholesky, old_means):
    """Mixture from weighted responsibilities (n, K) (W_i r_ik); ``keep`` masks the
    components that stay."""
    mass = jnp.sum(weighted_resp, axis=0)
    keep = keep & (mass > MIN_COMPONENT_WEIGHT * jnp.sum(mass))
    resp = jnp.where(keep[None], weighted_resp / jnp.where(keep, mass, 1.0)[None], 0.0)
    means = resp.T @ points  # (K, d)
    centred = points[None] - means[:, None]  # (K, n, d)
    covariance = jnp.einsum("kn,kni,knj->kij", resp.T, centred, centred) + jnp.diag(ridge)
    cholesky = jnp.where(keep[:, None, None], jax.vmap(_cholesky)(covariance), old_cholesky)
    log_weights = jnp.where(keep, jnp.log(jnp.where(keep, mass, 1.0)), -jnp.inf)
    return GaussianMixture(log_weights - jax.nn.logsumexp(log_weights), jnp.where(keep[:, None], means, old_means),
                           cholesky)


def _scale(points, log_weights):
    """The points' weighted sd per coordinate (k-means works in coordinates scaled by it)."""
    return jnp.sqrt(jnp.maximum(_weighted_variance(points, log_weights), jnp.finfo(points.dtype).tiny))


def _weighted_variance(points, log_weights):
    weights = jax.nn.softmax(log_weights)
    mean = weights @ points
    return weights @ (points - mean) ** 2


def _check_points(points, log_weights) -> None:
    """``points`` (n, d) with n, d >= 1 and ``log_weights`` (n,) (static shapes); concrete
    log weights with at least one that is not −inf or nan (no point to fit otherwise) and
    none +inf."""
    if np.ndim(points) != 2 or 0 in np.shape(points):
        raise ValueError(f"points must have shape (n, d) with n, d >= 1, got {np.shape(points)}")
    if np.shape(log_weights) != np.shape(points)[:1]:
        raise ValueError(f"log_weights must have shape (n,) = {np.shape(points)[:1]} (one per point), "
                         f"got {np.shape(log_weights)}")
    if not _checks.is_traced(log_weights):
        weights = np.asarray(log_weights, dtype=np.float64)
        if not np.any(weights > -np.inf):  # nan compares False: all nan or −inf
            raise ValueError("log_weights are all -inf or nan: no point carries weight, so there is no mixture to fit")
        if np.any(weights == np.inf):
            raise ValueError("log_weights contain +inf (a broken density, not a weight): every normalized weight "
                             "would be nan; pass them through jaxz.weights.sanitize first")


def fit_mixture(rng_key: PRNGKey, points: Array, log_weights: Array, num_components: Array,
                max_components: int, iterations: int = EM_ITERATIONS) -> GaussianMixture:
    """Weighted EM for a mixture of ``num_components`` Gaussians (an integer in
    [1, ``max_components``], possibly traced; ``max_components`` is static: the slots)
    on ``points`` (n, d) with log weights (n,) (any scale; −inf or nan drops a point).
    Seeded by weighted k-means++; each M-step adds RIDGE × the points' variance to every
    covariance's diagonal and drops components whose mass is below
    MIN_COMPONENT_WEIGHT, so the fit can have fewer components than asked: a component
    left without points (more components than distinct live points) is dropped the same
    way (its slot has log a_k = −inf). Compiled once per ``max_components`` and ``iterations``.

    ValueError for a concrete ``num_components`` outside [1, ``max_components``] and for
    concrete log weights that are all −inf (or nan); a traced ``num_components`` is
    clipped to [1, ``max_components``], and traced weights all −inf give a nan mixture."""
    max_components = _checks.integer("max_components", max_components, 1, "mixture slots")
    iterations = _checks.integer("iterations", iterations, 0, "EM iterations")
    _check_points(points, log_weights)
    if _checks.is_traced(num_components):
        num_components = jnp.clip(num_components, 1, max_components)
    elif _checks.integer("num_components", num_components, 1) > max_components:
        raise ValueError(f"num_components must be in [1, max_components] = [1, {max_components}] (the mixture has "
                         f"{max_components} slots), got {num_components}: raise max_components")
    return _fit_mixture(rng_key, points, log_weights, num_components, max_components, iterations)


@functools.partial(jax.jit, static_argnames=("max_components", "iterations"))
def _fit_mixture(rng_key, points, log_weights, num_components, max_components, iterations):
    """``fit_mixture`` past its checks."""
    log_w = jax.nn.log_softmax(jnp.where(jnp.isnan(log_weights), -jnp.inf, log_weights))
    ridge = RIDGE * jnp.maximum(_weighted_variance(points, log_w), jnp.finfo(points.dtype).tiny)
    active = jnp.arange(max_components) < num_components
    means = _seed_means(rng_key, points, log_w, num_components, max_components)
    start = _lloyd(points, log_w, means, active, ridge)
    def em_step(mixture, _):
        used = ~jnp.isneginf(mixture.log_weights)
        joint = jnp.where(used, _component_log_densities(mixture, points) + mixture.log_weights, -jnp.inf)
        log_resp = joint - jax.nn.logsumexp(joint, axis=-1, keepdims=True)  # E-step
        weighted = jnp.exp(log_resp + log_w[:, None])
        weighted = jnp.where(jnp.isnan(weighted), 0.0, weighted)
        return _m_step(points, weighted, used, ridge, mixture.cholesky, mixture.means), None

    fitted, _ = jax.lax.scan(em_step, start, None, length=iterations)
    return fitted


def select_mixture(rng_key: PRNGKey, points: Array, log_weights: Array, candidates: tuple[int, ...],
                   iterations: int = EM_ITERATIONS) -> tuple[GaussianMixture, Array]:
    """The mixture, among ``candidates`` numbers of components (integers >= 1), whose
    two-fold cross-validated weighted log-likelihood Σ_i W_i log q(x_i) is highest,
    refitted on all points; returns (mixture, chosen number of components). Points and
    weights as ``fit_mixture`` (ValueError for concrete weights all −inf)."""
    if not isinstance(candidates, tuple) or not candidates:
        raise ValueError(f"candidates must be a non-empty tuple of numbers of components, got {candidates!r}")
    candidates = tuple(_checks.integer("candidates", count, 1, "components") for count in candidates)
    iterations = _checks.integer("iterations", iterations, 0, "EM iterations")
    _check_points(points, log_weights)
    return _select_mixture(rng_key, points, log_weights, candidates, iterations)


@functools.partial(jax.jit, static_argnames=("candidates", "iterations"))
def _select_mixture(rng_key, points, log_weights, candidates, iterations):
    """``select_mixture`` past its checks."""
    n = points.shape[0]
    max_components = max(candidates)
    key_split, key_fit = jax.random.split(rng_key)
    fold = jax.random.permutation(key_split, n) < n // 2
    log_w = jax.nn.log_softmax(jnp.where(jnp.isnan(log_weights), -jnp.inf, log_weights))
    # every candidate fitted three times in one vmapped graph: on each half (scored on the other) and on all points
    train = jnp.stack([~fold, fold, jnp.ones_like(fold)])
    test = jnp.stack([fold, ~fold, jnp.zeros_like(fold)])
    counts = jnp.repeat(jnp.asarray(candidates), 3)
    rows = jnp.tile(jnp.arange(3), len(candidates))

    def fit_and_score(num_components, row, key):
        fitted = _fit_mixture(key, points, jnp.where(train[row], log_w, -jnp.inf), num_components, max_components,
                             iterations)
        log_q = log_density(fitted, points)
        held_out = test[row] & jnp.isfinite(log_w)
        return fitted, jnp.sum(jnp.where(held_out, jnp.exp(log_w) * jnp.where(jnp.isfinite(log_q), log_q, -1e30), 0.0))

    fits, scores = jax.vmap(fit_and_score)(counts, rows, jax.random.split(key_fit, counts.shape[0]))
    scores = jnp.sum(scores.reshape(len(candidates), 3), axis=-1)
    best = jnp.argmax(jnp.where(jnp.isnan(scores), -jnp.inf, scores))
    chosen = jax.tree.map(lambda leaf: leaf[3 * best + 2], fits)
    return chosen, jnp.asarray(candidates)[best]


__all__ = ["GaussianMixture", "fit_mixture", "select_mixture", "log_density", "sample", "PMCStatistics",
           "pmc_statistics", "pmc_update"]
