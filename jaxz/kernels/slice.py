"""Slice sampling (Neal 2003) and Metropolis-within-Gibbs: coordinate-wise kernels
that blackjax lacks. Both sweep the coordinates of the flattened position in order."""
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxz.kernels.base import Kernel, check_scale, from_transition, tempered_log_density
from jaxz.paths import Path


def _univariate_slice(rng_key, log_density_1d, x0, log_f0, width, max_stepping_out, max_shrinkage):
    """One update of a scalar coordinate: slice level, stepping out, shrinkage.

    Neal (2003), Fig. 3 (stepping out with at most ``max_stepping_out`` expansions,
    split at random between the two ends) and Fig. 5 (shrinkage).
    """
    key_level, key_position, key_split, key_shrink = jax.random.split(rng_key, 4)
    level = log_f0 - jax.random.exponential(key_level, dtype=x0.dtype)
    left = x0 - width * jax.random.uniform(key_position, dtype=x0.dtype)
    right = left + width
    num_left = jnp.floor(max_stepping_out * jax.random.uniform(key_split, dtype=x0.dtype)).astype(jnp.int32)
    num_right = max_stepping_out - 1 - num_left

    def step_left(carry):
        left, j = carry
        return left - width, j - 1

    def step_right(carry):
        right, k = carry
        return right + width, k - 1

    left, _ = jax.lax.while_loop(lambda c: (c[1] > 0) & (log_density_1d(c[0]) > level), step_left, (left, num_left))
    right, _ = jax.lax.while_loop(lambda c: (c[1] > 0) & (log_density_1d(c[0]) > level), step_right, (right, num_right))

    def shrink_cond(carry):
        _, _, _, accepted, i, _ = carry
        return ~accepted & (i < max_shrinkage)

    def shrink(carry):
        left, right, x, _, i, key = carry
        key, key_draw = jax.random.split(key)
        proposal = left + (right - left) * jax.random.uniform(key_draw, dtype=x0.dtype)
        accepted = log_density_1d(proposal) > level
        left = jnp.where(~accepted & (proposal < x0), proposal, left)
        right = jnp.where(~accepted & (proposal >= x0), proposal, right)
        return left, right, jnp.where(accepted, proposal, x), accepted, i + 1, key

    init = (left, right, x0, jnp.bool_(False), jnp.int32(0), key_shrink)
    _, _, x_new, accepted, _, _ = jax.lax.while_loop(shrink_cond, shrink, init)
    return jnp.where(accepted, x_new, x0), accepted


def slice(path: Path, width, *, max_stepping_out: int = 20, max_shrinkage: int = 100) -> Kernel:
    """Slice-within-Gibbs: a univariate stepping-out/shrinkage slice update of every
    coordinate in turn, at β. ``width`` is the initial bracket (scalar or per coordinate).
    Always moves unless the shrinkage cap is hit (then the coordinate stays)."""
    if jnp.ndim(width) == 0 and not float(width) > 0:
        raise ValueError(f"width must be > 0, got {width}")

    def transition(rng_key, position, beta):
        flat, unravel = ravel_pytree(position)
        log_density = tempered_log_density(path, beta)
        widths = jnp.broadcast_to(jnp.asarray(width, flat.dtype), flat.shape)

        def update(d, carry):
            flat, num_accepted = carry

            def log_density_1d(value):
                return log_density(unravel(flat.at[d].set(value)))

            x_new, accepted = _univariate_slice(
                jax.random.fold_in(rng_key, d), log_density_1d, flat[d], log_density(unravel(flat)),
                widths[d], max_stepping_out, max_shrinkage,
            )
            return flat.at[d].set(x_new), num_accepted + accepted

        flat, num_accepted = jax.lax.fori_loop(0, flat.shape[0], update, (flat, jnp.int32(0)))
        return unravel(flat), num_accepted / flat.shape[0]

    return from_transition(transition)


def metropolis_within_gibbs(path: Path, scale) -> Kernel:
    """Random-walk Metropolis on one coordinate at a time (systematic scan) at β.
    ``scale`` is the proposal standard deviation (scalar or per coordinate)."""
    if jnp.ndim(scale) == 0 and not float(scale) > 0:
        raise ValueError(f"scale must be > 0, got {scale}")

    def transition(rng_key, position, beta):
        flat, unravel = ravel_pytree(position)
        log_density = tempered_log_density(path, beta)
        scales = jnp.broadcast_to(jnp.asarray(scale, flat.dtype), flat.shape)

        def update(d, carry):
            flat, log_f, num_accepted = carry
            key_move, key_accept = jax.random.split(jax.random.fold_in(rng_key, d))
            proposal = flat.at[d].add(scales[d] * jax.random.normal(key_move, dtype=flat.dtype))
            log_f_new = log_density(unravel(proposal))
            accept = jnp.log(jax.random.uniform(key_accept, dtype=flat.dtype)) < log_f_new - log_f
            return jnp.where(accept, proposal, flat), jnp.where(accept, log_f_new, log_f), num_accepted + accept

        init = (flat, log_density(position), jnp.int32(0))
        flat, _, num_accepted = jax.lax.fori_loop(0, flat.shape[0], update, init)
        return unravel(flat), num_accepted / flat.shape[0]

    kernel = from_transition(transition)

    def init(position, beta):
        check_scale(scale, position)  # the shape of a vector of scales, once the position's is known
        return kernel.init(position, beta)

    return kernel._replace(init=init)
