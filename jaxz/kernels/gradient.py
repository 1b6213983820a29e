"""Gradient-based and random-walk kernels: thin adapters over blackjax.

The public constructors ``hmc``, ``mala``, ``rwmh`` and ``from_blackjax``: without a
step size they build the kernels that the particle estimators tune from their
population (``jaxz.kernels.tuning``); with one, the plain blackjax kernels with
exactly those values (``jaxz.kernels.base.blackjax_kernel``).
"""
import functools

import blackjax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxz import _checks
from jaxz.kernels import tuning
from jaxz.kernels.base import (
    Kernel, algorithm_name, blackjax_kernel, check_inverse_mass_matrix, check_scale, missing_parameters,
)
from jaxz.kernels.riemannian import generalized_leapfrog
from jaxz.paths import Path


TUNABLE = ("step_size", "inverse_mass_matrix")  # what from_blackjax can tune when not given


def from_blackjax(algorithm, path: Path, *, target_acceptance: float | None = None, **parameters) -> Kernel:
    """A tempered Kernel from any blackjax top-level API (``blackjax.nuts``, ``blackjax.hmc``,
    ``blackjax.mala``, ...) and its parameters.

    With every required parameter given: exactly that blackjax kernel
    (``jaxz.kernels.base.blackjax_kernel``). Without ``step_size`` (and, for kernels that
    take one, without ``inverse_mass_matrix``): a kernel that ``jaxz.smc`` and
    ``jaxz.ais`` tune before each move like ``jaxz.kernels.hmc(path)`` (see
    ``jaxz.kernels.tuning``): the step toward ``target_acceptance`` by the
    optimal-scaling law of HMC (Beskos et al. 2013; MALA's for ``blackjax.mala``), the
    inverse mass matrix = the weighted particle covariance unless one is given. The
    default target is 0.8 for NUTS (its acceptance statistic averages over the whole
    trajectory, as Stan's δ), 0.57 for MALA and 0.65 otherwise. Any other missing
    parameter (``num_integration_steps`` of ``blackjax.hmc``, ...) is a ValueError
    naming it. The tuned values are in ``result.trace.kernel_parameters``.
    """
    missing = missing_parameters(algorithm, parameters)
    if not missing:
        if target_acceptance is not None:
            raise ValueError("target_acceptance applies only when step_size is left to tuning; got both")
        return blackjax_kernel(algorithm, path, **parameters)
    untunable = [name for name in missing if name not in TUNABLE]
    if "step_size" not in missing or untunable or not callable(getattr(algorithm, "init", None)):
        needed = untunable or missing
        if "step_size" in parameters and not untunable:
            raise ValueError(f"from_blackjax: {algorithm_name(algorithm)} needs "
                             f"{', '.join(f'{m}=...' for m in missing)} with an explicit step_size (or leave out "
                             "step_size too: smc and ais then tune both)")
        raise ValueError(f"from_blackjax: {algorithm_name(algorithm)} needs "
                         f"{', '.join(f'{m}=...' for m in needed)}; only {' and '.join(TUNABLE)} can be left to "
                         "smc/ais tuning (of a blackjax top-level API with .init)")
    takes_mass = "inverse_mass_matrix" in missing or "inverse_mass_matrix" in parameters
    fixed_mass = parameters.pop("inverse_mass_matrix", None)
    if algorithm is blackjax.mala:
        exponent, default_target, initial_step = tuning.MALA_EXPONENT, tuning.MALA_TARGET, tuning.mala_initial_step
    else:
        exponent, initial_step = tuning.HMC_EXPONENT, tuning.hmc_initial_step
        default_target = tuning.NUTS_TARGET if algorithm is blackjax.nuts else tuning.HMC_TARGET

    def move(rng_key, inner, log_density, tuned):
        extra = {"inverse_mass_matrix": tuned.inverse_mass_matrix} if takes_mass else {}
        inner, info = algorithm(log_density, step_size=tuned.step_size, **extra, **parameters).step(rng_key, inner)
        return inner, getattr(info, "acceptance_rate", getattr(info, "is_accepted", jnp.nan))

    return tuning.tuned_kernel(
        path, inner_init=algorithm.init, move=move, initial_step=initial_step, exponent=exponent,
        target_acceptance=default_target if target_acceptance is None else target_acceptance,
        mass_matrix="diagonal" if takes_mass else "identity", inverse_mass_matrix=fixed_mass,
        num_integration_steps=None, trajectory_length=None,
    )


