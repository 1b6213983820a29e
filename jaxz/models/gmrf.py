"""Latent Gaussian Markov random fields (conditional autoregressive, CAR) with
binomial or Gaussian observations, as sequences of variables for ``jaxz.twisted_smc``
(Lindsten, Helske & Vihola 2018, §4.3 and §6.3).

    x ~ N(0, Q⁻¹),   Q = τ (D + d I − A)           (A the 0/1 adjacency, D its degrees)
    y_t | x_t ~ Binomial(n_t, logit⁻¹ x_t)         (binomial_car; full likelihood, with log C(n_t, y_t))
    y_t | x_t ~ N(x_t, s_t²)                       (gaussian_car; log Z exact, ``exact_log_z``)

Z = p(y) = ∫ p(x) ∏_t p(y_t | x_t) dx. This is the precision convention of the authors'
code (particlefield); the paper's text writes the precision as Q/τ (shared/data/README.md).

``sequential_model(model, order, twist)`` adds one variable per step in ``order``:
SMC-Base draws x_t from the prior conditional p(x_t | x_{1:t−1}) and weighs by
p(y_t | x_t); SMC-Twist (seed eq. 12) draws from the Gaussian approximation
p̃(x_t | x_{1:t−1}, y_{1:T}) built from Gaussian pseudo-observations p̃(y_s | x_s)
(``jaxz.approx.laplace``) and weighs by p(y_t | x_t)/p̃(y_t | x_t).

Linear algebra runs on the host in float64 (numpy/scipy): sparse LDLᵀ factorizations
(SuperLU with diagonal pivots) — fill-reducing for log-determinants and solves, in the
requested order for the per-step conditional coefficients. The device side gets
only those coefficients (the nonzeros of one factor column per step), in the
default JAX float dtype — float64 under ``jax.experimental.enable_x64()``, which the
Gaussian-case exactness (Prop. 1) to 1e-6 needs.
"""
from types import SimpleNamespace
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.sparse.csgraph
import scipy.sparse.linalg
from scipy.special import gammaln

from jaxz import _checks
from jaxz.base import SequentialGraphModel
from jaxz.paths import Path, likelihood_tempering
from jaxz.models._graph_orders import approximate_minimum_degree, random_order, reverse_cuthill_mckee
from jaxz.models._graph_orders import check_adjacency as _check_adjacency
from jaxz.types import Array

_LOG_2PI = float(np.log(2.0 * np.pi))


class LatentGMRF(NamedTuple):
    """A CAR latent field with one observation per variable (host-side, float64)."""

    adjacency: np.ndarray  # (T, T) int8, symmetric 0/1, zero diagonal
    precision: scipy.sparse.csr_matrix  # Q = τ (D + d I − A)
    log_det_precision: float  # log |Q|
    observations: np.ndarray  # (T,) y
    trials: np.ndarray | None  # (T,) n_t (binomial), None for Gaussian observations
    noise_sd: np.ndarray | None  # (T,) s_t (Gaussian), None for binomial observations
    tau: float
    d: float

    @property
    def num_variables(self) -> int:
        return self.observations.shape[0]


# ---------------------------------------------------------------------------------------
# Graphs and construction


def lattice_adjacency(rows: int, cols: int) -> np.ndarray:
    """The (rows·cols, rows·cols) adjacency of a rows × cols grid with 4-neighbours
    (not periodic), vertices in raster order (column index fastest)."""
    if int(rows) < 1 or int(cols) < 1:
        raise ValueError(f"rows and cols must be >= 1, got {rows}, {cols}")
    index = np.arange(rows * cols).reshape(rows, cols)
    edges = np.concatenate([
        np.stack([index[:, :-1].ravel(), index[:, 1:].ravel()], axis=1),
        np.stack([index[:-1, :].ravel(), index[1:, :].ravel()], axis=1),
    ])
    return adjacency_from_edges(edges, rows * cols)


