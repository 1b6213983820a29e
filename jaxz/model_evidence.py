"""``jaxz.evidence``: the evidence log Z of a model in one call.

``evidence(model, key, model_args=(data,))`` builds the likelihood-tempering path of a
NumPyro model (``jaxz.numpyro``), or takes a ``jaxz.paths.Path``, runs ``num_runs``
independent estimators in one ``vmap`` (split over devices when there are several) and
pools them with ``jaxz.pool_runs``.

``method="auto"`` runs, per run:

1. adaptive tempered SMC (``jaxz.smc``: each β chosen so that the conditional ESS is a
   fixed fraction of the particles) with a self-tuned kernel: random-walk Metropolis
   (``jaxz.kernels.rwmh``, target acceptance 0.23) up to ``RANDOM_WALK_MAX_DIM``
   coordinates, HMC (``jaxz.kernels.hmc``, target acceptance 0.65) above;
2. an importance stage (``jaxz.mixture_importance``): a Gaussian mixture fitted by EM to the
   final weighted particles, mixed with a twice-wider copy and with the prior, and Ẑ the mean
   weight of fresh draws (population Monte Carlo's adaptation, Cappé et al. 2008, started
   from SMC's particles). ``refine`` keeps it only where it is unflagged and agrees with
   SMC's own estimate;
3. a check of the runs against each other (``jaxz.runs_disagree``: Cochran's Q and each
   run's distance to the median), then the pool (``jaxz.combine_runs``).

``method="smc"`` is tempered SMC with HMC at every dimension and no importance stage.

Cost: ``num_evaluations`` counts what the algorithm evaluates, summed over runs:
log densities f_β(x) (reweighting, every bisection point of the adaptive schedule; on an
affine path only f_0 and f_1) plus gradients ∇ log f_β(x) (one per leapfrog step, one per
particle whenever β changes, and the step-size rescue's trial steps). A gradient also
yields the log density and is counted once, as a gradient. A random-walk move costs one
log density per proposal; the importance stage two log densities (f_0 and f_1) per draw.
The particles' trajectories run as one vmapped loop, so each particle is charged the
longest trajectory's leapfrog steps (tests/test_evidence.py checks the counts).
"""
import collections
import functools
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks
from jaxz import sharding as _sharding
from jaxz._status import STATUS_HEAVY_TAIL, status_names
from jaxz.base import Estimate, run
from jaxz.estimators import mixture_importance as _stage
from jaxz.estimators.mixture_importance import IMPORTANCE_DRAWS_PER_PARTICLE, mixture_importance, refine
from jaxz.estimators.smc import smc
from jaxz.kernels import hmc, rwmh
from jaxz.paths import Path
from jaxz.pooling import pool_runs
from jaxz.types import Array

METHODS = ("auto", "smc")
DEFAULT_MAX_STEPS = 1000  # cap on the tempering stages of one run (STATUS_MAX_STEPS when hit)
# method="auto" moves the particles by tuned random-walk Metropolis up to this many coordinates, by tuned HMC
# above: at low dimension a random-walk move is far cheaper per unit of MSE, at higher dimension it stops mixing
# (the comparison: benchmarks/results/evidence_levers.md).
RANDOM_WALK_MAX_DIM = 5
# Conditional ESS kept at each tempering step with the random walk (jaxz.smc's default, 0.5, stays for HMC): more
# stages of cheap moves (the sweep over target_ess: docs/changelog.d/docstrings.md, jaxz.model_evidence).
RANDOM_WALK_TARGET_ESS = 0.9


