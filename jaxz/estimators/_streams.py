"""Stream mechanics for online estimators: padding of short chunks, a NaN check on
incoming rows, and a bounded-memory reservoir of past observations (Algorithm R)."""
import jax
import jax.numpy as jnp
import numpy as np


def check_finite_rows(data, name: str = "data") -> None:
    """Host-side check (skipped for traced data): no observation may hold a nan."""
    for leaf in jax.tree.leaves(data):
        if isinstance(leaf, jax.core.Tracer):
            return
        values = np.asarray(leaf)
        if np.issubdtype(values.dtype, np.floating) and np.isnan(values).any():
            rows = np.unique(np.nonzero(np.isnan(values.reshape(values.shape[0], -1)))[0])
            raise ValueError(f"{name} must not contain nan; rows with nan: {rows[:10].tolist()}")


def pad_rows(data, num_rows: int):
    """Pad the leading axis to ``num_rows`` by repeating the last row (finite, so masked
    padding never feeds a nan into a gradient)."""
    def pad(leaf):
        extra = num_rows - leaf.shape[0]
        if extra == 0:
            return leaf
        return jnp.concatenate([leaf, jnp.repeat(leaf[-1:], extra, axis=0)], axis=0)

    return jax.tree.map(pad, data)


def reservoir_update(rng_key, reservoir, num_seen, chunk, num_valid):
    """Vitter's Algorithm R over one chunk, vectorized.

    Item j of the chunk is the t = num_seen + j-th observation (0-based). Algorithm R
    puts it in slot t while t < R and otherwise draws u ~ U{0..t} and overwrites slot u
    when u < R. Items are processed in order, so when several land in one slot the last
    one wins: a segment max over the items' targets gives exactly that. Every item of
    the stream is then in the reservoir with probability R / n. Items j >= num_valid
    (padding) are skipped.
    """
    slots = jax.tree.leaves(reservoir)[0].shape[0]
    size = jax.tree.leaves(chunk)[0].shape[0]
    items = jnp.arange(size)
    t = num_seen + items
    u = jax.random.randint(rng_key, (size,), 0, t + 1)
    target = jnp.where(t < slots, t, jnp.where(u < slots, u, slots))
    target = jnp.where(items < num_valid, target, slots)  # slot R = dropped
    winner = jax.ops.segment_max(items, target, num_segments=slots + 1)[:slots]
    taken = winner >= 0  # segment_max of an empty segment is the dtype minimum
    winner = jnp.clip(winner, 0, size - 1)

    def update(slot_leaf, chunk_leaf):
        new = chunk_leaf[winner]
        keep = taken.reshape((slots,) + (1,) * (slot_leaf.ndim - 1))
        return jnp.where(keep, new, slot_leaf)

    return jax.tree.map(update, reservoir, chunk)
