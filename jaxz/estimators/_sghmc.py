"""The SGHMC moves of SGAIS (Alg. 1 line 9): ``burn_in`` stochastic-gradient HMC steps per
particle at the current λ, on the chunk's stochastic potential (seed eq. 4).

- ``seed_move``: the seed's eq. (3) with an explicit learning rate, η = lr / n;
- ``auto_move``: the automatic default, BAOAB-integrated SGHMC (Leimkuhler & Matthews 2013)
  on coordinates whitened by a metric from the particles (``metric_factor``), with the step
  from their curvature (``whitened_curvature``, ``auto_step``).

Both take the chunk first (a ``ChunkPotential``, built by ``sgais``: its potential, gradient
and mini-batches), then (rng_key, flat, lam, population), and return (flat, burn_in, step):
the moved particles (M, d), the steps taken per particle and the step used.
"""
import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxz import reduction
from jaxz import weights as _weights
from jaxz.kernels.tuning import weighted_covariance
from jaxz.types import Array

DENSE_METRIC_MAX_DIM = 256  # dense Hessian metric up to this many parameters (d Hessian-vector products)
POWER_ITERATIONS = 10  # for λ_max(H_z): an estimate from below, hence the margin h√λ ≤ 1 (< 2)
CURVATURE_PROBES = 4  # particles at which λ_max is estimated (the max is taken)
SEED_FRICTION = 0.2  # the seed's friction α with an explicit learning rate (§6.1)


class ChunkPotential(NamedTuple):
    """The stochastic potential of one chunk (seed eq. 4) and what the moves read of the chunk.

    potential(flat_theta, lam, batch) -> scalar: U(θ) = −λ log p(D_k | θ) − (n/|B|) Σ_B log p(y | θ)
        − log p(θ), θ flat (d,), ``batch`` from ``draw_batch``.
    gradient_at(flat_theta, lam, rng_key) -> (d,): ∇U on a fresh mini-batch, non-finite entries 0.
    draw_batch(rng_key) -> a mini-batch B of the earlier rows (the whole pool while it fits in one).
    chunk_log_likelihood(flat_theta) -> scalar: log p(D_k | θ) over the chunk's valid rows.
    num_seen: n, the observations before the chunk; num_valid: |D_k|, its rows (int32).
    noisy: whether the gradient is a mini-batch estimate (the pool exceeds one mini-batch).
    dtype: the float dtype of the particles.
    """
    potential: Callable
    gradient_at: Callable
    draw_batch: Callable
    chunk_log_likelihood: Callable
    num_seen: Array
    num_valid: Array
    noisy: Array
    dtype: Any


# --- explicit learning_rate: the seed's SGHMC (eq. 3), η = lr / n ---------------------------

def seed_step_size(chunk: ChunkPotential, lam, learning_rate: float):
    # η = lr / n with n the observations the intermediate target has absorbed,
    # n_before + λ·|D_k|: the potential's curvature grows like it (the prior's at n = 1).
    dtype = chunk.dtype
    absorbed = chunk.num_seen.astype(dtype) + lam * chunk.num_valid.astype(dtype)
    return jnp.asarray(learning_rate, dtype) / jnp.maximum(absorbed, 1.0)


def sghmc_step(chunk: ChunkPotential, flat_theta, velocity, rng_key, lam, eta, *, alpha: float,
               noise_offset: float):
    """Seed eq. (3): v ← (1−α) v − η ∇Ũ(θ) + N(0, 2(α − β̂) η); θ ← θ + v."""
    key_batch, key_noise = jax.random.split(rng_key)
    gradient = chunk.gradient_at(flat_theta, lam, key_batch)
    noise_scale = jnp.sqrt(2.0 * (alpha - noise_offset) * eta)
    noise = noise_scale * jax.random.normal(key_noise, flat_theta.shape, chunk.dtype)
    velocity = (1.0 - alpha) * velocity - eta * gradient + noise
    return flat_theta + velocity, velocity