class Evidence(NamedTuple):
    """What ``jaxz.evidence`` returns.

    log_z, log_z_stderr, status: the pool of the runs (``jaxz.pool_runs``): log of the
        mean of the runs' Ẑ, its s.e., the runs' flags with STATUS_RUNS_DISAGREE where
        they disagree beyond their own s.e.s. Status 0: no check fired.
    runs: each run's ``Estimate`` (leading run axis).
    num_evaluations: log-density plus gradient evaluations over all runs (module
        docstring), split in ``num_log_density_evaluations`` and ``num_gradient_evaluations``.
    num_stages: (runs,) tempering stages of each run.
    min_ess: (runs,) smallest ESS fraction after any reweighting.
    acceptance_rate: (runs,) mean acceptance at β = 1.
    samples: the SMC particles, (runs, num_particles, ...) per leaf: a NumPyro model's
        latent and deterministic sites in their own space, or a Path's positions;
        weighted draws from f_1 / Z.
    log_weights: (runs, num_particles) their normalized log weights.
    seconds, compile_seconds: wall time of the runs after compilation, and of compiling.
    smc_runs: (runs,) the SMC pass's own estimates (``runs`` where no importance stage ran).
    importance_runs: (runs,) the importance stage's estimates (nan where none ran).
    num_components: (runs,) components of the fitted mixture (0: no importance stage).
    pareto_k: (runs,) Pareto k̂ of the importance weights (nan: no importance stage).
    """

    log_z: Array
    log_z_stderr: Array
    status: Array
    runs: Estimate
    num_evaluations: Any
    num_log_density_evaluations: Any
    num_gradient_evaluations: Any
    num_stages: Array
    min_ess: Array
    acceptance_rate: Array
    samples: Any
    log_weights: Array
    seconds: float
    compile_seconds: float
    smc_runs: Estimate | None = None
    importance_runs: Estimate | None = None
    num_components: Array | None = None
    pareto_k: Array | None = None

    def __repr__(self) -> str:
        return _describe(self)


def _describe(result: "Evidence") -> str:
    """A few readable lines: log Z ± s.e., the status by name, the runs, evaluations and time
    (the arrays stay in the fields; ``repr`` of each field shows them)."""
    def flags(status):
        names = status_names(status)
        return "|".join(names) if names else "OK"

    try:
        num_runs = int(np.shape(result.runs.log_z)[0])
        run_lines = ", ".join(f"{float(z):.4f}±{float(e):.4f}" + ("" if int(st) == 0 else f" [{flags(st)}]")
                              for z, e, st in zip(np.asarray(result.runs.log_z), np.asarray(result.runs.log_z_stderr),
                                                  np.asarray(result.runs.status)))
        return (f"Evidence(log_z={float(result.log_z):.4f} ± {float(result.log_z_stderr):.4f}, "
                f"status={flags(result.status)}, runs={num_runs}: [{run_lines}], "
                f"evaluations={result.num_evaluations:,} ({result.num_log_density_evaluations:,} log densities, "
                f"{result.num_gradient_evaluations:,} gradients), seconds={result.seconds:.2f} "
                f"(+{result.compile_seconds:.2f} compiling))")
    except (TypeError, ValueError, IndexError):  # traced or hand-built fields: the plain tuple repr
        return "Evidence" + tuple.__repr__(result)


def _check_sample_base_dtype(path):
    """``path.sample_base`` draws float32 or float64: the tuned kernels' noise and the
    tempering's betainc refuse integers (JAX's "int32 not inexact") and float16/bfloat16
    (a TypeError of betainc). Read from shapes alone (``_checks.base_draws``)."""
    for leaf in jax.tree.leaves(_checks.base_draws(path)):
        if leaf.dtype not in (jnp.float32, jnp.float64):
            raise ValueError(f"target.sample_base must draw float32 or float64 arrays (jaxz.evidence tempers in "
                             f"them), got {leaf.dtype}: cast its draws, e.g. .astype(jnp.float32)")


def _resolve_target(target, model_args, model_kwargs):
    """(path, constrain or None) for a Path or a NumPyro model."""
    if isinstance(target, Path):
        if model_args or model_kwargs:
            raise ValueError("model_args and model_kwargs are for a NumPyro model; a Path takes none")
        if target.sample_base is None:
            raise ValueError("target is a Path without sample_base: jaxz.evidence needs exact draws from its "
                             "beta = 0 end (jaxz.paths.likelihood_tempering(..., sample_prior=...))")
        _check_sample_base_dtype(target)
        return target, None
    if not callable(target):
        raise ValueError(f"target must be a NumPyro model (a callable) or a jaxz.paths.Path with sample_base, got "
                         f"{type(target).__name__}")
    from jaxz import numpyro as _numpyro

    model_path = _numpyro.likelihood_tempering(target, model_args, model_kwargs)
    return model_path.path, model_path.constrain


@jax.jit
def _pool(runs: Estimate, log_densities, gradients):
    """The runs pooled and checked against each other (``jaxz.pooling.pool_runs``) and the
    evaluations summed, in one compiled call (run op by op, these dominate a short call)."""
    runs, pooled = pool_runs(runs)
    return runs, pooled, jnp.sum(log_densities), jnp.sum(gradients)


