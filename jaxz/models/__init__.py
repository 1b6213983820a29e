"""Targets with known structure (and, where possible, exact log Z)."""
