"""The multistate Bennett acceptance ratio (MBAR; Shirts & Chodera 2008), the
estimator eq. (18) of Carlson et al. (2016) compares RTS against.

Samples x_n, n = 1..N, drawn from K unnormalized densities f_k = exp(−u_k) (n_k of
them from state k) give the dimensionless free energies f̂_k = −log Ẑ_k as the
solution of the self-consistent equations

    Ẑ_i = Σ_n exp(−u_i(x_n)) / Σ_k n_k exp(−u_k(x_n)) / Ẑ_k          (S&C eq. 11)

which are the stationarity conditions of the convex function (S&C Appendix C)

    F(f) = Σ_n log Σ_k n_k exp(f_k − u_kn) − Σ_k n_k f_k.

We minimise F by Newton's method in log space (every sum a logsumexp), falling back
to a self-consistent step whenever the Newton step does not reduce the gradient,
inside a ``lax.while_loop``; the gauge f ↦ f + c is fixed by
a quadratic penalty on Σ_k n_k f_k and, at the end, by f_0 = 0. States with n_k = 0
are solved for afterwards by the self-consistent formula. The uncertainty is the
asymptotic covariance of S&C eq. (D4), in a form that needs one K × K linear solve.

Everything after the argument checks is one ``jax.jit``-compiled function
(``_mbar``, its settings traced arguments), compiled once per shape and dtype:
repeated eager calls at one shape cost the solve, not a compilation.

Robustness (DESIGN.md §4): a nan potential is a zero density (flagged), a state
whose density is zero at every sample has Z_k = 0 (f_k = +inf, flagged), an
unconverged solve or a state without overlap gets an infinite standard error and a
status bit (``MBARInfo``), so the returned pair is never silently wrong.

``mbar`` returns one type, ``MBARResult``: it unpacks as the pair
``f_k, f_k_stderr = jaxz.mbar(u_kn, n_k)`` (DESIGN.md §3) and carries the
``MBARInfo`` as ``.info``.
"""
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks
from jaxz.base import STATUS_DEGENERATE, STATUS_FEW_PARTICLES, STATUS_MAX_STEPS, STATUS_NONFINITE, STATUS_OK
from jaxz.estimators import _particles
from jaxz.types import Array

# A state whose free energy rests on fewer effective samples than this (``MBARInfo.overlap_ess``) is flagged
# STATUS_FEW_PARTICLES and its standard error reported as inf: below it the s.e. of Gaussian states pulled apart
# stops being calibrated (benchmarks/mbar_overlap_threshold.py; benchmarks/results/mbar_overlap_threshold.json).
# For sampled states the flag is conservative; an unsampled state with mass where no sample went can pass it (the
# limitation in ``mbar``'s docstring).
MIN_OVERLAP_ESS = 10.0


class MBARInfo(NamedTuple):
    """Diagnostics of one MBAR solve (``jaxz.mbar(...).info``).

    status: int32 bit flags (``jaxz.STATUS_*``): STATUS_NONFINITE (a nan or −inf
      potential was met and treated as zero density, or a sample has zero density
      under every sampled state, or n_k was invalid under tracing), STATUS_DEGENERATE
      (some state has zero density at every sample: its f_k = +inf), STATUS_MAX_STEPS
      (not converged: the solver stopped at ``max_iterations``, or stalled, before the
      gradient fell below the tolerance), STATUS_FEW_PARTICLES (some state has
      overlap_ess below ``min_overlap_ess``, or the states split into groups whose overlap
      underflows: the covariance is singular), STATUS_PRECISION_LOSS (potentials so
      large that their rounding, eps · |u_kn|, exceeds a tenth of a nat: float32 near 1e6).
    num_iterations: int32, Newton / self-consistent iterations taken.
    gradient_norm: max_k |∂F/∂f_k| / n_k at the returned f, over the sampled states
      not flagged for low overlap (a state without overlap leaves F flat along its
      f_k: its gradient may stall, and it is flagged STATUS_FEW_PARTICLES instead).
    converged: bool, gradient_norm <= tolerance, or below the rounding level of the
      gradient where that is higher (float32 with large free energies; see ``_solve``).
    overlap_ess: (K,) the effective number of samples behind each state's free energy
      (Kish's for an unsampled state, N × its overlap with the other sampled states for
      a sampled one; see ``mbar``); inf for the only sampled state, 0 where f_k = +inf.
    """

    status: Array
    num_iterations: Array
    gradient_norm: Array
    converged: Array
    overlap_ess: Array


