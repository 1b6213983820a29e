"""Pairwise binary (Ising) models: exact log Z by transfer matrices or enumeration, and
the one-spin-at-a-time sequence of twisted SMC (Lindsten, Helske & Vihola 2018, §3, §6.1).

A model over spins x ∈ {−1, +1}^T with an edge list E (pairs of distinct variables;
parallel edges allowed, each its own factor) has

    π(x) ∝ exp( Σ_{e=(u,v) ∈ E} J_e x_u x_v + Σ_i H_i x_i ),

the factor graph of seed eq. (1) with one unary factor per spin and one pairwise factor
per edge. ``periodic_lattice`` builds the seed's §6.1 lattice; ``pairwise`` any graph.
Arrays follow the dtype of the field. The transfer matrices behind ``exact_log_z`` live in
``jaxz.models._ising_transfer``.
"""
import dataclasses
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks
from jaxz.base import SequentialGraphModel
from jaxz.models._ising_transfer import (
    _checkerboard_applies, _checkerboard_log_z, _spins, _transfer_matrix_log_z, default_batch_size,
)
from jaxz.types import Array

MAX_ENUMERATED_SPINS = 24  # brute force sums 2^T states
MAX_TRANSFER_WIDTH = 16  # the transfer matrix sums over 2^(2·width) row pairs on a torus


@partial(jax.tree_util.register_dataclass, data_fields=["couplings", "field"], meta_fields=["edges", "lattice_shape"])
@dataclasses.dataclass(frozen=True, eq=False)
class IsingModel:
    """A pairwise binary model (spins ±1); build it with ``periodic_lattice`` or ``pairwise``.

    edges: tuple of (u, v) pairs of variable indices (static structure).
    couplings: (E,) J_e, one per edge.
    field: (T,) H_i.
    lattice_shape: (L, W) when the variables are the sites of an L × W periodic
        lattice in raster order (site (i, j) is variable i·W + j); None otherwise.
    """

    edges: tuple
    couplings: Array
    field: Array
    lattice_shape: tuple | None = None

    @property
    def num_variables(self) -> int:
        return int(np.shape(self.field)[0])

    @property
    def edge_array(self) -> np.ndarray:
        """(E, 2) int32 array of the edges."""
        return np.asarray(self.edges, np.int32).reshape(-1, 2)


def _float_dtype(array) -> jnp.dtype:
    dtype = jnp.result_type(array)
    return dtype if jnp.issubdtype(dtype, jnp.floating) else jnp.result_type(float)


def _check_real(name: str, value) -> None:
    """Complex fields or couplings would lose their imaginary part in the cast to a float."""
    if jnp.iscomplexobj(value):
        raise ValueError(f"{name} must be real (an Ising model's energies are real), "
                         f"got dtype {jnp.result_type(value)}")


def pairwise(edges, couplings, field) -> IsingModel:
    """A pairwise binary model on any graph: π(x) ∝ exp(Σ_e J_e x_u x_v + Σ_i H_i x_i).

    edges: (E, 2) integer pairs (u, v), u ≠ v, in [0, T); parallel edges are separate factors.
    couplings: (E,) J_e, or a scalar for every edge.
    field: (T,) H_i. The variables' sequential order (``sequential_model``) is their index.
    Concrete couplings and field must be finite (ValueError: a nan makes log Z nan).
    """
    field = jnp.asarray(field)
    _check_real("field", field)
    _check_real("couplings", couplings)
    _checks.finite("field", field)
    _checks.finite("couplings", couplings)
    if field.ndim != 1 or field.shape[0] < 1:
        raise ValueError(f"field must be a 1-D array with at least one variable, got shape {field.shape}")
    field = field.astype(_float_dtype(field))
    num_variables = field.shape[0]
    edge_array = np.asarray(edges)
    if edge_array.size == 0:
        edge_array = edge_array.reshape(0, 2)
    if edge_array.ndim != 2 or edge_array.shape[1] != 2 or not np.issubdtype(edge_array.dtype, np.integer):
        raise ValueError(f"edges must be an (E, 2) integer array, got shape {edge_array.shape} "
                         f"and dtype {edge_array.dtype}")
    if edge_array.size and (edge_array.min() < 0 or edge_array.max() >= num_variables):
        raise ValueError(f"edges must index variables in [0, {num_variables}), got values in "
                         f"[{edge_array.min()}, {edge_array.max()}]")
    if np.any(edge_array[:, 0] == edge_array[:, 1]):
        raise ValueError("edges must join two distinct variables (a self-loop x_i·x_i = 1 is a constant)")
    couplings = jnp.asarray(couplings, field.dtype)
    if couplings.ndim == 0:
        couplings = jnp.full((edge_array.shape[0],), couplings)
    if couplings.shape != (edge_array.shape[0],):
        raise ValueError(f"couplings must be a scalar or have shape ({edge_array.shape[0]},) (one per edge), "
                         f"got shape {couplings.shape}")
    return IsingModel(tuple(map(tuple, edge_array.tolist())), couplings, field)