def adjacency_from_edges(edges, num_nodes: int) -> np.ndarray:
    """A symmetric 0/1 (num_nodes, num_nodes) adjacency from an (E, 2) array of 0-based
    undirected edges (duplicates are merged; self-loops are refused)."""
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    if edges.size and (edges.min() < 0 or edges.max() >= num_nodes):
        raise ValueError(f"edges must hold node ids in [0, {num_nodes}), got range [{edges.min()}, {edges.max()}]")
    if np.any(edges[:, 0] == edges[:, 1]):
        raise ValueError("edges must not contain self-loops")
    adjacency = np.zeros((num_nodes, num_nodes), np.int8)
    adjacency[edges[:, 0], edges[:, 1]] = 1
    adjacency[edges[:, 1], edges[:, 0]] = 1
    return adjacency


def car_precision(adjacency, tau: float = 0.1, d: float = 1.0) -> scipy.sparse.csr_matrix:
    """Q = τ (D + d I − A), sparse, float64: positive definite for τ > 0, d > 0
    (strictly diagonally dominant)."""
    adjacency = _check_adjacency(adjacency)
    if not float(tau) > 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    if not float(d) > 0:
        raise ValueError(f"d must be > 0 (d = 0 is the improper intrinsic CAR), got {d}")
    sparse = scipy.sparse.csr_matrix(adjacency, dtype=np.float64)
    degrees = np.asarray(sparse.sum(axis=1)).ravel()
    return (float(tau) * (scipy.sparse.diags(degrees + float(d)) - sparse)).tocsr()


def _vector(name, value, num_variables):
    value = np.asarray(value, dtype=np.float64)
    if value.ndim > 1 or (value.ndim == 1 and value.shape[0] != num_variables):
        raise ValueError(f"{name} must be a scalar or have shape ({num_variables},), got shape {value.shape}")
    if not np.all(np.isfinite(value)):
        raise ValueError(f"{name} must be finite")
    return np.broadcast_to(value, (num_variables,)).copy()


def binomial_car(adjacency, observations, trials, *, tau: float = 0.1, d: float = 1.0) -> LatentGMRF:
    """CAR field with binomial counts: y_t ~ Binomial(n_t, logit⁻¹ x_t) (seed §6.3).

    adjacency: (T, T) symmetric 0/1, zero diagonal. observations: (T,) integer counts.
    trials: n_t, a scalar or (T,), integers >= the counts. The likelihood is the full
    binomial one, log C(n_t, y_t) included (the authors' code leaves it out).
    """
    adjacency = _check_adjacency(adjacency)
    num_variables = adjacency.shape[0]
    observations = _vector("observations", observations, num_variables)
    trials = _vector("trials", trials, num_variables)
    if np.any(trials != np.round(trials)) or np.any(trials < 0):
        raise ValueError("trials must be non-negative integers")
    if np.any(observations != np.round(observations)) or np.any(observations < 0) or np.any(observations > trials):
        raise ValueError("observations must be integers in [0, trials]")
    precision = car_precision(adjacency, tau, d)
    return LatentGMRF(adjacency, precision, ldl_log_det(sparse_ldl(precision)), observations, trials, None,
                      float(tau), float(d))


def gaussian_car(adjacency, observations, *, noise_sd, tau: float = 0.1, d: float = 1.0) -> LatentGMRF:
    """CAR field with Gaussian observations y_t ~ N(x_t, s_t²), ``noise_sd`` = s (a
    scalar or (T,), > 0). The Laplace approximation is exact here, so twisted SMC with
    it returns Ẑ = Z (``exact_log_z``) with zero variance (seed Prop. 1)."""
    adjacency = _check_adjacency(adjacency)
    num_variables = adjacency.shape[0]
    observations = _vector("observations", observations, num_variables)
    noise_sd = _vector("noise_sd", noise_sd, num_variables)
    if np.any(noise_sd <= 0):
        raise ValueError("noise_sd must be > 0")
    precision = car_precision(adjacency, tau, d)
    return LatentGMRF(adjacency, precision, ldl_log_det(sparse_ldl(precision)), observations, None, noise_sd,
                      float(tau), float(d))


