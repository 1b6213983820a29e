"""jaxz: JAX-native estimators of normalizing constants.

Every estimator is a pure ``(init, step, finalize)`` triple; ``jaxz.run`` drives one.
"""
from jaxz import data, diagnostics, kernels, models, paths, resampling, schedules, weights
from jaxz.base import (
    STATUS_DEGENERATE,
    STATUS_MAX_STEPS,
    STATUS_NONFINITE,
    STATUS_OK,
    Estimate,
    Estimator,
    Result,
    run,
)
from jaxz.estimators import ais, raise_, smc
from jaxz.estimators import arm
from jaxz.base import SequentialModel
from jaxz.estimators import importance, particle_filter, rejection, sir
from jaxz.estimators import sgais, sgais_stream
from jaxz.estimators import mbar, rts, rts_estimates

__version__ = "0.1.0"

__all__ = [
    "run", "Estimate", "Estimator", "Result",
    "STATUS_OK", "STATUS_NONFINITE", "STATUS_DEGENERATE", "STATUS_MAX_STEPS",
    "weights", "resampling", "schedules", "paths", "kernels", "diagnostics", "models", "data",
    "ais", "raise_", "smc",
    "importance", "sir", "rejection", "particle_filter",
]
