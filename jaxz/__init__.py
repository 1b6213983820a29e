"""jaxz: JAX-native estimators of normalizing constants.

Every estimator is a pure ``(init, step, finalize)`` triple; ``jaxz.run`` drives one.
"""
import importlib

from jaxz import reduction
from jaxz import data, diagnostics, kernels, numpyro, paths, plot, posterior, resampling, schedules, sharding, weights
from jaxz.sharding import shard_particles, shard_runs
from jaxz.base import (
    STATUS_DEGENERATE,
    STATUS_LOW_ESS,
    STATUS_MAX_STEPS,
    STATUS_NONFINITE,
    STATUS_OK,
    STATUS_PRECISION_LOSS,
    STATUS_STDERR_UNRESOLVED,
    STATUS_FEW_PARTICLES,
    STATUS_HEAVY_TAIL,
    STATUS_RUNS_DISAGREE,
    STATUS_STUCK,
    STATUS_FEW_CHAINS,
    STATUS_COLLAPSED,
    STATUS_PLATEAU,
    status_names,
    Estimate,
    Estimator,
    Result,
    SequentialGraphModel,
    SequentialModel,
    run,
)
from jaxz.pooling import combine_runs
from jaxz.estimators.ais import ais, raise_
from jaxz.estimators.arm import arm
from jaxz.estimators.importance import importance, sir
from jaxz.estimators.mbar import mbar
from jaxz.estimators.mixture_importance import mixture_importance
from jaxz.estimators.particle_filter import particle_filter
from jaxz.estimators.rejection import rejection
from jaxz.estimators.rts import rts, rts_estimates
from jaxz.estimators.sgais import sgais
from jaxz.estimators.sgais import sgais_defaults
from jaxz.estimators.sgais import stream as sgais_stream
from jaxz.estimators.smc import smc
from jaxz.estimators.twisted import twisted_smc
from jaxz.model_evidence import Evidence, evidence
from jaxz.pooling import pool_runs, runs_disagree

__version__ = "0.1.0"

_LAZY = ("approx", "models", "provenance")  # loaded on first use: the estimators need none of them


def __getattr__(name):
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "run", "combine_runs", "Estimate", "Estimator", "Result", "SequentialModel", "SequentialGraphModel",
    "STATUS_OK", "STATUS_NONFINITE", "STATUS_DEGENERATE", "STATUS_MAX_STEPS", "STATUS_LOW_ESS", "STATUS_PRECISION_LOSS",
    "STATUS_STDERR_UNRESOLVED", "STATUS_FEW_PARTICLES", "STATUS_HEAVY_TAIL", "STATUS_RUNS_DISAGREE", "STATUS_STUCK",
    "STATUS_FEW_CHAINS", "STATUS_COLLAPSED", "STATUS_PLATEAU", "status_names", "reduction",
    "weights", "resampling", "schedules", "paths", "kernels", "diagnostics", "models", "approx", "data", "plot",
    "sharding", "shard_particles", "shard_runs",
    "importance", "sir", "rejection", "ais", "raise_", "smc", "particle_filter",
    "twisted_smc", "arm", "rts", "rts_estimates", "mbar", "sgais", "sgais_stream", "sgais_defaults",
    "mixture_importance", "pool_runs", "runs_disagree",
    "evidence", "Evidence", "numpyro", "posterior",
]