def simulate_binomial_car(rng: np.random.Generator, adjacency, trials, *, tau: float = 0.1, d: float = 1.0):
    """One draw (x, y) from the binomial CAR model with a numpy Generator: x = L⁻ᵀ z
    with Q = L Lᵀ, y_t ~ Binomial(n_t, logit⁻¹ x_t). Returns (x, y) as float64 arrays."""
    precision = car_precision(adjacency, tau, d)
    num_variables = precision.shape[0]
    lower = scipy.linalg.cholesky(precision.toarray(), lower=True)
    x = scipy.linalg.solve_triangular(lower.T, rng.standard_normal(num_variables), lower=False)
    trials = np.broadcast_to(np.asarray(trials), (num_variables,))
    y = rng.binomial(trials.astype(np.int64), 1.0 / (1.0 + np.exp(-x)))
    return x, y.astype(np.float64)


# ---------------------------------------------------------------------------------------
# Host linear algebra: sparse LDLᵀ (SuperLU in symmetric mode, diagonal pivots)


def sparse_ldl(matrix, extra_diagonal=None, *, ordering: str = "MMD_AT_PLUS_A"):
    """A sparse LDLᵀ factorization of the SPD ``matrix`` (+ diag(extra_diagonal)).

    scipy has no sparse Cholesky; SuperLU with diagonal pivoting (diag_pivot_thresh=0)
    in symmetric mode factors P A Pᵀ = L U with U = D Lᵀ, L unit lower — an LDLᵀ with
    SuperLU's symmetric minimum-degree permutation P (``ordering``; "NATURAL" keeps the
    given order): on a map-like graph far cheaper than a dense factorization, O(T³), or a
    banded one in reverse Cuthill–McKee order, O(T b²) with b the bandwidth.

    Returns scipy's ``SuperLU`` object: ``.solve(b)`` solves A x = b, ``ldl_log_det`` gives
    log |A|. A ValueError where A is not positive definite (a pivot D_ii <= 0).
    """
    matrix = scipy.sparse.csc_matrix(matrix)
    if extra_diagonal is not None:
        matrix = (matrix + scipy.sparse.diags(np.asarray(extra_diagonal, np.float64))).tocsc()
    factor = scipy.sparse.linalg.splu(matrix, permc_spec=ordering, diag_pivot_thresh=0.0,
                                      options={"SymmetricMode": True})
    if not np.all(factor.U.diagonal() > 0):
        raise ValueError("the precision matrix is not positive definite")
    return factor


def ldl_log_det(factor) -> float:
    """log |A| of the matrix A that ``sparse_ldl`` factored: Σ log D_ii (A is SPD: D > 0)."""
    return float(np.sum(np.log(factor.U.diagonal())))


def gaussian_pseudo_evidence(model: LatentGMRF, means, precisions, log_scales):
    """log ∫ N(x; 0, Q⁻¹) ∏_t exp(c_t − h_t (x_t − m_t)²/2) dx and the maximizer x̃ of the
    integrand — the evidence and posterior mean of a Gaussian model whose observation
    terms are unnormalized Gaussians (m_t means, h_t >= 0 precisions, c_t log heights).

    With Q̃ = Q + diag(h) and x̃ = Q̃⁻¹ (h ⊙ m), the integral is
        Σ c_t + ½ log|Q| − ½ log|Q̃| − ½ x̃ᵀQ x̃ − ½ Σ h_t (x̃_t − m_t)²,
    a sum of terms that do not cancel (evaluated at x̃ rather than as mᵀHm − bᵀQ̃⁻¹b).
    """
    means, precisions, log_scales = (np.asarray(a, np.float64) for a in (means, precisions, log_scales))
    factor = sparse_ldl(model.precision, precisions)
    mean = factor.solve(precisions * means)
    log_z = (np.sum(log_scales) + 0.5 * model.log_det_precision - 0.5 * ldl_log_det(factor)
             - 0.5 * mean @ (model.precision @ mean) - 0.5 * np.sum(precisions * (mean - means) ** 2))
    return float(log_z), mean


def exact_log_z(model: LatentGMRF) -> float:
    """log p(y) for Gaussian observations: y ~ N(0, Q⁻¹ + diag(s²)), computed through the
    sparse posterior precision Q + diag(s⁻²) (``gaussian_pseudo_evidence``)."""
    if model.noise_sd is None:
        raise ValueError("exact_log_z needs Gaussian observations (gaussian_car); binomial_car has no closed form")
    variances = model.noise_sd**2
    log_scales = -0.5 * (_LOG_2PI + np.log(variances))
    log_z, _ = gaussian_pseudo_evidence(model, model.observations, 1.0 / variances, log_scales)
    return log_z