def seed_move(chunk: ChunkPotential, rng_key, flat, lam, population, *, learning_rate: float,
              alpha: float | None, noise_offset: float, burn_in: int | None):
    """``burn_in`` SGHMC steps at λ for every particle; momenta refreshed first.

    flat (M, d) the particles; ``population`` is unread (the seed's move is not
    preconditioned). alpha None: the seed's 0.2; burn_in None: the seed's 20 (§6.1).
    Returns (flat, burn_in, η)."""
    del population
    burn_in = 20 if burn_in is None else burn_in
    alpha = SEED_FRICTION if alpha is None else alpha
    num_particles = flat.shape[0]
    key_velocity, key_steps = jax.random.split(rng_key)
    eta = seed_step_size(chunk, lam, learning_rate)
    velocity = jnp.sqrt(eta) * jax.random.normal(key_velocity, flat.shape, chunk.dtype)
    step = functools.partial(sghmc_step, chunk, alpha=alpha, noise_offset=noise_offset)

    def body(carry, key):
        flat, velocity = carry
        keys = jax.random.split(key, num_particles)
        flat, velocity = jax.vmap(step, in_axes=(0, 0, 0, None, None))(flat, velocity, keys, lam, eta)
        return (flat, velocity), None

    (flat, _), _ = jax.lax.scan(body, (flat, velocity), jax.random.split(key_steps, burn_in))
    return flat, jnp.int32(burn_in), eta


# --- automatic step: preconditioned SGHMC from the particles -------------------------------

def auto_step(num_rows, minibatch_size: int, noisy, curvature_trace, max_curvature, max_chunk_bias: float,
              max_step: float, alpha: float | None, dtype):
    """(h, α): the whitened SGHMC step and the per-step friction of the automatic defaults.

    On z = θ / s (s² the particles' variances) the seed's η (eq. 3) is the squared step h²
    and lr·tr(I₁) (I₁ the per-observation Fisher information) becomes h²·tr(H_z), H_z the
    whitened Hessian of the potential (≈ tr(n I₁_z), about d when the particles' variances
    match the posterior; larger where the posterior is correlated, e.g. softmax weights).
    ``curvature_trace`` estimates tr(H_z) (Hutchinson), ``max_curvature`` its largest
    eigenvalue (power iteration). The step is the smaller of
      stability: h = min(``max_step``, 1/√λ_max(H_z))  (BAOAB is stable for h√λ < 2);
      bias:      the per-chunk mini-batch bias m·h²·tr(H_z)/(4α|B|) (``sgais`` docstring)
                 held at ``max_chunk_bias`` δ: with α = 2h (critical damping of a unit mode)
                 h = 8|B|δ / (m tr H_z); with α given, h = √(4α|B|δ / (m tr H_z)).
    The bias bound applies only with gradient noise (``noisy``): while the earlier rows fit in
    one mini-batch (the first chunks) the gradient is exact.
    """
    m = jnp.maximum(jnp.asarray(num_rows, dtype), 1.0)
    trace = jnp.maximum(jnp.asarray(curvature_trace, dtype), 1.0)
    stable = jnp.minimum(max_step, 1.0 / jnp.sqrt(jnp.maximum(jnp.asarray(max_curvature, dtype), 1e-12)))
    if alpha is None:
        h_bias = 8.0 * minibatch_size * max_chunk_bias / (m * trace)
    else:
        h_bias = jnp.sqrt(4.0 * alpha * minibatch_size * max_chunk_bias / (m * trace))
    step = jnp.where(noisy, jnp.minimum(h_bias, stable), stable).astype(dtype)
    friction = jnp.minimum(2.0 * step, 1.0) if alpha is None else jnp.asarray(alpha, dtype)
    return step, friction.astype(dtype)


def _push(factor, v):
    """A v: a whitened vector to θ-space (A dense (d, d), or its diagonal (d,)); the dense
    product in the fixed order of ``jaxz.reduction.matvec`` (layout-independent bits)."""
    return reduction.matvec(factor, v) if factor.ndim == 2 else factor * v


def _pull(factor, g):
    """Aᵀ g: a θ-space gradient to the whitened coordinates (fixed-order, as ``_push``)."""
    return reduction.matvec(factor.T, g) if factor.ndim == 2 else factor * g


