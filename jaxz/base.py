"""The estimator contract: Estimate, Estimator, Result and the driver `run`.

Every estimator in jaxz is a pure ``(init, step, finalize)`` triple. ``run`` drives
one with ``lax.scan`` when its number of steps is static and with ``lax.while_loop``
on ``~state.done`` otherwise, recording each step's Info into a padded trace.
"""
import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _progress
from jaxz._status import (  # noqa: F401  (re-exported: jaxz.base.STATUS_* is public)
    STATUS_COLLAPSED, STATUS_DEGENERATE, STATUS_FEW_CHAINS, STATUS_FEW_PARTICLES, STATUS_HEAVY_TAIL, STATUS_LOW_ESS,
    STATUS_MAX_STEPS, STATUS_NONFINITE, STATUS_OK, STATUS_PRECISION_LOSS, STATUS_RUNS_DISAGREE,
    STATUS_PLATEAU, STATUS_STDERR_UNRESOLVED, STATUS_STUCK, status_names,
)
from jaxz.types import Array


class Estimate(NamedTuple):
    """The one result type of every estimator.

    log_z: estimate of log Z (for a ladder, the beta = 1 end).
    log_z_stderr: estimated standard error of log_z; nan where the method has none.
    cost: MCMC transitions applied, summed over particles/chains.
    status: int32 bit flags, see ``jaxz.STATUS_*``.
    """

    log_z: Array
    log_z_stderr: Array
    cost: Array
    status: Array


class Estimator(NamedTuple):
    """A pure ``(init, step, finalize)`` triple.

    init(rng_key, *args) -> State; step(rng_key, state) -> (State, Info);
    finalize(state) -> Estimate. ``num_steps`` is the static number of steps
    (an int, or a callable of init's arguments) when the estimator has one, and
    None for adaptive estimators, which need ``max_steps`` in ``run``.
    """

    init: Callable
    step: Callable
    finalize: Callable
    num_steps: Any = None


class Result(NamedTuple):
    """What ``jaxz.run`` returns.

    estimate: the ``Estimate``.
    state: the estimator's final State.
    trace: each step's Info stacked along a leading step axis, padded to ``max_steps``
        for an adaptive estimator (entries past ``num_steps`` are zeros);
        ``valid_trace()`` gives it without the padding.
    num_steps: how many entries of ``trace`` are valid (int32).

    After ``jax.vmap`` every field has a leading run axis (``trace`` then has the
    shape (runs, max_steps, ...)).
    """

    estimate: Estimate
    state: Any
    trace: Any  # Info stacked along a leading axis of length max_steps (padded)
    num_steps: Array  # how many entries of trace are valid

    def valid_trace(self, run: int | tuple | None = None):
        """The trace without its padding: each Info field cut to its ``num_steps`` steps.

        Needs concrete values (call it on a Result that came out of ``jit``, not inside;
        inside ``jit`` mask with ``jnp.arange(max_steps) < num_steps`` instead).

        Args:
            run: for a vmapped Result (``num_steps`` with a run axis), the index of the
                run to take (an int, or a tuple for nested vmaps); None takes every run.
                Must be None for a single run.

        Returns:
            The Info of one run with fields of length ``num_steps`` along their first
            axis, as NumPy arrays; for a vmapped Result with ``run=None``, a list of
            those, one per run (runs take different numbers of steps, so they do not stack).
        """
        num_steps = self.num_steps
        if isinstance(num_steps, jax.core.Tracer):
            raise ValueError("valid_trace needs a concrete num_steps: call it outside jit "
                             "(inside, mask the trace with jnp.arange(max_steps) < num_steps)")
        num_steps = np.asarray(num_steps)
        if run is None:
            if num_steps.ndim == 0:
                return jax.tree.map(lambda leaf: np.asarray(leaf)[: int(num_steps)], self.trace)
            if num_steps.ndim != 1:
                raise ValueError(f"valid_trace(run=None) flattens one run axis; this Result has run axes of shape "
                                 f"{num_steps.shape}: pass run as a tuple of indices")
            return [self.valid_trace(index) for index in range(num_steps.shape[0])]
        if num_steps.ndim == 0:
            raise ValueError(f"run must be None for a single (un-vmapped) Result, got run={run!r}")
        index = run if isinstance(run, tuple) else (run,)
        if len(index) != num_steps.ndim:
            raise ValueError(f"run must index all {num_steps.ndim} run axes of shape {num_steps.shape}, "
                             f"got run={run!r}")
        count = int(num_steps[index])
        return jax.tree.map(lambda leaf: np.asarray(leaf)[index][:count], self.trace)


