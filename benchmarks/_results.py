"""What the benchmark scripts share: a description of the machine and the JSON writer."""
import json
import os

from jaxz.provenance import describe


def machine(**extra) -> dict:
    """``jaxz._provenance.describe(**extra)`` (platform, cores, JAX version and backend,
    devices, the jaxz source) with its load average named ``load_average_at_start``."""
    return {("load_average_at_start" if key == "load_average" else key): value
            for key, value in describe(**extra).items()}


def write(results: dict, name: str) -> str:
    """Stamp the load average at the end and write ``results`` to benchmarks/results/``name``."""
    results["machine"]["load_average_at_end"] = list(os.getloadavg())
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", name)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as handle:
        json.dump(results, handle, indent=2)
    print(f"wrote {out}")
    return out