def _log_denominator(f, u_kn, log_n_k):
    """log Σ_k n_k exp(f_k − u_kn), one value per sample n. A sample with zero density
    under every sampled state (−inf here) cannot have been drawn from any of them: it is
    given +inf, which drops it from every sum (its weight W_nk becomes 0)."""
    log_denominator = jax.nn.logsumexp(log_n_k[:, None] + f[:, None] - u_kn, axis=0)
    return jnp.where(jnp.isneginf(log_denominator), jnp.inf, log_denominator)


def _log_counts(n_k, dtype):
    return jnp.where(n_k > 0, jnp.log(jnp.maximum(n_k, 1)), -jnp.inf).astype(dtype)


def _gradient(f, weights, n_k, sampled):
    """∇F (plus the gauge penalty (Σ n_k f_k)² / 2N); zero on unsampled states."""
    gradient = n_k * jnp.sum(weights, axis=1) - n_k + n_k * jnp.dot(n_k, f) / jnp.sum(n_k)
    return jnp.where(sampled, gradient, 0.0)


def _hessian(weights, n_k, sampled):
    """∇²F plus the gauge penalty's n nᵀ / Σn. With π_nk = n_k W_nk:
    H_kj = −Σ_n π_nk π_nj (k ≠ j) and H_kk = Σ_n π_nk (1 − π_nk)."""
    weighted = weights * n_k[:, None]
    # the K × N × K product dominates the cost: form it in float32 at most. Only the
    # Newton direction uses it; the gradient stays in full precision, so the fixed
    # point (and f̂) keeps the input's precision. The diagonal is formed in full
    # precision: for a state that barely overlaps the others it is a tiny number that
    # float32 rounding of Σ π_nk − Σ π_nk² would wipe out, and with it the Newton step.
    low = weighted.astype(jnp.float32)
    outer = (low @ low.T).astype(weights.dtype)
    num_states = n_k.shape[0]
    diagonal = jnp.sum(weighted * (1.0 - weighted), axis=1)
    hessian = jnp.where(jnp.eye(num_states, dtype=bool), diagonal[:, None], -outer) + jnp.outer(n_k, n_k) / jnp.sum(n_k)
    # unsampled states do not enter F: keep them out of the linear system
    return jnp.where(sampled[:, None] & sampled[None, :], hessian, jnp.eye(num_states, dtype=weights.dtype))


STALL_ITERATIONS = 10  # stop when the gradient norm has not fallen by 1% in this many iterations


