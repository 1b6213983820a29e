"""Mechanics shared by the particle estimators: vmapped kernels, reweighting with
nan/inf handling, resampling of whole pytrees, argument checks."""
import jax
import jax.numpy as jnp
import numpy as np

from jaxz import resampling as _resampling
from jaxz import weights as _weights
from jaxz.base import STATUS_DEGENERATE, STATUS_LOW_ESS, STATUS_OK, Estimate
from jaxz.kernels.base import KernelState


def num_particles_of(positions, name: str = "positions", axis: str = "particle") -> int:
    """The size of the common leading axis of every leaf of ``positions`` (the particle
    axis; ``axis`` names it in errors, e.g. "observation" for a data set)."""
    leaves = jax.tree.leaves(positions)
    if not leaves:
        raise ValueError(f"{name} must be a non-empty pytree of arrays")
    sizes = {np.shape(leaf)[0] if np.ndim(leaf) > 0 else None for leaf in leaves}
    if None in sizes or len(sizes) != 1:
        raise ValueError(f"{name} must have one common leading ({axis}) axis, got leading sizes {sizes}")
    (size,) = sizes
    if size == 0:
        raise ValueError(f"{name} must hold at least one {axis}, got 0")
    return size


def check_fraction(name: str, value) -> float:
    value = float(value)
    if not 0.0 < value <= 1.0:
        raise ValueError(f"{name} must be in (0, 1], got {value}")
    return value


def log_densities(path, positions, beta):
    """log f_β at every particle (vmapped over the leading axis)."""
    return jax.vmap(path.log_density, in_axes=(0, None))(positions, beta)


def incremental_log_weights(path, positions, beta_from, beta_to):
    """log f_{β_to}(x_i) − log f_{β_from}(x_i), sanitized: nan → −inf, with a status."""
    increments = log_densities(path, positions, beta_to) - log_densities(path, positions, beta_from)
    # -inf - -inf is nan: a particle outside both supports keeps zero weight.
    return _weights.sanitize(increments)


def _shared_beta_axes(kernel, positions, beta):
    """vmap axes for a batch of kernel states: the particle axis everywhere except β,
    which all particles share. Kept unbatched, a kernel's "has β changed?" test stays one
    real branch under vmap instead of a per-particle select that computes both sides."""
    one = jax.tree.map(lambda leaf: leaf[0], positions)
    state = jax.eval_shape(kernel.init, one, beta)
    return KernelState(0, 0, None) if isinstance(state, KernelState) else 0


def kernel_init(kernel, positions, beta):
    """Kernel states of every particle at a common β (leading axis = particles)."""
    axes = _shared_beta_axes(kernel, positions, beta)
    return jax.vmap(kernel.init, in_axes=(0, None), out_axes=axes)(positions, beta)


def kernel_step(kernel, rng_key, kernel_states, beta, num_steps: int = 1):
    """Apply the kernel ``num_steps`` times to every particle at the common β; mean
    acceptance rate out."""
    positions = kernel_states.position
    num_particles = jax.tree.leaves(positions)[0].shape[0]
    axes = KernelState(0, 0, None) if isinstance(kernel_states, KernelState) and jnp.ndim(kernel_states.beta) == 0 else 0
    step = jax.vmap(kernel.step, in_axes=(0, axes, None), out_axes=(axes, 0))

    def body(states, key):
        states, info = step(jax.random.split(key, num_particles), states, beta)
        return states, jnp.mean(info.acceptance_rate)

    kernel_states, acceptance = jax.lax.scan(body, kernel_states, jax.random.split(rng_key, num_steps))
    return kernel_states, jnp.mean(acceptance)


def take(tree, indices):
    """Gather particles ``indices`` along the leading axis of every leaf (a shared,
    unbatched β of kernel states stays as it is)."""
    if isinstance(tree, KernelState) and jnp.ndim(tree.beta) == 0:
        return KernelState(take(tree.position, indices), take(tree.inner, indices), tree.beta)
    return jax.tree.map(lambda leaf: jnp.take(leaf, indices, axis=0), tree)


def degenerate_status(log_z):
    return jnp.where(jnp.isneginf(log_z), STATUS_DEGENERATE, STATUS_OK).astype(jnp.int32)


