"""The runs behind ``jaxz.evidence``: its compiled phases, and the batches of runs that reach
the accuracy asked.

One batch is ``num_runs`` independent runs of three programs, each vmapped over the runs
(and over data sets under ``batched=True``) and compiled once per model and settings
(``jaxz._evidence_cache``):

1. ``smc``: one run's tempered SMC from base draws (``smc_run``); with ``method="nested"``
   instead ``nested``: one run's nested SMC and its importance stage (``nested_run``);
2. ``importance``: the importance stage started from the run's weighted particles
   (``stage_run``), where one runs after tempered SMC;
3. ``pool``: the runs checked against each other and pooled (``pool_body``).

The later phases are lowered from the earlier ones' output shapes, so the three compile at
once in worker threads while the calling thread traces the next (``execute``).
``run_to_target`` adds batches, with fresh keys, until the pooled s.e. reaches the target.
``jaxz.model_evidence`` checks the arguments and chooses the estimators (a ``Plan``).
"""
import functools
import sys
import time
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _evidence_cache as _cache
from jaxz import _progress
from jaxz import sharding as _sharding
from jaxz._status import STATUS_HEAVY_TAIL, STATUS_RUNS_DISAGREE
from jaxz.base import Estimate, run
from jaxz.estimators.mixture_importance import mixture_importance, refine
from jaxz.pooling import pool_runs


class Plan(NamedTuple):
    """The estimators of a call, chosen by ``jaxz.model_evidence`` from its method and the
    model's dimension.

    estimator_of: ``estimator_of(path) -> Estimator``, the SMC estimator on a path.
    random_walk: whether its moves are random-walk ones (their evaluations are log densities).
    candidates: the mixture component counts the importance stage tries (empty: no stage).
    stage_of: ``stage_of(path) -> Estimator``, the importance stage that takes the run's
        ``jaxz.run`` result (``nested_importance``; None: the runs are tempered SMC's).
    """

    estimator_of: Callable
    random_walk: bool
    candidates: tuple
    stage_of: Callable | None = None

    @property
    def first_phase(self) -> str:
        return "smc" if self.stage_of is None else "nested"


def pool_body(runs: Estimate, log_densities, gradients):
    """The runs pooled and checked against each other (``jaxz.pooling.pool_runs``) and the
    evaluations summed, in one compiled call (run op by op, these dominate a short call).
    Where the pool is flagged STATUS_RUNS_DISAGREE, so is every run (``jaxz.model_evidence``,
    step 3)."""
    runs, pooled = pool_runs(runs)
    shared = jnp.where(pooled.status & STATUS_RUNS_DISAGREE, STATUS_RUNS_DISAGREE, 0)
    runs = runs._replace(status=(runs.status | shared).astype(jnp.int32))
    return runs, pooled, jnp.sum(log_densities), jnp.sum(gradients)


def run_mesh(num_runs):
    """A mesh named "runs" over the most devices that divide num_runs (None for one)."""
    num_devices = len(jax.devices())
    usable = max(d for d in range(1, num_devices + 1) if num_runs % d == 0)
    return None if usable == 1 else _sharding.mesh(usable, axis="runs")


def smc_run(path, constrain, estimator, num_particles, max_steps, progress, random_walk, key):
    """One run's tempered SMC from base draws: its estimate, evaluations, schedule
    diagnostics, final particles (and their constrained values) and the key of its
    importance stage."""
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
    return dict(estimate=result.estimate, log_densities=log_densities, gradients=gradients,
                num_stages=result.num_steps, min_ess=jnp.min(ess), acceptance=trace.acceptance_rate[last],
                particles=particles, samples=samples, log_weights=state.log_weights, key_stage=key_stage)


def nested_run(path, constrain, estimator, stage, num_particles, max_steps, progress, key):
    """One run's nested SMC from base draws and its importance stage from the levels
    (``jaxz.estimators.nested_importance``), in the outputs of ``smc_run``: ``estimate``
    nested SMC's own, ``refined`` the run's estimate, ``record`` the stage's; the samples are
    the stage's last batch of draws with their weights (the nested run's particles sit
    above its last level, not at the posterior); ``min_ess`` the importance weights' ESS
    over their number."""
    key_base, key_run, key_stage = jax.random.split(key, 3)
    result = run(estimator, key_run, path.sample_base(key_base, num_particles), max_steps=max_steps, progress=progress)
    staged = run(stage, key_stage, result)
    info = jax.tree.map(lambda leaf: leaf[0], staged.trace)  # the stage's one step
    draws, log_weights = staged.state.draws, staged.state.draw_log_weights
    samples = draws if constrain is None else jax.vmap(constrain)(draws)
    num_draws = staged.estimate.cost - result.estimate.cost
    record = (info.importance, info.num_components, info.pareto_k)
    log_densities = staged.state.log_density_evaluations
    return dict(estimate=result.estimate, refined=staged.estimate, record=record, log_densities=log_densities,
                gradients=jnp.zeros_like(log_densities), num_stages=result.num_steps,
                min_ess=(info.ess / num_draws).astype(log_weights.dtype),
                acceptance=result.state.acceptance_rate, particles=draws, samples=samples, log_weights=log_weights,
                key_stage=key_stage)