def _solve(u_kn, n_k, tolerance, max_iterations):
    """Minimise F over the sampled states (n_k > 0). Returns (f, num_iterations,
    gradient, floor, log_denominator): f in the gauge Σ n_k f_k = 0 with unsampled
    states from eq. (11), the gradient ∂F/∂f_k / n_k there, its rounding level
    ``floor``, and log Σ_k n_k exp(f_k − u_kn) per sample.

    The loop stops when max_k |∂F/∂f_k| / n_k <= max(tolerance, floor), at
    ``max_iterations``, or when the norm has stalled (not fallen by 1% in
    STALL_ITERATIONS iterations: a state without overlap leaves F almost flat along its
    f_k, where neither step makes progress; ``_mbar`` judges convergence on the other
    states). floor: W_nk = exp(f_k − u_kn − log den_n) carries a relative error of about
    eps (|f_k| + |u_kn| + |log den_n|), so Σ_n W_nk − 1 cannot be resolved below
    eps Σ_n W_nk (|f_k| + |u_kn| + |log den_n| + 1). In float64 it is far under the
    default tolerance; in float32 with free energies in the hundreds it is not, and the
    default 1e-5 would otherwise be out of reach."""
    dtype = u_kn.dtype
    eps = jnp.finfo(dtype).eps
    log_n_k = _log_counts(n_k, dtype)
    sampled = n_k > 0

    def gauge(f):  # Σ n_k f_k = 0 over sampled states, the penalty's minimum
        shift = jnp.dot(n_k, jnp.where(sampled, f, 0.0)) / jnp.sum(n_k)
        return jnp.where(sampled, f - shift, 0.0)

    def norm(gradient):
        value = jnp.max(jnp.abs(gradient) / jnp.maximum(n_k, 1))
        return jnp.where(jnp.isnan(value), jnp.inf, value)

    def evaluate(f):
        log_denominator = _log_denominator(f, u_kn, log_n_k)
        weights = jnp.exp(f[:, None] - u_kn - log_denominator[None, :])
        magnitude = jnp.abs(f)[:, None] + jnp.abs(u_kn) + jnp.abs(log_denominator)[None, :] + 1.0
        rounding = jnp.sum(jnp.where(weights > 0, weights * magnitude, 0.0), axis=1)
        floor = eps * jnp.max(jnp.where(sampled, rounding, 0.0))
        return weights, log_denominator, _gradient(f, weights, n_k, sampled), floor

    def body(carry):
        f, weights, log_denominator, gradient, floor, iteration, best, stalled = carry
        newton = gauge(f - jnp.linalg.solve(_hessian(weights, n_k, sampled), gradient))
        evaluated_newton = evaluate(newton)

        def fixed_point_step():  # S&C eq. (11) from the current denominators
            fixed_point = -jax.nn.logsumexp(-u_kn - log_denominator[None, :], axis=1)
            fixed_point = gauge(jnp.where(sampled, fixed_point, 0.0))
            return (fixed_point,) + evaluate(fixed_point)

        # take the Newton step when it reduces the gradient, else a self-consistent step
        # (far from the optimum, where the quadratic model is poor)
        f, weights, log_denominator, gradient, floor = jax.lax.cond(
            norm(evaluated_newton[2]) < norm(gradient), lambda: (newton,) + evaluated_newton, fixed_point_step
        )
        improved = norm(gradient) < 0.99 * best
        best = jnp.where(improved, norm(gradient), best)
        stalled = jnp.where(improved, 0, stalled + 1)
        return f, weights, log_denominator, gradient, floor, iteration + 1, best, stalled

    def cond(carry):
        gradient, floor, iteration, _, stalled = carry[3:]
        converged = norm(gradient) <= jnp.maximum(tolerance, floor)
        return ~converged & (iteration < max_iterations) & (stalled < STALL_ITERATIONS)

    f = jnp.zeros(u_kn.shape[0], dtype)
    start = evaluate(f)
    carry = (f,) + start + (jnp.int32(0), norm(start[2]), jnp.int32(0))
    f, _, log_denominator, gradient, floor, iterations, _, _ = jax.lax.while_loop(cond, body, carry)
    # unsampled states from eq. (11) (the denominators involve only sampled states)
    f = jnp.where(sampled, f, -jax.nn.logsumexp(-u_kn - log_denominator[None, :], axis=1))
    return f, iterations, gradient / jnp.maximum(n_k, 1), floor, log_denominator


def _covariance(weights, n_k):
    """Asymptotic covariance of f̂ (S&C eq. (D4)), up to terms a 1ᵀ + 1 bᵀ that cancel
    in every difference f̂_i − f̂_j. With G = WᵀW (K × K), D4 is Θ = G (I − N G)⁺,
    N = diag(n). I − N G is singular (right null vector n, left 1, because the columns
    of W sum to 1); replacing the pseudo-inverse by the inverse of I − N G + n 1ᵀ / Σn
    changes Θ only by such cancelling terms, and needs an LU solve, not an
    eigendecomposition. ``weights`` is Wᵀ, (K, N)."""
    gram = weights @ weights.T
    num_states = n_k.shape[0]
    system = jnp.eye(num_states, dtype=gram.dtype) - n_k[:, None] * gram
    system = system + jnp.outer(n_k, jnp.ones_like(n_k)) / jnp.sum(n_k)
    return jnp.linalg.solve(system.T, gram).T  # G A⁻¹ (G symmetric)


