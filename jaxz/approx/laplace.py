"""The Laplace approximation of a latent Gaussian Markov random field (Rue, Martino &
Chopin 2009), as the Gaussian pseudo-observations that twist SMC (Lindsten, Helske &
Vihola 2018, §4.3, eq. 12).

For p(x, y) = N(x; 0, Q⁻¹) ∏_t exp ℓ_t(x_t), Newton's method finds the mode x̂ of
f(x) = −½ xᵀQx + Σ_t ℓ_t(x_t): with g_t = ℓ_t'(x_t), h_t = −ℓ_t''(x_t),

    x ← (Q + diag h)⁻¹ (h ⊙ x + g),                                   (Newton step)

stopping when the step is below ``tol``. Expanding ℓ_t to second order at x̂ gives
the unnormalized Gaussian pseudo-observation

    p̃(y_t | x_t) = exp(c_t − h_t (x_t − m_t)²/2),  m_t = x̂_t + g_t/h_t,  c_t = ℓ_t(x̂_t) + g_t²/(2h_t),

and log Z ≈ log ∫ p(x) ∏ p̃(y_t | x_t) dx = Σ ℓ_t(x̂_t) − ½ x̂ᵀQx̂ + ½ log|Q| − ½ log|Q + diag h|,
the Laplace log Z. All host-side float64, sparse: each Newton step is one sparse
LDLᵀ factorization of Q + diag h (``jaxz.models.gmrf.sparse_ldl``: SuperLU,
minimum-degree order).
"""
from typing import NamedTuple

import numpy as np

from jaxz.models import gmrf as _gmrf


class LaplaceApproximation(NamedTuple):
    log_z: float  # the Laplace approximation of log Z
    mode: np.ndarray  # (T,) x̂
    pseudo_means: np.ndarray  # (T,) m_t
    pseudo_variances: np.ndarray  # (T,) 1/h_t (inf where y_t carries no information)
    pseudo_log_scales: np.ndarray  # (T,) c_t: log p̃(y_t | x_t) at its peak x_t = m_t
    num_iterations: int
    converged: bool
    gradient_norm: float  # max_t |(−Q x̂ + g)_t| at the returned mode


def _site_derivatives(model, x):
    """ℓ_t(x_t), g_t = ℓ_t'(x_t), h_t = −ℓ_t''(x_t) for every t (float64)."""
    y = model.observations
    if model.trials is not None:
        n = model.trials
        log_sigmoid = -np.logaddexp(0.0, -x)
        log_sigmoid_neg = -np.logaddexp(0.0, x)
        log_choose = _log_choose(n, y)
        probability = np.exp(log_sigmoid)
        value = y * log_sigmoid + (n - y) * log_sigmoid_neg + log_choose
        return value, y - n * probability, n * np.exp(log_sigmoid + log_sigmoid_neg)
    variance = model.noise_sd**2
    value = -0.5 * (y - x) ** 2 / variance - 0.5 * np.log(2.0 * np.pi * variance)
    return value, (y - x) / variance, 1.0 / variance


def _log_choose(n, y):
    from scipy.special import gammaln

    return gammaln(n + 1) - gammaln(y + 1) - gammaln(n - y + 1)


def _objective(model, x):
    value, _, _ = _site_derivatives(model, x)
    return np.sum(value) - 0.5 * x @ (model.precision @ x)


def laplace(model, *, tol: float = 1e-10, max_iterations: int = 100, initial=None) -> LaplaceApproximation:
    """Laplace approximation of a ``jaxz.models.gmrf`` latent field; usable as the
    ``twist`` of ``jaxz.models.gmrf.sequential_model``.

    tol: stop when max_t |Δx_t| <= tol · (1 + max_t |x_t|). max_iterations: Newton steps
    at most (``converged`` says whether tol was met). initial: (T,) start, default 0.
    Newton steps are halved while they fail to increase f (the binomial and Gaussian
    log-likelihoods are concave, so full steps are almost always taken).
    """
    if not isinstance(model, _gmrf.LatentGMRF):
        raise ValueError(f"model must be a jaxz.models.gmrf.LatentGMRF, got {type(model).__name__}")
    if not float(tol) > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    if int(max_iterations) < 1:
        raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
    num_variables = model.num_variables
    x = np.zeros(num_variables) if initial is None else np.asarray(initial, np.float64).copy()
    if x.shape != (num_variables,):
        raise ValueError(f"initial must have shape ({num_variables},), got {x.shape}")
    objective = _objective(model, x)
    converged, iteration = False, 0
    for iteration in range(1, int(max_iterations) + 1):
        _, gradient, curvature = _site_derivatives(model, x)
        newton = _gmrf.sparse_ldl(model.precision, curvature).solve(curvature * x + gradient)
        step = newton - x
        for _ in range(30):  # step halving: a safeguard; concave ℓ rarely needs it
            candidate = x + step
            candidate_objective = _objective(model, candidate)
            if candidate_objective >= objective - 1e-12 * abs(objective):
                break
            step = 0.5 * step
        x, objective = candidate, candidate_objective
        if np.max(np.abs(step)) <= tol * (1.0 + np.max(np.abs(x))):
            converged = True
            break

    value, gradient, curvature = _site_derivatives(model, x)
    log_z = (np.sum(value) - 0.5 * x @ (model.precision @ x) + 0.5 * model.log_det_precision
             - 0.5 * _gmrf.ldl_log_det(_gmrf.sparse_ldl(model.precision, curvature)))
    informative = curvature > 0
    safe_curvature = np.where(informative, curvature, 1.0)
    pseudo_means = np.where(informative, x + gradient / safe_curvature, x)
    pseudo_variances = np.where(informative, 1.0 / safe_curvature, np.inf)
    pseudo_log_scales = value + np.where(informative, 0.5 * gradient**2 / safe_curvature, 0.0)
    gradient_norm = float(np.max(np.abs(gradient - model.precision @ x)))
    return LaplaceApproximation(float(log_z), x, pseudo_means, pseudo_variances, pseudo_log_scales, iteration,
                                converged, gradient_norm)


__all__ = ["laplace", "LaplaceApproximation"]
