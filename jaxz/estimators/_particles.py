"""Mechanics shared by the particle estimators: log densities over the particles,
reweighting with nan/inf handling and its precision check, resampling of whole pytrees,
the error bars and status flags of a run (argument checks are in ``jaxz._checks``). Moving particles with a kernel
is in ``jaxz.estimators._moves``; what importance-type weights can vouch for (their s.e.
and its STATUS_FEW_PARTICLES / STATUS_HEAVY_TAIL) in ``jaxz.estimators._weight_checks``."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks
from jaxz import resampling as _resampling
from jaxz import weights as _weights
from jaxz.estimators import _genealogy
from jaxz.estimators._weight_checks import MIN_EFFECTIVE_PARTICLES, importance_stderr, low_ess_status
from jaxz.base import (
    STATUS_DEGENERATE,
    STATUS_COLLAPSED,
    STATUS_FEW_PARTICLES,
    STATUS_NONFINITE,
    STATUS_OK,
    STATUS_PRECISION_LOSS,
    STATUS_STDERR_UNRESOLVED,
    Estimate,
)
from jaxz.kernels.base import KernelState


def num_particles_of(positions, name: str = "positions", axis: str = "particle") -> int:
    """The size of the common leading axis of every leaf of ``positions`` (the particle
    axis; ``axis`` names it in errors, e.g. "observation" for a data set)."""
    leaves = jax.tree.leaves(positions)
    if not leaves:
        raise ValueError(f"{name} must be a non-empty pytree of arrays")
    sizes = {np.shape(leaf)[0] if np.ndim(leaf) > 0 else None for leaf in leaves}
    if None in sizes:  # a scalar: often a particle count passed where positions are expected
        scalar = next(leaf for leaf in leaves if np.ndim(leaf) == 0)
        shown = "" if isinstance(scalar, jax.core.Tracer) else f" {scalar!r}"
        hint = ", e.g. path.sample_base(key, n) for n draws of the base" if axis == "particle" else ""
        raise ValueError(f"{name} must be an array (or pytree of arrays) with a leading ({axis}) axis, got the "
                         f"scalar{shown}: pass the {axis}s themselves{hint}, not their number")
    if len(sizes) != 1:
        raise ValueError(f"{name} must have one common leading ({axis}) axis, got leading sizes {sizes}")
    (size,) = sizes
    if size == 0:
        raise ValueError(f"{name} must hold at least one {axis}, got 0")
    return size


# Argument checks live in jaxz._checks; the estimators call them under these names too.
check_fraction = _checks.fraction
check_batch_size = _checks.batch_size
check_path = _checks.path
check_scalar_function = _checks.scalar_function
check_count = _checks.integer  # a positive integer argument (particle or sample count)


def over_particles(fn, batched, batch_size=None):
    """``fn`` applied to every particle of ``batched`` (a pytree with a leading particle
    axis): one ``vmap`` over all N, or with ``batch_size`` a ``lax.map`` over chunks of
    that many particles, so that the working memory of ``fn`` (a gradient, a
    data-sized intermediate) is held for one chunk at a time, not for all N."""
    if batch_size is None:
        return jax.vmap(fn)(batched)
    return jax.lax.map(fn, batched, batch_size=batch_size)


def constrain(tree, sharding):
    """Every leaf of ``tree`` laid out with ``sharding`` (a ``jax.sharding.Sharding`` of
    the leading particle axis), or ``tree`` unchanged for None: how estimators that
    create their particles inside ``init`` let a user spread them over devices."""
    if sharding is None:
        return tree
    return jax.tree.map(lambda leaf: jax.lax.with_sharding_constraint(leaf, sharding), tree)


def log_densities(path, positions, beta, batch_size=None):
    """log f_β at every particle (vmapped over the leading axis, or in chunks)."""
    return over_particles(lambda x: path.log_density(x, beta), positions, batch_size)


# An increment is a difference of two log densities; each carries a rounding error of
# about eps·|log f|. Past this many nats the weights are noise (e.g. float32 densities
# near 1e6), and the run is flagged STATUS_PRECISION_LOSS.
PRECISION_TOLERANCE = 0.1


def log_density_reader(path, positions, batch_size=None):
    """β -> log f_β at every particle. On an affine path (``Path.affine``: log f_β =
    (1 − β) log f_0 + β log f_1) f_0 and f_1 are evaluated here, once per particle, and
    any β is read off the line between them, so an adaptive schedule's bisection and its
    reweighting cost two evaluations per particle instead of one per trial β. The ends
    are returned exactly at β = 0 and 1; where either end is −inf, f_β is −inf between."""
    if not getattr(path, "affine", False):
        return lambda beta: log_densities(path, positions, beta, batch_size)
    log_start = log_densities(path, positions, 0.0, batch_size)
    log_end = log_densities(path, positions, 1.0, batch_size)
    vanishes = jnp.isneginf(log_start) | jnp.isneginf(log_end)
    slope = jnp.where(vanishes, 0.0, log_end - log_start)

    def read(beta):
        between = jnp.where(vanishes, -jnp.inf, log_start + beta * slope)
        return jnp.where(beta == 0.0, log_start, jnp.where(beta == 1.0, log_end, between))

    return read


def lost_support_status(log_later, log_earlier):
    """STATUS_NONFINITE where a particle that carries mass at a later point of the path
    (``log_later`` finite: its log f_β, or its log weight) has f_β' = 0 at an earlier one
    (``log_earlier`` = −inf, β' < β): f_β' does not cover f_β, so a forward weight f_β/f_β'
    drawn from f_β' never sees that mass and Ẑ is biased low however many particles.
    (RAISE, going down, is not affected: its weights are drawn from the larger support.)"""
    lost = jnp.any(jnp.isfinite(log_later) & jnp.isneginf(log_earlier))
    return jnp.where(lost, STATUS_NONFINITE, 0).astype(jnp.int32)


def incremental_log_weights(path, positions, beta_from, beta_to, batch_size=None, log_from=None, read=None):
    """log f_{β_to}(x_i) − log f_{β_from}(x_i), sanitized: nan → −inf, with a status
    (STATUS_NONFINITE for a nan, STATUS_PRECISION_LOSS when the densities are too large
    in magnitude for their difference to be resolved in their dtype). ``log_from``: the
    log f_{β_from}(x_i) if already evaluated (a bisection over β_to reuses them);
    ``read``: a ``log_density_reader`` of these particles, used instead of the path."""
    log_to = read(beta_to) if read is not None else log_densities(path, positions, beta_to, batch_size)
    if log_from is None:
        log_from = read(beta_from) if read is not None else log_densities(path, positions, beta_from, batch_size)
    increments, status = _weights.sanitize(log_to - log_from)
    return increments, status | precision_status(log_to, log_from, log_weights=increments)


def precision_status(*log_values, log_weights=None):
    """STATUS_PRECISION_LOSS when the rounding error of the log densities, eps · Σ|log f|
    per particle (finite values only), exceeds PRECISION_TOLERANCE nats: the difference
    of these log densities is noise. With ``log_weights`` (the particles' log weights,
    shaped as the values) the error is read as it enters log Ẑ = log Σ w_i, the average
    of the particles' errors under their normalized weights, Σ_i W_i eps |log f_i|: a
    particle whose weight vanishes carries none of it (a NumPyro model's prior draw with
    σ near 0 has log f_1 near −1e6 in float32 and weight e^{−1e6}: flagged by the
    any-particle reading of this check, which ``log_weights=None`` keeps)."""
    eps = jnp.finfo(jnp.result_type(*log_values)).eps
    magnitude = sum(jnp.where(jnp.isfinite(value), jnp.abs(value), 0.0) for value in log_values)
    if log_weights is None:
        lost = jnp.any(eps * magnitude > PRECISION_TOLERANCE)
    else:
        log_weights = jnp.broadcast_to(jnp.where(jnp.isnan(log_weights), -jnp.inf, log_weights), magnitude.shape)
        alive = jnp.any(jnp.isfinite(log_weights))
        shares = jnp.where(alive, jax.nn.softmax(jnp.where(alive, log_weights, 0.0).ravel()), 0.0)
        lost = jnp.sum(shares * eps * magnitude.ravel()) > PRECISION_TOLERANCE
    return jnp.where(lost, STATUS_PRECISION_LOSS, STATUS_OK).astype(jnp.int32)


def first_particle(positions):
    """The first particle of a batch (leading axis), for shape checks."""
    return jax.tree.map(lambda leaf: leaf[0], positions)


def _shares_beta(states) -> bool:
    """Kernel states whose β (and parameters) are one unbatched value for all particles."""
    return isinstance(states, KernelState) and jnp.ndim(states.beta) == 0


def take(tree, indices):
    """Gather particles ``indices`` along the leading axis of every leaf (a shared,
    unbatched β and parameters of kernel states stay as they are)."""
    if _shares_beta(tree):
        return KernelState(take(tree.position, indices), take(tree.inner, indices), tree.beta, tree.parameters)
    return jax.tree.map(lambda leaf: jnp.take(leaf, indices, axis=0), tree)


def degenerate_status(log_z):
    return jnp.where(jnp.isneginf(log_z), STATUS_DEGENERATE, STATUS_OK).astype(jnp.int32)


def reported_stderr(log_z, spread):
    """The error bar reported for log Ẑ from its spread s: sqrt(s² + s⁴/4), which holds log
    Ẑ's bias (``jaxz.weights.stderr_with_log_bias``: Ẑ, or 1/Ẑ for RAISE, is the unbiased
    one, so log Ẑ is off by about s²/2), and infinite for a dead run (log_z = −inf)."""
    return jnp.where(jnp.isneginf(log_z), jnp.inf, _weights.stderr_with_log_bias(spread))


def make_estimate(log_z, log_z_stderr, cost, status) -> Estimate:
    """The Estimate of a particle method: flags a dead run (log_z = −inf) as degenerate,
    with an infinite standard error, a nan log_z (e.g. a traced nan log Z_0) as
    non-finite: never a silent NaN, and a log_z whose own rounding exceeds
    PRECISION_TOLERANCE nats as STATUS_PRECISION_LOSS (e.g. float32 with a log Z_0 near
    1e7, whose spacing is 1 nat). ``log_z_stderr`` is the spread s of log Ẑ; the error bar
    reported is ``reported_stderr`` of it."""
    log_z_stderr = reported_stderr(log_z, log_z_stderr)
    status = status | degenerate_status(log_z) | jnp.where(jnp.isnan(log_z), STATUS_NONFINITE, STATUS_OK)
    status = status | precision_status(log_z)  # log Ẑ's own rounding: float32 beyond ~1e6 (e.g. a large log Z_0)
    return Estimate(log_z, log_z_stderr, cost, status.astype(jnp.int32))


def float_dtype(positions):
    """The floating dtype the estimator works in: that of the positions (or default)."""
    dtypes = [leaf.dtype for leaf in jax.tree.leaves(positions) if jnp.issubdtype(leaf.dtype, jnp.floating)]
    return jnp.result_type(*dtypes) if dtypes else jnp.result_type(float)




def resampler(resampling):
    """The resampling function named or given, and whether the genealogy variance
    estimator is valid for it (only multinomial resampling: Lee & Whiteley 2018)."""
    if isinstance(resampling, str):
        if resampling not in _resampling.SCHEMES:
            raise ValueError(f"resampling must be one of {sorted(_resampling.SCHEMES)}, got {resampling!r}")
        resampling = _resampling.SCHEMES[resampling]
    if not callable(resampling):
        raise ValueError("resampling must be a function of jaxz.resampling or its name, "
                         f"got {type(resampling).__name__}")
    return resampling, resampling is _resampling.multinomial


def genealogy_estimate(log_z, log_weights, genealogy, genealogy_valid: bool, min_ess, cost, status, *,
                       bandwidth: int | None = None, resampling_steps=None) -> Estimate:
    """The Estimate of a resampling particle method from its ``_genealogy.Genealogy``.

    The standard error is the fixed-lag genealogy estimator (``jaxz.estimators._genealogy``:
    Lee & Whiteley 2018 over the last λ generations, Olsson & Douc 2019's lag beyond) when
    it is valid: multinomial resampling, or no resampling at all (then it is the delta
    method of importance sampling). Otherwise nan: no single-run estimate is known for
    systematic, stratified or residual resampling (use ``jaxz.combine_runs``).

    The lag read reaches the model's ``bandwidth`` (a factor joins variables that many
    steps apart; None: unknown) in generations at the run's resampling rate,
    ⌈bandwidth × generations / ``resampling_steps``⌉ (the steps at which the run could
    resample; ``_genealogy.lagged_estimate``'s ``min_lag``): a shorter lag would truncate
    a dependence the model is known to have, at the price of a noisier σ̂² where the
    truncation was harmless.

    Status flags, besides those of ``make_estimate``:

    - STATUS_FEW_PARTICLES: the ESS fell below 2 at some step.
    - STATUS_COLLAPSED: the genealogy collapsed, i.e. fewer than 2 effective families at
      the oldest generation the estimate reads (the estimate then rests on one family),
      or an infinite σ̂² (a generation that closed with one family); and in every run
      where ``bandwidth`` exceeds the longest lag the genealogy keeps (λ_max = N/8,
      ``_genealogy.default_lag``): N particles are too few for the dependence the model is
      known to have (N ≥ 8 × bandwidth is necessary, not sufficient), no per-run check
      separates the runs that missed mass, and ``jaxz.combine_runs`` keeps the flag. Such
      a run has a nan s.e. if it resampled; one that never resampled keeps the delta
      method of importance sampling.
    - STATUS_FEW_PARTICLES / STATUS_HEAVY_TAIL from the final weights (``low_ess_status``).
    - STATUS_STDERR_UNRESOLVED: σ̂² is negative or below its own noise
      (``_genealogy.log_variance``; the s.e. is nan: log Ẑ is fine, its error bar unknown),
      or that noise drowns the variance the weights show step by step (the lag-0 variance
      below 0.3 × the noise, ``_genealogy.drowned``): σ̂² then rests on the dependence
      between generations that a few families read, or is the genealogy's neutral drift
      itself. The s.e. is kept for ``jaxz.combine_runs``, which pools σ̂² on the scale of
      Ẑ², where it is unbiased, but the run does not vouch for it.

    The s.e. is σ̂ × t_ν(0.975)/1.96, ν = 2σ̂⁴/noise² the degrees of freedom of σ̂² given
    its measured noise (Satterthwaite; ``jaxz.weights.student_t_factor``), so that
    log Ẑ ± 1.96 s.e. is a Student-t interval: σ̂ is read from the same particles as log Ẑ,
    and the runs far in the tail of log Ẑ are those whose σ̂ is too small. With no
    resampling σ̂² has no noise term and the factor is 1, and the s.e. is that of
    importance sampling on the same weights where it is larger (``importance_stderr``
    with ``never_resampled``: the second moment's upper tail from the Pareto tail fitted
    with a shape half an sd above k̂, nan past k̂ = 0.7): the runs whose largest weights
    did not turn up look light-tailed and lie low, and no per-run check finds them. The
    Estimate then holds log Ẑ's bias too (``make_estimate``: sqrt(s² + s⁴/4)). The
    coverage of these error bars is in benchmarks/results/calibration.md.
    """
    reach = None
    if bandwidth is not None:  # the generations a factor's span covers, at this run's resampling rate
        dtype = log_weights.dtype
        steps = jnp.maximum(jnp.asarray(resampling_steps), 1).astype(dtype)  # given with the bandwidth
        reach = jnp.ceil(bandwidth * genealogy.generation.astype(dtype) / steps)
    estimated, noise, families = _genealogy.lagged_estimate(genealogy, log_weights, min_lag=reach)
    variance = _genealogy.resolve(genealogy, estimated, noise)
    # the genealogy's own noise drowns what the weights show step by step: σ̂² rests on a dependence that few
    # families read (or is that noise itself), so the run does not vouch for it (_genealogy.drowned, with the
    # measurements); the s.e. stays, as combine_runs pools σ̂² on the scale of Ẑ², where it is unbiased
    local = _genealogy.local_variance(genealogy, log_weights)
    drowned = _genealogy.drowned(genealogy, local, noise) & jnp.isfinite(variance)
    # nothing resampled: importance sampling, whose s.e. is read from the fitted Pareto tail's second moment as
    # jaxz.importance reads it, from a shape half an sd above k̂ (such runs are those whose tail looks light;
    # nan past k̂ = 0.7), never smaller than the genealogy's delta method
    variance = jnp.where(genealogy.generation == 0,
                         jnp.maximum(variance, importance_stderr(log_weights, never_resampled=True) ** 2), variance)
    longest_lag = genealogy.lineage.shape[1] - 1
    # the model reaches past what N particles keep: a collapsed genealogy, known beforehand
    too_few = bandwidth is not None and bandwidth > longest_lag  # N < 8 × bandwidth: flagged in every run
    variance = jnp.where(too_few & (genealogy.generation > 0), jnp.nan, variance)
    # σ̂² is itself noisy: the s.e. is widened so that ±1.96 s.e. is the Student-t interval
    # with σ̂²'s own degrees of freedom (see the docstring)
    widen = _weights.student_t_factor(_genealogy.degrees_of_freedom(estimated, noise))
    stderr = jnp.sqrt(variance) * widen
    stderr = jnp.where(genealogy_valid | (genealogy.generation == 0), stderr, jnp.nan)
    collapsed = (families < MIN_EFFECTIVE_PARTICLES) | jnp.isposinf(variance) | too_few
    status = status | jnp.where(min_ess < MIN_EFFECTIVE_PARTICLES, STATUS_FEW_PARTICLES, 0)  # one particle: ESS 1
    status = status | jnp.where(collapsed, STATUS_COLLAPSED, 0)
    status = low_ess_status(log_weights, status, never_resampled=genealogy.generation == 0)
    # nan: the variance estimate is negative or below its own noise (a valid genealogy only:
    # elsewhere the s.e. is nan by design and says nothing about this run)
    unresolved = jnp.isnan(variance) & (genealogy_valid | (genealogy.generation == 0))
    status = jnp.where(unresolved | drowned, status | STATUS_STDERR_UNRESOLVED, status)
    return make_estimate(log_z, stderr.astype(log_z.dtype), cost, status)