def stage_run(stage, key, particles, log_weights, estimate):
    """One run's importance stage (``mixture_importance``, one step composed by hand): the
    run's estimate refined by it, the stage's own record and its log-density evaluations."""
    stage_state, info = stage.step(key, stage.init(key, particles, log_weights))
    stage_estimate = stage.finalize(stage_state)
    refined = refine(estimate, (stage_estimate.log_z, stage_estimate.log_z_stderr, stage_estimate.status),
                     info.mismatch)
    status = jnp.where(info.mismatch, stage_estimate.status | STATUS_HEAVY_TAIL, stage_estimate.status)
    record = (stage_estimate._replace(status=status.astype(jnp.int32)), info.num_components, info.pareto_k)
    return refined, record, stage_state.log_density_evaluations


def no_stage(estimates: Estimate):
    """The importance record of runs without an importance stage: nan estimates, 0 components."""
    nan = jnp.full(jnp.shape(estimates.log_z), jnp.nan, estimates.log_z.dtype)
    zeros = jnp.zeros(jnp.shape(estimates.log_z), jnp.int32)
    return Estimate(nan, nan, jnp.zeros_like(estimates.cost), zeros), zeros, nan


def say(progress: bool, message: str) -> None:
    """A line of the call's progress (``progress=True``) on stderr, written with ``tqdm.write``
    so that it lands above an open bar instead of through it; without tqdm,
    ``_progress.tqdm_class`` warns that progress needs it, as ``jaxz.run``'s bar does."""
    tqdm = _progress.tqdm_class() if progress else None
    if tqdm is not None:
        tqdm.write(f"jaxz.evidence: {message}", file=sys.stderr)


# The most particles a batch holds (runs x particles per run, per data set) for its runs to go in
# sequence on CPU (``in_sequence``).
SEQUENCE_MAX_PARTICLES = 2048


def in_sequence(settings) -> bool:
    """Whether the SMC runs (and data sets) of a batch go one after the other (``lax.map``), not
    as one ``vmap``: on CPU, where the runs are not split over devices and no progress bar
    gathers them, for batches of at most ``SEQUENCE_MAX_PARTICLES`` particles (runs x
    particles per run). A vmapped run's while loops are batched by JAX at trace time through
    a fixed-point iteration over their carries, which doubles the SMC program's tracing and
    lowering (benchmarks/results/compile_options.md); in turn, each op's overhead is paid per
    run, and small per-run ops leave XLA's intra-op threads idle. The compile saved is paid
    once, the run time on every call: the sequence serves small batches (the default 8 runs
    x 128 particles), whose runs take about as long either way, and the vmap large ones,
    whose long HMC trajectories ran 4-5x slower in turn (32 runs x 1000 particles,
    benchmarks/results/evidence_suite.md). On GPU and TPU the vmap keeps the device busy."""
    return (jax.default_backend() == "cpu" and not settings.progress and run_mesh(settings.num_runs) is None
            and settings.num_runs * settings.num_particles <= SEQUENCE_MAX_PARTICLES)


def _over(fn, inputs, sequence: bool):
    """``fn`` over the leading axis of ``inputs``: ``lax.map`` where ``sequence``, else vmap."""
    return jax.lax.map(lambda args: fn(*args), inputs) if sequence else jax.vmap(fn)(*inputs)