def make_estimate(log_z, log_z_stderr, cost, status) -> Estimate:
    """The Estimate of a particle method: flags a dead run (log_z = −inf) as degenerate,
    with an infinite standard error, and never lets a NaN through silently."""
    dead = jnp.isneginf(log_z)
    log_z_stderr = jnp.where(dead, jnp.inf, log_z_stderr)
    return Estimate(log_z, log_z_stderr, cost, (status | degenerate_status(log_z)).astype(jnp.int32))


def float_dtype(positions):
    """The floating dtype the estimator works in: that of the positions (or default)."""
    dtypes = [leaf.dtype for leaf in jax.tree.leaves(positions) if jnp.issubdtype(leaf.dtype, jnp.floating)]
    return jnp.result_type(*dtypes) if dtypes else jnp.result_type(float)


def eve_log_z_stderr(log_weights, eve, num_resampling):
    """Standard error of log Ẑ for SMC and particle filters, from the Eve (time-0
    ancestor) indices (Lee & Whiteley 2018):
    Var(Ẑ)/Ẑ² ≈ 1 − (N/(N−1))^{m+1} (1 − Σ_k (Σ_{i: E_i = k} W_i)²), m resampling
    events; the delta method turns it into a standard error of log Ẑ. When the Eve
    indices have coalesced (long runs) it saturates, and is then only a lower bound.

    log_weights: (N,) normalized log W; eve: (N,) int32; num_resampling: int.
    """
    num_particles = log_weights.shape[0]
    per_eve = jax.ops.segment_sum(jnp.exp(log_weights), eve, num_segments=num_particles)
    ratio = num_particles / (num_particles - 1.0) if num_particles > 1 else jnp.inf
    relative_variance = 1.0 - ratio ** (num_resampling + 1) * (1.0 - jnp.sum(per_eve**2))
    return jnp.sqrt(jnp.maximum(relative_variance, 0.0)).astype(log_weights.dtype)


MIN_EFFECTIVE_PARTICLES = 2.0  # below this ESS an estimate is flagged STATUS_LOW_ESS


def resampler(resampling):
    """The resampling function named or given, and whether the genealogy variance
    estimator is valid for it (only multinomial resampling: Lee & Whiteley 2018)."""
    if isinstance(resampling, str):
        if resampling not in _resampling.SCHEMES:
            raise ValueError(f"resampling must be one of {sorted(_resampling.SCHEMES)}, got {resampling!r}")
        resampling = _resampling.SCHEMES[resampling]
    if not callable(resampling):
        raise ValueError(f"resampling must be a function of jaxz.resampling or its name, got {type(resampling).__name__}")
    return resampling, resampling is _resampling.multinomial


def particle_estimate(log_z, log_weights, eve, num_resampling, genealogy_valid: bool, min_ess, cost, status) -> Estimate:
    """The Estimate of a resampling particle method (smc, particle_filter, twisted_smc).

    The standard error is the genealogy estimator (``eve_log_z_stderr``) when it is
    valid: multinomial resampling, or no resampling at all (then it is the delta method
    of importance sampling). Otherwise it is nan: no single-run estimate is known for
    systematic, stratified or residual resampling (use ``jaxz.combine_runs``).
    STATUS_LOW_ESS flags a run whose ESS fell below 2 particles at some step, or whose
    particles all descend from one initial particle (the error bar has nothing left to
    measure the spread with).
    """
    stderr = eve_log_z_stderr(log_weights, eve, num_resampling)
    stderr = jnp.where(genealogy_valid | (num_resampling == 0), stderr, jnp.nan)
    num_particles = log_weights.shape[0]
    coalesced = (num_particles > 1) & jnp.all(eve == eve[0])
    low = (min_ess < MIN_EFFECTIVE_PARTICLES) | coalesced
    status = jnp.where(low, status | STATUS_LOW_ESS, status)
    return make_estimate(log_z, stderr.astype(log_z.dtype), cost, status)


def check_count(name: str, value) -> int:
    """A positive integer argument (particle or sample count), else ValueError."""
    if isinstance(value, bool) or int(value) != value or int(value) < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value}")
    return int(value)