def hmc(path: Path, step_size=None, num_integration_steps=None, inverse_mass_matrix=None, *,
        mass_matrix: str = "diagonal", target_acceptance: float = tuning.HMC_TARGET,
        trajectory_length: float = tuning.DEFAULT_TRAJECTORY_LENGTH) -> Kernel:
    """Hamiltonian Monte Carlo (blackjax.hmc) at each β.

    With ``step_size``: exactly that step and ``num_integration_steps`` leapfrog steps
    (required), ``inverse_mass_matrix`` (diagonal (d,) or dense (d, d)) or the identity.

    Without: tuned by ``jaxz.smc`` / ``jaxz.ais`` before each move (see
    ``jaxz.kernels.tuning``): the step toward ``target_acceptance`` (0.65, Beskos et
    al. 2013), the inverse mass matrix = the weighted particle covariance
    (``mass_matrix`` "diagonal", "dense" or "identity"; an explicit
    ``inverse_mass_matrix`` stays fixed) and ⌈``trajectory_length`` / ε⌉ leapfrog steps
    (an explicit ``num_integration_steps`` stays fixed). Outside those estimators it
    runs at its initial parameters (ε = d^(−1/4), unit mass).
    """
    _checks.inverse_mass_matrix("inverse_mass_matrix", inverse_mass_matrix)
    if step_size is None:
        return tuning.tuned_hmc(path, num_integration_steps=num_integration_steps,
                                inverse_mass_matrix=inverse_mass_matrix, mass_matrix=mass_matrix,
                                target_acceptance=target_acceptance, trajectory_length=trajectory_length)
    _checks.positive("step_size", step_size)
    if num_integration_steps is None:
        raise ValueError("num_integration_steps is required with an explicit step_size (an integer >= 1)")
    num_integration_steps = _checks.integer("num_integration_steps", num_integration_steps, 1, "leapfrog steps")
    if inverse_mass_matrix is not None:
        kernel = blackjax_kernel(
            blackjax.hmc, path, step_size=step_size,
            inverse_mass_matrix=jnp.asarray(inverse_mass_matrix), num_integration_steps=int(num_integration_steps),
        )

        def checked_init(position, beta):
            check_inverse_mass_matrix(inverse_mass_matrix, position)
            return kernel.init(position, beta)

        return kernel._replace(init=checked_init)

    def with_identity_mass(position):
        flat, _ = ravel_pytree(position)
        return blackjax_kernel(
            blackjax.hmc, path, step_size=step_size,
            inverse_mass_matrix=jnp.ones_like(flat), num_integration_steps=int(num_integration_steps),
        )

    return Kernel(
        lambda position, beta: with_identity_mass(position).init(position, beta),
        lambda rng_key, state, beta: with_identity_mass(state.position).step(rng_key, state, beta),
        cached_step=lambda rng_key, state: with_identity_mass(state.position).cached_step(rng_key, state),
    )


def mala(path: Path, step_size=None, *, inverse_mass_matrix=None, mass_matrix: str = "diagonal",
         target_acceptance: float = tuning.MALA_TARGET) -> Kernel:
    """Metropolis-adjusted Langevin (blackjax.mala) at each β.

    With ``step_size``: exactly blackjax's MALA at that step (no preconditioning).
    Without: tuned by ``jaxz.smc`` / ``jaxz.ais`` — the step toward
    ``target_acceptance`` (0.574, Roberts & Rosenthal 1998) and preconditioned by the
    weighted particle covariance (``mass_matrix``) or a fixed ``inverse_mass_matrix``.
    """
    _checks.inverse_mass_matrix("inverse_mass_matrix", inverse_mass_matrix)
    if step_size is None:
        return tuning.tuned_mala(path, inverse_mass_matrix=inverse_mass_matrix, mass_matrix=mass_matrix,
                                 target_acceptance=target_acceptance)
    _checks.positive("step_size", step_size)
    return blackjax_kernel(blackjax.mala, path, step_size=step_size)


