"""Kernels that tune themselves from the particle population (smc, ais).

A tuned kernel reads its parameters — a step size, an inverse mass matrix (HMC's
M⁻¹, MALA's preconditioner, RWMH's proposal covariance up to the squared step) and
HMC's number of leapfrog steps — from ``KernelState.parameters``. The particle
estimators keep them shared by all particles and, before each move, replace them
with ``Kernel.adapt(parameters, population)``:

- inverse mass matrix = the weighted covariance of the particles that approximate
  f_β (diagonal by default, dense on request, shrunk toward its diagonal when the
  ESS is not large against the dimension), as in Chopin (2002), Jasra, Stephens,
  Doucet & Tsagaris (2011) and Buchholz, Chopin & Jacob (2021, §3.1). With M⁻¹ the
  covariance of f_β the move sees a target of unit scale at every β, which is what
  lets one step size serve from the base to a posterior 10⁴ times narrower;
- step size: the previous move's mean acceptance rate â is mapped to a new step by
  the optimal-scaling law a(ε) ≈ 2Φ(−c ε^p) (Roberts, Gelman & Gilks 1997 for the
  random walk, p = 1, optimal a = 0.234; Roberts & Rosenthal 1998 for MALA, p = 3/2
  in blackjax's ε (proposal variance 2ε), optimal a = 0.574; Beskos, Pillai,
  Roberts, Sanz-Serna & Stuart 2013 for HMC, p = 2, optimal a = 0.651). Solving it
  for c at the observed (ε, â) and again for ε at the target a*:

      ε' = ε · (Φ⁻¹(a*/2) / Φ⁻¹(â/2))^{κ/p},

  with κ = 1/2 (half the predicted change in log ε, which converges even where the
  law's exponent is off by 2x in few dimensions) and at most a 5x change per stage.
  Under the whitening above the law's constant changes little from stage to stage;
- HMC's number of leapfrog steps (unless given): the trajectory turns a whitened
  (unit) Gaussian by T (π/2 by default: a quarter period, which maps a state to an
  independent one), counted in the leapfrog's own angle per step θ(ε) =
  arccos(1 − ε²/2): L = T / θ(ε) on average, each trajectory taking ⌊L + U⌋ steps
  (U uniform, so the mean is L and the acceptance varies smoothly with ε), capped at
  ``MAX_INTEGRATION_STEPS``. The step
  is jittered uniformly by ±20% at each trajectory (Neal 2011, §5.4.2.2) so that no
  trajectory length stays resonant with the target.

The kernel at a stage thus depends on the particles before its move; the weights do
not change. For a fixed schedule this is the adaptive SMC of Chopin (2002) and
Jasra et al. (2011): consistent, with a CLT (Beskos, Jasra, Kantas & Thiery 2016), but
— as the kernel of particle i depends, through the population, on particle i itself
— exactly unbiased only in the limit; ``jaxz.smc(..., schedule="two_pass")`` fixes
the pilot's tuned parameters along with its schedule and restores exact
unbiasedness. The public constructors are ``jaxz.kernels.hmc``, ``mala``, ``rwmh`` and
``from_blackjax`` (``jaxz.kernels.gradient``): without a step size they build the tuned
kernels here; with one, the plain blackjax kernels, untouched by any of this.
"""
import math
from typing import Callable, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
from blackjax.mcmc.mala import MALAState
from jax.flatten_util import ravel_pytree
from jax.scipy.special import ndtri

from jaxz import reduction
from jaxz.kernels.base import (
    Kernel, KernelInfo, KernelState, Population, check_inverse_mass_matrix, tempered_log_density,
)
from jaxz.paths import Path
from jaxz.types import Array

MASS_MATRICES = ("diagonal", "dense", "identity")
MAX_STEP_CHANGE = 5.0  # the step size moves by at most this factor per stage
# Half the log-step change the scaling law predicts: the law is asymptotic (d → ∞), and in
# a few dimensions the acceptance can fall twice as steeply with ε, where a full step
# would oscillate; half a step converges for any true exponent up to 4p.
STEP_DAMPING = 0.5
MAX_INTEGRATION_STEPS = 100
STEP_JITTER = 0.2  # HMC step drawn uniformly in [1 − 0.2, 1 + 0.2] × ε per trajectory
DEFAULT_TRAJECTORY_LENGTH = 0.5 * math.pi

