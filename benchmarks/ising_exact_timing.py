"""How long the exact log Z of the twisted-SMC paper's 16 × 16 periodic Ising models takes
(issue 28 item 5): ``jaxz.models.ising.exact_log_z`` (transfer matrices over the white
sites of a checkerboard) on the three models of ``ising16_lindsten2018.npz``, float64 and
float32, each timed after its compilation, against the values committed in
``paper_repro/out/twisted_ising_exact.json``.

    python benchmarks/ising_exact_timing.py [--models 0 1 2] [--batch-sizes 8 16] [--float32]

``--batch-sizes``: seams per pass to try on model 0 (the fastest is used for the others);
default: the library's default for this backend. Writes
benchmarks/results/ising_exact_timing[_<backend>].json.
"""
import argparse
import json
import os
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxz  # noqa: E402
from jaxz.models import ising  # noqa: E402
from _results import machine, write  # noqa: E402

COMMITTED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "paper_repro", "out",
                         "twisted_ising_exact.json")


def timed(model, batch_size):
    """(log Z, compile seconds, run seconds) of one exact_log_z call."""
    function = jax.jit(lambda m: ising.exact_log_z(m, batch_size=batch_size))
    start = time.perf_counter()
    compiled = function.lower(model).compile()
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    value = float(jax.block_until_ready(compiled(model)))
    return value, compile_seconds, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=None)
    parser.add_argument("--float32", action="store_true", help="also time model 0 in float32")
    parser.add_argument("--crop", type=int, default=16, help="the top-left K x K of the field (a smoke test: K < 16)")
    args = parser.parse_args()
    data = np.load(jaxz.data.shared_file("ising16_lindsten2018.npz"))
    committed = json.load(open(COMMITTED))["exact_log_z"] if os.path.exists(COMMITTED) and args.crop == 16 else None
    field = np.asarray(data["field"])[:args.crop, :args.crop]
    batch_sizes = args.batch_sizes or [ising.default_batch_size()]
    results = dict(machine=machine(), method="checkerboard transfer matrices (ising.exact_log_z)",
                   lattice=[args.crop, args.crop], runs=[])
    def measure(index, dtype, batch_size):
        lattice = ising.periodic_lattice(jnp.asarray(field, dtype), float(data["inverse_temperatures"][index]))
        log_z, compile_seconds, seconds = timed(lattice, batch_size)
        entry = dict(model=index, dtype=jnp.dtype(dtype).name, batch_size=batch_size, log_z=log_z,
                     compile_seconds=compile_seconds, seconds=seconds,
                     committed_log_z=None if committed is None else committed[index])
        results["runs"].append(entry)
        print(entry, flush=True)
        return entry

    best = None
    for index in args.models:
        entries = [measure(index, jnp.float64, batch_size) for batch_size in (batch_sizes if best is None else [best])]
        best = best or min(entries, key=lambda entry: entry["seconds"])["batch_size"]
        if args.float32 and index == args.models[0]:
            measure(index, jnp.float32, best)
    backend = jax.default_backend()
    name = "ising_exact_timing" + ("" if backend == "cpu" else f"_{backend}") + ("" if args.crop == 16 else "_crop")
    write(results, name + ".json")


if __name__ == "__main__":
    main()
