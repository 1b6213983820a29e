"""Linear-Gaussian state-space model with an exact (Kalman) log-likelihood.

    x_1 ~ N(m_0, P_0),   x_t = A x_{t−1} + v_t,   v_t ~ N(0, Q),       t = 2..T
    y_t = C x_t + w_t,   w_t ~ N(0, R),                                 t = 1..T

The first state is drawn at the time of the first observation, the convention of
``jaxz.particle_filter``. The Kalman filter gives log p(y_{1:T}) exactly:
with predicted moments (m_t, P_t), S_t = C P_t Cᵀ + R and

    log p(y_{1:T}) = Σ_t log N(y_t; C m_t, S_t).

``particle_filter_callables(params)`` returns the one-particle functions the
bootstrap filter takes.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks, reduction
from jaxz.types import Array, PRNGKey


class LGSSM(NamedTuple):
    transition: Array  # A (d_x, d_x)
    observation: Array  # C (d_y, d_x)
    transition_cov: Array  # Q (d_x, d_x)
    observation_cov: Array  # R (d_y, d_y)
    initial_mean: Array  # m_0 (d_x,)
    initial_cov: Array  # P_0 (d_x, d_x)


def check(params: LGSSM) -> LGSSM:
    """Floating fields (float32 or float64), shapes that agree, finite matrices, and symmetric positive-definite
    covariances Q, R, P_0 (a Cholesky factor reads only one triangle, so a non-symmetric Q
    would be silently replaced by another; a negative-definite one gives nan). ValueError
    naming the field; traced fields pass the value checks."""
    if not isinstance(params, LGSSM):
        raise ValueError(f"params must be a jaxz.models.lgssm.LGSSM, got {type(params).__name__}")
    for name in LGSSM._fields:
        _checks.floating(name, getattr(params, name))
        if jnp.result_type(getattr(params, name)) in (jnp.float16, jnp.bfloat16):
            raise ValueError(f"{name} is {jnp.result_type(getattr(params, name))}, which is not supported: the filter "
                             "and the noise take Cholesky factors, which exist in float32 and float64 only")
    dim_state = np.shape(params.initial_mean)
    if len(dim_state) != 1:
        raise ValueError(f"initial_mean must have shape (d_x,), got {dim_state}")
    (d_x,) = dim_state
    d_y = np.shape(params.observation)[0] if np.ndim(params.observation) == 2 else None
    expected = {"transition": (d_x, d_x), "observation": (d_y, d_x), "transition_cov": (d_x, d_x),
                "observation_cov": (d_y, d_y), "initial_cov": (d_x, d_x)}
    for name, shape in expected.items():
        if np.shape(getattr(params, name)) != shape:
            raise ValueError(f"{name} must have shape {shape} (d_x = {d_x}, d_y = {d_y}), "
                             f"got {np.shape(getattr(params, name))}")
    for name in ("transition", "observation", "initial_mean"):
        _checks.finite(name, getattr(params, name))
    for name in ("transition_cov", "observation_cov", "initial_cov"):
        if np.size(getattr(params, name)):  # a (0, 0) covariance (d_x = 0: no state) has nothing to check
            _checks.positive_definite(name, getattr(params, name))
    return params


def default(dim_state: int = 2, dim_observation: int = 1, dtype=float) -> LGSSM:
    """A stable, mildly rotating model: A = 0.9·rotation(0.3) (d_x = 2 shown; larger
    d_x use 0.9·I), C = first ``dim_observation`` coordinates, Q = 0.5 I, R = 0.5 I,
    x_1 ~ N(0, I)."""
    if dim_state == 2:
        angle = 0.3
        rotation = jnp.array([[jnp.cos(angle), -jnp.sin(angle)], [jnp.sin(angle), jnp.cos(angle)]])
        transition = 0.9 * rotation
    else:
        transition = 0.9 * jnp.eye(dim_state)
    observation = jnp.eye(dim_observation, dim_state)
    return LGSSM(
        transition.astype(dtype), observation.astype(dtype), 0.5 * jnp.eye(dim_state, dtype=dtype),
        0.5 * jnp.eye(dim_observation, dtype=dtype), jnp.zeros((dim_state,), dtype), jnp.eye(dim_state, dtype=dtype),
    )


def _gaussian_noise(rng_key, cov, dtype):
    chol = jnp.linalg.cholesky(cov)
    return reduction.matvec(chol, jax.random.normal(rng_key, (cov.shape[0],), dtype=dtype))


def _log_normal(x, mean, cov):
    chol = jnp.linalg.cholesky(cov)
    # L⁻¹ depends on the parameters only (one solve, outside any vmap over particles)
    inverse = jax.scipy.linalg.solve_triangular(chol, jnp.eye(cov.shape[0], dtype=chol.dtype), lower=True)
    whitened = reduction.matvec(inverse, x - mean)
    return (-0.5 * reduction.sum(whitened**2) - jnp.sum(jnp.log(jnp.diag(chol)))
            - 0.5 * x.shape[-1] * jnp.log(2.0 * jnp.pi))


def sample_initial(rng_key: PRNGKey, params: LGSSM) -> Array:
    """x_1 ~ N(m_0, P_0), one particle."""
    return params.initial_mean + _gaussian_noise(rng_key, params.initial_cov, params.initial_mean.dtype)


def sample_transition(rng_key: PRNGKey, x: Array, params: LGSSM) -> Array:
    """x_t ~ N(A x_{t−1}, Q), one particle."""
    return reduction.matvec(params.transition, x) + _gaussian_noise(rng_key, params.transition_cov, x.dtype)


def _check_observation_shape(params: LGSSM, observations, one_step: bool = False) -> None:
    """Observations of shape (T, d_y), or one step y_t of shape (d_y,) (ValueError
    otherwise): a (T, 2) series for d_y = 1 would broadcast against C x_t and give a wrong
    log Ẑ with status 0. Shapes are static, so this holds under jit too."""
    d_y = np.shape(params.observation)[0]
    shape = np.shape(observations)
    if one_step and shape != (d_y,):
        raise ValueError(f"observations must have shape (T, d_y) = (T, {d_y}): one time step y_t has shape "
                         f"{shape}, expected ({d_y},)")
    if not one_step and (len(shape) != 2 or shape[0] < 1 or shape[1] != d_y):
        raise ValueError(f"observations must have shape (T, d_y) = (T, {d_y}) with T >= 1, got shape {shape}")


def log_observation(x: Array, y: Array, params: LGSSM) -> Array:
    """log N(y_t; C x_t, R) for one y_t of shape (d_y,) (ValueError otherwise)."""
    _check_observation_shape(params, y, one_step=True)
    return _log_normal(y, reduction.matvec(params.observation, x), params.observation_cov)


def particle_filter_callables(params: LGSSM):
    """(sample_initial(key), sample_transition(key, x), log_observation(x, y)) bound to ``params``."""
    check(params)
    return (
        lambda rng_key: sample_initial(rng_key, params),
        lambda rng_key, x: sample_transition(rng_key, x, params),
        lambda x, y: log_observation(x, y, params),
    )


def simulate(rng_key: PRNGKey, params: LGSSM, num_steps: int) -> tuple[Array, Array]:
    """Draw (x_{1:T}, y_{1:T}) with leading axis time (``num_steps`` = T >= 1)."""
    check(params)
    num_steps = _checks.integer("num_steps", num_steps, 1, "time steps T")
    key_init, key_scan = jax.random.split(rng_key)
    x_first = sample_initial(key_init, params)

    def body(x, key):
        key_observation, key_transition = jax.random.split(key)
        dtype = x.dtype
        y = params.observation @ x + _gaussian_noise(key_observation, params.observation_cov, dtype)
        return sample_transition(key_transition, x, params), (x, y)

    _, (states, observations) = jax.lax.scan(body, x_first, jax.random.split(key_scan, num_steps))
    return states, observations


def kalman_log_likelihood(params: LGSSM, observations: Array) -> Array:
    """Exact log p(y_{1:T}) by the Kalman filter (``lax.scan`` over time). ``params``
    pass ``check``; observations must have shape (T, d_y), and concrete ones must be
    finite (ValueError)."""
    check(params)
    _check_observation_shape(params, observations)
    _checks.finite("observations", observations)
    A, C, Q, R = params.transition, params.observation, params.transition_cov, params.observation_cov

    def body(carry, y):
        mean, cov = carry  # predicted moments of x_t given y_{1:t−1}
        innovation_cov = C @ cov @ C.T + R
        log_increment = _log_normal(y, C @ mean, innovation_cov)
        gain = jnp.linalg.solve(innovation_cov, C @ cov).T  # P Cᵀ S⁻¹ (S, P symmetric)
        filtered_mean = mean + gain @ (y - C @ mean)
        filtered_cov = cov - gain @ innovation_cov @ gain.T
        filtered_cov = 0.5 * (filtered_cov + filtered_cov.T)
        return (A @ filtered_mean, A @ filtered_cov @ A.T + Q), log_increment

    _, log_increments = jax.lax.scan(body, (params.initial_mean, params.initial_cov), observations)
    return jnp.sum(log_increments)


exact_log_z = kalman_log_likelihood

__all__ = [
    "LGSSM",
    "check",
    "default",
    "sample_initial",
    "sample_transition",
    "log_observation",
    "particle_filter_callables",
    "simulate",
    "kalman_log_likelihood",
    "exact_log_z",
]
