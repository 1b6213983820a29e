"""Deterministic approximations used as proposals and twisting functions."""
from jaxz.approx.lda_ep import LDAEPResult, lda_ep

__all__ = ["lda_ep", "LDAEPResult"]