def _overlap_ess(weights, n_k, sampled):
    """Per state, the effective number of samples behind its free energy, on the scale
    of an inverse variance (N at perfect overlap, → 0 without overlap).

    Unsampled state k: Kish's 1 / Σ_n W_nk² (the columns of W sum to 1), pymbar's
    effective sample number: Z_k is an importance-sampling estimate from all N samples,
    whose variance is ≈ 1/ESS − 1/N.

    Sampled state k: N Ô_k with Ô_k = S_k / (N π_k (1 − π_k)), S_k = Σ_n π_nk (1 − π_nk)
    and π_nk = n_k W_nk the probability that sample n came from state k given x_n,
    π_k = n_k / N. S_k = n_k (1 − O_kk) (O pymbar's overlap matrix) is the expected
    number of samples that could have come from state k or from another sampled state;
    Ô_k estimates the overlap ∫ p_k q / (π_k p_k + (1 − π_k) q) of p_k with the mixture q
    of the others, and N Ô_k is the inverse of BAR's asymptotic variance between the two
    when the overlap is poor. It is large whichever way the overlap runs (a narrow
    state inside a wide one scores well), and ≈ 0 for a state that no other reaches,
    whatever its n_k."""
    # in linear space: W_nk <= 1 at the solution and π_nk in [0, 1], so nothing
    # overflows, and the K × N pass costs no transcendental functions
    membership = n_k[:, None] * weights  # π_nk
    shared = jnp.sum(membership * (1.0 - membership), axis=1)
    fraction = n_k / jnp.sum(n_k)  # π_k
    overlap = shared / (fraction * (1.0 - fraction))
    kish = 1.0 / jnp.sum(weights**2, axis=1)
    only_sampled = sampled & (jnp.sum(sampled) == 1)  # nothing else to overlap with
    return jnp.where(only_sampled, jnp.inf, jnp.where(sampled, overlap, kish))


@jax.jit
def _mbar(u_kn, n_k, tolerance, max_iterations, min_overlap_ess):
    """The whole estimator after the argument checks: (f_k, f_k_stderr, MBARInfo)."""
    dtype = u_kn.dtype
    # DESIGN.md §4: nan is zero density, flagged. −inf (infinite density) is refused
    # by ``mbar`` on concrete input; under tracing it is treated the same way.
    invalid_potential = jnp.isnan(u_kn) | jnp.isneginf(u_kn)
    rounding = _particles.precision_status(u_kn)  # the potentials' own rounding (finite values)
    u_kn = jnp.where(invalid_potential, jnp.inf, u_kn)
    # A state with zero density at every sample: Z_k = 0. It leaves the solve (its
    # density is zero, so it adds nothing to any denominator either).
    zero_row = jnp.all(jnp.isposinf(u_kn), axis=1)
    invalid_counts = jnp.any((n_k < 0) | ~jnp.isfinite(n_k))  # only reachable under tracing
    counts = jnp.where(zero_row | (n_k < 0), 0.0, n_k).astype(dtype)
    sampled = counts > 0
    # W_nk is unchanged by a per-sample shift of u_kn (eq. 11's numerator and
    # denominator share it): shift each column to minimum 0 over the sampled states,
    # so the exponents stay small and float32 keeps its precision (pymbar does too).
    column_min = jnp.min(jnp.where(sampled[:, None], u_kn, jnp.inf), axis=0)
    u_kn = u_kn - jnp.where(jnp.isfinite(column_min), column_min, 0.0)[None, :]

    f, num_iterations, gradient, floor, log_denominator = _solve(u_kn, counts, tolerance, max_iterations)
    # f_k = +inf: no sample has density under state k (a zero row, or only samples
    # that no sampled state could have produced)
    empty = jnp.isposinf(f) | zero_row
    weights = jnp.exp(jnp.where(empty, 0.0, f)[:, None] - u_kn - log_denominator[None, :])  # S&C eq. (9)
    # samples with zero density under every sampled state (dropped: +inf denominator)
    orphan_samples = jnp.any(jnp.isposinf(log_denominator))

    overlap_ess = jnp.where(empty, 0.0, _overlap_ess(weights, counts, sampled))
    low = ~empty & (overlap_ess < min_overlap_ess)
    # converged: judged on the states with overlap. A state without one leaves F flat
    # along its f_k; its own gradient may stall above the tolerance, but it moves the
    # others' solution only through the overlap it lacks, and it is flagged anyway.
    gradient_norm = jnp.max(jnp.where(sampled & ~low, jnp.abs(gradient), 0.0))
    gradient_norm = jnp.where(jnp.isnan(gradient_norm), jnp.inf, gradient_norm)
    converged = gradient_norm <= jnp.maximum(tolerance, floor)
    theta = _covariance(weights, counts)
    diagonal = jnp.diag(theta)
    variance = diagonal + diagonal[0] - theta[0] - theta[:, 0]
    singular = jnp.any(~empty & ~jnp.isfinite(variance))  # groups of states without overlap

    # the reported pair: f_0 = 0; s.e. of f_k − f_0, inf wherever it cannot be trusted
    f_k = jnp.where(empty, jnp.inf, f - f[0]).at[0].set(0.0)
    untrusted = empty | low | low[0] | ~jnp.isfinite(variance) | ~converged
    stderr = jnp.where(untrusted, jnp.inf, jnp.sqrt(jnp.maximum(variance, 0.0))).at[0].set(0.0)
    f_k = jnp.where(invalid_counts, jnp.nan, f_k)
    stderr = jnp.where(invalid_counts, jnp.nan, stderr)

    status = jnp.int32(STATUS_OK)
    status |= jnp.where(jnp.any(invalid_potential) | orphan_samples | jnp.any(zero_row & (n_k > 0)) | invalid_counts,
                        STATUS_NONFINITE, 0)
    status |= jnp.where(jnp.any(empty), STATUS_DEGENERATE, 0)
    status |= jnp.where(converged, 0, STATUS_MAX_STEPS)
    status |= jnp.where(jnp.any(low) | singular, STATUS_FEW_PARTICLES, 0)
    status |= rounding
    info = MBARInfo(status.astype(jnp.int32), num_iterations, gradient_norm, converged, overlap_ess)
    return f_k, stderr, info


