"""``jaxz.evidence``: the evidence log Z of a model in one call.

``evidence(model, key, model_args=(data,))`` builds the likelihood-tempering path of a
NumPyro model (``jaxz.numpyro``), or takes a ``jaxz.paths.Path``, runs ``num_runs``
independent estimators and pools them with ``jaxz.pool_runs``: on CPU their SMC passes one
after the other in one compiled program (``lax.map``) and their importance stages in one
``vmap``, on GPU and TPU both in one ``vmap``, split over devices when there are several
(``jaxz._evidence_run``).

``method="auto"`` runs, per run:

1. adaptive tempered SMC (``jaxz.smc``: each β chosen so that the conditional ESS is a
   fixed fraction of the particles) with a self-tuned kernel: up to ``RANDOM_WALK_MAX_DIM``
   coordinates random-walk Metropolis (target acceptance 0.23) whose every move adds a step
   at a random smaller scale (``jaxz.kernels.multiscale.multiscale_rwmh``: mass far below
   the particles' spread, at a singularity or in a narrow mode, stays reachable), HMC
   (``jaxz.kernels.hmc``, target acceptance 0.65) above;
2. an importance stage (``jaxz.mixture_importance``): a Gaussian mixture fitted by EM to the
   final weighted particles, mixed with a twice-wider copy and with the prior, and Ẑ the mean
   weight of fresh draws (population Monte Carlo's adaptation, Cappé et al. 2008, started
   from SMC's particles). ``refine`` keeps it only where it is unflagged and agrees with
   SMC's own estimate;
3. a check of the runs against each other (``jaxz.runs_disagree``: Cochran's Q and each
   run's distance to the median), then the pool (``jaxz.combine_runs``). Where the pool is
   flagged STATUS_RUNS_DISAGREE, so is every run: the runs are draws of one estimator, and
   when they (or a run's two stages) disagree beyond their error bars, a shared bias is as
   likely as one bad run, so no run's error bar can be vouched for.

``method="smc"`` is tempered SMC with HMC at every dimension and no importance stage.

``method="nested"`` runs, per run, waste-free nested SMC (``jaxz.estimators.nested.nested_smc``:
the prior restricted to rising likelihood levels, each level's particles spread over its level
set) to a tolerance of 1e-5, then importance sampling from a Gaussian per level
(``jaxz.estimators.nested_importance``), then step 3. Its levels follow the likelihood to
whatever scale its mass sits at, where a mixture fitted at the posterior's spread does not
reach: an integrable singularity, mass on many scales at once (the power-law and radial rows
of benchmarks/results/evidence_suite_hard.md, where "auto" is flagged and "nested" is right).
It needs a likelihood-tempering path (a NumPyro model's, or a Path with an affine ``log_density``).

Cost: ``num_evaluations`` counts what the algorithm evaluates, summed over runs:
log densities f_β(x) (reweighting, every bisection point of the adaptive schedule; on an
affine path only f_0 and f_1) plus gradients ∇ log f_β(x) (one per leapfrog step, one per
particle whenever β changes, and the step-size rescue's trial steps). A gradient also
yields the log density and is counted once, as a gradient. A random-walk move costs one
log density per proposal (``multiscale_rwmh`` makes two per move); the importance stage two
log densities (f_0 and f_1) per draw.
The particles' trajectories run as one vmapped loop, so each particle is charged the
longest trajectory's leapfrog steps (tests/test_evidence.py checks the counts).
"""
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks
from jaxz import _evidence_cache as _cache
from jaxz import _evidence_run as _runs
from jaxz._status import status_names
from jaxz.base import Estimate
from jaxz.estimators import mixture_importance as _stage
from jaxz.estimators import nested_importance as _nested_importance
from jaxz.estimators.mixture_importance import IMPORTANCE_DRAWS_PER_PARTICLE
from jaxz.estimators.nested import nested_smc
from jaxz.estimators.smc import smc
from jaxz.kernels import hmc
from jaxz.kernels.multiscale import multiscale_rwmh
from jaxz.paths import Path
from jaxz.types import Array