def _run_mesh(num_runs):
    """A mesh named "runs" over the most devices that divide num_runs (None for one)."""
    num_devices = len(jax.devices())
    usable = max(d for d in range(1, num_devices + 1) if num_runs % d == 0)
    return None if usable == 1 else _sharding.mesh(usable, axis="runs")


CACHE_SIZE = 16  # compiled runs kept for jit_model_args (each holds its executable's memory)
_COMPILED: "collections.OrderedDict" = collections.OrderedDict()


def _split_arguments(model_args, model_kwargs):
    """(arrays, rebuild, static): the model's array arguments (traced under jit_model_args),
    ``rebuild(arrays) -> (model_args, model_kwargs)`` and the other leaves with the tree's
    structure (hashable: part of the cache key)."""
    leaves, treedef = jax.tree.flatten((tuple(model_args), dict(model_kwargs or {})))
    is_array = [isinstance(leaf, (np.ndarray, jax.Array)) for leaf in leaves]
    arrays = [leaf for leaf, array in zip(leaves, is_array) if array]
    others = tuple(None if array else leaf for leaf, array in zip(leaves, is_array))
    for leaf in others:
        try:
            hash(leaf)
        except TypeError as error:
            raise ValueError(f"jit_model_args: a model argument that is not an array must be hashable (it is part of "
                             f"the cache key), got {type(leaf).__name__}") from error

    def rebuild(traced):
        values = iter(traced)
        return jax.tree.unflatten(treedef, [next(values) if array else leaf for leaf, array in zip(others, is_array)])

    return arrays, rebuild, (treedef, others, tuple(is_array))


def _cache_key(target, static, arrays, keys, settings, options):
    """What a compiled ``jaxz.evidence`` depends on besides its array arguments' values (the
    keys' sharding says whether the runs are split over devices), or None where a setting
    cannot be hashed (then the call compiles as without the cache)."""
    def aval(x):
        return tuple(np.shape(x)), str(x.dtype), bool(getattr(x, "weak_type", False)), getattr(x, "sharding", None)

    key = (target, static, tuple(aval(x) for x in arrays), aval(keys), tuple(settings),
           tuple(sorted(options.items())), str(jnp.result_type(float)))  # the float width in force
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _remember(key, compiled):
    if key is None:
        return
    _COMPILED[key] = compiled
    while len(_COMPILED) > CACHE_SIZE:
        _COMPILED.popitem(last=False)


def _one_run(path, constrain, estimator, stage, num_particles, max_steps, progress, random_walk, key):
    """One run of ``jaxz.evidence``: tempered SMC from base draws, then (``stage``, a
    ``mixture_importance`` estimator, or None) the importance stage."""
    # one key per use: with partitionable threefry fold_in(key, 1) is split(key, n)[1], the SMC run's own key
    key_base, key_run, key_stage = jax.random.split(key, 3)
    positions = path.sample_base(key_base, num_particles)
    result = run(estimator, key_run, positions, max_steps=max_steps, progress=progress)
    state, trace = result.state, result.trace
    log_densities, gradients = state.log_density_evaluations, state.gradient_evaluations
    if random_walk:  # a random walk's moves evaluate log densities, not gradients
        log_densities, gradients = log_densities + gradients, jnp.zeros_like(gradients)
    last = jnp.maximum(result.num_steps - 1, 0)
    ess = jnp.where(jnp.arange(max_steps) < result.num_steps, trace.ess, jnp.inf)
    particles = state.kernel_states.position
    samples = particles if constrain is None else jax.vmap(constrain)(particles)
    estimate = result.estimate
    nan = jnp.full((), jnp.nan, estimate.log_z.dtype)
    stage_record = Estimate(nan, nan, jnp.zeros_like(estimate.cost), jnp.int32(0)), jnp.int32(0), nan
    if stage is not None:  # one step of the importance estimator, composed by hand (no loop to run)
        stage_state, info = stage.step(key_stage, stage.init(key_stage, particles, state.log_weights))
        stage_estimate = stage.finalize(stage_state)
        estimate = refine(estimate, (stage_estimate.log_z, stage_estimate.log_z_stderr, stage_estimate.status),
                          info.mismatch)
        status = jnp.where(info.mismatch, stage_estimate.status | STATUS_HEAVY_TAIL, stage_estimate.status)
        stage_record = (stage_estimate._replace(status=status.astype(jnp.int32)), info.num_components,
                        info.pareto_k)
        log_densities = log_densities + stage_state.log_density_evaluations
    return (estimate, result.estimate, stage_record, log_densities, gradients, result.num_steps, jnp.min(ess),
            trace.acceptance_rate[last], samples, state.log_weights)