def mbar(
    u_kn: Array,
    n_k: Array,
    *,
    tolerance: float | None = None,
    max_iterations: int = 100,
    min_overlap_ess: float = MIN_OVERLAP_ESS,
    return_info: bool = False,
) -> "MBARResult":
    """Solve MBAR for the dimensionless free energies of K states.

    Args:
      u_kn: (K, N) reduced potentials u_k(x_n) = −log f_k(x_n) of every sample under
        every state; the columns are grouped by the state the samples were drawn from,
        the first n_0 from state 0, the next n_1 from state 1, ... (the estimate uses
        only the counts). +inf is a legal potential (zero density), except for a
        sample under its own state (a ValueError naming n_k: the counts do not match
        the grouping); nan is treated as +inf and flagged; −inf (infinite density)
        raises a ValueError, or is flagged like nan under tracing.
      n_k: (K,) sample counts per state, non-negative integers summing to N (zeros
        allowed: those states are solved for by eq. 11 from the others' samples).
      tolerance: stop when max_k |∂F/∂f_k| / n_k falls below it (default 1e-10 in
        float64, 1e-5 in float32).
      max_iterations: cap on Newton / fixed-point iterations.
      min_overlap_ess: a state whose overlap_ess (below) is under this is flagged
        STATUS_FEW_PARTICLES and gets an infinite standard error.
      return_info: the old three-tuple ``(f_k, f_k_stderr, info)``, kept for code that
        unpacks it (a DeprecationWarning); use ``jaxz.mbar(...).info`` instead.
    tolerance, max_iterations and min_overlap_ess may be traced (a vmap over them compiles once).

    Returns:
      ``MBARResult(free_energies, stderr, info)``, which unpacks as the pair
      ``f_k, f_k_stderr``: f_k = −log(Z_k / Z_0) (so f_0 = 0), the asymptotic standard
      error of f_k − f_0 (S&C eq. D4), and the solve's ``MBARInfo``
      (``jaxz.estimators.mbar.MBARInfo``). Jitted inside (compiled once per shape and
      dtype), also jittable and vmappable from outside; follows the dtype of ``u_kn``.

    The pair alone is never silently wrong. The standard error is inf where the
    asymptotic formula cannot be trusted: every state when the solver did not converge
    (STATUS_MAX_STEPS), state k when it, or the reference state 0, has overlap_ess
    below ``min_overlap_ess`` (STATUS_FEW_PARTICLES), and a state with Z_k = 0, whose
    f_k is +inf (STATUS_DEGENERATE). f_k itself is still the MBAR solution, a number
    without an error bar. ``.info`` says which case it is.

    Overlap criterion (``MBARInfo.overlap_ess``, ``_overlap_ess``; an inverse-variance
    scale, N at perfect overlap, → 0 without): Kish's effective sample size for an
    unsampled state, N times its overlap with the mixture of the other sampled states for a
    sampled one, so a sampled state that no other reaches scores ≈ 0 whatever its n_k.

    Limitation: for an unsampled state the criterion is necessary, not sufficient.
    Importance sampling cannot see mass where no sample went: a state shifted beyond,
    or wider than, all the sampled ones can pass with an s.e. too small
    (benchmarks/results/mbar_overlap_threshold.json). Sample a state whose f_k matters.
    A group of states that overlap each other but not the rest gets an enormous s.e.
    relative to state 0 (honest), or, when the overlap underflows, a singular
    covariance: inf with STATUS_FEW_PARTICLES.
    """
    u_kn, n_k, tolerance = _check_arguments(u_kn, n_k, tolerance, max_iterations, min_overlap_ess)
    # the settings are traced arguments, not static ones: changing them does not recompile
    result = MBARResult(*_mbar(u_kn, n_k, jnp.asarray(tolerance, u_kn.dtype), jnp.asarray(max_iterations, jnp.int32),
                               jnp.asarray(min_overlap_ess, u_kn.dtype)))
    if return_info:
        warnings.warn("jaxz.mbar(..., return_info=True) is deprecated: jaxz.mbar returns an MBARResult whose "
                      ".info is the MBARInfo (it unpacks as the pair f_k, f_k_stderr)",
                      DeprecationWarning, stacklevel=2)
        return result.free_energies, result.stderr, result.info
    return result