METHODS = ("auto", "smc", "nested")
DEFAULT_MAX_STEPS = 1000  # cap on the tempering stages of one run (STATUS_MAX_STEPS when hit)
# method="auto" moves the particles by tuned random-walk Metropolis up to this many coordinates, by tuned HMC
# above: at low dimension a random-walk move is far cheaper per unit of MSE, at higher dimension it stops mixing
# (the comparison: benchmarks/results/evidence_levers.md).
RANDOM_WALK_MAX_DIM = 5
# Conditional ESS kept at each tempering step with the random walk (jaxz.smc's default, 0.5, stays for HMC): more
# stages of cheap moves (the sweep over target_ess: docs/changelog.d/docstrings.md, jaxz.model_evidence).
RANDOM_WALK_TARGET_ESS = 0.9
# The accuracy asked by default: an s.e. of log Z that serves model comparison (a Bayes factor read to ~0.1 nats).
DEFAULT_TARGET_STDERR = 0.05
# Particles per run under an accuracy target: enough for the adaptive schedule, the ESS checks and the mixture the
# importance stage fits to be reliable (the coverage of benchmarks/results/evidence_coverage.json); the target is
# then reached by adding runs (``MAX_BATCHES`` batches at most).
TARGET_PARTICLES = 128
DEFAULT_PARTICLES = 1000  # particles per run with target_stderr=None
# Particles per run of method="nested", with or without a target: 20 waste-free chains of 50 states a level (fewer
# than _chains.MIN_WASTE_FREE_CHAINS chains are flagged), the setting of the jaxz_nested_importance rows of
# benchmarks/results/evidence_suite_hard.md.
NESTED_PARTICLES = 1000
# Importance draws per particle when both are sized for the target (num_particles=None): a quarter of
# IMPORTANCE_DRAWS_PER_PARTICLE, 4096 draws per run, enough for the Pareto k̂ of its weights.
TARGET_DRAWS_PER_PARTICLE = 16
MAX_BATCHES = 16


