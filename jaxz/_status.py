"""The status bit flags of ``jaxz.Estimate.status`` (re-exported as ``jaxz.STATUS_*`` and
from ``jaxz.base``). A module of their own so that ``jaxz.weights`` can raise them without
importing the estimator contract, and ``jaxz.base`` can import ``jaxz.weights``."""

STATUS_OK = 0
STATUS_NONFINITE = 1  # a non-finite density was met and given zero weight
STATUS_DEGENERATE = 2  # every weight vanished: log_z = -inf
STATUS_MAX_STEPS = 4  # an adaptive loop hit its cap before finishing
STATUS_LOW_ESS = 8  # too few effective particles, a collapsed genealogy, or chains that never moved
STATUS_PRECISION_LOSS = 16  # log densities so large that their differences lost all precision in this dtype
# The run's own standard error could not be resolved: nan where its genealogy estimate of the
# variance was negative or below that estimate's own noise; finite but not vouched for where that
# noise drowned the variance the weights show step by step (jaxz.estimators._genealogy.drowned;
# jaxz.combine_runs pools it on the scale of Ẑ², where it is unbiased). log Ẑ itself is not in doubt;
# pool runs with jaxz.combine_runs for an error bar (the pooled result does not carry this bit).
STATUS_STDERR_UNRESOLVED = 32
