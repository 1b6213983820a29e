"""Where ``jaxz.evidence``'s first call spends its time, per phase, under XLA's compile options.

    python benchmarks/compile_options.py [--quick] [--models NAME ...]

Each configuration runs in a fresh process on the models of ``time_to_answer.py`` with
``jaxz.evidence``'s defaults (accuracy target 0.05 nats), a first call (compile included)
and a second call with a new key (the cached programs reused):

- ``optimized``: XLA's default options (``optimize=True``);
- ``level0``: ``xla_backend_optimization_level=0`` (no LLVM passes): the CPU default
  before ``FAST_COMPILE_OPTIONS``;
- ``fast``: ``jaxz._evidence_cache.FAST_COMPILE_OPTIONS`` (level 0 and XLA's loop emitters
  instead of its fusion emitters), the CPU default now;
- ``fast_vmapped``: ``fast`` with the runs of a batch vmapped, the CPU layout before they ran
  in sequence (``jaxz._evidence_run.in_sequence``): JAX batches the runs' while loops at
  trace time, which is what the lowering seconds of this row add.

These four compile the phases one after another, so each phase's seconds are its own:
tracing and lowering (Python), XLA's compile, and the run. A fifth, ``fast_beside``, is the
shipped call (``fast``, with the importance stage and the pool lowered from the output
shapes of the phases before them and compiled at once in worker threads): its first-call
wall time is what a user waits. A sixth, ``disk_cache``, is that call in a new process after another process
made it with JAX's persistent compilation cache on (``jax_compilation_cache_dir``): what a
user who turns it on waits when running a script again. The log Z of the first call is
printed so that one sees which options change its bits.

Writes benchmarks/results/compile_options.{json,md}.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

try:
    from _results import machine, write
except ImportError:  # run from the repository root
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _results import machine, write

CONFIGS = ("optimized", "level0", "fast", "fast_vmapped", "fast_beside", "disk_cache")
QUICK_MODELS = ("beta_bernoulli", "linear_regression", "eight_schools_noncentered")
FULL_MODELS = QUICK_MODELS + ("dirichlet_multinomial", "logistic_breast_cancer")


def _child(config: str, model_name: str) -> dict:
    """One configuration on one model, in this (fresh) process: per-phase seconds of the
    first call, wall seconds of the first and second calls, and their log Z."""
    import jax
    import numpy as np

    import jaxz
    from jaxz import _evidence_cache as cache
    from jaxz import _evidence_run
    from time_to_answer import MODELS

    phases = {}
    if config == "disk_cache":
        jax.config.update("jax_compilation_cache_dir", os.environ["JAXZ_BENCH_CACHE_DIR"])
    elif config != "fast_beside":
        options = dict(optimized=None, level0={"xla_backend_optimization_level": 0},
                       fast=dict(cache.FAST_COMPILE_OPTIONS), fast_vmapped=dict(cache.FAST_COMPILE_OPTIONS))[config]
        if config == "fast_vmapped":
            _evidence_run.in_sequence = lambda settings: False
        cache.compile_options = lambda optimize: options
        beside = cache.compile_beside

        def one_by_one(phase, fn, inputs, key, optimize=True):
            """Compiled before the next phase is lowered, each part timed."""
            pending = beside(phase, fn, inputs, key, optimize)
            _, waited = pending.result()
            if pending.lower_seconds:  # made now, not found in the cache
                phases[phase] = dict(lower=pending.lower_seconds, compile=waited)
            return pending
        cache.compile_beside = one_by_one

    model = MODELS[model_name]
    args = model.data(0)
    exact = float(model.exact(*args))
    calls = []
    for index in range(2):
        start = time.perf_counter()
        result = jaxz.evidence(model.numpyro_model, jax.random.key(index), model_args=args)
        jax.block_until_ready(result.log_z)
        calls.append(dict(wall=time.perf_counter() - start, log_z=float(result.log_z),
                          error=float(result.log_z) - exact, stderr=float(result.log_z_stderr),
                          status=int(result.status), phase_seconds=result.phase_seconds,
                          num_runs=int(np.shape(result.runs.log_z)[0])))
    return dict(config=config, model=model_name, phases=phases, first=calls[0], second=calls[1])


def _run_child(config: str, model_name: str) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--child", config, model_name]
    if config == "disk_cache":
        with tempfile.TemporaryDirectory() as folder:
            environment = dict(os.environ, JAXZ_BENCH_CACHE_DIR=folder)
            filled = _parse(subprocess.run(command, capture_output=True, text=True, check=False, env=environment),
                            config, model_name)
            row = _parse(subprocess.run(command, capture_output=True, text=True, check=False, env=environment),
                         config, model_name)
        row["filling_call"] = filled["first"]
        return row
    return _parse(subprocess.run(command, capture_output=True, text=True, check=False), config, model_name)


def _parse(done, config, model_name) -> dict:
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise RuntimeError(f"{config} on {model_name} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


def markdown(results: dict) -> str:
    rows = ["| model | options | lower s (smc / importance) | XLA compile s (smc / importance) | first call s | "
            "second call s | first-call log Z |", "|---|---|---|---|---|---|---|"]
    for row in results["rows"]:
        phases = row["phases"]
        lower = " / ".join(f"{phases[p]['lower']:.1f}" if p in phases else "-" for p in ("smc", "importance"))
        xla = " / ".join(f"{phases[p]['compile']:.1f}" if p in phases else "-" for p in ("smc", "importance"))
        rows.append(f"| {row['model']} | {row['config']} | {lower if phases else '(beside)'} | "
                    f"{xla if phases else '(beside)'} | {row['first']['wall']:.1f} | {row['second']['wall']:.2f} | "
                    f"{row['first']['log_z']:.10f} |")
    head = (f"# Compile options of jaxz.evidence\n\n`{results['command']}`, {results['machine']['cpu_count']} cores "
            f"(load {results['machine']['load_average_at_start'][0]:.1f} at start, "
            f"{results['machine']['load_average_at_end'][0]:.1f} at end). Each row a fresh process; "
            f"the second call has a new key.\n\n")
    return head + "\n".join(rows) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"models {', '.join(QUICK_MODELS)} (default)")
    parser.add_argument("--full", action="store_true", help=f"models {', '.join(FULL_MODELS)}")
    parser.add_argument("--models", nargs="+")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(*args.child)), flush=True)
        return
    models = args.models or (FULL_MODELS if args.full else QUICK_MODELS)
    command = "python benchmarks/compile_options.py " + " ".join(sys.argv[1:])
    results = dict(command=command.strip(), machine=machine(), rows=[])
    for model_name in models:
        for config in CONFIGS:
            row = _run_child(config, model_name)
            print(f"{model_name} {config}: first {row['first']['wall']:.1f} s, second {row['second']['wall']:.2f} s, "
                  f"log Z {row['first']['log_z']:.8f}", flush=True)
            results["rows"].append(row)
    write(results, "compile_options.json")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "compile_options.md")
    with open(path, "w") as handle:
        handle.write(markdown(results))


if __name__ == "__main__":
    main()
