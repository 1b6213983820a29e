"""Tempered MCMC kernels: one transition at a given β for one particle.

Adapters over blackjax (hmc, mala, rwmh, rmhmc, from_blackjax), the generalized leapfrog
that ``rmhmc`` hands to blackjax, and what blackjax lacks (slice-within-Gibbs,
Metropolis-within-Gibbs, Gibbs for discrete states);
``hmc``, ``mala`` and ``rwmh`` without a step size tune themselves inside ``smc`` and ``ais``.
"""
from jaxz.kernels import tuning
from jaxz.kernels.base import (
    Kernel,
    KernelInfo,
    KernelState,
    Population,
    from_transition,
    repeat,
    tempered_log_density,
)
from jaxz.kernels.gibbs import checkerboard, gibbs
from jaxz.kernels.gradient import from_blackjax, hmc, mala, rmhmc, rwmh
from jaxz.kernels.riemannian import generalized_leapfrog
from jaxz.kernels.slice import metropolis_within_gibbs, slice
from jaxz.kernels.tempered_hmc import tempered_hmc
from jaxz.kernels.tuning import TunedParameters

__all__ = [
    "Kernel", "KernelInfo", "KernelState", "Population", "TunedParameters", "tuning", "from_blackjax",
    "from_transition", "repeat", "tempered_log_density",
    "hmc", "mala", "rmhmc", "generalized_leapfrog", "rwmh", "gibbs", "checkerboard", "slice",
    "metropolis_within_gibbs", "tempered_hmc",
]
