"""The evidence of a model in one call: ``jaxz.evidence``.

``jaxz.evidence(model, key, model_args=(data,))`` builds the likelihood-tempering path
of a NumPyro model (``jaxz.numpyro``) or takes a ``jaxz.paths.Path``, runs
``num_runs`` independent estimators in one ``vmap`` (split over devices when there are
several), and pools them with ``jaxz.combine_runs``: log Z ± its standard error from
the spread of the runs, with the status flags of every run.

``method="auto"`` runs two stages. First, adaptive tempered SMC (``jaxz.smc``: each β
chosen so that the conditional ESS is a fixed fraction of the particles, multinomial
resampling) with a self-tuned kernel: up to ``RANDOM_WALK_MAX_DIM`` (5) coordinates,
random-walk Metropolis (``jaxz.kernels.rwmh(path)``: proposal covariance from the
particles, step toward an acceptance of 0.23, as many moves per stage as the particles'
log density needs to decorrelate, conditional ESS 0.9 per step); above, HMC
(``jaxz.kernels.hmc(path)``: mass matrix from the particles' covariance, step toward an
acceptance of 0.65, a quarter-turn trajectory, as many moves per stage as the particles'
coordinates need to decorrelate, conditional ESS 0.5). Then an importance stage: a
Gaussian mixture fitted to the final weighted particles by EM, its number of components
chosen by cross-validation (``jaxz.approx.mixture``), mixed with a copy twice as wide and
with the prior (defensive shares of 0.1 each, so every weight is bounded by L(x) / 0.1),
gives 64 fresh draws per particle; Ẑ is their mean weight (unbiased given the particles),
its s.e. the delta method with the weights' fitted Pareto tail (``jaxz.importance``'s).
This is the mixture adaptation of population Monte Carlo (Cappé et al. 2008) started from
SMC's particles; ``pmc_steps=`` adds PMC steps on the first draws (off by default, see
``evidence``'s arguments). The run reports the importance estimate where it is unflagged
(enough effective draws, Pareto k̂ below ``jaxz.weights.pareto_threshold`` or a fitted tail
the largest weight refutes, ``jaxz.weights.pareto_tail_fits``), else SMC's own; where
both exist and differ by more than ``DISAGREEMENT`` (4) combined s.e.s, the run is flagged
STATUS_LOW_ESS. A second check reads 1 + χ²(π ‖ q) twice: E_q[(w/Z)²] from the draws and
E_π[w/Z] at SMC's particles (draws of π). Where the particles hold mass the mixture's draws
never reach (the neck of a funnel), only the second sees it; above ``MOMENT_MISMATCH`` (4)
times the first, the run keeps SMC's estimate and is flagged STATUS_LOW_ESS. A mixture of
K components over d coordinates needs K (d + 2) x 5 particles; without even K = 1 the
stage is skipped. Last, the runs must agree within their own error bars: where Cochran's Q
rejects (``HETEROGENEITY_LEVEL``) the pooled result is flagged STATUS_LOW_ESS, and every run
beyond ``DISAGREEMENT`` s.e.s of the runs' median is flagged (so the pooled result too,
whose status ORs the runs'). ``method="smc"`` is the HMC
configuration at every dimension, without the importance stage (``importance=`` switches
it on or off for either method; with ``waste_free=True`` it is off unless asked: waste-free
particles that lost a mode made it report a wrong number with a tiny s.e.).

Measured on the evidence suite (``benchmarks/evidence_suite.py``, 1000 particles):
MSE × evaluations 10-1000x below the SMC pass alone (two-mode d = 2: SMC 0.0045, with the
stage 8e-5 at 1.1x the evaluations); numbers and coverage in
benchmarks/results/evidence_suite.md.

Cost. ``num_evaluations`` counts what the algorithm evaluates, summed over runs: log
densities f_β(x) (the reweighting, every bisection point of the adaptive schedule; on an
affine path such as likelihood tempering only f_0 and f_1, once per particle and stage)
plus gradients ∇ log f_β(x) (one per leapfrog step, one per particle whenever β
changes, to refresh HMC's cached gradient, and the step-size rescue's trial steps). A
gradient evaluation also yields the log density; it is counted once, as a gradient. A
random-walk move costs one log density per proposal (and one per particle whenever β
changes), counted as log densities. The importance stage evaluates f_1 and f_0 at every
draw: two log densities each.
Each trajectory draws ⌊L + U⌋ leapfrog steps (U uniform, ``jaxz.kernels.tuning``), but
the particles' trajectories run as one vmapped loop that lasts as long as the longest,
so each particle costs that maximum (mean ⌊L⌋ + 1 − (1 − frac L)^N): that is what is
counted. Checked against a log density that counts its own calls
(tests/test_evidence.py): exact for fixed and adaptive schedules, within the rounding
of the expected maximum for waste-free and two-pass runs.
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
from jaxz._status import STATUS_HEAVY_TAIL
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
# method="auto" moves the particles by tuned random-walk Metropolis up to this many dimensions, by tuned HMC
# above. Per evaluation (log density or gradient, counted alike) on the evidence suite (500 particles, 8 runs,
# benchmarks/results/evidence_levers.md): MSE x evaluations 15x lower than HMC on the 2-d shells, 12x on the
# eggbox, 38x on Rosenbrock; on the 10-d funnel random walks left log Z 1.7 nats low in every run (HMC 0.4).
RANDOM_WALK_MAX_DIM = 5
# ... and with the random walk, the conditional ESS of each step is 0.9 instead of jaxz.smc's 0.5: more stages
# of cheap moves. 32 runs x 1000 particles, MSE x evaluations at target_ess 0.5 / 0.7 / 0.8 / 0.9: eggbox
# 8,600 / 2,490 / 2,290 / 1,210 (coverage 0.91 / 0.97 / 0.94 / 1), 2-d shells 410 / 287 / 250 / 306, Rosenbrock
# 1,620 / 1,040 / 1,270 / 1,540 (coverage 0.91 to 1). With HMC (moves ~30x dearer) 0.7 bought nothing on the
# 10-d shells (2.06e4 against 2.09e4, 16 runs), so HMC keeps 0.5.
RANDOM_WALK_TARGET_ESS = 0.9
class Evidence(NamedTuple):
    """What ``jaxz.evidence`` returns.

    log_z, log_z_stderr, status: pooled over the runs by ``jaxz.combine_runs`` (the
        log of the mean of the runs' Ẑ, the s.e. from their spread, every run's flags
        OR-ed, STATUS_LOW_ESS included: status 0 means no run was flagged), plus
        STATUS_LOW_ESS where the runs disagree beyond their own s.e.s (``_between_runs``).
    runs: each run's ``Estimate`` (leading run axis): its own log Ẑ, s.e., cost
        (HMC trajectories) and status.
    num_evaluations: log-density plus gradient evaluations, all runs (see the module
        docstring); ``num_log_density_evaluations`` and ``num_gradient_evaluations``
        split it.
    num_stages: (runs,) tempering stages each run took (the schedule's length).
    min_ess: (runs,) smallest ESS fraction after any reweighting (the adaptive
        schedule holds it near 0.5; far lower means the particles lost track).
    acceptance_rate: (runs,) mean acceptance at β = 1 (the tuner aims at 0.65 for HMC,
        0.23 for the random walk).
    samples: the SMC particles, (runs, num_particles, ...) per leaf: for a NumPyro
        model a dict of its latent and deterministic sites in their own space; for a
        Path, the positions. Weighted draws from the posterior f_1 / Z.
    log_weights: (runs, num_particles) their normalized log weights.
    seconds: wall time of the runs after compilation; compile_seconds: of compiling.
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
    from jaxz._status import status_names  # noqa: PLC0415

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
    evaluations summed, in one compiled call (op by op, these took 3 s of a 20 s call)."""
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
        estimate = refine(estimate, stage_estimate[:2] + (stage_estimate.status,), info.mismatch)
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
            observed with ``obs=``; see ``jaxz.numpyro`` for what counts where), or a
            ``jaxz.paths.Path`` with ``sample_base`` (its ``log_z0`` is added).
        rng_key: a PRNG key; the same key gives the same bits on any device layout.
        model_args, model_kwargs: the model's arguments (data as arrays).
        num_runs: independent runs (vmapped; split over devices when there are several):
            the pooled error bar comes from their spread, so use at least 4.
        num_particles: particles per run.
        method: "auto" (the recommended configuration; now tempered SMC with
            self-tuned random-walk moves up to 5 coordinates, HMC above) or "smc"
            (tempered SMC with self-tuned HMC at any dimension).
        progress: a progress bar over the tempering stages (``jaxz.run``'s).
        importance: run the importance stage after SMC (default: True for "auto"
            without ``waste_free``, else False); it needs a mixture the particles support (see
            ``MIXTURE_COMPONENTS``) and is skipped where there is none.
        importance_draws: draws of the importance stage per run (default 64 x
            num_particles; rounded up to whole batches of num_particles).
        pmc_steps: population Monte Carlo steps that re-fit the importance stage's
            mixture on its first quarter of draws, the rest drawn from half the re-fitted,
            half the fitted mixture (``jaxz.approx.mixture.pmc_update``). Off (0) by
            default. Measured with 2: they hold the error bars where SMC's particles starve
            a mode (a mode of share 0.3 holding 5 % of them, fitted 3x too narrow: 0.95
            coverage of the unflagged runs and 6 % flagged, against 0.84 and 88 %); on the
            evidence suite's 2-d problems (128 runs, the same keys) 0.3-1.2x the default's
            MSE, 1.4x on the 31-d logistic regression (benchmarks/results/evidence_levers.md).
        jit_model_args: compile the runs as a function of the model's array arguments
            (NumPyro's ``MCMC(..., jit_model_args=True)``): a later call with the same model,
            the same settings and arrays of the same shapes and dtypes reuses the compiled
            runs (``compile_seconds`` about 0 instead of 10-20 s) with the new values. As
            with ``jax.jit``, arrays the model reads from anywhere but its arguments (a
            global, a closure) are fixed at the first call; pass data as arguments. Other
            arguments (Python numbers, strings) are part of the cache key, by value: pass
            a size the model builds shapes from as a Python int (an array argument is
            traced, and its value is not known while compiling). A NumPyro model only (a
            Path carries its data in its functions).
        **options: passed to ``jaxz.smc`` (``target_ess``, ``resample_ess``,
            ``waste_free``, ``schedule="two_pass"``, ``max_mcmc_steps``, ``batch_size``,
            ...), except ``max_steps``: the cap on each run's stages (default 1000).

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
        # Not after waste-free SMC by default: its final particles lost a mode in 2 of 8 runs on the 10-d two-mode
        # target, and the stage then reported log 0.7 with an s.e. of 0.002 and status 0 (its own SMC estimate,
        # s.e. 0.8-1.2, had not disagreed beyond 4 s.e.). Pass importance=True to have it anyway.
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
