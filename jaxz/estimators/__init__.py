"""Estimators of normalizing constants, one file per family."""
from jaxz.estimators.ais import ais, raise_
from jaxz.estimators.arm import arm
from jaxz.estimators.importance import importance, sir
from jaxz.estimators.mbar import mbar
from jaxz.estimators.particle_filter import particle_filter
from jaxz.estimators.rejection import rejection
from jaxz.estimators.rts import rts, rts_estimates
from jaxz.estimators.sgais import sgais, sgais_defaults
from jaxz.estimators.sgais import stream as sgais_stream
from jaxz.estimators.smc import smc
from jaxz.estimators.twisted import twisted_smc

__all__ = [
    "importance", "sir", "rejection", "ais", "raise_", "smc", "particle_filter", "twisted_smc",
    "arm", "rts", "rts_estimates", "mbar", "sgais", "sgais_stream", "sgais_defaults",
]
