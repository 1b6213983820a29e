"""The compiled programs behind ``jaxz.evidence`` and the cache that keeps them.

A call of ``jaxz.evidence`` compiles its phases (the SMC runs, the importance stage) as
functions of the run keys and of the model's array arguments (``Target.arrays``), so a
second call with a new key, or with new data of the same shapes and dtypes, reuses the
compiled programs. What a program bakes in as constants (arrays the model reads from a
global or a closure, Python numbers among its arguments, a Path's functions) is read off
a trace of the model (``fingerprint``): a call in which any of them changed compiles anew
instead of reusing a program built for other data.
"""
import collections
import concurrent.futures
import hashlib
import threading
import time
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz.paths import Path

CACHE_SIZE = 32  # compiled programs kept (each holds its executable's memory)
_COMPILED: "collections.OrderedDict" = collections.OrderedDict()  # full key -> (executable, out_info)
_LOCK = threading.Lock()  # the cache is written from the compiling threads too
_WORKERS = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="jaxz-compile")

# A model that reads its data's values in Python (``if y.sum() > 0``, ``int(n)``) cannot take them as traced
# arguments: these are the errors JAX raises then.
CONCRETE_ERRORS = (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
                   jax.errors.TracerIntegerConversionError, jax.errors.TracerBoolConversionError)


class Target(NamedTuple):
    """How the programs see the model.

    build: ``build(arrays) -> (path, constrain)``, the path of the model on those arrays.
    arrays: the model's array arguments, passed to every program (empty when baked in).
    fingerprint: a hash of what the programs bake in as constants (``fingerprint``).
    mode: "arguments" (data are arguments), "baked" (compiled in) or "path" (a Path target).
    """

    build: Callable
    arrays: list
    fingerprint: str
    mode: str


def split_arguments(model_args, model_kwargs):
    """(arrays, rebuild): the model's array arguments and ``rebuild(arrays) -> (model_args,
    model_kwargs)``, which puts (traced) arrays back among the other arguments."""
    leaves, treedef = jax.tree.flatten((tuple(model_args), dict(model_kwargs or {})))
    is_array = [isinstance(leaf, (np.ndarray, jax.Array)) for leaf in leaves]
    arrays = [leaf for leaf, array in zip(leaves, is_array) if array]

    def rebuild(traced):
        values = iter(traced)
        return jax.tree.unflatten(treedef, [next(values) if array else leaf for leaf, array in zip(leaves, is_array)])

    return arrays, rebuild


def fingerprint(build: Callable, arrays) -> str:
    """A hash of the model's computation and of every constant it closes over.

    Traces ``build(arrays)``'s base draws, log density (β traced) and ``constrain`` to a
    jaxpr: its text names the operations, shapes and literal numbers, its constants are the
    arrays read from globals and closures (hashed by value)."""
    def probe(key, beta, arrays):
        path, constrain = build(arrays)
        draws = path.sample_base(key, 2)
        outputs = (jax.vmap(path.log_density, (0, None))(draws, beta), path.log_z0, path.affine)
        return outputs if constrain is None else outputs + (jax.vmap(constrain)(draws),)

    beta = jnp.asarray(0.5, jnp.result_type(float))
    closed = jax.make_jaxpr(probe)(jax.random.PRNGKey(0), beta, arrays)
    digest = hashlib.blake2b(str(closed.jaxpr).encode(), digest_size=20)
    digest.update(str(closed.out_avals).encode())
    for constant in closed.consts:
        if jax.dtypes.issubdtype(getattr(constant, "dtype", np.float32), jax.dtypes.prng_key):
            constant = jax.random.key_data(constant)
        value = np.asarray(constant)
        digest.update(f"{value.dtype}{value.shape}".encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    return digest.hexdigest()


def prepare(target, model_args, model_kwargs, resolve: Callable, jit_model_args, batched: bool) -> Target:
    """The model as the programs see it: data as arguments where the model can trace them
    (``jit_model_args`` None or True), else baked in (False, or None and a model that reads
    its data's values in Python). ``batched``: the arrays carry a leading data-set axis."""
    if isinstance(target, Path):  # its data live in its functions
        def build_path(arrays):
            return resolve(target, (), None)
        return Target(build_path, [], fingerprint(build_path, []), "path")
    arrays, rebuild = split_arguments(model_args, model_kwargs)

    def build(traced):
        return resolve(target, *rebuild(traced))

    if jit_model_args is not False:
        probe_arrays = [array[0] for array in arrays] if batched else arrays
        try:
            return Target(build, arrays, fingerprint(build, probe_arrays), "arguments")
        except CONCRETE_ERRORS as error:
            if jit_model_args or batched:
                what = "batched=True" if batched else "jit_model_args=True"
                raise ValueError(f"{what} passes the model's arrays as traced arguments, and the model reads "
                                 f"their values in Python ({type(error).__name__}): use jnp operations on them, "
                                 f"or jit_model_args=False to compile them in") from error

    def build_baked(unused):
        return resolve(target, model_args, model_kwargs)

    return Target(build_baked, [], fingerprint(build_baked, []), "baked")


def _aval(x):
    return (tuple(np.shape(x)), str(x.dtype), bool(getattr(x, "weak_type", False)),
            str(getattr(x, "sharding", None)))


def cache_key(target: Target, settings: tuple, options: dict):
    """What the compiled programs depend on besides their inputs' shapes: the model's
    fingerprint, the settings and options, the float width in force; None where an option
    cannot be hashed (the call then compiles without the cache)."""
    key = (target.fingerprint, target.mode, tuple(settings), tuple(sorted(options.items())),
           str(jnp.result_type(float)))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def optimize_by_default() -> bool:
    """Whether XLA optimizes the compiled programs by default: not on CPU, where its LLVM
    passes take about half of the compile time and save less run time than they cost on
    the models a call compiles for (``jaxz.evidence``'s ``optimize``); on GPU and TPU yes."""
    return jax.default_backend() != "cpu"


# XLA options of an unoptimized compile (``optimize=False``, the CPU default): no LLVM backend passes, and XLA's
# loop emitters instead of its fusion emitters, which on CPU take about half of what is left of the compile time;
# the runs take somewhat longer than at level 0 alone, and several times longer than XLA-optimized ones
# (benchmarks/results/compile_options.md).
FAST_COMPILE_OPTIONS = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}