# ---------------------------------------------------------------------------------------
# Densities on the device (one particle)


def _site_arrays(model: LatentGMRF, dtype):
    """The per-variable constants of log p(y_t | x_t), as a pytree the jitted code reads."""
    if model.trials is not None:
        trials, counts = model.trials, model.observations
        log_choose = gammaln(trials + 1) - gammaln(counts + 1) - gammaln(trials - counts + 1)
        return BinomialSites(*(jnp.asarray(a, dtype) for a in (model.observations, model.trials, log_choose)))
    return GaussianSites(*(jnp.asarray(a, dtype) for a in (model.observations, model.noise_sd)))


class BinomialSites(NamedTuple):
    observations: Array  # (T,) y
    trials: Array  # (T,) n
    log_choose: Array  # (T,) log C(n, y)


class GaussianSites(NamedTuple):
    observations: Array  # (T,) y
    noise_sd: Array  # (T,) s


def _site_log_likelihood(sites, x, site):
    """log p(y_site | x) for a scalar x (``site`` may be traced, or a slice for a vector x)."""
    y = sites.observations[site]
    if isinstance(sites, BinomialSites):
        # y log σ(x) + (n − y) log σ(−x) + log C(n, y), stable for any x
        n = sites.trials[site]
        return y * jax.nn.log_sigmoid(x) + (n - y) * jax.nn.log_sigmoid(-x) + sites.log_choose[site]
    s = sites.noise_sd[site]
    return -0.5 * ((y - x) / s) ** 2 - jnp.log(s) - 0.5 * _LOG_2PI


def likelihood_tempering_path(model: LatentGMRF, dtype=None) -> Path:
    """The path p(x) p(y | x)^β for AIS / tempered SMC references, with exact prior
    draws (``Path.sample_base``). O(T + E) per density evaluation (edge list, no dense Q)."""
    dtype = jnp.result_type(float) if dtype is None else dtype
    sites = _site_arrays(model, dtype)
    upper = scipy.sparse.triu(model.precision, k=1).tocoo()
    rows, cols = jnp.asarray(upper.row), jnp.asarray(upper.col)
    off_diagonal = jnp.asarray(upper.data, dtype)
    diagonal = jnp.asarray(model.precision.diagonal(), dtype)
    num_variables = model.num_variables
    log_normalizer = 0.5 * model.log_det_precision - 0.5 * num_variables * _LOG_2PI
    lower_t = jnp.asarray(scipy.linalg.cholesky(model.precision.toarray(), lower=True), dtype)

    def log_prior(x):
        quadratic = jnp.sum(diagonal * x**2) + 2.0 * jnp.sum(off_diagonal * x[rows] * x[cols])
        return -0.5 * quadratic + log_normalizer

    def log_likelihood(x):
        return jnp.sum(_site_log_likelihood(sites, x, slice(None)))

    def sample_prior(rng_key, num):
        z = jax.random.normal(rng_key, (num_variables, num), dtype)
        return jax.scipy.linalg.solve_triangular(lower_t, z, lower=True, trans="T").T

    return likelihood_tempering(log_prior, log_likelihood, sample_prior=sample_prior)


# ---------------------------------------------------------------------------------------
# The sequential decomposition: forward conditionals from the reverse Cholesky factor


class SequentialSteps(NamedTuple):
    """Everything step t of the sequential model reads (device arrays, leading axis t).

    x_{o_t} | x_{o_1..o_{t−1}} ~ N(offsets_t + Σ_k coefficients_{t,k} x_{parents_{t,k}}, scales_t²),
    padded to a common width K with zero coefficients (parent 0). The log weight is
    log p(y | x) − log p̃(y | x), p̃ from ``pseudo_*``, plus log Z̃ at t = 0 (SMC-Base:
    p̃ ≡ 1, Z̃ = 1).
    A pytree: pass it through jit/vmap (different orderings batched at one width) and
    build the model inside with ``sequential_model_from_steps``.
    """

    variables: Array  # (T,) int32: o_t, the variable set at step t
    parents: Array  # (T, K) int32: variables set before step t that x_{o_t} depends on
    coefficients: Array  # (T, K)
    offsets: Array  # (T,)
    scales: Array  # (T,) conditional standard deviations
    sites: BinomialSites | GaussianSites
    pseudo_means: Array  # (T,) m̃_t of p̃(y_t | x_t) = exp(c_t − h_t (x_t − m̃_t)²/2)
    pseudo_precisions: Array  # (T,) h_t (all 0 for SMC-Base)
    pseudo_log_scales: Array  # (T,) c_t
    log_z_tilde: Array  # () log Z̃ = log ∫ p(x) ∏ p̃(y_t | x_t) dx


