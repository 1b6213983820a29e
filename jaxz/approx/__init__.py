"""Deterministic approximations used as proposals and twisting functions."""
