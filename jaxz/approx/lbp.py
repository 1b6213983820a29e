"""Sum-product loopy belief propagation on a pairwise binary model, for the twisting
functions of Lindsten, Helske & Vihola (2018, §4.1, Prop. 2, eq. 7).

The factor graph has a unary factor φ_i(x) = e^{H_i x} per spin and a pairwise factor
ψ_e(x_u, x_v) = e^{J_e x_u x_v} per edge. Messages (all normalized to sum to one over
x ∈ {−1, +1}, kept in log space):

    variable → factor   λ_{u→e}(x_u) ∝ φ_u(x_u) ∏_{e' ∋ u, e' ≠ e} μ_{e'→u}(x_u)
    factor → variable   μ_{e→v}(x_v) ∝ Σ_{x_u} ψ_e(x_u, x_v) λ_{u→e}(x_u)

(the unary factors' messages are the factors themselves). A sweep visits the variables
in index order sending to later neighbours, then in reverse order sending to earlier
ones: on a lattice in raster order, the authors' forward-backward sweep (theirs sends
right and down in the forward pass, wrapping edges included; ours sends every edge
towards its later end — same fixed points, a slightly different schedule). A tree
numbered from a root (parents before children) is exact after two sweeps.
"""
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz.models.ising import IsingModel, incidence
from jaxz.types import Array


class LoopyBP(NamedTuple):
    """A loopy-BP fixed point; pass it as ``twist`` to ``jaxz.models.ising.sequential_model``.

    log_messages: (E, 2, 2) log μ_{e→end}(value): edge e, receiving end (0: ``edges[e, 0]``,
        1: ``edges[e, 1]``), value (0: spin −1, 1: spin +1); normalized over the value.
    log_z: the Bethe approximation of log Z at these messages (exact on a tree).
    num_sweeps: forward-backward sweeps run.
    converged: whether the last sweep changed no message by a relative amount >= tol.
    max_change: that largest relative change, max |μ_new/μ_old − 1|.
    """

    log_messages: Array
    log_z: Array
    num_sweeps: Array
    converged: Array
    max_change: Array


def _normalize(log_values: Array) -> Array:
    return log_values - jax.nn.logsumexp(log_values, axis=-1, keepdims=True)


def loopy_bp(model: IsingModel, *, max_sweeps: int = 100, tol: float = 1e-2) -> LoopyBP:
    """Loopy belief propagation (sum-product, sequential forward-backward sweeps) on a
    pairwise binary model, until no message changes by a relative amount >= ``tol`` in
    a sweep or ``max_sweeps`` sweeps have run; messages start uniform.

    Returns a ``LoopyBP`` with the messages, the Bethe log Z (``bethe_log_z``) and
    convergence information. Its messages give the twist of seed eq. (7).
    """
    if isinstance(max_sweeps, bool) or int(max_sweeps) != max_sweeps or int(max_sweeps) < 1:
        raise ValueError(f"max_sweeps must be an integer >= 1, got {max_sweeps}")
    if not float(tol) > 0.0:
        raise ValueError(f"tol must be > 0, got {tol}")
    if not isinstance(model, IsingModel):
        raise ValueError(f"model must be a jaxz.models.ising.IsingModel, got {type(model).__name__}")
    return _loopy_bp(model, int(max_sweeps), float(tol))