def _check_order(order, num_variables) -> np.ndarray:
    if order is None:
        return np.arange(num_variables)
    order = np.asarray(order)
    if order.shape != (num_variables,) or not np.array_equal(np.sort(order), np.arange(num_variables)):
        raise ValueError(f"order must be a permutation of 0..{num_variables - 1}, got shape {order.shape}")
    return order.astype(np.int64)


def _check_twist(twist, num_variables):
    fields = ("pseudo_means", "pseudo_variances", "pseudo_log_scales")
    if not all(hasattr(twist, name) for name in fields):
        raise ValueError(f"twist must have {', '.join(fields)} (e.g. jaxz.approx.laplace(model)), "
                         f"got {type(twist).__name__}")
    means, variances, log_scales = (np.asarray(getattr(twist, name), np.float64) for name in fields)
    for name, value in zip(fields, (means, variances, log_scales)):
        if value.shape != (num_variables,):
            raise ValueError(f"twist.{name} must have shape ({num_variables},), got {value.shape}")
    if not (np.all(np.isfinite(means)) and np.all(np.isfinite(log_scales)) and np.all(variances > 0)):
        raise ValueError("twist pseudo-observations must have finite means and log scales, "
                         "and variances > 0 (inf allowed)")
    return means, 1.0 / variances, log_scales


def forward_conditionals(precision, mean, order, width: int | None = None):
    """Coefficients of x_{o_t} | x_{o_1..o_{t−1}} under N(mean, precision⁻¹), for every t.

    The lower Cholesky factor L of Q (Q = L Lᵀ) in an order gives the *backward*
    conditionals: row j of Lᵀ(x − μ) = z reads x_j | x_{j+1:T} (the authors' filters run
    from the last variable to the first). The forward ones come from the "reverse"
    factor Q_o = U Uᵀ with U upper triangular, U = J L_r J, L_r the lower factor of Q in the
    reversed order and J the reversal: column t of Uᵀ(x − μ) = z gives
        x_{o_t} = μ_{o_t} − Σ_{r<t} (U_{rt}/U_{tt}) (x_{o_r} − μ_{o_r}) + z_t / U_{tt}.
    In LDLᵀ form (L_r = L̄ D^{1/2}, L̄ unit lower) the coefficients are the entries of L̄
    and the conditional variances 1/D: one sparse factorization in the reversed order
    (``sparse_ldl`` with no reordering). Step t costs the nonzeros of its column — the
    fill, which the ordering controls (``orderings``); every step is padded to the widest
    column (at least ``width``).

    Returns (parents (T, K) int64, coefficients (T, K), offsets (T,), scales (T,)), float64.
    """
    precision = scipy.sparse.csc_matrix(precision)
    num = precision.shape[0]
    order = _check_order(order, num)
    reverse = order[::-1]
    factor = sparse_ldl(precision[reverse][:, reverse], ordering="NATURAL")
    if not (np.array_equal(factor.perm_c, np.arange(num)) and np.array_equal(factor.perm_r, np.arange(num))):
        raise RuntimeError("SuperLU reordered a factorization asked for in natural order")  # never expected
    lower = scipy.sparse.tril(factor.L, k=-1).tocsc()
    lower.eliminate_zeros()  # supernode padding: only true nonzeros are parents
    # Column j of the reversed-order factor is step t = T − 1 − j; its rows k > j are the
    # variables reverse[k], set at the earlier steps T − 1 − k.
    steps = num - 1 - np.repeat(np.arange(num), np.diff(lower.indptr))
    slots = np.arange(lower.nnz) - lower.indptr[:-1].repeat(np.diff(lower.indptr))
    num_parents = np.diff(lower.indptr)[::-1]
    width = max(int(num_parents.max(initial=0)), 0 if width is None else int(width))
    parents = np.zeros((num, width), np.int64)
    coefficients = np.zeros((num, width))
    parents[steps, slots] = reverse[lower.indices]
    coefficients[steps, slots] = -lower.data
    mean = np.asarray(mean, np.float64)
    offsets = mean[order] - np.sum(coefficients * mean[parents], axis=1)
    scales = 1.0 / np.sqrt(factor.U.diagonal()[::-1])
    return parents, coefficients, offsets, scales