# Optimal-scaling laws a(ε) = 2Φ(−c ε^p): the exponent p in each kernel's step size.
HMC_EXPONENT, MALA_EXPONENT, RWMH_EXPONENT = 2.0, 1.5, 1.0
# Default target acceptance rates: HMC 0.65 (Beskos et al. 2013, optimal 0.651), MALA 0.57
# (Roberts & Rosenthal 1998, 0.574), RWMH 0.23 (Roberts, Gelman & Gilks 1997, 0.234), and
# 0.8 for NUTS, whose acceptance statistic averages over the whole trajectory (Stan's δ).
HMC_TARGET, MALA_TARGET, RWMH_TARGET, NUTS_TARGET = 0.65, 0.57, 0.23, 0.8


def hmc_initial_step(dim: int) -> float:
    """HMC's step before any tuning, d^(−1/4) (the optimal step's order in d, Beskos et al. 2013)."""
    return dim**-0.25


def mala_initial_step(dim: int) -> float:
    """MALA's step before any tuning, d^(−1/3) (Roberts & Rosenthal 1998)."""
    return dim ** (-1.0 / 3.0)


def rwmh_initial_step(dim: int) -> float:
    """The random walk's step before any tuning, 2.38/√d (Roberts, Gelman & Gilks 1997)."""
    return 2.38 / math.sqrt(dim)


class TunedParameters(NamedTuple):
    """Parameters of a tuned kernel, shared by all particles (one set per stage in the
    estimators' Info). ``inverse_mass_matrix`` is (d,) (diagonal) or (d, d) (dense):
    HMC's M⁻¹, MALA's preconditioner, RWMH's proposal covariance / step_size²."""

    step_size: Array
    inverse_mass_matrix: Array
    num_integration_steps: Array  # HMC: mean leapfrog steps L (a trajectory takes ⌊L + U⌋); 1 for MALA, RWMH


def weighted_covariance(positions, log_weights: Array, dense: bool) -> Array:
    """Covariance of the particles under their normalized weights: the diagonal (d,)
    or the dense (d, d) matrix, shrunk toward its diagonal by λ = d / (ESS + d) so it
    stays well conditioned when the ESS is not large against d (a Ledoit–Wolf-type
    target; the weights' ESS plays the sample size). Variances are floored at
    eps · their mean so that a collapsed coordinate cannot give a zero scale."""
    flat = jax.vmap(lambda x: ravel_pytree(x)[0])(positions)
    dtype = flat.dtype
    # every sum over particles in one fixed order, so the tuned step is the same bits on
    # any device layout (jaxz.reduction)
    weights = jnp.exp(log_weights - reduction.logsumexp(log_weights)).astype(dtype)
    mean = reduction.sum(weights[:, None] * flat, axis=0)
    centred = flat - mean
    variances = reduction.sum(weights[:, None] * centred**2, axis=0)
    floor = jnp.finfo(dtype).eps * jnp.mean(variances) + jnp.finfo(dtype).tiny
    variances = jnp.maximum(variances, floor)
    if not dense:
        return variances
    dim = flat.shape[1]
    covariance = reduction.sum((centred * weights[:, None])[:, :, None] * centred[:, None, :], axis=0)
    ess = 1.0 / reduction.sum(weights**2)
    shrinkage = dim / (ess + dim)
    covariance = (1.0 - shrinkage) * covariance + shrinkage * jnp.diag(jnp.diag(covariance))
    return covariance.at[jnp.diag_indices(dim)].set(variances)


def rescale_step_size(step_size: Array, acceptance_rate: Array, target: float, exponent: float) -> Array:
    """ε' = ε (Φ⁻¹(a*/2) / Φ⁻¹(â/2))^{κ/p}: half (κ = 1/2) of the log-step change to
    the step at which the optimal-scaling law a = 2Φ(−c ε^p), fitted to the acceptance
    â observed at ε, gives the target a*. â is clipped to [0.01, 0.99] and the change
    to [1/5, 5]; a nan â (no move yet) keeps ε."""
    observed = jnp.clip(acceptance_rate, 0.01, 0.99)
    factor = (ndtri(jnp.asarray(target / 2.0, step_size.dtype)) / ndtri(observed / 2.0)) ** (STEP_DAMPING / exponent)
    factor = jnp.clip(factor, 1.0 / MAX_STEP_CHANGE, MAX_STEP_CHANGE).astype(step_size.dtype)
    return jnp.where(jnp.isnan(acceptance_rate), step_size, step_size * factor)


