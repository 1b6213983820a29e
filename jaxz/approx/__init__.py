"""Deterministic approximations used as proposals and twisting functions."""
from jaxz.approx.lbp import loopy_bp

__all__ = ["loopy_bp"]
