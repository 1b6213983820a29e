"""Deterministic approximations used as proposals and twisting functions.

``approx`` imports models' types but no estimator: each result has ``.log_z`` and is
handed to a model's ``sequential_model(model, twist=result)`` (or, for ``gpc_ep``, used
as the base q of an annealing path).
"""
from jaxz.approx.gpc_ep import gpc_ep
from jaxz.approx.laplace import LaplaceApproximation, laplace
from jaxz.approx.lbp import loopy_bp
from jaxz.approx.lda_ep import LDAEPResult, lda_ep

__all__ = ["gpc_ep", "laplace", "LaplaceApproximation", "lda_ep", "LDAEPResult", "loopy_bp"]