def compile_options(optimize: bool) -> dict | None:
    """The XLA options of a compile: None (XLA's defaults) where ``optimize``, else
    ``FAST_COMPILE_OPTIONS`` (the CPU-only option dropped on other backends)."""
    if optimize:
        return None
    if jax.default_backend() == "cpu":
        return dict(FAST_COMPILE_OPTIONS)
    return {"xla_backend_optimization_level": 0}


def _full_key(phase, key, optimize, inputs):
    return None if key is None else (phase, key, optimize, tuple(_aval(x) for x in jax.tree.leaves(inputs)))


def _abstract(out_info):
    """The outputs' shapes, dtypes and weak types (the sharding and layout dropped), so a
    later phase's cache key is the same whether they came from a lowering or a cached program."""
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=x.weak_type), out_info)


def _compile(lowered, optimize: bool):
    options = compile_options(optimize)
    try:
        return lowered.compile(options)
    except Exception as error:  # noqa: BLE001 (XlaRuntimeError or JaxRuntimeError by jaxlib version): a jaxlib
        # without the fusion-emitter option
        if options is None or "No such compile option" not in str(error):
            raise
        return lowered.compile({"xla_backend_optimization_level": 0})


def _keep(full, executable, out_info):
    if full is not None:
        with _LOCK:
            _COMPILED[full] = (executable, out_info)
            while len(_COMPILED) > CACHE_SIZE:
                _COMPILED.popitem(last=False)


def _cached(full):
    with _LOCK:
        if full is not None and full in _COMPILED:
            _COMPILED.move_to_end(full)
            return _COMPILED[full]
    return None


def compiled(phase: str, fn: Callable, inputs: tuple, key, optimize: bool = True) -> tuple[Any, float]:
    """(executable, seconds spent compiling): ``jax.jit(fn)`` compiled for ``inputs`` (with
    XLA's optimizations where ``optimize``, else with ``compile_options(False)``), or the one
    compiled before for the same phase, key and input shapes (0 seconds)."""
    full = _full_key(phase, key, optimize, inputs)
    hit = _cached(full)
    if hit is not None:
        return hit[0], 0.0
    start = time.perf_counter()
    lowered = jax.jit(fn).lower(*inputs)
    executable = _compile(lowered, optimize)
    _keep(full, executable, _abstract(lowered.out_info))
    return executable, time.perf_counter() - start


class Pending(NamedTuple):
    """A program being compiled in a worker thread (``compile_beside``).

    out_info: its outputs' shapes and dtypes (``jax.ShapeDtypeStruct``), known once lowered.
    lower_seconds: the seconds its tracing and lowering took in the calling thread.
    """

    future: concurrent.futures.Future
    out_info: Any
    lower_seconds: float

    def result(self) -> tuple[Any, float]:
        """(executable, seconds the caller waits for it now); 0 where it is ready."""
        if self.future.done():
            return self.future.result(), 0.0
        start = time.perf_counter()
        executable = self.future.result()
        return executable, time.perf_counter() - start


def compile_beside(phase: str, fn: Callable, inputs: tuple, key, optimize: bool = True) -> Pending:
    """Lower ``jax.jit(fn)`` for ``inputs`` (concrete or ``jax.ShapeDtypeStruct``) here and
    compile it in a worker thread: XLA's compile releases Python's lock, so the caller can
    trace and lower the next phase, or compile it, meanwhile. A cached program (same phase,
    key and input shapes as in ``compiled``) comes back ready."""
    full = _full_key(phase, key, optimize, inputs)
    hit = _cached(full)
    future = concurrent.futures.Future()
    if hit is not None:
        future.set_result(hit[0])
        return Pending(future, hit[1], 0.0)
    start = time.perf_counter()
    lowered = jax.jit(fn).lower(*inputs)
    out_info = _abstract(lowered.out_info)
    lower_seconds = time.perf_counter() - start

    def work():
        executable = _compile(lowered, optimize)
        _keep(full, executable, out_info)
        return executable
    return Pending(_WORKERS.submit(work), out_info, lower_seconds)


def clear() -> None:
    """Forget every compiled program (the next call compiles anew)."""
    with _LOCK:
        _COMPILED.clear()