class Evidence(NamedTuple):
    """What ``jaxz.evidence`` returns.

    log_z, log_z_stderr, status: the pool of the runs (``jaxz.pool_runs``): log of the
        mean of the runs' Ẑ, its s.e., the runs' flags with STATUS_RUNS_DISAGREE where
        they disagree beyond their own s.e.s. Status 0: no check fired.
    runs: each run's ``Estimate`` (leading run axis).
    num_evaluations: log-density plus gradient evaluations over all runs (module
        docstring), split in ``num_log_density_evaluations`` and ``num_gradient_evaluations``.
    num_stages: (runs,) tempering stages of each run.
    min_ess: (runs,) smallest ESS fraction after any reweighting ("nested": the importance
        weights' ESS over their number).
    acceptance_rate: (runs,) mean acceptance at β = 1 ("nested": at the last level).
    samples: the SMC particles, (runs, num_particles, ...) per leaf: a NumPyro model's
        latent and deterministic sites in their own space, or a Path's positions;
        weighted draws from f_1 / Z ("nested": the importance stage's last batch of draws).
    log_weights: (runs, num_particles) their normalized log weights.
    seconds, compile_seconds: wall time of the runs after compilation, and of compiling.
    smc_runs: (runs,) the SMC pass's own estimates (``runs`` where no importance stage ran;
        "nested": nested SMC's).
    importance_runs: (runs,) the importance stage's estimates (nan where none ran).
    num_components: (runs,) components of the fitted mixture (0: no importance stage).
    pareto_k: (runs,) Pareto k̂ of the importance weights (nan: no importance stage).
    phase_seconds: {phase: {"compile": s, "run": s}} for "trace" (the model traced for its
        fingerprint), "smc" ("nested" for method="nested"), "importance" (where it ran) and
        "pool"; a phase whose program came from the cache compiles in 0 s.
    compiled_as: how the model's arrays reached the programs: "arguments", "baked" (compiled
        in) or "path" (a Path target).
    target_stderr, target_met: the s.e. asked for, and whether the pooled s.e. reached it
        (False where ``max_evaluations``, ``max_seconds`` or ``MAX_BATCHES`` stopped the
        runs first; None without a target). Not a status: the s.e. reported is the one the
        runs support either way.

    With ``batched=True`` every array field has a leading data-set axis (the evaluation
    counts are arrays over data sets); ``dataset(i)`` is the ``Evidence`` of one.
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
    phase_seconds: dict | None = None
    compiled_as: str | None = None
    target_stderr: float | None = None
    target_met: Any = None

    def __repr__(self) -> str:
        return _describe(self)

    def dataset(self, index: int) -> "Evidence":
        """The Evidence of data set ``index`` of a ``batched=True`` call."""
        if np.ndim(self.log_z) != 1:
            raise ValueError("dataset(i) picks one data set of a batched=True call; this Evidence holds one")
        scalars = {"seconds", "compile_seconds", "phase_seconds", "compiled_as", "target_stderr"}
        return Evidence(**{name: value if name in scalars else jax.tree.map(lambda leaf: leaf[index], value)
                           for name, value in self._asdict().items()})

    def posterior_draws(self, rng_key, num_draws: int | None = None):
        """Equally weighted posterior draws pooled over the runs (``jaxz.posterior.posterior_draws``)."""
        from jaxz import posterior
        return posterior.posterior_draws(self, rng_key, num_draws)

    def to_arviz(self, rng_key, num_draws: int | None = None):
        """An ``arviz.InferenceData``, one chain per run (``jaxz.posterior.to_arviz``)."""
        from jaxz import posterior
        return posterior.to_arviz(self, rng_key, num_draws)


def _describe(result: "Evidence") -> str:
    """A few readable lines: log Z ± s.e., the status by name, the runs, evaluations and time
    (the arrays stay in the fields; ``repr`` of each field shows them)."""
    def flags(status):
        names = status_names(status)
        return "|".join(names) if names else "OK"

    if np.ndim(result.log_z) == 1:
        return _describe_batch(result, flags)
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


def _describe_batch(result: "Evidence", flags) -> str:
    """The summary of a batched call: data sets, how many flagged, the first few."""
    log_z, stderr, status = (np.asarray(x) for x in (result.log_z, result.log_z_stderr, result.status))
    shown = ", ".join(f"{z:.4f}±{e:.4f}" + ("" if st == 0 else f" [{flags(st)}]")
                      for z, e, st in zip(log_z[:4], stderr[:4], status[:4]))
    more = ", ..." if log_z.size > 4 else ""
    return (f"Evidence(data sets={log_z.size}, flagged={int(np.sum(status != 0))}, log_z=[{shown}{more}], "
            f"runs per set={np.shape(result.runs.log_z)[1]}, evaluations={int(np.sum(result.num_evaluations)):,}, "
            f"seconds={result.seconds:.2f} (+{result.compile_seconds:.2f} compiling))")


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


def _num_datasets(arrays) -> int:
    """The common leading axis of the model's arrays under ``batched=True``."""
    sizes = {int(np.shape(array)[0]) if np.ndim(array) else None for array in arrays}
    if not arrays or None in sizes or len(sizes) != 1 or 0 in sizes:
        raise ValueError(f"batched=True reads a leading data-set axis on every array among model_args and "
                         f"model_kwargs, of one common length >= 1; got leading sizes {sorted(map(str, sizes))}")
    return sizes.pop()


class _Settings(NamedTuple):
    """The checked settings of one call."""

    method: str
    num_runs: int
    num_particles: int
    progress: bool
    importance: bool
    num_batches: int
    pmc_steps: int
    max_steps: int
    jit_model_args: bool | None
    batched: bool
    target_stderr: float | None
    max_evaluations: int | None
    max_seconds: float | None
    optimize: bool
    options: dict


def _flag(name, value, allow_none=False):
    if (value is None and allow_none) or isinstance(value, (bool, np.bool_)):
        return value
    raise ValueError(f"{name} must be True{', False or None' if allow_none else ' or False'}, got {value!r}")


