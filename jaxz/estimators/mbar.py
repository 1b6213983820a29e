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
"""
import jax
import jax.numpy as jnp

from jaxz.types import Array


def _log_denominator(f, u_kn, log_n_k):
    # log Σ_k n_k exp(f_k − u_kn), one value per sample n
    return jax.nn.logsumexp(log_n_k[:, None] + f[:, None] - u_kn, axis=0)


def _self_consistent(f, u_kn, log_n_k):
    """One fixed-point update of S&C eq. (11): f_i = −log Σ_n exp(−u_in) / Σ_k n_k exp(f_k − u_kn)."""
    return -jax.nn.logsumexp(-u_kn - _log_denominator(f, u_kn, log_n_k)[None, :], axis=1)


def _weights(f, u_kn, log_n_k):
    """W_nk = exp(f_k − u_kn) / Σ_j n_j exp(f_j − u_jn), as a (K, N) array."""
    return jnp.exp(f[:, None] - u_kn - _log_denominator(f, u_kn, log_n_k)[None, :])


def _gradient(f, weights, n_k, sampled):
    """∇F (plus the gauge penalty (Σ n_k f_k)² / 2N); zero on unsampled states."""
    gradient = n_k * jnp.sum(weights, axis=1) - n_k + n_k * jnp.dot(n_k, f) / jnp.sum(n_k)
    return jnp.where(sampled, gradient, 0.0)


def _hessian(weights, n_k, sampled):
    weighted = weights * n_k[:, None]
    # the K × N × K product dominates the cost: form it in float32 at most. Only the
    # Newton direction uses it; the gradient stays in full precision, so the fixed
    # point (and f̂) keeps the input's precision.
    low = weighted.astype(jnp.float32)
    outer = (low @ low.T).astype(weights.dtype)
    hessian = jnp.diag(jnp.sum(weighted, axis=1)) - outer + jnp.outer(n_k, n_k) / jnp.sum(n_k)
    # unsampled states do not enter F: keep them out of the linear system
    return jnp.where(sampled[:, None] & sampled[None, :], hessian, jnp.eye(n_k.shape[0], dtype=weights.dtype))


def _solve(u_kn, n_k, tolerance, max_iterations):
    dtype = u_kn.dtype
    log_n_k = jnp.where(n_k > 0, jnp.log(jnp.maximum(n_k, 1)), -jnp.inf).astype(dtype)
    sampled = n_k > 0

    def gauge(f):  # Σ n_k f_k = 0 over sampled states, the penalty's minimum
        shift = jnp.dot(n_k, jnp.where(sampled, f, 0.0)) / jnp.sum(n_k)
        return jnp.where(sampled, f - shift, 0.0)

    def norm(gradient):
        value = jnp.max(jnp.abs(gradient) / jnp.maximum(n_k, 1))
        return jnp.where(jnp.isnan(value), jnp.inf, value)

    def evaluate(f):
        weights = _weights(f, u_kn, log_n_k)
        return weights, _gradient(f, weights, n_k, sampled)

    def body(carry):
        f, weights, gradient, iteration = carry
        newton = gauge(f - jnp.linalg.solve(_hessian(weights, n_k, sampled), gradient))
        w_newton, g_newton = evaluate(newton)

        def fixed_point_step():
            fixed_point = gauge(jnp.where(sampled, _self_consistent(f, u_kn, log_n_k), 0.0))
            return (fixed_point,) + evaluate(fixed_point)

        # take the Newton step when it reduces the gradient, else a self-consistent step
        # (far from the optimum, where the quadratic model is poor)
        f, weights, gradient = jax.lax.cond(
            norm(g_newton) < norm(gradient), lambda: (newton, w_newton, g_newton), fixed_point_step
        )
        return f, weights, gradient, iteration + 1

    def cond(carry):
        _, _, gradient, iteration = carry
        return (norm(gradient) > tolerance) & (iteration < max_iterations)

    f = jnp.zeros(u_kn.shape[0], dtype)
    weights, gradient = evaluate(f)
    f, _, _, _ = jax.lax.while_loop(cond, body, (f, weights, gradient, jnp.int32(0)))
    # unsampled states from eq. (11); at the fixed point it leaves the sampled ones unchanged
    f = jnp.where(sampled, f, _self_consistent(f, u_kn, log_n_k))
    return f - f[0]


def _covariance(f, u_kn, n_k):
    """Asymptotic covariance of f̂ (S&C eq. (D4)), up to terms a 1ᵀ + 1 bᵀ that cancel
    in every difference f̂_i − f̂_j. With G = WᵀW (K × K), D4 is Θ = G (I − N G)⁺,
    N = diag(n). I − N G is singular (right null vector n, left 1, because the columns
    of W sum to 1); replacing the pseudo-inverse by the inverse of I − N G + n 1ᵀ / Σn
    changes Θ only by such cancelling terms, and needs an LU solve, not an
    eigendecomposition."""
    log_n_k = jnp.where(n_k > 0, jnp.log(jnp.maximum(n_k, 1)), -jnp.inf).astype(u_kn.dtype)
    weights = _weights(f, u_kn, log_n_k)  # (K, N) = Wᵀ
    gram = weights @ weights.T
    system = jnp.eye(f.shape[0], dtype=f.dtype) - n_k[:, None] * gram + jnp.outer(n_k, jnp.ones_like(n_k)) / jnp.sum(n_k)
    return jnp.linalg.solve(system.T, gram).T  # G A⁻¹ (G symmetric)


def mbar(u_kn: Array, n_k: Array, *, tolerance: float | None = None, max_iterations: int = 100) -> tuple[Array, Array]:
    """Solve MBAR for the dimensionless free energies of K states.

    Args:
      u_kn: (K, N) reduced potentials u_k(x_n) = −log f_k(x_n) of every sample under
        every state; samples are grouped by the state they were drawn from, n_k of
        them from state k (only the counts matter).
      n_k: (K,) sample counts per state, summing to N (zeros allowed).
      tolerance: stop when max_k |∂F/∂f_k| / n_k falls below it (default 1e-10 in
        float64, 1e-5 in float32).
      max_iterations: cap on Newton / fixed-point iterations.

    Returns:
      ``(f_k, f_k_stderr)``: f_k = −log(Z_k / Z_0) (so f_0 = 0), and the asymptotic
      standard error of f_k − f_0. Jittable; follows the dtype of ``u_kn``.
    """
    u_kn = jnp.asarray(u_kn)
    if not jnp.issubdtype(u_kn.dtype, jnp.floating):
        u_kn = u_kn.astype(jnp.result_type(float))
    if u_kn.ndim != 2:
        raise ValueError(f"u_kn must be a (K, N) array, got shape {u_kn.shape}")
    n_k = jnp.asarray(n_k).astype(u_kn.dtype)
    if n_k.shape != (u_kn.shape[0],):
        raise ValueError(f"n_k must have shape (K,) = ({u_kn.shape[0]},), got {n_k.shape}")
    if not isinstance(n_k, jax.core.Tracer) and float(jnp.sum(n_k)) != u_kn.shape[1]:
        raise ValueError(f"n_k must sum to N = {u_kn.shape[1]} (the columns of u_kn), got {float(jnp.sum(n_k))}")
    if tolerance is None:
        tolerance = 1e-10 if u_kn.dtype == jnp.float64 else 1e-5
    f = _solve(u_kn, n_k, tolerance, max_iterations)
    theta = _covariance(f, u_kn, n_k)
    diagonal = jnp.diag(theta)
    variance = diagonal + diagonal[0] - theta[0] - theta[:, 0]
    return f, jnp.sqrt(jnp.maximum(variance, 0.0))


__all__ = ["mbar"]