def _check_target(target_acceptance):
    if not 0.0 < float(target_acceptance) < 1.0:
        raise ValueError(f"target_acceptance must be in (0, 1), got {target_acceptance}")
    return float(target_acceptance)


def _check_mass(mass_matrix: str, inverse_mass_matrix):
    if inverse_mass_matrix is None and mass_matrix not in MASS_MATRICES:
        raise ValueError(f"mass_matrix must be one of {MASS_MATRICES}, got {mass_matrix!r}")


def _check_position(flat):
    """One particle's flattened position (static shape and dtype, checked at trace time):
    at least one coordinate, as the initial step is a power of d (HMC's d^(−1/4)); and
    float32 or float64, as the step-size law's Φ⁻¹ (``ndtri``) and a dense mass matrix's
    Cholesky factor have no half-precision implementation."""
    if flat.shape[0] == 0:
        raise ValueError("the position has no coordinates (draws of shape (n, 0)): a tuned kernel needs at least one "
                         "coordinate to move (its initial step is a power of d); with no parameter there is nothing "
                         "to integrate")
    if flat.dtype in (jnp.float16, jnp.bfloat16):
        raise ValueError(f"the position is {flat.dtype}, which the tuned kernels do not support (their step-size law's "
                         "inverse normal CDF and a dense mass matrix's Cholesky factor exist in float32 and float64 "
                         "only): pass positions.astype(jnp.float32)")


def tuned_kernel(path: Path, *, inner_init: Callable, move: Callable, initial_step: Callable, exponent: float,
                 target_acceptance: float, mass_matrix: str, inverse_mass_matrix, num_integration_steps,
                 trajectory_length: float | None) -> Kernel:
    """A tunable kernel from ``inner_init(position, log_density)`` (the blackjax state at
    β, cached) and ``move(rng_key, inner, log_density, parameters) -> (inner, acceptance)``.

    ``initial_step(d)`` is the step before any tuning and ``exponent`` the p of the
    kernel's optimal-scaling law (``rescale_step_size``); ``mass_matrix`` ("diagonal",
    "dense" or "identity") is the inverse mass matrix adapted from the particles unless
    a fixed ``inverse_mass_matrix`` is given; ``num_integration_steps`` fixes HMC's
    leapfrog steps, else ``trajectory_length`` sets them (None: one step)."""
    target_acceptance = _check_target(target_acceptance)
    _check_mass(mass_matrix, inverse_mass_matrix)
    fixed_mass = inverse_mass_matrix is not None
    dense = jnp.ndim(inverse_mass_matrix) == 2 if fixed_mass else mass_matrix == "dense"
    adapt_mass = not fixed_mass and mass_matrix != "identity"

    def leapfrog_steps(step_size):
        if num_integration_steps is not None:
            return jnp.asarray(num_integration_steps, step_size.dtype)
        if trajectory_length is None:
            return jnp.ones((), step_size.dtype)
        # The leapfrog turns a unit Gaussian by θ = arccos(1 − ε²/2) per step (> ε for
        # large ε): count steps in that angle, so that ε near the stability limit 2
        # does not give a near-half-turn x → −x that would keep |x| unmixed.
        # Real-valued: each trajectory draws ⌊L + U⌋ steps, so that the acceptance rate
        # moves smoothly with ε instead of jumping where L would step from 1 to 2.
        angle = jnp.arccos(jnp.clip(1.0 - 0.5 * step_size**2, -1.0, 1.0))
        return jnp.clip(trajectory_length / jnp.maximum(angle, 1e-6), 1.0, MAX_INTEGRATION_STEPS)

    def default_parameters(position, dtype):
        flat, _ = ravel_pytree(position)
        dim = flat.shape[0]
        if fixed_mass:
            check_inverse_mass_matrix(inverse_mass_matrix, position)
            mass = jnp.asarray(inverse_mass_matrix, dtype)
        else:
            mass = jnp.eye(dim, dtype=dtype) if dense else jnp.ones((dim,), dtype)
        step_size = jnp.asarray(initial_step(dim), dtype)
        return TunedParameters(step_size, mass, leapfrog_steps(step_size))

    def init(position, beta):
        beta = jnp.asarray(beta)
        flat, _ = ravel_pytree(position)
        _check_position(flat)
        dtype = flat.dtype if jnp.issubdtype(flat.dtype, jnp.floating) else jnp.result_type(float)
        inner = inner_init(position, tempered_log_density(path, beta))
        return KernelState(position, inner, beta, default_parameters(position, dtype))

    def step(rng_key, state, beta):
        beta = jnp.asarray(beta, dtype=jnp.result_type(state.beta))
        log_density = tempered_log_density(path, beta)
        # The cached density (and gradient) belong to the β they were computed at; the
        # parameters are not cached, so a change of parameters needs no rebuild.
        inner = jax.lax.cond(beta == state.beta, lambda: state.inner,
                             lambda: inner_init(state.inner.position, log_density))
        return moved(rng_key, state._replace(inner=inner), beta, log_density)

    def cached_step(rng_key, state):
        return moved(rng_key, state, state.beta, tempered_log_density(path, state.beta))

    def moved(rng_key, state, beta, log_density):
        inner, acceptance = move(rng_key, state.inner, log_density, state.parameters)
        acceptance = jnp.asarray(acceptance, jnp.result_type(float))
        acceptance = jnp.where(jnp.isnan(acceptance), 0.0, acceptance)  # a divergent proposal counts as rejected
        return KernelState(inner.position, inner, beta, state.parameters), KernelInfo(acceptance)

    def adapt(parameters: TunedParameters, population: Population) -> TunedParameters:
        dtype = parameters.step_size.dtype
        mass = parameters.inverse_mass_matrix
        if adapt_mass:
            mass = weighted_covariance(population.positions, population.log_weights, dense).astype(dtype)
        step_size = rescale_step_size(parameters.step_size, jnp.asarray(population.acceptance_rate, dtype),
                                      target_acceptance, exponent)
        return TunedParameters(step_size, mass, leapfrog_steps(step_size))

    return Kernel(init, step, 1, adapt, cached_step)