def freeze_when_done(step: Callable = None, *, pass_through: tuple = ()) -> Callable:
    """Wrap ``step`` so that a done state comes back unchanged, with a zero Info.

    This is what makes ``vmap`` over runs whose adaptive schedules take different
    numbers of steps correct: the finished runs idle while the others go on.
    pass_through: names of State fields that are scratch space (never read across steps,
    e.g. ARM's pool buffer): taken from the new state as they are, with no select over them.
    Use as ``@freeze_when_done`` or ``@freeze_when_done(pass_through=("scratch",))``.
    """
    if step is None:
        return lambda step: freeze_when_done(step, pass_through=pass_through)

    def frozen_step(rng_key, state):
        new_state, info = step(rng_key, state)
        keep = state.done
        selected = new_state._replace(**{name: getattr(state, name) for name in pass_through})
        selected = jax.tree.map(lambda old, new: jnp.where(keep, old, new), state, selected)
        new_state = selected._replace(**{name: getattr(new_state, name) for name in pass_through})
        info = jax.tree.map(lambda leaf: jnp.where(keep, jnp.zeros_like(leaf), leaf), info)
        return new_state, info

    return frozen_step


def _static_num_steps(estimator: Estimator, init_args) -> int | None:
    num_steps = estimator.num_steps
    if callable(num_steps):
        num_steps = num_steps(*init_args)
    return None if num_steps is None else int(num_steps)


_STATIC_SCALARS = (bool, int, float, str, type(None), np.integer, np.floating, np.bool_)
_TRACE_ERRORS = (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
                 jax.errors.TracerIntegerConversionError, jax.errors.TracerBoolConversionError)


def run(estimator: Estimator, rng_key, *init_args, max_steps: int | None = None, progress: bool = False) -> Result:
    """Drive an estimator from ``init`` to ``finalize``.

    Uses ``lax.scan`` when the estimator's step count is static and ``max_steps`` is
    not given, and a ``lax.while_loop`` on ``~state.done`` capped at ``max_steps``
    otherwise; a run that hits the cap gets ``STATUS_MAX_STEPS``. Jittable and
    vmappable (vmap over ``rng_key`` and/or the init arguments). Called eagerly, the
    whole run is compiled once per estimator and argument layout (``_compiled_run``) and
    reused by later calls with other keys or positions.

    Args:
        estimator: an ``Estimator`` (``jaxz.smc(...)``, ``jaxz.ais(...)``, ...).
        rng_key: a PRNG key (new-style ``jax.random.key`` or legacy).
        *init_args: passed to ``estimator.init`` after its key (``positions``,
            ``num_particles``, ...). Python ints among them (particle counts) are static:
            under ``jit`` close over them or mark them static.
        max_steps: cap on the number of steps of an adaptive estimator (a Python int;
            required when the estimator's step count is not static). The trace is
            padded to this length.
        progress: show a tqdm bar of the steps with the β, ESS, acceptance rate and
            log Ẑ so far, wherever the estimator reports them (fields read by name:
            ``Info.beta`` / ``State.beta``, ``Info.ess``, ``Info.acceptance_rate``,
            ``State.log_z`` / ``Info.log_z``, else ``finalize(state).log_z``). Works
            under ``jit`` (one ``jax.debug.callback`` per step) and ``vmap`` (one bar
            for all runs, showing how many have finished, the smallest β and ESS, the
            mean acceptance and log Ẑ). Off by default, and then nothing is traced for
            it. Needs tqdm; without it, a warning and no bar. The numbers are the same
            either way.

    Returns:
        ``Result(estimate, state, trace, num_steps)``: the ``Estimate`` (with
        ``STATUS_MAX_STEPS`` added when the cap was hit), the final state, each step's
        Info stacked along a leading axis (padded to ``max_steps``; see
        ``Result.valid_trace``) and the number of steps taken.
    """
    if not isinstance(progress, (bool, np.bool_)):
        raise ValueError(f"progress must be True or False, got {progress!r}")
    num_steps = _static_num_steps(estimator, init_args)
    if max_steps is None and num_steps is None:
        raise ValueError("max_steps is required for an adaptive estimator (its number of steps is not static)")
    if max_steps is not None and (isinstance(max_steps, bool) or int(max_steps) != max_steps or max_steps < 1):
        raise ValueError(f"max_steps must be an integer >= 1 (the cap on an adaptive loop's steps), got {max_steps}")
    report = None
    if progress:
        tqdm = _progress.tqdm_class()
        if tqdm is not None:
            total = num_steps if max_steps is None else None
            report = _progress.reporter(_progress.Bar(tqdm, total, max_steps, "jaxz.run"))

    if report is None:  # the whole run as one compiled program, cached per estimator
        layout = tuple(arg if isinstance(arg, _STATIC_SCALARS) else _TRACED for arg in init_args)
        dynamic = tuple(arg for arg in init_args if not isinstance(arg, _STATIC_SCALARS))
        try:
            hash((estimator, layout))
        except TypeError:  # an estimator holding something unhashable: run as written
            pass
        else:
            try:
                return _compiled_run(rng_key, dynamic, estimator=estimator, layout=layout, max_steps=max_steps,
                                     num_steps=num_steps)
            except _TRACE_ERRORS:  # an init or model that needs concrete values: run as written
                pass
    return _drive(estimator, rng_key, init_args, max_steps, num_steps, report)