def programs(prepared, settings, plan: Plan):
    """The call's SMC and importance programs as functions of the model's arrays: the SMC
    runs of their keys, and the importance stage of the runs' particles (None where it does
    not run), each over the runs (and over data sets when batched). The SMC runs (and the
    data sets) go in sequence or vmapped (``in_sequence``); the importance stage's runs are
    always vmapped: its loops have fixed lengths, so the vmap costs little to trace, and its
    many small steps (the mixture's EM, the batches of draws) ran a third faster batched
    over the runs than one run after the other (8 runs x 128 particles on 2 CPU cores)."""
    sequence = in_sequence(settings)

    def over_data(per_run, runs_in_sequence=sequence):
        """``program(arrays, *inputs)``: ``per_run(path, constrain)`` over the runs' inputs,
        on the path built from the arrays (and over data sets)."""
        def one_dataset(arrays, *inputs):
            path, constrain = prepared.build(arrays)
            return _over(per_run(path, constrain), inputs, runs_in_sequence)

        def program(arrays, *inputs):
            return _over(one_dataset, (arrays, *inputs), sequence) if settings.batched else \
                one_dataset(arrays, *inputs)
        return program

    if plan.stage_of is not None:
        return over_data(lambda path, constrain: functools.partial(
            nested_run, path, constrain, plan.estimator_of(path), plan.stage_of(path), settings.num_particles,
            settings.max_steps, settings.progress)), None
    smc_program = over_data(lambda path, constrain: functools.partial(
        smc_run, path, constrain, plan.estimator_of(path), settings.num_particles, settings.max_steps,
        settings.progress, plan.random_walk))
    stage_program = None
    if plan.candidates:
        stage_program = over_data(lambda path, constrain: functools.partial(stage_run, mixture_importance(
            path, num_batches=settings.num_batches, candidates=plan.candidates, pmc_steps=settings.pmc_steps)),
            runs_in_sequence=False)
    return smc_program, stage_program


def keys(rng_key, settings, num_datasets):
    """One key per run ((data sets, runs) when batched), the runs split over devices when
    there are several (not batched)."""
    if num_datasets is not None:
        return jax.random.split(rng_key, num_datasets * settings.num_runs).reshape(num_datasets, settings.num_runs)
    run_keys = jax.random.split(rng_key, settings.num_runs)
    mesh = run_mesh(settings.num_runs)
    return run_keys if mesh is None else _sharding.shard_runs(run_keys, mesh, "runs")


def _pool_program(settings):
    return jax.vmap(pool_body) if settings.batched else pool_body  # one pool per data set when batched


def _lower_beside(settings, cache_key, first, smc_program, stage_program, smc_inputs, with_pool: bool):
    """{phase: ``_cache.Pending``}: the first phase's program (``first``: "smc" or "nested")
    lowered here and compiled in a worker thread; where the runs are not split over devices,
    the importance stage (where one runs) and the pool (``with_pool``) lowered from the output
    shapes of the phases before them while those compile, and compiled beside them."""
    pending = {first: _cache.compile_beside(first, smc_program, smc_inputs, cache_key, settings.optimize)}
    if isinstance(getattr(smc_inputs[1], "sharding", None), jax.sharding.NamedSharding):
        return pending
    shapes = pending[first].out_info
    runs, log_densities = shapes.get("refined", shapes["estimate"]), shapes["log_densities"]
    if stage_program is not None:
        pending["importance"] = _cache.compile_beside(
            "importance", stage_program, (smc_inputs[0], shapes["key_stage"], shapes["particles"],
                                          shapes["log_weights"], shapes["estimate"]), cache_key, settings.optimize)
        runs, _, stage_log_densities = pending["importance"].out_info
        log_densities = jax.eval_shape(jnp.add, log_densities, stage_log_densities)
    if with_pool:
        pending["pool"] = _cache.compile_beside("pool", _pool_program(settings), (runs, log_densities,
                                                                                  shapes["gradients"]),
                                                ("pool", settings.batched), settings.optimize)
    return pending


def _run_phase(settings, name, pending, inputs, compile_now):
    """(outputs, {"compile": s, "run": s}) of one phase: its program from ``pending`` (compiled
    beside: its lowering plus the seconds waited) or from ``compile_now()``, run on ``inputs``."""
    if pending is not None:
        executable, waited = pending.result()
        compile_seconds = pending.lower_seconds + waited
    else:
        executable, compile_seconds = compile_now()
    say(settings.progress, f"{name}: " + (f"compiled ({compile_seconds:.1f} s waited)" if compile_seconds
                                              else "compiled program reused") + ", running")
    start = time.perf_counter()
    outputs = jax.block_until_ready(executable(*inputs))
    seconds = dict(compile=compile_seconds, run=time.perf_counter() - start)
    say(settings.progress, f"{name}: ran in {seconds['run']:.1f} s")
    return outputs, seconds