def _factor(matrix, dense):
    """L with L Lᵀ = ``matrix``: the Cholesky factor when dense, the elementwise square
    root (a vector) when diagonal. Computed once per move, not per use."""
    return jnp.linalg.cholesky(matrix) if dense else jnp.sqrt(matrix)


def _flat_map(factor, dense, vector, *, inverse=False, transpose=False):
    """Apply L (or L⁻¹, Lᵀ, L⁻ᵀ) to a flat vector, L from ``_factor``."""
    if not dense:
        return vector / factor if inverse else vector * factor
    if inverse:
        return jax.scipy.linalg.solve_triangular(factor, vector, lower=True, trans=1 if transpose else 0)
    return (factor.T if transpose else factor) @ vector


def tuned_hmc(path: Path, *, num_integration_steps, inverse_mass_matrix, mass_matrix: str,
              target_acceptance: float, trajectory_length: float) -> Kernel:
    """Tuned HMC (blackjax's HMC kernel, velocity Verlet): step size toward
    ``target_acceptance``, M⁻¹ = particle covariance unless ``inverse_mass_matrix`` is
    given, ⌈trajectory_length / ε⌉ leapfrog steps unless ``num_integration_steps`` is.
    ``jaxz.kernels.hmc(path)`` (no step size) builds it, with the defaults."""
    if num_integration_steps is not None and int(num_integration_steps) < 1:
        raise ValueError(f"num_integration_steps must be >= 1, got {num_integration_steps}")
    if not float(trajectory_length) > 0:
        raise ValueError(f"trajectory_length must be > 0, got {trajectory_length}")
    build = blackjax.hmc.build_kernel()

    def move(rng_key, inner, log_density, parameters):
        key_jitter, key_steps, key_move = jax.random.split(rng_key, 3)
        dtype = parameters.step_size.dtype
        jitter = jax.random.uniform(key_jitter, (), dtype, 1.0 - STEP_JITTER, 1.0 + STEP_JITTER)
        steps = jnp.floor(parameters.num_integration_steps + jax.random.uniform(key_steps, (), dtype))
        inner, info = build(key_move, inner, log_density, parameters.step_size * jitter,
                            parameters.inverse_mass_matrix, steps.astype(jnp.int32))
        return inner, info.acceptance_rate

    return tuned_kernel(
        path, inner_init=blackjax.hmc.init, move=move, initial_step=hmc_initial_step, exponent=HMC_EXPONENT,
        target_acceptance=target_acceptance, mass_matrix=mass_matrix, inverse_mass_matrix=inverse_mass_matrix,
        num_integration_steps=num_integration_steps, trajectory_length=float(trajectory_length),
    )