def whitened_move(chunk: ChunkPotential, rng_key, flat_theta, lam, factor, h, friction, burn_in, *,
                  noise_offset: float):
    """SGHMC on z with θ = A z (A = ``factor``: M⁻¹ = A Aᵀ, see ``metric_factor``), one
    particle, integrated by the BAOAB splitting (Leimkuhler & Matthews 2013) of the seed's
    Langevin dynamics (§4): half kick, half drift, exact friction + noise
    p ← e^{−α} p + √(1 − e^{−2α}) ξ, half drift, half kick. For a Gaussian target its
    θ-marginal is exact at any stable step, so the step is limited by the gradient
    noise and stability alone; one gradient (fresh mini-batch) per step, as eq. (3)."""
    dtype, gradient_at = chunk.dtype, chunk.gradient_at
    key_momentum, key_first, key_steps = jax.random.split(rng_key, 3)
    decay = jnp.exp(-friction)
    kick = jnp.sqrt(jnp.maximum(1.0 - decay**2 - 2.0 * noise_offset * h, 0.0))  # β̂ offset (eq. 3)
    momentum = jax.random.normal(key_momentum, flat_theta.shape, dtype)
    gradient = _pull(factor, gradient_at(flat_theta, lam, key_first))  # ∇_z U = Aᵀ ∇_θ U

    def body(i, carry):
        theta, momentum, gradient = carry
        key_noise, key_batch = jax.random.split(jax.random.fold_in(key_steps, i))
        momentum = momentum - 0.5 * h * gradient
        theta = theta + 0.5 * h * _push(factor, momentum)
        momentum = decay * momentum + kick * jax.random.normal(key_noise, theta.shape, dtype)
        theta = theta + 0.5 * h * _push(factor, momentum)
        gradient = _pull(factor, gradient_at(theta, lam, key_batch))
        momentum = momentum - 0.5 * h * gradient
        return theta, momentum, gradient

    theta, _, _ = jax.lax.fori_loop(0, burn_in, body, (flat_theta, momentum, gradient))
    return theta


def _probe_rows(rng_key, num_particles: int) -> Array:
    """The indices of min(CURVATURE_PROBES, M) distinct particles, drawn uniformly: where the
    curvature (``metric_factor``'s Hessian, ``whitened_curvature``'s λ_max) is read."""
    return jax.random.choice(rng_key, num_particles, (min(CURVATURE_PROBES, num_particles),), replace=False)


def metric_factor(chunk: ChunkPotential, rng_key, flat, lam, population):
    """A with M⁻¹ = A Aᵀ, the mass of the whitened moves (θ = A z).

    d ≤ DENSE_METRIC_MAX_DIM: the inverse of the potential's mean Hessian H̄ at λ over
    CURVATURE_PROBES particles (one mini-batch), the Laplace covariance at the particles
    (a constant Riemannian metric, Girolami & Calderhead 2011 §5; the Fisher
    preconditioner of SGFS, Ahn, Korattikara & Welling 2012): A = U diag(p)^{-1/2} for
    H̄ = U diag(λ) Uᵀ, with p_j = max(λ_j, 1/(4 v_j)), v_j the weighted particles'
    variance along u_j, so that a flat or non-convex direction (λ_j ≤ 0) takes the
    particles' spread instead. Correlated posteriors (the softmax's contrasts against
    its prior-only direction) are then whitened whole, where a diagonal scale would leave
    tr(H_z) and λ_max/λ_min large and the bias-limited step (``auto_step``) small.
    Larger d: the diagonal s (weighted particle variances), A = diag(s).

    flat (M, d) the particles; ``population`` = (positions (M, d), log_weights (M,)), the
    weighted particles at λ."""
    dtype = chunk.dtype
    num_particles, dim = flat.shape
    variances = weighted_covariance(*population, dense=False).astype(dtype)
    if dim > DENSE_METRIC_MAX_DIM:
        return jnp.sqrt(variances)
    key_batch, key_rows = jax.random.split(rng_key)
    batch = chunk.draw_batch(key_batch)
    rows = _probe_rows(key_rows, num_particles)
    hessians = jax.vmap(jax.hessian(chunk.potential), in_axes=(0, None, None))(flat[rows], lam, batch)
    hessian = reduction.mean(jnp.where(jnp.isfinite(hessians), hessians, 0.0), axis=0)
    eigenvalues, vectors = jnp.linalg.eigh(0.5 * (hessian + hessian.T))
    positions, log_weights = population
    weights = jnp.exp(_weights.normalize(log_weights)).astype(dtype)
    # sums over particles in one fixed order: the same bits on any device layout
    centred = positions - reduction.sum(weights[:, None] * positions, axis=0)
    spread = reduction.sum(weights[:, None] * (centred @ vectors) ** 2, axis=0)  # v_j
    spread = jnp.maximum(spread, jnp.finfo(dtype).eps * jnp.mean(variances) + jnp.finfo(dtype).tiny)
    precision = jnp.maximum(eigenvalues, 1.0 / spread)
    return vectors * jax.lax.rsqrt(precision)[None, :]


