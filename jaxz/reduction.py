"""Sums over the particle axis that add in one fixed order, whatever the device layout.

``jnp.sum`` over an axis that is split across devices adds each device's part first and
then the partial sums (an all-reduce): the order of the additions, and so the rounding
of the result, depends on how many devices hold the axis. In float32 that is enough to
move an adaptive β schedule by one bisection step, and from there every later number.
jaxz reduces over particles only through the functions here, so that the same key gives
the same bits on 1, 2 or 4 devices and across processes.

The order is a pairwise tree fixed by the particle index alone: level by level, entry
2k and entry 2k + 1 are added (the axis first padded with zeros to a power of two).
Each level is an elementwise addition of two strided slices, which every layout computes
identically; XLA does not reassociate floating-point additions, so the tree is the one
written here. Pairwise summation is also more accurate than a sequential sum: its
rounding error grows as O(ε log N) rather than O(ε N).

The input first passes through a rounding to its own dtype (an identity on values that
the compiler keeps), so that no product that made it is fused into the first additions
as a multiply-add, a choice the compiler makes differently for different layouts.

Prefix sums (``cumsum``, for inverse-CDF resampling) use ``lax.associative_scan``, built
from the same strided slices and elementwise additions. Maxima, minima and integer sums
are exact in any order and need nothing of this.
"""
import operator

import jax
import jax.numpy as jnp

from jaxz.types import Array


def _exact(x: Array) -> bool:
    return not jnp.issubdtype(x.dtype, jnp.inexact)


def _axis(x: Array, axis) -> int:
    """``axis`` as an index into ``x``'s dimensions, in [0, ndim): an integer in [−ndim, ndim)
    (ValueError naming it otherwise, not numpy's AxisError or a ZeroDivisionError)."""
    if x.ndim == 0:
        raise ValueError(f"x must have at least one axis to reduce along, got a scalar (axis={axis!r})")
    try:
        index = operator.index(axis)  # refuses floats; a bool passes, so it is refused below
    except TypeError:
        index = None
    if index is None or isinstance(axis, bool) or not -x.ndim <= index < x.ndim:
        raise ValueError(f"axis must be an integer in [{-x.ndim}, {x.ndim - 1}] for x of shape {x.shape}, "
                         f"got {axis!r}")
    return index % x.ndim


def _rounded(x: Array) -> Array:
    """x itself, through a select that the compilers keep (NaN stays NaN): it stops a
    product that made x from being fused with the first additions into a multiply-add,
    which rounds once, not twice. Compilers fuse differently for different layouts, so
    without it the bits would again depend on the layout."""
    return jnp.where(jnp.isnan(x), jnp.asarray(jnp.nan, x.dtype), x)


def sum(x: Array, axis: int = -1, keepdims: bool = False) -> Array:  # noqa: A001 (mirrors jnp.sum)
    """Σ along ``axis`` by the pairwise tree of the particle index (see the module)."""
    x = jnp.asarray(x)
    axis = _axis(x, axis)
    if _exact(x):
        return jnp.sum(x, axis=axis, keepdims=keepdims)
    size = x.shape[axis]
    if size == 0:
        return jnp.sum(x, axis=axis, keepdims=keepdims)
    x = _rounded(x)
    width = 1 << (size - 1).bit_length()  # the next power of two
    if width != size:
        pad = [(0, 0)] * x.ndim
        pad[axis] = (0, width - size)
        x = jnp.pad(x, pad)
    while x.shape[axis] > 1:
        even = jax.lax.slice_in_dim(x, 0, None, stride=2, axis=axis)
        odd = jax.lax.slice_in_dim(x, 1, None, stride=2, axis=axis)
        x = even + odd
    return x if keepdims else jnp.squeeze(x, axis)


def matvec(matrix: Array, x: Array) -> Array:
    """matrix @ x, its products summed in the fixed order. Under vmap over particles,
    ``matrix @ x`` is a matrix product over the batch, which the CPU's BLAS blocks by the
    batch's shape: a particle's bits would depend on how many particles its device holds."""
    return sum(matrix * x[..., None, :], axis=-1)


def mean(x: Array, axis: int = -1, keepdims: bool = False) -> Array:
    """The mean along ``axis``, summed in the fixed order."""
    x = jnp.asarray(x)
    axis = _axis(x, axis)
    total = sum(x, axis, keepdims)
    return total / jnp.asarray(x.shape[axis], total.dtype if jnp.issubdtype(total.dtype, jnp.inexact) else None)


def cumsum(x: Array, axis: int = -1) -> Array:
    """Inclusive prefix sums along ``axis``, in an order fixed by the index alone."""
    x = jnp.asarray(x)
    axis = _axis(x, axis)
    if _exact(x):
        return jnp.cumsum(x, axis=axis)
    x = _rounded(x)
    return jax.lax.associative_scan(jnp.add, x, axis=axis)


def logsumexp(x: Array, axis: int = -1, keepdims: bool = False) -> Array:
    """log Σ exp(x) along ``axis``: the maximum (exact in any order) taken out, the rest
    summed in the fixed order; −inf when every entry is −inf."""
    x = jnp.asarray(x)
    axis = _axis(x, axis)
    top = jnp.max(x, axis=axis, keepdims=True)
    top = jax.lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0.0))
    total = sum(jnp.exp(x - top), axis, keepdims=True)
    out = jnp.log(total) + top
    return out if keepdims else jnp.squeeze(out, axis)


__all__ = ["sum", "matvec", "mean", "cumsum", "logsumexp"]
