"""Deterministic approximations used as proposals and twisting functions.

``approx`` imports models' types but no estimator: each result has ``.log_z`` and is
handed to a model's ``sequential_model(model, twist=result)`` (or, for ``gpc_ep``, used
as the base q of an annealing path).

The submodules load on first use (PEP 562): ``jaxz.approx.mixture``, which the
estimators use, does not load ``jaxz.models`` with the approximations that need it.
"""
import importlib
import sys
import types

# public name -> the submodule that defines it
_EXPORTS = {
    "gpc_ep": "gpc_ep",
    "laplace": "laplace",
    "LaplaceApproximation": "laplace",
    "lda_ep": "lda_ep",
    "LDAEPResult": "lda_ep",
    "loopy_bp": "lbp",
}
_SUBMODULES = ("gpc_ep", "laplace", "lbp", "lda_ep", "mixture")
# submodules that define a function of their own name: jaxz.approx.<name> is the function
_SHADOWED = ("gpc_ep", "laplace", "lda_ep")


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        setattr(sys.modules[__name__], name, value)  # later reads find it without this hook
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(_SUBMODULES))


class _Package(types.ModuleType):
    """The import system binds a loaded submodule as an attribute of its package: for
    ``gpc_ep``, ``laplace`` and ``lda_ep`` (``from jaxz.approx.laplace import ...`` before
    any use of ``jaxz.approx.laplace``) bind the function of that name instead, as the
    eager ``from jaxz.approx.laplace import laplace`` did."""

    def __setattr__(self, name, value):
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = ["gpc_ep", "laplace", "LaplaceApproximation", "lda_ep", "LDAEPResult", "loopy_bp"]
