"""The status bit flags of ``jaxz.Estimate.status`` (re-exported as ``jaxz.STATUS_*`` and
from ``jaxz.base``). A module of their own so that ``jaxz.weights`` can raise them without
importing the estimator contract, and ``jaxz.base`` can import ``jaxz.weights``."""

STATUS_OK = 0
STATUS_NONFINITE = 1  # a non-finite density was met and given zero weight
STATUS_DEGENERATE = 2  # every weight vanished: log_z = -inf
STATUS_MAX_STEPS = 4  # an adaptive loop hit its cap before finishing
# The causes of a low effective sample size, one bit each (each names the check behind it;
# docs/error-bars.md lists them). STATUS_LOW_ESS is their mask: `status & STATUS_LOW_ESS`
# reads "one of them fired", as it did when they were one bit.
STATUS_FEW_PARTICLES = 8  # a reweighting (or the final weights) left fewer than 2 effective particles
STATUS_PRECISION_LOSS = 16  # log densities so large that their differences lost all precision in this dtype
# The run's own standard error could not be resolved: nan where its genealogy estimate of the
# variance was negative or below that estimate's own noise; finite but not vouched for where that
# noise drowned the variance the weights show step by step (jaxz.estimators._genealogy.drowned;
# jaxz.combine_runs pools it on the scale of Ẑ², where it is unbiased). log Ẑ itself is not in doubt;
# pool runs with jaxz.combine_runs for an error bar (the pooled result does not carry this bit).
STATUS_STDERR_UNRESOLVED = 32
STATUS_HEAVY_TAIL = 64  # the importance weights' tail (Pareto k̂) is too heavy for their mean to be trusted
STATUS_RUNS_DISAGREE = 128  # independent estimates (runs, or a run's two stages) disagree beyond their error bars
STATUS_STUCK = 256  # the moves stopped moving (acceptance ~0, particles or chains left where they were)
STATUS_FEW_CHAINS = 512  # too few chains, or chains that did not mix, for the variance estimate
STATUS_COLLAPSED = 1024  # the genealogy collapsed: the particles descend from fewer than 2 effective ancestors
# Every particle a run weighed had the same target density (a likelihood constant on all of them): the
# run's s.e. of 0 says nothing, as a region of prior mass below about 1/N (a plateau's top) is unseen.
STATUS_PLATEAU = 2048
STATUS_LOW_ESS = (STATUS_FEW_PARTICLES | STATUS_HEAVY_TAIL | STATUS_RUNS_DISAGREE | STATUS_STUCK
                  | STATUS_FEW_CHAINS | STATUS_COLLAPSED)

STATUS_NAMES = {
    STATUS_NONFINITE: "NONFINITE", STATUS_DEGENERATE: "DEGENERATE", STATUS_MAX_STEPS: "MAX_STEPS",
    STATUS_FEW_PARTICLES: "FEW_PARTICLES", STATUS_PRECISION_LOSS: "PRECISION_LOSS",
    STATUS_STDERR_UNRESOLVED: "STDERR_UNRESOLVED", STATUS_HEAVY_TAIL: "HEAVY_TAIL",
    STATUS_RUNS_DISAGREE: "RUNS_DISAGREE", STATUS_STUCK: "STUCK", STATUS_FEW_CHAINS: "FEW_CHAINS",
    STATUS_COLLAPSED: "COLLAPSED", STATUS_PLATEAU: "PLATEAU",
}


def status_names(status) -> tuple:
    """The names of the bits set in one status (an int or a scalar array), in bit order:
    ``status_names(0) == ()``, ``status_names(8 | 4) == ("MAX_STEPS", "FEW_PARTICLES")``.
    The names are those of ``jaxz.STATUS_*`` without the prefix."""
    import numpy as np  # noqa: PLC0415 (kept out of the import of the flags themselves)

    value = np.asarray(status)
    if value.shape != () or value.dtype.kind not in "iub":
        raise ValueError(f"status must be one integer status (a scalar), got {value.dtype} of shape {value.shape}; "
                         "map status_names over an array of them")
    value = int(value)
    if value < 0:
        raise ValueError(f"status must be >= 0 (a set of bit flags), got {value}")
    unknown = value & ~sum(STATUS_NAMES)
    names = tuple(name for bit, name in sorted(STATUS_NAMES.items()) if value & bit)
    return names + ((f"UNKNOWN({unknown})",) if unknown else ())
