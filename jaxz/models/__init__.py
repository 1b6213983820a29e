"""Targets with known structure (and, where possible, exact log Z)."""
from jaxz.models import gaussian, gmm10, lgssm, logistic, mixture, nlssm, rbm, rbm_raise, regression, streaming
from jaxz.models import ising

__all__ = ["gaussian", "gmm10", "lgssm", "logistic", "mixture", "nlssm", "rbm", "rbm_raise", "regression", "streaming", "ising"]
