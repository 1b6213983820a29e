"""The tempered Kernel contract and the adapter over blackjax.

A Kernel is one MCMC transition at a given β for ONE particle; estimators vmap it.
``num_transitions`` says how many elementary transitions one ``step`` applies, so
estimators can fill ``Estimate.cost`` honestly (``repeat`` multiplies it).

A kernel may be tunable: its step reads ``KernelState.parameters`` (a step size, a
mass matrix, ...), which the particle estimators keep shared by all particles, like
β, and update between stages with ``Kernel.adapt(parameters, population)`` from the
weighted particle population (``jaxz.kernels.tuning``). A kernel without ``adapt``
ignores its parameters.
"""
import inspect
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxz import _checks
from jaxz.paths import Path
from jaxz.types import Array


class Kernel(NamedTuple):
    init: Callable  # init(position, beta) -> KernelState
    step: Callable  # step(rng_key, kernel_state, beta) -> (KernelState, info)
    num_transitions: int = 1
    # adapt(parameters, population: Population) -> parameters, or None (not tunable):
    # the rule smc and ais apply between stages to KernelState.parameters.
    adapt: Callable | None = None
    # cached_step(rng_key, kernel_state) -> (KernelState, info): a step at the β the state's
    # cache was computed at (``kernel_state.beta``), with no check for a new β; or None.
    # The particle estimators call it for the second and later moves at one β: under an
    # outer ``vmap`` over runs (β batched) ``step``'s ``lax.cond`` becomes a select that
    # would rebuild the cache (one gradient per particle) at every move.
    cached_step: Callable | None = None


class KernelState(NamedTuple):
    position: Any
    inner: Any  # the wrapped sampler's own state (e.g. blackjax's HMCState)
    beta: Array  # the β the inner state was computed at
    # Tunable parameters (step size, inverse mass matrix, ...) that ``step`` reads. The
    # particle estimators keep them unbatched (shared by all particles, like β) and set
    # them with ``Kernel.adapt``; () for kernels that have none.
    parameters: Any = ()


class Population(NamedTuple):
    """What ``Kernel.adapt`` sees of the particle system before a move (leading axis =
    particles): the weighted particles approximating f_β, the β the move will target,
    and the mean acceptance rate of the previous move (nan before the first move)."""

    positions: Any
    log_weights: Array  # (N,) normalized
    beta: Array
    acceptance_rate: Array


class KernelInfo(NamedTuple):
    acceptance_rate: Array


@jax.custom_jvp
def _nan_to_neg_inf(value):
    return jnp.where(jnp.isnan(value), -jnp.inf, value)


@_nan_to_neg_inf.defjvp
def _nan_to_neg_inf_jvp(primals, tangents):
    # Identity tangent: the guard is for the value a Metropolis test reads. Letting
    # ``where`` into the gradient turns the cotangent of every density evaluation into
    # a per-particle array under vmap, a cost in every HMC step; where the value is nan
    # the gradient is not usable either way.
    (value,), (tangent,) = primals, tangents
    return _nan_to_neg_inf(value), tangent


def check_inverse_mass_matrix(inverse_mass_matrix, position, name: str = "inverse_mass_matrix"):
    """A diagonal (d,) or dense (d, d) inverse mass matrix for a position that flattens
    to d numbers (shapes are static: this runs at trace time)."""
    size = ravel_pytree(position)[0].shape[0]
    shape = jnp.shape(inverse_mass_matrix)
    if shape not in ((size,), (size, size)):
        raise ValueError(f"{name} must have shape ({size},) (diagonal) or ({size}, {size}) (dense) for a position "
                         f"of {size} numbers, got {shape}")


def check_scale(scale, position, name: str = "scale"):
    """A proposal scale for a position that flattens to d numbers: a scalar (the same in
    every coordinate) or one per coordinate, (d,); another length would meet the position
    only in a broadcast inside the first step (shapes are static: this runs at trace time)."""
    size = ravel_pytree(position)[0].shape[0]
    shape = jnp.shape(scale)
    if shape not in ((), (1,), (size,)):
        raise ValueError(f"{name} must be a scalar or have shape ({size},) (one per coordinate) for a position of "
                         f"{size} numbers, got shape {shape}")


def tempered_log_density(path: Path, beta) -> Callable:
    """x ↦ log f_β(x), with nan mapped to −inf so that a broken density is rejected."""

    def log_density(x):
        return _nan_to_neg_inf(path.log_density(x, beta))

    return log_density