def evidence(target, rng_key, *, model_args=(), model_kwargs=None, num_runs: int = 8, num_particles: int = 1000,
             method: str = "auto", progress: bool = False, importance: bool | None = None,
             importance_draws: int | None = None, pmc_steps: int = 0, jit_model_args: bool = False,
             **options) -> Evidence:
    """log Z of a NumPyro model (its evidence p(y)) or of a ``jaxz.paths.Path``, in one call.

    Args:
        target: a NumPyro model (a callable with ``numpyro.sample`` sites, the data
            observed with ``obs=``; see ``jaxz.numpyro``), or a ``jaxz.paths.Path`` with
            ``sample_base`` (its ``log_z0`` is added).
        rng_key: a PRNG key; the same key gives the same bits on any device layout.
        model_args, model_kwargs: the model's arguments (data as arrays).
        num_runs: independent runs (vmapped, split over devices when there are several);
            the pooled error bar comes from their spread, so use at least 4.
        num_particles: particles per run.
        method: "auto" (tempered SMC with self-tuned random-walk moves up to
            ``RANDOM_WALK_MAX_DIM`` coordinates, HMC above, then the importance stage) or
            "smc" (tempered SMC with self-tuned HMC at any dimension).
        progress: a progress bar over the tempering stages (``jaxz.run``'s).
        importance: run the importance stage after SMC (default: True for "auto" without
            ``waste_free``, else False); skipped where the particles support no mixture
            (``jaxz.estimators.mixture_importance.component_candidates``).
        importance_draws: importance draws per run (default
            ``IMPORTANCE_DRAWS_PER_PARTICLE`` x num_particles, rounded up to whole batches of
            num_particles).
        pmc_steps: population Monte Carlo steps that re-fit the mixture on the first
            quarter of the draws (``mixture_importance.PILOT_SHARE``); the rest are drawn from half the re-fitted, half
            the fitted mixture (``jaxz.approx.mixture.pmc_update``). 0 (off) by default; they
            help where SMC's particles starve or squeeze a mode
            (benchmarks/results/evidence_levers.md).
        jit_model_args: compile the runs as a function of the model's array arguments (as
            NumPyro's ``MCMC(..., jit_model_args=True)``): a later call with the same model,
            settings, and arrays of the same shapes and dtypes reuses the compiled runs
            (``CACHE_SIZE`` kept). Arrays the model reads from elsewhere (a global, a
            closure) are fixed at the first call; other arguments (Python numbers, strings)
            are part of the cache key by value, so pass a size the model builds shapes from
            as a Python int. NumPyro models only.
        **options: passed to ``jaxz.smc`` (``target_ess``, ``resample_ess``, ``waste_free``,
            ``schedule="two_pass"``, ``max_mcmc_steps``, ``batch_size``, ...), except
            ``max_steps``: the cap on each run's stages (default ``DEFAULT_MAX_STEPS``).

    Returns:
        ``Evidence``: pooled log Z, s.e. and status; per-run estimates; evaluation
        counts; the schedule length, smallest ESS and final acceptance of each run;
        the final particles (constrained sites of a model) and their weights.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    num_runs = _checks.integer("num_runs", num_runs)
    num_particles = _checks.integer("num_particles", num_particles, 2)
    if not isinstance(progress, (bool, np.bool_)):
        raise ValueError(f"progress must be True or False, got {progress!r}")
    max_steps = _checks.integer("max_steps", options.pop("max_steps", DEFAULT_MAX_STEPS))
    for name in ("kernel", "path"):
        if name in options:
            raise ValueError(f"{name} is chosen by method={method!r}; build jaxz.smc yourself to pass your own")
    if importance is None:
        # Not after waste-free SMC by default: its final particles can lose a mode, and the mixture fitted to them
        # then reports a wrong log Z with a tiny s.e. that SMC's own wide one does not contradict.
        importance = method == "auto" and not options.get("waste_free", False)
    if not isinstance(importance, (bool, np.bool_)):
        raise ValueError(f"importance must be True, False or None, got {importance!r}")
    if importance_draws is None:
        importance_draws = IMPORTANCE_DRAWS_PER_PARTICLE * num_particles
    num_batches = -(-_checks.integer("importance_draws", importance_draws) // num_particles)
    pmc_steps = _checks.integer("pmc_steps", pmc_steps, 0)
    if pmc_steps and not importance:
        raise ValueError(f"pmc_steps={pmc_steps} re-fits the importance stage's mixture, and no importance stage runs "
                         f"(importance={importance}, method={method!r}): pass importance=True, or pmc_steps=0")
    if not isinstance(jit_model_args, (bool, np.bool_)):
        raise ValueError(f"jit_model_args must be True or False, got {jit_model_args!r}")
    if jit_model_args and isinstance(target, Path):
        raise ValueError("jit_model_args is for a NumPyro model; a Path carries its data in its functions")
    path, constrain = _resolve_target(target, model_args, model_kwargs)
    dimension = _stage.dimension(path)
    random_walk = method == "auto" and dimension <= RANDOM_WALK_MAX_DIM
    candidates = _stage.component_candidates(dimension, num_particles) if importance else ()
    if random_walk:
        # A random walk's moves are cheap (one log density) and on multimodal or curved low-dimensional targets
        # its particles' coordinates stay correlated (which mode, where on a shell) long after the log density,
        # which is all that later weights read, has decorrelated: count moves on the log density.
        options.setdefault("decorrelation", "log_density")
        options.setdefault("target_ess", RANDOM_WALK_TARGET_ESS)

    def runs_of(path, constrain):
        """One run's function of its key, on ``path`` (built from the arguments it is given)."""
        estimator = smc(path, rwmh(path) if random_walk else hmc(path), **options)
        stage = (mixture_importance(path, num_batches=num_batches, candidates=candidates, pmc_steps=pmc_steps)
                 if candidates else None)
        return functools.partial(_one_run, path, constrain, estimator, stage, num_particles, max_steps, progress,
                                 random_walk)

    try:  # the options are checked here, before any compilation (under jit_model_args too)
        one_run = runs_of(path, constrain)
    except TypeError as error:
        raise ValueError(f"options are passed to jaxz.smc: {error}") from error

    keys = jax.random.split(rng_key, num_runs)
    run_mesh = _run_mesh(num_runs)
    if run_mesh is not None:
        keys = _sharding.shard_runs(keys, run_mesh, "runs")
    start = time.perf_counter()
    if jit_model_args:
        arrays, rebuild, static = _split_arguments(model_args, model_kwargs)

        def batch(keys, arrays):
            model_path = _resolve_target(target, *rebuild(arrays))
            return jax.vmap(runs_of(*model_path))(keys)

        settings = (method, num_particles, importance, num_batches, pmc_steps, max_steps, progress)
        cache_key = _cache_key(target, static, arrays, keys, settings, options)
        compiled = None if cache_key is None else _COMPILED.get(cache_key)
        if compiled is None:
            compiled = jax.jit(batch).lower(keys, arrays).compile()
            _remember(cache_key, compiled)
        inputs = (keys, arrays)
    else:
        compiled = jax.jit(jax.vmap(one_run)).lower(keys).compile()
        inputs = (keys,)
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    outputs = jax.block_until_ready(compiled(*inputs))
    seconds = time.perf_counter() - start
    (runs, smc_runs, (importance_runs, num_components, pareto_k), log_densities, gradients, num_stages, min_ess,
     acceptance, samples, log_weights) = outputs

    runs, pooled, num_log, num_gradients = _pool(runs, log_densities, gradients)
    num_log, num_gradients = int(round(float(num_log))), int(round(float(num_gradients)))
    return Evidence(pooled.log_z, pooled.log_z_stderr, pooled.status, runs, num_log + num_gradients, num_log,
                    num_gradients, num_stages, min_ess, acceptance, samples, log_weights, seconds, compile_seconds,
                    smc_runs, importance_runs, num_components, pareto_k)


__all__ = ["evidence", "Evidence", "METHODS"]
