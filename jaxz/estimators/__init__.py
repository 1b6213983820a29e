"""Estimators of normalizing constants, one file per family."""
from jaxz.estimators.ais import ais, raise_
from jaxz.estimators.smc import smc

__all__ = ["ais", "raise_", "smc"]
from jaxz.estimators.sgais import sgais, stream as sgais_stream