def sequential_steps(model: LatentGMRF, order=None, twist=None, *, width: int | None = None,
                     dtype=None) -> SequentialSteps:
    """Host precomputation of ``sequential_model``: the per-step arrays (see
    ``SequentialSteps``). ``width`` pads the conditioning sets to a common K so that
    steps of different orderings stack for ``vmap``; ``dtype`` defaults to JAX's
    default float (float64 under ``enable_x64``)."""
    if not isinstance(model, LatentGMRF):
        raise ValueError(f"model must be a LatentGMRF (binomial_car / gaussian_car), got {type(model).__name__}")
    dtype = jnp.result_type(float) if dtype is None else dtype
    num_variables = model.num_variables
    order = _check_order(order, num_variables)
    if twist is None:
        # SMC-Base is the twist ψ ≡ 1: pseudo-observations with zero precision and height,
        # so the proposals are the prior conditionals p(x_t | x_{1:t−1}), Z̃ = 1 and the
        # weight is p(y_t | x_t). One code path (and one compiled program) for both.
        means, precisions, log_scales = np.zeros((3, num_variables))
    else:
        means, precisions, log_scales = _check_twist(twist, num_variables)
    # The conditionals of p̃(x | y) ∝ p(x) ∏ p̃(y_s | x_s), whose precision is Q + diag(h).
    log_z_tilde, mean = gaussian_pseudo_evidence(model, means, precisions, log_scales)
    precision = model.precision + scipy.sparse.diags(precisions)
    parents, coefficients, offsets, scales = forward_conditionals(precision, mean, order, width)
    as_device = lambda a: jnp.asarray(a, dtype)  # noqa: E731
    return SequentialSteps(
        jnp.asarray(order, jnp.int32), jnp.asarray(parents, jnp.int32), as_device(coefficients), as_device(offsets),
        as_device(scales), _site_arrays(model, dtype), as_device(means), as_device(precisions), as_device(log_scales),
        as_device(log_z_tilde),
    )


def steps_bandwidth(steps: SequentialSteps) -> int | None:
    """The largest t − s over the steps t and the parents x_{o_s} (nonzero coefficient) that
    step t's forward conditional reads: the model's bandwidth in this order, fill included
    (``jaxz.SequentialGraphModel.bandwidth``). None when ``steps`` are traced."""
    if _checks.is_traced((steps.variables, steps.parents, steps.coefficients)):
        return None
    variables, parents = np.asarray(steps.variables), np.asarray(steps.parents)
    position = np.empty_like(variables)
    position[variables] = np.arange(variables.shape[0])
    reach = np.arange(variables.shape[0])[:, None] - position[parents]
    return int(np.max(np.where(np.asarray(steps.coefficients) != 0, reach, 0), initial=0))