def tuned_mala(path: Path, *, inverse_mass_matrix, mass_matrix: str, target_acceptance: float) -> Kernel:
    """Tuned, preconditioned MALA: blackjax's MALA run on whitened coordinates z = L⁻¹x
    (L Lᵀ = the inverse mass matrix), i.e. the proposal x + ε M⁻¹∇log f + √(2ε) L ξ.
    The cached state (x, log f, ∇log f) stays in x, so a new preconditioner needs no
    new gradient; a rejected move returns x bit for bit. ``jaxz.kernels.mala(path)``
    (no step size) builds it, with the defaults."""
    build = blackjax.mala.build_kernel()
    dense = (jnp.ndim(inverse_mass_matrix) == 2) if inverse_mass_matrix is not None else mass_matrix == "dense"

    def move(rng_key, inner, log_density, parameters):
        flat, unravel = ravel_pytree(inner.position)
        gradient, _ = ravel_pytree(inner.logdensity_grad)
        factor = _factor(parameters.inverse_mass_matrix, dense)

        def log_density_z(z):
            return log_density(unravel(_flat_map(factor, dense, z)))

        z_state = MALAState(_flat_map(factor, dense, flat, inverse=True), inner.logdensity,
                            _flat_map(factor, dense, gradient, transpose=True))
        z_new, info = build(rng_key, z_state, log_density_z, parameters.step_size)
        proposed = MALAState(
            unravel(_flat_map(factor, dense, z_new.position)), z_new.logdensity,
            unravel(_flat_map(factor, dense, z_new.logdensity_grad, inverse=True, transpose=True)),
        )
        new = jax.tree.map(lambda a, b: jnp.where(info.is_accepted, a, b), proposed, inner)
        return new, info.acceptance_rate

    return tuned_kernel(
        path, inner_init=blackjax.mala.init, move=move, initial_step=mala_initial_step,
        exponent=MALA_EXPONENT, target_acceptance=target_acceptance, mass_matrix=mass_matrix,
        inverse_mass_matrix=inverse_mass_matrix, num_integration_steps=None, trajectory_length=None,
    )


def tuned_rwmh(path: Path, *, inverse_mass_matrix, mass_matrix: str, target_acceptance: float) -> Kernel:
    """Tuned Gaussian random-walk Metropolis (blackjax's normal random walk) with
    proposal covariance step_size² × (the particle covariance, or the
    ``inverse_mass_matrix`` given); the initial step is 2.38/√d (Roberts, Gelman &
    Gilks 1997). ``jaxz.kernels.rwmh(path)`` (no scale) builds it, with the defaults."""
    build = blackjax.additive_step_random_walk.build_kernel()
    dense = (jnp.ndim(inverse_mass_matrix) == 2) if inverse_mass_matrix is not None else mass_matrix == "dense"

    def move(rng_key, inner, log_density, parameters):
        factor = _factor(parameters.inverse_mass_matrix, dense)
        random_step = blackjax.mcmc.random_walk.normal(parameters.step_size * factor)
        inner, info = build(rng_key, inner, log_density, random_step)
        return inner, info.acceptance_rate

    return tuned_kernel(
        path, inner_init=blackjax.additive_step_random_walk.init, move=move,
        initial_step=rwmh_initial_step, exponent=RWMH_EXPONENT, target_acceptance=target_acceptance,
        mass_matrix=mass_matrix, inverse_mass_matrix=inverse_mass_matrix, num_integration_steps=None,
        trajectory_length=None,
    )


__all__ = ["TunedParameters", "weighted_covariance", "rescale_step_size", "tuned_kernel", "tuned_hmc", "tuned_mala",
           "tuned_rwmh", "hmc_initial_step", "mala_initial_step", "rwmh_initial_step", "MASS_MATRICES"]