def _positive(name, value, integer=False):
    """None, or a positive finite number (an integer where ``integer``)."""
    if value is None:
        return None
    if integer:
        return _checks.integer(name, value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number or None, got {value!r}")
    return float(value)


def _settings(target, method, num_runs, num_particles, progress, importance, importance_draws, pmc_steps,
              jit_model_args, batched, target_stderr, max_evaluations, max_seconds, optimize, options) -> _Settings:
    """The call's arguments checked (before any tracing), with their defaults filled in."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    num_runs = _checks.integer("num_runs", num_runs)
    target_stderr = _positive("target_stderr", target_stderr)
    nested = method == "nested"
    sized = num_particles is None and target_stderr is not None  # particles and draws sized for the target
    if num_particles is None:
        num_particles = NESTED_PARTICLES if nested else DEFAULT_PARTICLES if target_stderr is None else TARGET_PARTICLES
    num_particles = _checks.integer("num_particles", num_particles, 2)
    _flag("progress", progress)
    max_steps = _checks.integer("max_steps", options.pop("max_steps", DEFAULT_MAX_STEPS))
    for name in ("kernel", "path", "kernel_of", "record_levels"):
        if name in options:
            raise ValueError(f"{name} is chosen by method={method!r}; build the estimator yourself to pass your own")
    _flag("importance", importance, allow_none=True)
    if nested:
        if importance is False:
            raise ValueError("method='nested' runs nested SMC and its importance stage together; for nested SMC "
                             "alone, run jaxz.estimators.nested.nested_smc")
        importance, per_particle = True, _nested_importance.DRAWS_PER_PARTICLE
    else:
        if importance is None:
            # Not after waste-free SMC by default: its final particles can lose a mode, and the mixture fitted to
            # them then reports a wrong log Z with a tiny s.e. that SMC's own wide one does not contradict.
            importance = method == "auto" and not options.get("waste_free", False)
        per_particle = TARGET_DRAWS_PER_PARTICLE if sized else IMPORTANCE_DRAWS_PER_PARTICLE
    if importance_draws is None:
        importance_draws = per_particle * num_particles
    num_batches = -(-_checks.integer("importance_draws", importance_draws) // num_particles)
    pmc_steps = _checks.integer("pmc_steps", pmc_steps, 0)
    if pmc_steps and (nested or not importance):
        raise ValueError(f"pmc_steps={pmc_steps} re-fits the importance stage's mixture fitted to SMC's particles, "
                         f"and no such stage runs (importance={importance}, method={method!r}): pass "
                         f"method='auto' with importance=True, or pmc_steps=0")
    _flag("jit_model_args", jit_model_args, allow_none=True)
    _flag("batched", batched)
    if isinstance(target, Path) and (jit_model_args or batched):
        raise ValueError(f"{'jit_model_args' if jit_model_args else 'batched'} is for a NumPyro model's arguments; "
                         f"a Path carries its data in its functions")
    return _Settings(method, num_runs, num_particles, bool(progress), bool(importance), num_batches, pmc_steps,
                     max_steps, jit_model_args, bool(batched), target_stderr,
                     _positive("max_evaluations", max_evaluations, integer=True),
                     _positive("max_seconds", max_seconds),
                     _cache.optimize_by_default() if _flag("optimize", optimize, True) is None else bool(optimize),
                     options)


def _plan(settings: _Settings, path) -> _runs.Plan:
    """The call's estimators: SMC with tuned random-walk moves (``method="auto"`` up to
    ``RANDOM_WALK_MAX_DIM`` coordinates) or HMC, and the importance stage's candidate
    component counts (none where it does not run). The options are checked here, before
    any compilation."""
    if settings.method == "nested":
        return _nested_plan(settings, path)
    dimension = _stage.dimension(path)
    random_walk = settings.method == "auto" and dimension <= RANDOM_WALK_MAX_DIM
    candidates = _stage.component_candidates(dimension, settings.num_particles) if settings.importance else ()
    options = dict(settings.options)
    if random_walk:
        # A random walk's moves are cheap (one log density) and on multimodal or curved low-dimensional targets
        # its particles' coordinates stay correlated (which mode, where on a shell) long after the log density,
        # which is all that later weights read, has decorrelated: count moves on the log density.
        options.setdefault("decorrelation", "log_density")
        options.setdefault("target_ess", RANDOM_WALK_TARGET_ESS)

    def estimator_of(path):
        return smc(path, multiscale_rwmh(path) if random_walk else hmc(path), **options)

    try:
        estimator_of(path)
    except TypeError as error:
        raise ValueError(f"options are passed to jaxz.smc: {error}") from error
    return _runs.Plan(estimator_of, random_walk, tuple(candidates))


def _nested_plan(settings: _Settings, path) -> _runs.Plan:
    """``method="nested"``: waste-free nested SMC to ``nested_importance.TOLERANCE`` with its
    levels recorded (the options passed to ``nested_smc`` may change its settings), then
    ``nested_importance`` with ``num_batches`` draws per particle."""
    options = dict(waste_free=True, tolerance=_nested_importance.TOLERANCE, max_levels=settings.max_steps)
    options.update(settings.options, record_levels=True)

    def estimator_of(path):
        return nested_smc(path, **options)

    def stage_of(path):
        return _nested_importance.nested_importance(path, draws_per_particle=settings.num_batches)

    try:
        estimator_of(path)
    except TypeError as error:
        raise ValueError(f"options are passed to jaxz.estimators.nested.nested_smc with method='nested': "
                         f"{error}") from error
    return _runs.Plan(estimator_of, False, (), stage_of)


def evidence(target, rng_key, *, model_args=(), model_kwargs=None, num_runs: int = 8,
             num_particles: int | None = None, target_stderr: float | None = DEFAULT_TARGET_STDERR,
             max_evaluations: int | None = None, max_seconds: float | None = None, method: str = "auto",
             progress: bool = False, importance: bool | None = None, importance_draws: int | None = None,
             pmc_steps: int = 0, jit_model_args: bool | None = None, batched: bool = False,
             optimize: bool | None = None, **options) -> Evidence:
    """log Z of a NumPyro model (its evidence p(y)) or of a ``jaxz.paths.Path``, in one call.

    Args:
        target: a NumPyro model (a callable with ``numpyro.sample`` sites, the data
            observed with ``obs=``; see ``jaxz.numpyro``), or a ``jaxz.paths.Path`` with
            ``sample_base`` (its ``log_z0`` is added).
        rng_key: a PRNG key; the same key gives the same bits on the same device layout, and
            the same log Z to float precision on any other (runs vmapped or in sequence).
        model_args, model_kwargs: the model's arguments (data as arrays).
        num_runs: independent runs per batch (in sequence on CPU, else vmapped and split over
            devices when there are several); the pooled error bar comes from their spread,
            so use at least 4.
        num_particles: particles per run (default ``TARGET_PARTICLES`` under an accuracy
            target, ``DEFAULT_PARTICLES`` with ``target_stderr=None``; ``NESTED_PARTICLES``
            for "nested" either way).
        target_stderr: the s.e. of log Z asked for (default ``DEFAULT_TARGET_STDERR``, 0.05
            nats): after the first ``num_runs`` runs, further batches of as many (the same
            compiled program, new keys) until the pooled s.e. is at most this on every
            data set. None: one batch.
        max_evaluations, max_seconds: stop adding batches before one more would pass these
            (log densities + gradients over all runs; wall seconds of running): the call
            returns what it has, with ``Evidence.target_met`` False.
        method: "auto" (tempered SMC with self-tuned random-walk moves up to
            ``RANDOM_WALK_MAX_DIM`` coordinates, HMC above, then the importance stage),
            "smc" (tempered SMC with self-tuned HMC at any dimension) or "nested" (waste-free
            nested SMC, then importance sampling from its levels; module docstring).
            **options go to ``jaxz.smc``, or for "nested" to ``nested_smc``.
        progress: the call's phases as they compile and run (on stderr), with a bar over
            the tempering stages (``jaxz.run``'s).
        importance: run the importance stage after SMC (default: True for "auto" without
            ``waste_free``, else False); skipped where the particles support no mixture
            (``jaxz.estimators.mixture_importance.component_candidates``). "nested" always
            runs its own stage (False is an error).
        importance_draws: importance draws per run (default ``TARGET_DRAWS_PER_PARTICLE``
            x num_particles where the particles are sized for the target, else
            ``IMPORTANCE_DRAWS_PER_PARTICLE`` x num_particles; "nested":
            ``nested_importance.DRAWS_PER_PARTICLE`` x num_particles; rounded up to whole
            batches of num_particles).
        pmc_steps: population Monte Carlo steps that re-fit the mixture on the first
            quarter of the draws (``mixture_importance.PILOT_SHARE``); the rest are drawn from half the re-fitted, half
            the fitted mixture (``jaxz.approx.mixture.pmc_update``). 0 (off) by default; they
            help where SMC's particles starve or squeeze a mode
            (benchmarks/results/evidence_levers.md).
        jit_model_args: how the model's array arguments reach the compiled programs. None
            (default): as arguments, so a later call with new data of the same shapes and
            dtypes (or only a new key) reuses the compiled programs; a model that reads its
            data's values in Python (``if y.sum() > 0``) gets them compiled in instead.
            True: as arguments, an error where the model cannot take them so. False:
            compiled in as constants (XLA may fold them). Either way the programs are kept
            (``jaxz._evidence_cache.CACHE_SIZE``) under a fingerprint of the model's traced
            computation and of every constant it reads (globals, closures, Python numbers
            among its arguments): a call in which one of them changed compiles anew.
        batched: the model's array arguments carry a leading axis over data sets: every
            data set gets its own runs, pooled log Z, s.e. and status, in one compiled call
            (the ``Evidence`` fields gain that leading axis; ``Evidence.dataset(i)`` picks one).
        optimize: compile with XLA's default optimizations (faster runs, a longer compile);
            False compiles with ``jaxz._evidence_cache.FAST_COMPILE_OPTIONS`` on CPU (no
            backend optimizations, loop emitters instead of fusion emitters). None
            (default): True on GPU and TPU, False on CPU
            (``jaxz._evidence_cache.optimize_by_default``); the bits differ in the last
            places between the two (benchmarks/results/compile_options.md).
        **options: passed to ``jaxz.smc`` (``target_ess``, ``resample_ess``, ``waste_free``,
            ``schedule="two_pass"``, ``max_mcmc_steps``, ``batch_size``, ...), except
            ``max_steps``: the cap on each run's stages (default ``DEFAULT_MAX_STEPS``).

    Returns:
        ``Evidence``: pooled log Z, s.e. and status; per-run estimates; evaluation
        counts; the schedule length, smallest ESS and final acceptance of each run;
        the final particles (constrained sites of a model) and their weights
        (``Evidence.posterior_draws`` and ``to_arviz`` turn them into equally weighted draws).
    """
    settings = _settings(target, method, num_runs, num_particles, progress, importance, importance_draws, pmc_steps,
                         jit_model_args, batched, target_stderr, max_evaluations, max_seconds, optimize, options)
    if isinstance(target, Path) or not callable(target):  # the checks that name what target should be
        _resolve_target(target, model_args, model_kwargs)
    start = time.perf_counter()
    prepared = _cache.prepare(target, model_args, model_kwargs, _resolve_target, settings.jit_model_args,
                              settings.batched)
    num_datasets = _num_datasets(prepared.arrays) if settings.batched else None
    first = [array[0] for array in prepared.arrays] if settings.batched else prepared.arrays
    path, _ = prepared.build(first)
    trace_seconds = time.perf_counter() - start
    batches, pooled, runs, counts = _runs.run_to_target(prepared, settings, _plan(settings, path), rng_key,
                                                        num_datasets, MAX_BATCHES)
    axis = 1 if settings.batched else 0
    out, (importance_runs, num_components, pareto_k) = (_runs.concatenate([batch[name] for batch in batches], axis)
                                                        for name in ("out", "record"))
    phases = {"trace": dict(compile=trace_seconds, run=0.0)}
    for batch in batches:
        for name, seconds in batch["phases"].items():
            phases.setdefault(name, dict(compile=0.0, run=0.0))
            phases[name] = {part: phases[name][part] + seconds[part] for part in ("compile", "run")}
    num_log, num_gradients = counts
    met = np.asarray(pooled.log_z_stderr <= settings.target_stderr) if settings.target_stderr is not None else None
    return Evidence(pooled.log_z, pooled.log_z_stderr, pooled.status, runs, num_log + num_gradients, num_log,
                    num_gradients, out["num_stages"], out["min_ess"], out["acceptance"], out["samples"],
                    out["log_weights"], sum(p["run"] for p in phases.values()),
                    sum(p["compile"] for p in phases.values()), out["estimate"], importance_runs, num_components,
                    pareto_k, phases, prepared.mode, settings.target_stderr,
                    None if met is None else (bool(met) if met.ndim == 0 else met))


__all__ = ["evidence", "Evidence", "METHODS"]