@jax.tree_util.register_pytree_with_keys_class
class MBARResult:
    """What ``jaxz.mbar`` returns: ``free_energies`` (K,) f_k = −log(Z_k / Z_0),
    ``stderr`` (K,) the asymptotic standard error of f_k − f_0, and ``info``, the
    solve's ``MBARInfo``.

    It unpacks (and indexes) as the pair ``f_k, f_k_stderr = jaxz.mbar(u_kn, n_k)``
    of DESIGN.md §3, so it is not a NamedTuple (that would unpack as three). A pytree:
    it passes through ``jit`` and ``vmap``.
    """

    __slots__ = ("free_energies", "stderr", "info")

    def __init__(self, free_energies: Array, stderr: Array, info: MBARInfo):
        self.free_energies = free_energies
        self.stderr = stderr
        self.info = info

    def _pair(self):
        return self.free_energies, self.stderr

    def __iter__(self):
        return iter(self._pair())

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index):
        return self._pair()[index]

    def __repr__(self) -> str:
        return f"MBARResult(free_energies={self.free_energies!r}, stderr={self.stderr!r}, info={self.info!r})"

    def tree_flatten_with_keys(self):
        keys = (jax.tree_util.SequenceKey(0), jax.tree_util.SequenceKey(1), jax.tree_util.GetAttrKey("info"))
        return tuple(zip(keys, (self.free_energies, self.stderr, self.info))), None

    def tree_flatten(self):
        return (self.free_energies, self.stderr, self.info), None

    @classmethod
    def tree_unflatten(cls, _, children):
        return cls(*children)


