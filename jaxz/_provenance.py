"""The former name of ``jaxz.provenance``, kept so that scripts importing it still run."""
from jaxz.provenance import describe, source  # noqa: F401

__all__ = ["describe", "source"]