def rwmh(path: Path, scale=None, *, inverse_mass_matrix=None, mass_matrix: str = "diagonal",
         target_acceptance: float = tuning.RWMH_TARGET) -> Kernel:
    """Gaussian random-walk Metropolis–Hastings (blackjax's normal random walk).

    With ``scale``: isotropic with standard deviation ``scale`` in every coordinate
    (or one per coordinate). Without: tuned by ``jaxz.smc`` / ``jaxz.ais`` — proposal
    covariance ε² × the weighted particle covariance (``mass_matrix``) or a fixed
    ``inverse_mass_matrix``, ε toward ``target_acceptance`` (0.234, Roberts, Gelman &
    Gilks 1997).
    """
    _checks.inverse_mass_matrix("inverse_mass_matrix", inverse_mass_matrix)
    if scale is None:
        return tuning.tuned_rwmh(path, inverse_mass_matrix=inverse_mass_matrix, mass_matrix=mass_matrix,
                                 target_acceptance=target_acceptance)
    # a zero scale (or a zero entry of a vector of scales) never moves, yet every move is accepted
    _checks.positive("scale", scale)

    def with_scale(position):
        check_scale(scale, position)
        flat, _ = ravel_pytree(position)
        sigma = jnp.broadcast_to(jnp.asarray(scale, flat.dtype), flat.shape)
        return blackjax_kernel(blackjax.additive_step_random_walk.normal_random_walk, path, sigma=sigma)

    return Kernel(
        lambda position, beta: with_scale(position).init(position, beta),
        lambda rng_key, state, beta: with_scale(state.position).step(rng_key, state, beta),
        cached_step=lambda rng_key, state: with_scale(state.position).cached_step(rng_key, state),
    )


def rmhmc(path: Path, step_size, metric_fn, num_integration_steps: int, *,
          integrator: str = "generalized_leapfrog", max_iterations: int = 20, tolerance: float = 1e-8) -> Kernel:
    """Riemannian-manifold HMC (blackjax.rmhmc) with a position-dependent metric
    ``metric_fn(x) -> (d, d)`` mass matrix G(x).

    integrator: "generalized_leapfrog" (Girolami & Calderhead 2011, eqs. 16–18;
        ``jaxz.kernels.riemannian``: fixed points solved to ``tolerance`` within
        ``max_iterations``, a step that fails them is rejected) or "implicit_midpoint"
        (blackjax's default, which keeps an unsolved step; ``max_iterations`` and
        ``tolerance`` are handed to its solver).
    """
    _checks.positive("step_size", step_size)
    num_integration_steps = _checks.integer("num_integration_steps", num_integration_steps, 1, "leapfrog steps")
    max_iterations = _checks.integer("max_iterations", max_iterations, 1)
    if integrator == "generalized_leapfrog":
        scheme = generalized_leapfrog(metric_fn, max_iterations=max_iterations, tolerance=tolerance)
    elif integrator == "implicit_midpoint":
        scheme = functools.partial(blackjax.mcmc.integrators.implicit_midpoint, max_iters=int(max_iterations),
                                   convergence_tol=float(tolerance))
    else:
        raise ValueError(f"integrator must be 'generalized_leapfrog' or 'implicit_midpoint', got {integrator!r}")
    return blackjax_kernel(
        blackjax.rmhmc, path, step_size=step_size, mass_matrix=metric_fn,
        num_integration_steps=int(num_integration_steps), integrator=scheme,
    )