_TRACED = object()  # marks an init argument that the compiled run takes as an array


@functools.partial(jax.jit, static_argnames=("estimator", "layout", "max_steps", "num_steps"))
def _compiled_run(rng_key, dynamic, *, estimator, layout, max_steps, num_steps) -> Result:
    """``run`` compiled once per estimator, argument layout and step count: a later eager
    call with new keys or positions reuses the program (under an outer jit: inlined)."""
    values = iter(dynamic)
    init_args = tuple(next(values) if item is _TRACED else item for item in layout)
    return _drive(estimator, rng_key, init_args, max_steps, num_steps, None)


def _drive(estimator: Estimator, rng_key, init_args: tuple, max_steps, num_steps, report) -> Result:
    """init, the scan or while loop of steps, finalize (see ``run``)."""
    init_key, loop_key = jax.random.split(rng_key)
    state = estimator.init(init_key, *init_args)

    if max_steps is None:  # static schedule: a plain scan
        keys = jax.random.split(loop_key, num_steps)

        if report is None:
            def body(carry, key):
                return estimator.step(key, carry)

            state, trace = jax.lax.scan(body, state, keys)
        else:
            def body(carry, xs):
                key, i = xs
                new_state, info = estimator.step(key, carry)
                report(i, ~carry.done, i + 1 >= num_steps, _progress.fields(estimator, new_state, info))
                return new_state, info

            state, trace = jax.lax.scan(body, state, (keys, jnp.arange(num_steps, dtype=jnp.int32)))
        steps_taken = jnp.sum(jnp.ones((num_steps,), jnp.int32))
    else:
        _, info_shape = jax.eval_shape(estimator.step, loop_key, state)
        trace = jax.tree.map(lambda s: jnp.zeros((max_steps,) + s.shape, s.dtype), info_shape)

        def cond(carry):
            i, state, _, _ = carry
            return (i < max_steps) & ~state.done

        def body(carry):
            i, state, trace, key = carry
            key, step_key = jax.random.split(key)
            new_state, info = estimator.step(step_key, state)
            if report is not None:
                finished = jnp.asarray(new_state.done) | (i + 1 >= max_steps)
                report(i, ~state.done, finished, _progress.fields(estimator, new_state, info))
            trace = jax.tree.map(lambda buf, leaf: buf.at[i].set(leaf), trace, info)
            return i + 1, new_state, trace, key

        steps_taken, state, trace, _ = jax.lax.while_loop(
            cond, body, (jnp.int32(0), state, trace, loop_key)
        )

    # compiled as one program even where the whole run is not (a progress bar, an init that needs
    # concrete values): eager, its many small operations (the Pareto fit, the genealogy's lags,
    # the Student-t quantile) would each be dispatched and compiled on their own
    estimate = jax.jit(estimator.finalize)(state)
    hit_cap = ~jnp.asarray(state.done)
    status = jnp.where(hit_cap, estimate.status | STATUS_MAX_STEPS, estimate.status)
    estimate = estimate._replace(status=status.astype(jnp.int32))
    return Result(estimate, state, trace, steps_taken)