def whitened_curvature(chunk: ChunkPotential, rng_key, flat, lam, factor):
    """(Hutchinson tr(H_z) averaged over the particles, max over CURVATURE_PROBES particles
    of λ_max(H_z) by power iteration), H_z = Aᵀ ∇²U A on one mini-batch (or the exact pool)."""
    dtype = chunk.dtype
    num_particles = flat.shape[0]
    # four keys, each used once: with partitionable threefry a key's own draws and its splits are not independent
    key_batch, key_probe, key_rows, key_power = jax.random.split(rng_key, 4)
    batch = chunk.draw_batch(key_batch)

    def hvp(x, v):  # H_z v = Aᵀ ∇²U(x) A v
        tangent = jax.jvp(jax.grad(lambda y: chunk.potential(y, lam, batch)), (x,), (_push(factor, v),))[1]
        return jnp.where(jnp.isfinite(tangent), _pull(factor, tangent), 0.0)

    probes = jax.random.rademacher(key_probe, flat.shape, dtype)
    trace = reduction.mean(jnp.sum(probes * jax.vmap(hvp)(flat, probes), axis=1), axis=0)

    def largest(x, key):
        v = jax.random.normal(key, x.shape, dtype)

        def power(_, v):
            w = hvp(x, v / jnp.linalg.norm(v))
            return jnp.where(jnp.linalg.norm(w) > 0, w, v)

        v = jax.lax.fori_loop(0, POWER_ITERATIONS, power, v)
        return jnp.linalg.norm(v)  # ‖H v̂‖, v̂ the previous unit iterate

    rows = _probe_rows(key_rows, num_particles)
    curvature = jnp.max(jax.vmap(largest)(flat[rows], jax.random.split(key_power, rows.shape[0])))
    return trace, curvature


def auto_move(chunk: ChunkPotential, rng_key, flat, lam, population, *, minibatch_size: int,
              alpha: float | None, noise_offset: float, burn_in: int | None, max_chunk_bias: float,
              max_step: float, move_time: float, max_burn_in: int):
    """Whitened SGHMC moves of every particle at λ, with nothing hand-set: the metric from
    ``population`` (the weighted particles at λ, ``metric_factor``), the step h and friction
    from the whitened curvature (``auto_step``), burn_in = ⌈move_time / h⌉ ≤ max_burn_in
    unless given (whitened time 4 by default: a critically damped unit mode keeps a position
    correlation (1 + t)e^{−t} ≈ 0.09 after it, so resampled duplicates part). The options are
    those of ``sgais``. Returns (flat, burn_in, h)."""
    dtype = chunk.dtype
    num_particles = flat.shape[0]
    key_metric, key_curvature, key_moves = jax.random.split(rng_key, 3)
    factor = metric_factor(chunk, key_metric, flat, lam, population).astype(dtype)
    trace, curvature = whitened_curvature(chunk, key_curvature, flat, lam, factor)
    h, friction = auto_step(chunk.num_valid, minibatch_size, chunk.noisy, trace, curvature, max_chunk_bias,
                            max_step, alpha, dtype)
    if burn_in is None:
        burn_in = jnp.clip(jnp.ceil(move_time / h), 1, max_burn_in).astype(jnp.int32)
    else:
        burn_in = jnp.int32(burn_in)
    keys = jax.random.split(key_moves, num_particles)
    move = functools.partial(whitened_move, chunk, noise_offset=noise_offset)
    flat = jax.vmap(move, in_axes=(0, 0, None, None, None, None, None))(keys, flat, lam, factor, h, friction, burn_in)
    return flat, burn_in, h
