"""Estimators of normalizing constants, one file per family."""
from jaxz.estimators.ais import ais, raise_
from jaxz.estimators.smc import smc
from jaxz.estimators.arm import arm
from jaxz.estimators.importance import importance, sir
from jaxz.estimators.rejection import rejection
from jaxz.estimators.particle_filter import particle_filter

__all__ = ["ais", "raise_", "smc"]
__all__ += ["importance", "sir", "rejection", "particle_filter"]
from jaxz.estimators.sgais import sgais, stream as sgais_stream
from jaxz.estimators.rts import rts, rts_estimates
from jaxz.estimators.mbar import mbar