class SequentialModel(NamedTuple):
    """A target built one variable at a time: p_1, p_2, ..., p_N (ARM, twisted SMC).

    ``n`` is a traced 1-based int32; arrays keep their full size and entries past
    ``n`` are unused. ``num_transitions`` (default 1) counts the MCMC transitions one
    ``move`` applies, for ``Estimate.cost``; ``move_cost(n)`` (optional) is what one
    ``move`` at level n costs in full-size transitions when that depends on n (an RBM
    sweep over the n included units costs t·n/N full sweeps); None means
    ``num_transitions``.
    """

    num_steps: int  # N: p_N is the target
    sample_initial: Callable  # sample_initial(rng_key) -> x ~ p_1 (one particle, full-size array)
    log_z1: Array  # log Z_1
    log_smooth_weight: Callable  # log_smooth_weight(x, n) -> log W(x_[n]) = log ∫ f_{n+1}/f_n dx_{n+1}
    augment: Callable  # augment(rng_key, x, n) -> x with x_{n+1} ~ p_{n+1}(x_{n+1} | x_[n])
    move: Callable  # move(rng_key, x, n) -> x, an MCMC move leaving p_n invariant
    num_transitions: int = 1
    move_cost: Callable | None = None  # move_cost(n) -> cost of one move at level n, in full-size transitions


class SequentialGraphModel(NamedTuple):
    """A factor graph's variables x_1, ..., x_T taken in a fixed order, as the
    (twisted) targets γ^ψ_t = ψ_t γ_t of Lindsten, Helske & Vihola (2018, eqs. 4-5)
    that ``jaxz.twisted_smc`` runs on. The twist ψ (None = SMC-Base) is folded into the
    model's functions by its ``sequential_model(model, twist)``; the engine never sees it.

    A particle is a pytree ``state`` of fixed shape: the variables at full size plus
    any running statistics the model keeps (topic counts, a running mean). ``t`` is
    the 0-based index (a traced int32) of the variable being added: step t sets x_{t+1}
    in the paper's 1-based notation. Supply exactly one of the two forms:

    Discrete variables, fully adapted (eq. 2 and the look-ahead resampling weights):
      num_values: K, the values 0..K-1 a variable takes.
      log_potentials(state, t) -> (K,): log γ^ψ_{t+1}(x_{1:t}, k) − log γ^ψ_t(x_{1:t})
          for every value k (−inf is a legal zero). Their log-sum-exp is the
          predictive weight; the softmax is the locally optimal proposal.
      assign(state, t, k) -> state with the variable t set to value k (int32).
    Continuous (or any) variables, a model-supplied proposal:
      propose(rng_key, state, t) -> (state, log_weight): the variable t drawn from
          q_t(· | x_{1:t}) and the log weight function ω = γ^ψ_{t+1}/(γ^ψ_t q_t) (Alg. 1, 2c).
    Optional:
      bandwidth: the largest t − s over pairs of variables x_s, x_t (s < t, in the model's
          order) that share a factor, or None if unknown. The genealogy standard error
          keeps only the last N/8 (at most 128) resampling generations (``jaxz.twisted_smc``);
          where a factor reaches back further and the run resampled more often than that,
          its s.e. is nan with STATUS_STDERR_UNRESOLVED.
    """

    num_steps: int  # T: the number of variables
    initial_state: Any  # one particle before any variable is set
    num_values: int | None = None
    log_potentials: Callable | None = None
    assign: Callable | None = None
    propose: Callable | None = None
    bandwidth: int | None = None
