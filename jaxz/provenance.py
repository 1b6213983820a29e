"""Where a committed result came from: the machine it ran on and the jaxz source it ran.

The benchmark and paper_repro scripts stamp their JSON with ``describe()``, so a reader
can tell an output made by today's estimators from one that predates a change to them
(``benchmarks/stale_outputs.py`` lists the outputs older than the modules they rest on).
"""
import os
import platform
import subprocess

import jax

import jaxz


def source() -> dict:
    """The jaxz commit that is imported (``git rev-parse HEAD`` of the checkout holding
    the package) and whether ``jaxz/`` differs from it (``git status --porcelain``), or
    None for each where jaxz is not a git checkout (an installed wheel) or git is missing."""
    package = os.path.dirname(os.path.abspath(jaxz.__file__))

    def git(*args):
        try:
            done = subprocess.run(["git", "-C", package, *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--", ".") if commit else None
    return {"jaxz_version": jaxz.__version__, "jaxz_commit": commit,
            "jaxz_modified": None if status is None else bool(status)}


def describe(**extra) -> dict:
    """Platform, cores, JAX version and backend, devices, the load average now, and the
    jaxz source (``source``); ``extra`` is added as given."""
    devices = jax.devices()
    return dict(platform=platform.platform(), cpu_count=os.cpu_count(), jax=jax.__version__,
                backend=jax.default_backend(), devices=[str(d) for d in devices],
                device_kind=devices[0].device_kind, load_average=list(os.getloadavg()),
                **source(), **extra)