def missing_parameters(algorithm, parameters: dict) -> list[str]:
    """The required parameters of a blackjax top-level API (after its log density) that
    ``parameters`` does not give, in signature order; [] when the signature cannot be read."""
    try:
        signature = inspect.signature(getattr(algorithm, "differentiable", algorithm))
    except (TypeError, ValueError):
        return []
    required = [p.name for p in signature.parameters.values()
                if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return [name for name in required[1:] if name not in parameters]


def algorithm_name(algorithm) -> str:
    """``blackjax.mcmc.nuts`` for ``blackjax.nuts``: the module of its top-level API."""
    function = getattr(algorithm, "differentiable", algorithm)
    return getattr(function, "__module__", None) or repr(algorithm)


def blackjax_kernel(algorithm, path: Path, **parameters) -> Kernel:
    """Build a tempered Kernel from any blackjax top-level API (``blackjax.hmc``,
    ``blackjax.nuts``, ``blackjax.mala``, ...) and its parameters, used exactly as given:
    every required parameter must be given (no tuning). The public constructor is
    ``jaxz.kernels.from_blackjax``, which builds this kernel when every parameter is given
    and a tuned one (``jaxz.kernels.tuning``) when the step size is left out.

    blackjax states cache the log density (and its gradient) at one fixed target;
    when β changes between calls the inner state is rebuilt at the new β, behind a
    ``lax.cond``. The particle estimators vmap kernels with β shared (unbatched) across
    particles, so the branch is real and the rebuild costs one gradient per change of
    β, not per step. Where β is batched (chains at different temperatures), vmap turns
    the cond into a select that evaluates both sides.
    """
    missing = missing_parameters(algorithm, parameters)
    if missing:
        raise ValueError(f"from_blackjax: {algorithm_name(algorithm)} needs {', '.join(missing)}; pass "
                         f"{', '.join(f'{m}=...' for m in missing)} (jaxz.kernels.from_blackjax tunes a missing "
                         "step_size and inverse_mass_matrix inside smc and ais)")

    def build(beta):
        return algorithm(tempered_log_density(path, beta), **parameters)

    def init(position, beta):
        beta = jnp.asarray(beta)
        return KernelState(position, build(beta).init(position), beta)

    def move(rng_key, inner, beta):
        inner, info = build(beta).step(rng_key, inner)
        acceptance = getattr(info, "acceptance_rate", getattr(info, "is_accepted", jnp.nan))
        acceptance = jnp.asarray(acceptance, dtype=jnp.result_type(float))
        return KernelState(inner.position, inner, beta), KernelInfo(acceptance)

    def step(rng_key, state, beta):
        beta = jnp.asarray(beta, dtype=jnp.result_type(state.beta))
        inner = jax.lax.cond(
            beta == state.beta, lambda: state.inner, lambda: build(beta).init(state.inner.position)
        )
        return move(rng_key, inner, beta)

    def cached_step(rng_key, state):
        return move(rng_key, state.inner, state.beta)

    return Kernel(init, step, cached_step=cached_step)


def from_transition(transition: Callable) -> Kernel:
    """Build a Kernel from ``transition(rng_key, position, beta) -> (position, acceptance)``,
    for kernels with no cached state (Gibbs samplers, slice sampling)."""

    def init(position, beta):
        return KernelState(position, (), jnp.asarray(beta))

    def step(rng_key, state, beta):
        out = transition(rng_key, state.position, beta)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ValueError(
                "from_transition: transition(rng_key, position, beta) must return a pair (position, acceptance), "
                f"got {type(out).__name__}" + (f" of shape {out.shape}" if hasattr(out, "shape") else "")
            )
        position, acceptance = out
        if jax.tree.structure(position) != jax.tree.structure(state.position):
            raise ValueError("from_transition: the position returned must have the structure of the input position")
        return KernelState(position, (), jnp.asarray(beta, jnp.result_type(state.beta))), KernelInfo(
            jnp.asarray(acceptance, dtype=jnp.result_type(float))
        )

    return Kernel(init, step)


def repeat(kernel: Kernel, num_steps: int) -> Kernel:
    """Apply ``kernel`` ``num_steps`` times per step (an integer >= 1, not a bool: ValueError
    otherwise); info is averaged over the repeats."""
    num_steps = _checks.integer("num_steps", num_steps, what="transitions per step")

    def repeated(rng_key, state, first):
        keys = jax.random.split(rng_key, num_steps)
        state, info = first(keys[0], state)
        if num_steps == 1:
            return state, info
        later = kernel.cached_step or (lambda key, state: kernel.step(key, state, state.beta))
        state, infos = jax.lax.scan(lambda state, key: later(key, state), state, keys[1:])
        infos = jax.tree.map(lambda one, rest: jnp.concatenate([one[None], rest]), info, infos)
        return state, jax.tree.map(lambda leaf: jnp.mean(leaf, axis=0), infos)

    def step(rng_key, state, beta):
        return repeated(rng_key, state, lambda key, state: kernel.step(key, state, beta))

    def repeated_cached_step(rng_key, state):
        return repeated(rng_key, state, kernel.cached_step)

    cached_step = repeated_cached_step if kernel.cached_step is not None else None
    return Kernel(kernel.init, step, kernel.num_transitions * num_steps, kernel.adapt, cached_step)