def periodic_lattice(field, inverse_temperature) -> IsingModel:
    """The L × W square lattice, periodic in both directions (seed §6.1):
    π(x) ∝ exp(J Σ_{neighbours ⟨ij⟩} x_i x_j + Σ_i H_i x_i), J = ``inverse_temperature``
    on every edge, the field H NOT scaled by it.

    field: (L, W) array H; site (i, j) becomes variable i·W + j (raster order, j fastest).
    Each site has an edge to its right neighbour (i, j+1 mod W) and to the one below
    (i+1 mod L, j). Small sizes follow that rule literally, as a transfer matrix
    Tr(T^L) does: a dimension of size 2 has doubled edges (the direct and the wrapping
    edge join the same two sites, so the pair interacts with 2J), and a dimension of
    size 1 has no edges along it (the wrapping edge would be a self-loop, a constant).
    Concrete field and inverse_temperature must be finite (ValueError).
    """
    field = jnp.asarray(field)
    _check_real("field", field)
    _check_real("inverse_temperature", inverse_temperature)
    _checks.finite("field", field)
    _checks.finite("inverse_temperature", inverse_temperature)
    if field.ndim != 2 or field.shape[0] < 1 or field.shape[1] < 1:
        raise ValueError(f"field must be an (L, W) array with L, W >= 1, got shape {field.shape}")
    dtype = _float_dtype(field)
    num_rows, num_cols = field.shape
    site = np.arange(num_rows * num_cols).reshape(num_rows, num_cols)
    edges = []
    if num_cols >= 2:  # horizontal: (i, j) — (i, j+1 mod W)
        edges.append(np.stack([site, np.roll(site, -1, axis=1)], axis=-1).reshape(-1, 2))
    if num_rows >= 2:  # vertical: (i, j) — (i+1 mod L, j)
        edges.append(np.stack([site, np.roll(site, -1, axis=0)], axis=-1).reshape(-1, 2))
    edges = np.concatenate(edges) if edges else np.zeros((0, 2), np.int64)
    model = pairwise(edges, jnp.asarray(inverse_temperature, dtype), field.reshape(-1).astype(dtype))
    return dataclasses.replace(model, lattice_shape=(int(num_rows), int(num_cols)))


# ---------------------------------------------------------------------------------------
# Exact log Z


def log_density(model: IsingModel, x: Array) -> Array:
    """log of the unnormalized π: Σ_e J_e x_u x_v + Σ_i H_i x_i. ``x``: (..., T) spins ±1."""
    edges = model.edge_array
    pair_terms = x[..., edges[:, 0]] * x[..., edges[:, 1]] @ model.couplings if edges.size else 0.0
    return pair_terms + x @ model.field


@partial(jax.jit, static_argnames="chunk_bits")
def _enumeration_log_z(model: IsingModel, chunk_bits: int = 12) -> Array:
    """log Σ_x exp(log π̃(x)) over all 2^T states, 2^chunk_bits at a time under lax.map."""
    num_bits = model.num_variables
    chunk_bits = min(chunk_bits, num_bits)
    chunk_size = 2**chunk_bits
    dtype = model.field.dtype

    def chunk_log_z(chunk):
        indices = chunk * chunk_size + jnp.arange(chunk_size, dtype=jnp.int32)
        return jax.nn.logsumexp(log_density(model, _spins(indices, num_bits, dtype)))

    per_chunk = jax.lax.map(chunk_log_z, jnp.arange(2 ** (num_bits - chunk_bits), dtype=jnp.int32))
    return jax.nn.logsumexp(per_chunk)