def sequential_model_from_steps(steps: SequentialSteps, bandwidth: int | None = None) -> SequentialGraphModel:
    """The ``jaxz.SequentialGraphModel`` of precomputed steps; traceable (``steps`` may be
    jit/vmap arguments). A particle is x, shape (T,), in the model's variable indexing.
    bandwidth: see ``steps_bandwidth`` (None: unknown). Traced steps hide it: read it from
    the concrete steps before tracing and pass it, or ``jaxz.twisted_smc`` cannot apply its
    N ≥ 8 × bandwidth check, without which a genealogy too short for the model's reach
    reports s.e.s far too small at status 0 (``paper_repro/twisted_gmrf.py`` shows the
    pattern)."""
    num_variables = steps.variables.shape[0]

    def propose(rng_key, x, t):
        # Alg. 1 step 2(b): x_{o_t} ~ q_t, the (twisted) forward conditional.
        variable = steps.variables[t]
        mean = steps.offsets[t] + jnp.dot(steps.coefficients[t], x[steps.parents[t]])
        value = mean + steps.scales[t] * jax.random.normal(rng_key, (), x.dtype)
        # Alg. 1 step 2(c): base ω_t = p(y_t | x_t); twist ω_t = p(y_t | x_t)/p̃(y_t | x_t)
        # (eq. 12), with γ^ψ_0 = ψ_0 = Z̃ put into the first step so that Ẑ estimates Z.
        pseudo = steps.pseudo_log_scales[variable] - 0.5 * steps.pseudo_precisions[variable] * (
            value - steps.pseudo_means[variable]) ** 2
        log_weight = _site_log_likelihood(steps.sites, value, variable) - pseudo
        log_weight = log_weight + jnp.where(t == 0, steps.log_z_tilde, 0.0)
        return x.at[variable].set(value), log_weight

    return SequentialGraphModel(num_variables, jnp.zeros((num_variables,), steps.offsets.dtype), propose=propose,
                                bandwidth=bandwidth)


def sequential_model(model: LatentGMRF, order=None, twist=None, *, dtype=None) -> SequentialGraphModel:
    """The variables of ``model`` added one per step in ``order`` (a permutation of
    0..T−1; None: 0, 1, ..., T−1), for ``jaxz.twisted_smc``.

    twist=None: SMC-Base, the bootstrap proposal p(x_t | x_{1:t−1}) and weight p(y_t | x_t)
    (Naesseth et al. 2014). twist = Gaussian pseudo-observations (``jaxz.approx.laplace(model)``,
    or anything with ``pseudo_means``, ``pseudo_variances``, ``pseudo_log_scales``):
    SMC-Twist of seed eq. (12), ψ_t(x_{1:t}) = ∫ ∏_{s>t} p̃(y_s | x_s) p(x_{t+1:T} | x_{1:t}) dx_{t+1:T},
    proposal p̃(x_t | x_{1:t−1}, y_{1:T}), weight p(y_t | x_t)/p̃(y_t | x_t); Ẑ is unbiased
    for Z whatever the twist, and exact when the pseudo-observations are (Gaussian model).
    Per particle and step the cost is the fill of one factor column (``forward_conditionals``).
    """
    steps = sequential_steps(model, order, twist, dtype=dtype)
    return sequential_model_from_steps(steps, steps_bandwidth(steps))


# ---------------------------------------------------------------------------------------
# Orderings: order[t] is the variable added at step t (random, reverse Cuthill–McKee and minimum degree are in
# jaxz/models/_graph_orders.py; the fill they lead to is this model's forward conditionals')


def cholesky_fill(adjacency, order) -> int:
    """Off-diagonal nonzeros (the graph's edges plus the fill-in) of the factor whose
    columns are the forward conditionals for ``order`` (= the lower Cholesky factor of Q
    in reversed order): the total per-particle
    work of one SMC pass, and the quantity AMD minimizes. Counted numerically on
    Q = D + I − A (a generic SPD matrix with the graph's pattern)."""
    precision = car_precision(adjacency, 1.0, 1.0)
    order = _check_order(order, precision.shape[0])
    parents, coefficients, _, _ = forward_conditionals(precision, np.zeros(precision.shape[0]), order)
    return int(np.count_nonzero(coefficients))


orderings = SimpleNamespace(
    random=random_order,
    reverse_cuthill_mckee=reverse_cuthill_mckee,
    approximate_minimum_degree=approximate_minimum_degree,
    cholesky_fill=cholesky_fill,
)

__all__ = [
    "LatentGMRF", "BinomialSites", "GaussianSites", "SequentialSteps",
    "binomial_car", "gaussian_car", "car_precision", "lattice_adjacency", "adjacency_from_edges",
    "simulate_binomial_car", "exact_log_z", "gaussian_pseudo_evidence", "likelihood_tempering_path",
    "forward_conditionals", "sequential_steps", "steps_bandwidth", "sequential_model_from_steps", "sequential_model",
    "orderings", "random_order", "reverse_cuthill_mckee", "approximate_minimum_degree", "cholesky_fill",
    "sparse_ldl", "ldl_log_det",
]
