"""Targets with known structure (and, where possible, exact log Z)."""
from jaxz.models import gaussian, gmm10, gpc, lgssm, logistic, mixture, nlssm, rbm, rbm_raise, regression, streaming

__all__ = ["gaussian", "gmm10", "gpc", "lgssm", "logistic", "mixture", "nlssm", "rbm", "rbm_raise", "regression", "streaming"]