def exact_log_z(model: IsingModel, *, method: str | None = None, batch_size: int | None = None) -> Array:
    """Exact log Z of a pairwise binary model.

    method: "transfer" (periodic lattices whose narrower side is at most 16: transfer
        matrices; on an even lattice with sides >= 4 over the white sites of a checkerboard,
        the black ones summed out in closed form (``_checkerboard_log_z``: cost
        2^(2·width)·(L − 4)·width/2), otherwise row to row, one spin at a time (cost
        2^(2·width)·(L − 2)·width)), "enumerate" (any graph with at most 24 variables: all
        2^T states), or None: "transfer" for lattices, "enumerate" otherwise.
    batch_size: seams (starting rows) per transfer pass, a power of 2 (memory 2^width × it);
        None: ``default_batch_size()`` on the checkerboard (8 on a CPU, 1024 on an
        accelerator), 4 row to row.
    Follows the dtype of the field (float64 under ``jax.enable_x64`` for the most accuracy;
    every term is positive, so float32 loses only rounding, ~1e-6 relative per row).
    """
    if method is None:
        method = "transfer" if model.lattice_shape is not None else "enumerate"
    if batch_size is not None and (isinstance(batch_size, bool) or int(batch_size) != batch_size
                                   or int(batch_size) < 1 or int(batch_size) & (int(batch_size) - 1)):
        raise ValueError(f"batch_size must be a power of 2 >= 1, got {batch_size}")
    if method == "transfer":
        if model.lattice_shape is None:
            raise ValueError("method='transfer' needs a lattice model (periodic_lattice); use method='enumerate'")
        if min(model.lattice_shape) > MAX_TRANSFER_WIDTH:
            raise ValueError(f"the transfer matrix needs the lattice's narrower side <= {MAX_TRANSFER_WIDTH}, "
                             f"got shape {model.lattice_shape}")
        if _checkerboard_applies(model):
            return _checkerboard_log_z(model, default_batch_size() if batch_size is None else int(batch_size))
        return _transfer_matrix_log_z(model, 4 if batch_size is None else int(batch_size))
    if method == "enumerate":
        if model.num_variables > MAX_ENUMERATED_SPINS:
            raise ValueError(f"enumeration sums 2^T states: T must be at most {MAX_ENUMERATED_SPINS}, "
                             f"got {model.num_variables}")
        return _enumeration_log_z(model)
    raise ValueError(f"method must be 'transfer', 'enumerate' or None, got {method!r}")


# ---------------------------------------------------------------------------------------
# The sequential decomposition of seed §3 (twisted targets, eqs. 4-5 and 7)


class Incidence(NamedTuple):
    """Each variable's incident edges, padded to the largest degree D (all (T, D)).
    Padding entries have edge id E (one past the last edge: callers pad their per-edge
    arrays with one dummy row) and ``valid`` False."""

    edge_ids: np.ndarray  # int32: the edge
    neighbours: np.ndarray  # int32: the variable at the other end
    sides: np.ndarray  # int32: which end of the edge this variable is (0: ``edges[e, 0]``, 1: ``edges[e, 1]``)
    valid: np.ndarray  # bool


def incidence(model: IsingModel) -> Incidence:
    """The per-variable incident edges of ``model`` (static numpy tables)."""
    edges = model.edge_array
    num_variables, num_edges = model.num_variables, edges.shape[0]
    degree = np.bincount(edges.reshape(-1), minlength=num_variables) if num_edges else np.zeros(num_variables, int)
    width = max(int(degree.max()), 1)
    edge_ids = np.full((num_variables, width), num_edges, np.int32)
    neighbours = np.zeros((num_variables, width), np.int32)
    sides = np.zeros((num_variables, width), np.int32)
    valid = np.zeros((num_variables, width), bool)
    filled = np.zeros(num_variables, int)
    for e, (u, v) in enumerate(edges.tolist()):
        for node, other, side in ((u, v, 0), (v, u, 1)):
            slot = filled[node]
            edge_ids[node, slot], neighbours[node, slot], sides[node, slot], valid[node, slot] = e, other, side, True
            filled[node] += 1
    return Incidence(edge_ids, neighbours, sides, valid)