def _check_arguments(u_kn, n_k, tolerance, max_iterations, min_overlap_ess):
    """``mbar``'s arguments checked by name (values only where they are concrete): u_kn
    as a floating (K, N) array, n_k as counts of u_kn's column groups, the default tolerance."""
    u_kn = _checks.real("u_kn", jnp.asarray(u_kn))  # astype(float) would drop an imaginary part
    if n_k is not None:
        _checks.real("n_k", n_k)
    if not jnp.issubdtype(u_kn.dtype, jnp.floating):
        u_kn = u_kn.astype(jnp.result_type(float))
    if u_kn.ndim != 2:
        raise ValueError(f"u_kn must be a (K, N) array, got shape {u_kn.shape}")
    if u_kn.shape[1] == 0:
        raise ValueError(f"u_kn must hold at least one sample (N >= 1 columns), got shape {u_kn.shape}")
    if n_k is None or np.shape(n_k) != (u_kn.shape[0],):
        raise ValueError(f"n_k must have shape (K,) = ({u_kn.shape[0]},), got {np.shape(n_k)}")
    if not isinstance(n_k, jax.core.Tracer):
        counts = np.asarray(n_k, dtype=np.float64)
        if not np.all(np.isfinite(counts)) or np.any(counts < 0) or np.any(counts != np.round(counts)):
            raise ValueError(f"n_k must be non-negative integers (sample counts), got {counts.tolist()}")
        if counts.sum() != u_kn.shape[1]:
            raise ValueError(f"n_k must sum to N = {u_kn.shape[1]} (the columns of u_kn), got {counts.sum():g}")
    if not isinstance(u_kn, jax.core.Tracer):
        if bool(jnp.any(jnp.isneginf(u_kn))):
            raise ValueError("u_kn must not contain -inf (an infinite density); use +inf for zero density")
        if bool(jnp.all(jnp.isposinf(u_kn[0]))):
            raise ValueError("u_kn[0] is +inf at every sample: the reference state 0 has Z_0 = 0, "
                             "so f_k = −log(Z_k / Z_0) is undefined; put a state with density first")
    if not isinstance(u_kn, jax.core.Tracer) and not isinstance(n_k, jax.core.Tracer):
        _check_grouping(u_kn, np.asarray(n_k, dtype=np.int64))
    if tolerance is None:
        tolerance = 1e-10 if u_kn.dtype == jnp.float64 else 1e-5
    # the settings may be traced (vmap over them); concrete ones are checked
    if not isinstance(tolerance, jax.core.Tracer) and not float(tolerance) > 0:
        raise ValueError(f"tolerance must be > 0, got {tolerance}")
    if not isinstance(max_iterations, jax.core.Tracer) and (
        isinstance(max_iterations, bool) or int(max_iterations) != max_iterations or max_iterations < 1
    ):
        raise ValueError(f"max_iterations must be an integer >= 1, got {max_iterations}")
    if not isinstance(min_overlap_ess, jax.core.Tracer) and not float(min_overlap_ess) >= 0:
        raise ValueError(f"min_overlap_ess must be >= 0, got {min_overlap_ess}")
    return u_kn, jnp.asarray(n_k).astype(u_kn.dtype), tolerance


def _check_grouping(u_kn, counts):
    """The columns of u_kn come in groups, n_k of them drawn from state k: a sample
    cannot have zero density (u = +inf) under the state it was drawn from. Where one
    has, the counts do not describe the columns (wrong order, or counts of another
    grouping): a ValueError naming n_k. A nan there is left to the NONFINITE flag."""
    owner = np.repeat(np.arange(counts.shape[0]), counts)  # the state each column was drawn from
    own = u_kn[jnp.asarray(owner), jnp.arange(u_kn.shape[1])]
    impossible = np.flatnonzero(np.asarray(jnp.isposinf(own)))
    if impossible.size:
        column = int(impossible[0])
        state = int(owner[column])
        raise ValueError(
            f"n_k does not match the grouping of u_kn's columns: n_k = {counts.tolist()} puts column {column} among "
            f"the samples drawn from state {state}, but u_kn[{state}, {column}] = +inf (zero density there; "
            f"{impossible.size} of the {u_kn.shape[1]} columns have zero density under their state); order the "
            f"columns by the state each sample was drawn from, the first n_k[0] from state 0, the next n_k[1] "
            f"from state 1, ...")


__all__ = ["mbar", "MBARResult", "MBARInfo"]
