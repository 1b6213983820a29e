"""Targets with known structure (and, where possible, exact log Z)."""
from jaxz.models import gaussian, lgssm, logistic, mixture, nlssm, regression
from jaxz.models import streaming
from jaxz.models import gmm10
from jaxz.models import rbm
from jaxz.models import rbm_raise