def _log_messages_of(twist, num_edges: int, dtype):
    log_messages = jnp.asarray(getattr(twist, "log_messages", twist), dtype)
    if log_messages.shape != (num_edges, 2, 2):
        raise ValueError(f"twist must be a loopy_bp result or log messages of shape ({num_edges}, 2, 2) "
                         f"(edge, receiving end, value), got shape {log_messages.shape}")
    return log_messages


def sequential_model(model: IsingModel, twist=None) -> SequentialGraphModel:
    """The spins one at a time in index order (raster order for a lattice), as the
    targets of ``jaxz.twisted_smc`` (num_values = 2: value k is spin 2k − 1).

    SMC-Base (twist None): γ_t holds the unary factors of x_1..x_t and the edges among
    them (seed eq. 4). SMC-Twist: γ^ψ_t = ψ_t γ_t with the loopy-BP twist of seed eq. (7),
    ψ_t(x_{1:t}) = ∏_{edges e=(s,u), s ≤ t < u} μ_{e→s}(x_s): the message every
    not-yet-included edge sends into its included end. Adding spin t (0-based) brings
    its unary factor, the edges to earlier neighbours, the messages into t from the
    edges to later neighbours, and removes the messages the earlier neighbours received
    from their edges to t:

        log γ^ψ_{t+1}/γ^ψ_t (x_{1:t}, s) = H_t s + Σ_{e=(t,u), u<t} J_e s x_u
            + Σ_{e=(t,u), u>t} log μ_{e→t}(s) − Σ_{e=(t,u), u<t} log μ_{e→u}(x_u).

    twist: a ``jaxz.approx.loopy_bp`` result, or its (E, 2, 2) log messages
    [edge, receiving end (0: ``edges[e, 0]``, 1: ``edges[e, 1]``), value (0: −1, 1: +1)].
    A particle is the (T,) int8 spin vector, 0 where not yet set (a quarter of the
    float32 memory, which the resampling copies at every step); the weights follow
    the field's dtype.
    """
    num_variables, num_edges = model.num_variables, len(model.edges)
    dtype = model.field.dtype
    table = incidence(model)
    order = np.arange(num_variables)[:, None]
    earlier = jnp.asarray(table.valid & (table.neighbours < order))
    later = jnp.asarray(table.valid & (table.neighbours > order))
    edge_ids, neighbours, sides = (jnp.asarray(a) for a in (table.edge_ids, table.neighbours, table.sides))
    couplings = jnp.concatenate([model.couplings, jnp.zeros((1,), dtype)])  # padding (edge E) reads a zero
    field = model.field
    values = jnp.array([-1.0, 1.0], dtype)
    log_messages = None
    if twist is not None:
        log_messages = _log_messages_of(twist, num_edges, dtype)
        log_messages = jnp.concatenate([log_messages, jnp.zeros((1, 2, 2), dtype)])

    def log_potentials(spins, t):
        ids, others, side = edge_ids[t], neighbours[t], sides[t]
        before, after = earlier[t], later[t]
        neighbour_spins = spins[others].astype(dtype)
        local_field = field[t] + jnp.sum(jnp.where(before, couplings[ids] * neighbour_spins, 0.0))
        potentials = local_field * values
        if log_messages is not None:
            incoming = log_messages[ids, side]  # (D, 2): μ_{e→t}(·)
            potentials = potentials + jnp.sum(jnp.where(after[:, None], incoming, 0.0), axis=0)
            neighbour_value = (spins[others] > 0).astype(jnp.int32)
            received = log_messages[ids, 1 - side, neighbour_value]  # μ_{e→u}(x_u)
            potentials = potentials - jnp.sum(jnp.where(before, received, 0.0))
        return potentials

    def assign(spins, t, value):
        return spins.at[t].set((2 * value - 1).astype(jnp.int8))

    edges = model.edge_array
    return SequentialGraphModel(
        num_steps=num_variables,
        initial_state=jnp.zeros((num_variables,), jnp.int8),
        num_values=2,
        log_potentials=log_potentials,
        assign=assign,
        bandwidth=int(np.max(np.abs(edges[:, 1] - edges[:, 0]), initial=0)),  # raster order: (rows − 1)·width
    )


__all__ = [
    "IsingModel", "Incidence", "incidence", "pairwise", "periodic_lattice", "log_density", "exact_log_z",
    "default_batch_size",
    "sequential_model",
    "MAX_ENUMERATED_SPINS", "MAX_TRANSFER_WIDTH",
]
