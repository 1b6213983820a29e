"""Deterministic approximations used as proposals and twisting functions."""
from jaxz.approx.gpc_ep import gpc_ep

__all__ = ["gpc_ep"]