@partial(jax.jit, static_argnames=("max_sweeps", "tol"))
def _loopy_bp(model: IsingModel, max_sweeps: int, tol: float) -> LoopyBP:
    dtype = model.field.dtype
    table = incidence(model)
    num_variables, num_edges = model.num_variables, len(model.edges)
    order = np.arange(num_variables)[:, None]
    to_later = jnp.asarray(table.valid & (table.neighbours > order))
    to_earlier = jnp.asarray(table.valid & (table.neighbours < order))
    edge_ids, sides, valid = jnp.asarray(table.edge_ids), jnp.asarray(table.sides), jnp.asarray(table.valid)
    couplings = jnp.concatenate([model.couplings, jnp.zeros((1,), dtype)])  # row E: padding
    values = jnp.array([-1.0, 1.0], dtype)

    def send(log_messages, t, targets):
        """Recompute the messages from the factors of t's edges in ``targets`` into
        their other end, from the messages currently into t."""
        ids, side = edge_ids[t], sides[t]
        incoming = jnp.where(valid[t][:, None], log_messages[ids, side], 0.0)  # (D, 2): μ_{e→t}
        cavity = model.field[t] * values + jnp.sum(incoming, axis=0) - incoming  # (D, 2): log λ_{t→e}
        pair = couplings[ids][:, None, None] * values[:, None] * values[None, :]  # (D, x_t, x_other)
        outgoing = _normalize(jax.nn.logsumexp(pair + cavity[:, :, None], axis=1))  # (D, 2): μ_{e→other}
        old = log_messages[ids, 1 - side]
        return log_messages.at[ids, 1 - side].set(jnp.where(targets[t][:, None], outgoing, old))

    def sweep(log_messages):
        forward = jax.lax.fori_loop(0, num_variables, lambda t, m: send(m, t, to_later), log_messages)
        return jax.lax.fori_loop(
            0, num_variables, lambda i, m: send(m, num_variables - 1 - i, to_earlier), forward
        )

    def cond(carry):
        _, sweeps, change = carry
        return (sweeps < max_sweeps) & (change >= tol)

    def body(carry):
        log_messages, sweeps, _ = carry
        updated = sweep(log_messages)
        change = jnp.max(jnp.abs(jnp.expm1(updated - log_messages)))
        return updated, sweeps + 1, change

    start = jnp.full((num_edges + 1, 2, 2), -jnp.log(2.0), dtype)
    log_messages, sweeps, change = jax.lax.while_loop(cond, body, (start, jnp.int32(0), jnp.asarray(jnp.inf, dtype)))
    log_messages = log_messages[:num_edges]
    return LoopyBP(log_messages, bethe_log_z(model, log_messages), sweeps, change < tol, change)


def bethe_log_z(model: IsingModel, log_messages: Array) -> Array:
    """The Bethe approximation −F_Bethe of log Z at the beliefs of ``log_messages``:

        log Z_B = Σ_e E_{b_e}[J_e x_u x_v] + Σ_i E_{b_i}[H_i x_i] + Σ_e H(b_e) − Σ_i (d_i − 1) H(b_i),

    b_i(x) ∝ φ_i(x) ∏_{e∋i} μ_{e→i}(x), b_e(x_u, x_v) ∝ ψ_e λ_{u→e}(x_u) λ_{v→e}(x_v),
    d_i the number of edges at i, H the entropy (Yedidia, Freeman & Weiss 2005).
    Exact at the fixed point on a tree.
    """
    dtype = model.field.dtype
    edges = model.edge_array
    values = jnp.array([-1.0, 1.0], dtype)
    log_messages = jnp.asarray(log_messages, dtype)
    node_log = model.field[:, None] * values  # (T, 2): log φ_i + Σ_e log μ_{e→i}
    if edges.size:
        node_log = node_log.at[edges[:, 0]].add(log_messages[:, 0]).at[edges[:, 1]].add(log_messages[:, 1])
    node_belief = _normalize(node_log)
    degree = (np.bincount(edges.reshape(-1), minlength=model.num_variables) if edges.size
              else np.zeros(model.num_variables))

    def entropy(log_belief):
        return -jnp.sum(jnp.exp(log_belief) * log_belief, axis=-1)

    log_z = (jnp.sum(jnp.exp(node_belief) * (model.field[:, None] * values))
             - jnp.sum((degree - 1) * entropy(node_belief)))
    if edges.size:
        cavity_u = node_log[edges[:, 0]] - log_messages[:, 0]  # log λ_{u→e}
        cavity_v = node_log[edges[:, 1]] - log_messages[:, 1]
        energy = model.couplings[:, None, None] * values[:, None] * values[None, :]
        edge_log = energy + cavity_u[:, :, None] + cavity_v[:, None, :]
        edge_belief = (edge_log - jax.nn.logsumexp(edge_log, axis=(1, 2), keepdims=True)).reshape(-1, 4)
        log_z = log_z + jnp.sum(jnp.exp(edge_belief) * energy.reshape(-1, 4)) + jnp.sum(entropy(edge_belief))
    return log_z


__all__ = ["LoopyBP", "loopy_bp", "bethe_log_z"]
