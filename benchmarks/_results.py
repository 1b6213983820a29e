"""What the benchmark scripts share: a description of the machine and the JSON writer."""
import json
import os
import platform

import jax


def machine(**extra) -> dict:
    """Platform, cores, JAX version and backend, devices, load average at the start."""
    return dict(platform=platform.platform(), cpu_count=os.cpu_count(), jax=jax.__version__,
                backend=jax.default_backend(), devices=[str(d) for d in jax.devices()],
                device_kind=jax.devices()[0].device_kind,
                load_average_at_start=list(os.getloadavg()), **extra)


def write(results: dict, name: str) -> str:
    """Stamp the load average at the end and write ``results`` to benchmarks/results/``name``."""
    results["machine"]["load_average_at_end"] = list(os.getloadavg())
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", name)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as handle:
        json.dump(results, handle, indent=2)
    print(f"wrote {out}")
    return out