def execute(prepared, settings, plan: Plan, rng_key, num_datasets, first: bool = True):
    """Compile (or take from the cache) and run the SMC and importance phases: (SMC
    outputs, the runs' estimates after the importance stage, its record, its log-density
    evaluations, phase seconds, and the pool's ``Pending`` program where ``first``).

    A phase's "compile" seconds are its lowering and the seconds the call waited for its
    compile (``_lower_beside``)."""
    smc_program, stage_program = programs(prepared, settings, plan)
    key = _cache.cache_key(prepared, (settings.method, settings.num_particles, settings.importance,
                                      settings.num_batches, settings.pmc_steps, settings.max_steps, settings.progress,
                                      settings.batched, in_sequence(settings)), settings.options)
    smc_inputs = (prepared.arrays, keys(rng_key, settings, num_datasets))
    pending = _lower_beside(settings, key, plan.first_phase, smc_program, stage_program, smc_inputs, first)
    say(settings.progress, "compiling " + " and ".join(pending))
    phases = {}

    def phase(name, inputs):
        outputs, phases[name] = _run_phase(settings, name, pending.get(name), inputs, lambda: _cache.compiled(
            name, stage_program, inputs, key, settings.optimize))
        return outputs

    out = phase(plan.first_phase, smc_inputs)
    batch = dict(out=out, runs=out.pop("refined", out["estimate"]), record=out.pop("record", None),
                 log_densities=out["log_densities"], phases=phases, pool=pending.get("pool"))
    if batch["record"] is None:
        batch["record"] = no_stage(out["estimate"])
    if stage_program is not None:
        runs, record, stage_log_densities = phase(
            "importance", (prepared.arrays, out["key_stage"], out["particles"], out["log_weights"], out["estimate"]))
        batch.update(runs=runs, record=record, log_densities=out["log_densities"] + stage_log_densities)
    return batch


def concatenate(trees, axis: int):
    """Batches of runs joined along the run axis."""
    return trees[0] if len(trees) == 1 else jax.tree.map(lambda *leaves: jnp.concatenate(leaves, axis), *trees)


def _pool(settings, batches):
    """The batches so far pooled (``pool_body``): (runs, pooled, log densities, gradients)
    and the phase's seconds; the first batch's pool compiled beside its phases."""
    inputs = tuple(concatenate(trees, 1 if settings.batched else 0) for trees in zip(
        *[(batch["runs"], batch["log_densities"], batch["out"]["gradients"]) for batch in batches]))
    pending = batches[0]["pool"] if len(batches) == 1 else None
    return _run_phase(settings, "pool", pending, inputs, lambda: _cache.compiled(
        "pool", _pool_program(settings), inputs, ("pool", settings.batched), settings.optimize))


def run_to_target(prepared, settings, plan: Plan, rng_key, num_datasets, max_batches: int):
    """Batches of ``num_runs`` runs (one compiled program, fresh keys) until the pooled s.e.
    reaches ``target_stderr`` on every data set, or the evaluations or seconds allowed would
    be passed by one more batch, or ``max_batches`` ran. The first batch's keys are the
    runs' keys of a call without a target (same bits); later batches draw theirs from a key
    split off beside them. Returns (batches, pooled, runs after pooling, (log densities,
    gradients) summed over runs)."""
    more_key = jax.random.split(rng_key, settings.num_runs + 1)[-1]
    batches, start = [], time.perf_counter()
    while True:
        key = rng_key if not batches else jax.random.fold_in(more_key, len(batches))
        batches.append(execute(prepared, settings, plan, key, num_datasets, first=not batches))
        (runs, pooled, num_log, num_gradients), batches[-1]["phases"]["pool"] = _pool(settings, batches)
        counts = tuple(np.rint(np.asarray(n, np.float64)).astype(np.int64) for n in (num_log, num_gradients))
        if not settings.batched:
            counts = tuple(int(n) for n in counts)
        if settings.target_stderr is None:
            return batches, pooled, runs, counts
        stderr = np.asarray(pooled.log_z_stderr)
        short = np.isfinite(stderr) & (stderr > settings.target_stderr)
        evaluations = np.sum(counts[0]) + np.sum(counts[1])
        per_batch = evaluations / len(batches)
        ran = sum(sum(p["run"] for p in batch["phases"].values()) for batch in batches)
        over = ((settings.max_evaluations is not None and evaluations + per_batch > settings.max_evaluations)
                or (settings.max_seconds is not None
                    and time.perf_counter() - start + ran / len(batches) > settings.max_seconds))
        if not short.any() or over or len(batches) >= max_batches:
            if short.any():
                say(settings.progress, f"stopped at s.e. {float(np.max(stderr[short])):.3g} > target "
                                       f"{settings.target_stderr} after {len(batches)} batches "
                                       f"({'budget' if over else 'max_batches'})")
            return batches, pooled, runs, counts
        say(settings.progress, f"s.e. {float(np.max(stderr[short])):.3g} > target {settings.target_stderr}: "
                               f"another {settings.num_runs} runs")
