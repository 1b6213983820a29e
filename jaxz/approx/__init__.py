"""Deterministic approximations used as proposals and twisting functions."""
from jaxz.approx.laplace import LaplaceApproximation, laplace

__all__ = ["laplace", "LaplaceApproximation"]
