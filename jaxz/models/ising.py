"""Pairwise binary (Ising) models: exact log Z by transfer matrices or enumeration, and
the one-spin-at-a-time sequence of twisted SMC (Lindsten, Helske & Vihola 2018, §3, §6.1).

A model over spins x ∈ {−1, +1}^T with an edge list E (pairs of distinct variables;
parallel edges allowed, each its own factor) has

    π(x) ∝ exp( Σ_{e=(u,v) ∈ E} J_e x_u x_v + Σ_i H_i x_i ),

the factor graph of seed eq. (1) with one unary factor per spin and one pairwise factor
per edge. ``periodic_lattice`` builds the seed's §6.1 lattice; ``pairwise`` any graph.
Arrays follow the dtype of the field.
"""
import dataclasses
import itertools
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz.base import SequentialGraphModel
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
    """
    field = jnp.asarray(field)
    _check_real("field", field)
    _check_real("couplings", couplings)
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
    """
    field = jnp.asarray(field)
    _check_real("field", field)
    _check_real("inverse_temperature", inverse_temperature)
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


def _spins(indices: Array, num_bits: int, dtype) -> Array:
    """Row k holds the spins 2·bit − 1 of indices[k] (least significant bit first)."""
    return (2 * ((indices[:, None] >> jnp.arange(num_bits, dtype=jnp.int32)) & 1) - 1).astype(dtype)


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


def _lattice_terms(model: IsingModel):
    """Split a lattice model's couplings by rows, the narrower side being the row.

    Returns (field (L, W), row_pairs (L, W, W): J of the edges inside each row between
    columns p and q, vertical (L, W): J of the edges (i, j) — (i+1 mod L, j)).
    """
    num_rows, num_cols = model.lattice_shape
    edges = model.edge_array
    rows, cols = edges // num_cols, edges % num_cols
    field = model.field.reshape(num_rows, num_cols)
    if num_cols > num_rows:  # transpose: the transfer matrix runs over the narrower side
        rows, cols, num_rows, num_cols, field = cols, rows, num_cols, num_rows, field.T
    in_row = rows[:, 0] == rows[:, 1]
    down = (rows[:, 1] == (rows[:, 0] + 1) % num_rows) & (cols[:, 0] == cols[:, 1]) & ~in_row
    up = (rows[:, 0] == (rows[:, 1] + 1) % num_rows) & (cols[:, 0] == cols[:, 1]) & ~in_row & ~down
    if not np.all(in_row | down | up):
        raise ValueError("model.edges do not fit its lattice_shape: an edge joins sites that are not "
                         "lattice neighbours")
    couplings = model.couplings
    row_pairs = jnp.zeros((num_rows, num_cols, num_cols), couplings.dtype)
    row_pairs = row_pairs.at[rows[in_row, 0], cols[in_row, 0], cols[in_row, 1]].add(couplings[in_row])
    top_row = np.where(down, rows[:, 0], rows[:, 1])  # the upper site of a vertical edge
    vertical = jnp.zeros((num_rows, num_cols), couplings.dtype)
    vertical = vertical.at[top_row[down | up], cols[down | up, 0]].add(couplings[down | up])
    return field, row_pairs, vertical


def _butterflies(vectors: Array, ratios: Array, radix_bits: int = 3) -> Array:
    """Apply ⊗_j (I + t_j X) to (2^W, B) vectors (one per column), bit j of the row
    index being spin j: I + t_j X mixes the two entries that differ in bit j. Bits go
    ``radix_bits`` at a time, so one pass over memory applies several factors (about
    twice as fast as one bit per pass on a CPU)."""
    num_states, batch = vectors.shape
    num_bits = ratios.shape[0]
    low_bit = 0
    while low_bit < num_bits:
        width = min(radix_bits, num_bits - low_bit)
        block = vectors.reshape(num_states >> (low_bit + width), *([2] * width), (1 << low_bit) * batch)
        # the 2^width slices; index position p (0 = outermost) holds bit low_bit + width − 1 − p
        parts = {bits: block[(slice(None),) + bits] for bits in itertools.product((0, 1), repeat=width)}
        for step in range(width):
            position, ratio = width - 1 - step, ratios[low_bit + step]
            parts = {bits: value + ratio * parts[bits[:position] + (1 - bits[position],) + bits[position + 1:]]
                     for bits, value in parts.items()}

        def assemble(prefix):
            if len(prefix) == width:
                return parts[prefix]
            return jnp.stack([assemble(prefix + (0,)), assemble(prefix + (1,))], axis=1)

        vectors = assemble(()).reshape(num_states, batch)
        low_bit += width
    return vectors


@partial(jax.jit, static_argnames="batch_size")
def _transfer_matrix_log_z(model: IsingModel, batch_size: int = 4) -> Array:
    """log Z of a periodic lattice by row-to-row transfer matrices.

    With rows x_0, …, x_{L−1} (2^W states each), the diagonal row weights
    d_i(x_i) = exp(Σ_j H_ij x_ij + Σ_{edges in row i} J x_ip x_iq) and the vertical
    transfer V_i(x_i, x_{i+1}) = ∏_j exp(J_ij x_ij x_{i+1,j}) = ⊗_j K_ij,

        Z = Tr(D_0 V_0 D_1 V_1 ⋯ D_{L−1} V_{L−1})
          = Σ_a d_0(a) ⟨k_{L−1}(a), D_{L−1} V_{L−2} ⋯ D_1 k_0(a)⟩,

    where k_i(a) = V_i e_a is the product vector ⊗_j K_ij[·, a_j]. Every starting row a
    is needed (the torus has no cheaper cut), so the cost is 2^(2W)·(L−2)·W
    multiply-adds: K_ij = e^{J_ij} (I + e^{−2J_ij} X) is applied one spin at a time
    (``_butterflies``), ``batch_size`` starting rows per pass, each vector rescaled to
    max 1 after every row with its log-scale carried. Twice the work of
    ``_checkerboard_log_z``, which even lattices use.
    """
    field, row_pairs, vertical = _lattice_terms(model)
    num_rows, num_cols = field.shape
    dtype = field.dtype
    num_states = 2**num_cols
    spins = _spins(jnp.arange(num_states, dtype=jnp.int32), num_cols, dtype)  # (2^W, W)
    log_rows = field @ spins.T + jnp.einsum("ap,ipq,aq->ia", spins, row_pairs, spins)  # (L, 2^W): log d_i
    if num_rows == 1:
        return jax.nn.logsumexp(log_rows[0])
    row_max = jnp.max(log_rows, axis=1)
    rows = jnp.exp(log_rows - row_max[:, None])
    ratios = jnp.exp(-2.0 * vertical)  # (L, W)
    batch_size = min(batch_size, num_states)

    def product_vectors(start_spins, couplings):  # V e_a for a batch of rows a: (2^W, B)
        return jnp.exp(spins @ (couplings[:, None] * start_spins.T))

    def chunk_log_z(chunk):
        starts = chunk * batch_size + jnp.arange(batch_size, dtype=jnp.int32)
        start_spins = spins[starts]  # (B, W)
        vectors = product_vectors(start_spins, vertical[0])

        def next_row(carry, row):
            vectors, log_scale = carry
            row_weights, row_ratios = row
            vectors = _butterflies(vectors * row_weights[:, None], row_ratios)
            top = jnp.max(vectors, axis=0)
            return (vectors / top, log_scale + jnp.log(top)), None

        (vectors, log_scale), _ = jax.lax.scan(
            next_row, (vectors, jnp.zeros((batch_size,), dtype)), (rows[1:num_rows - 1], ratios[1:num_rows - 1])
        )
        closing_vectors = product_vectors(start_spins, vertical[num_rows - 1])
        closing = jnp.sum(rows[num_rows - 1][:, None] * vectors * closing_vectors, 0)
        return jax.nn.logsumexp(jnp.log(closing) + log_scale + log_rows[0, starts])

    per_chunk = jax.lax.map(chunk_log_z, jnp.arange(num_states // batch_size, dtype=jnp.int32))
    # constants pulled out: max of each d_i (i ≥ 1) and e^{J_ij} of each butterfly pass
    return jax.nn.logsumexp(per_chunk) + jnp.sum(row_max[1:]) + jnp.sum(vertical[1:num_rows - 1])


def _checkerboard_applies(model: IsingModel) -> bool:
    """Whether ``_checkerboard_log_z`` applies to a lattice model (W its narrower side): it
    needs L ≥ W ≥ 4 both even (the lattice then is bipartite, without doubled edges) and
    every in-row edge between neighbouring columns."""
    num_rows, num_cols = model.lattice_shape
    if num_cols > num_rows:
        num_rows, num_cols = num_cols, num_rows
    if num_cols < 4 or num_rows % 2 or num_cols % 2:
        return False
    edges = model.edge_array
    rows, cols = edges // model.lattice_shape[1], edges % model.lattice_shape[1]
    if model.lattice_shape[1] > model.lattice_shape[0]:
        rows, cols = cols, rows
    in_row = rows[:, 0] == rows[:, 1]
    step = (cols[in_row, 1] - cols[in_row, 0]) % num_cols
    return not np.any((step != 1) & (step != num_cols - 1))


def _log_two_cosh(z: Array) -> Array:
    return jnp.logaddexp(z, -z)


def _controlled_butterflies(state: Array, axis: int, low_to_high: Array, high_to_low: Array,
                            radix_bits: int = 1) -> Array:
    """Apply ⊗_k [[1, a_k], [b_k, 1]] along the bits of ``axis`` (0 or 1) of a
    (2^h, 2^h, B) state, the factors depending on the other axis (the control):
    low_to_high, high_to_low (h, 2^h): entry 1 of a pair gains a_k·entry 0 and entry 0
    gains b_k·entry 1. ``radix_bits`` bits per pass over memory, as ``_butterflies``."""
    size, _, batch = state.shape
    num_bits = low_to_high.shape[0]
    low_bit = 0
    while low_bit < num_bits:
        width = min(radix_bits, num_bits - low_bit)
        high = size >> (low_bit + width)
        if axis == 0:  # (high, 2, ..., 2, low, control, B); coefficients over the control
            block = state.reshape(high, *([2] * width), 1 << low_bit, size, batch)
            shape = (size, 1)
        else:  # (control, high, 2, ..., 2, low·B)
            block = state.reshape(size, high, *([2] * width), (1 << low_bit) * batch)
            shape = (size, 1, 1)
        lead = (slice(None),) * (1 if axis == 0 else 2)
        parts = {bits: block[lead + bits] for bits in itertools.product((0, 1), repeat=width)}
        for step in range(width):
            position = width - 1 - step
            up = low_to_high[low_bit + step].reshape(shape)
            down = high_to_low[low_bit + step].reshape(shape)
            parts = {bits: value + (down if bits[position] == 0 else up)
                     * parts[bits[:position] + (1 - bits[position],) + bits[position + 1:]]
                     for bits, value in parts.items()}

        def assemble(prefix):
            if len(prefix) == width:
                return parts[prefix]
            return jnp.stack([assemble(prefix + (0,)), assemble(prefix + (1,))], axis=len(lead))

        state = assemble(()).reshape(size, size, batch)
        low_bit += width
    return state


@partial(jax.jit, static_argnames=("batch_size", "radix_bits"))
def _checkerboard_log_z(model: IsingModel, batch_size: int = 8, radix_bits: int = 1) -> Array:
    """log Z of an even periodic lattice by transfer matrices over the white sites of a
    checkerboard, the black sites summed out in closed form.

    Site (i, j) is white when i + j is even. The lattice being bipartite, each black spin
    s meets only whites (up u, down d, left l, right r) and sums out exactly:
    Σ_s exp(s·(H + J_u u + J_d d + J_l l + J_r r)) = 2 cosh(H + J_u u + J_d d + J_l l + J_r r).
    Row i holds h = W/2 whites w_i, and the blacks of row i join w_{i−1}, w_i, w_{i+1}, so
    with states (w_{i−1}, w_i) (2^W of them)

        Z = Tr(T_0 T_1 ⋯ T_{L−1}),   T_i[(w_{i−1}, w_i), (w_i, w_{i+1})]
          = ∏_k 2cosh(H_ik + J_u w_{i−1,k} + J_d w_{i+1,k} + J_l w_{i,l(k)} + J_r w_{i,r(k)}) · e^{H·w_{i+1}},

    black k of row i lying between whites l(k), r(k) of its row. For fixed w_i, T_i is a
    Kronecker product over k of 2 × 2 matrices M_ik (w_{i−1,k} → w_{i+1,k}) = diag(r)·[[1, a],
    [b, 1]]: a diagonal and one butterfly per white — h multiply-adds per entry and row,
    half the W of the spin-by-spin transfer (``_transfer_matrix_log_z``). The trace runs
    over seams (w_{L−1}, w_0) = (p, q), ``batch_size`` values of p per pass: T_0 and T_1
    from a seam are closed-form products, T_2 … T_{L−3} full passes, T_{L−2} is needed at
    w_{L−1} = p only (one contraction per bit) and T_{L−1} at w_0 = q (an inner product):
    2^{2W}·(L − 4)·W/2 multiply-adds in all. Each vector is rescaled to max 1 after every
    row with its log-scale carried. Measured on a twisted-SMC paper's 16 × 16 model
    (``benchmarks/ising_exact_timing.py``): 94 s in float64 and 68 s in float32 on 2 idle
    CPU cores (batch 8: about 2.6·10⁹ multiply-adds per second per core, the passes over
    the 4 MB state bound by the caches' bandwidth; tiling the passes or 2 bits per pass
    measured slower), 3.2 s in float64 on one H100 (batch 1024).
    """
    field, row_pairs, vertical = _lattice_terms(model)
    num_rows, num_cols = field.shape
    dtype = field.dtype
    half = num_cols // 2
    size = 2**half
    batch_size = min(batch_size, size)
    rows = np.arange(num_rows)[:, None]
    whites = 2 * np.arange(half)[None, :] + rows % 2  # (L, h) column of white k in row i
    blacks = 2 * np.arange(half)[None, :] + (rows + 1) % 2  # column of black k in row i
    cols, next_cols = np.arange(num_cols)[None, :], (np.arange(num_cols)[None, :] + 1) % num_cols
    horizontal = row_pairs[rows, cols, next_cols] + row_pairs[rows, next_cols, cols]  # (i, j) — (i, j+1)
    white_field = field[rows, whites]  # (L, h)
    black_field = field[rows, blacks]
    up = vertical[(rows - 1) % num_rows, blacks]  # edge (i−1, j) — (i, j)
    down = vertical[rows, blacks]  # edge (i, j) — (i+1, j)
    left = horizontal[rows, (blacks - 1) % num_cols]  # edge (i, j−1) — (i, j)
    right = horizontal[rows, blacks]  # edge (i, j) — (i, j+1)
    left_white = np.where(rows % 2 == 0, np.arange(half), (np.arange(half) - 1) % half)  # (L, h)
    right_white = np.where(rows % 2 == 0, (np.arange(half) + 1) % half, np.arange(half))

    spins = _spins(jnp.arange(size, dtype=jnp.int32), half, dtype)  # (2^h, h): white k of each row value
    values = jnp.array([-1.0, 1.0], dtype)
    # log M_ik[a, d](c): row i, black k, input w_{i−1,k} = a, output w_{i+1,k} = d, control c = w_i
    control = (left[:, :, None] * spins.T[left_white] + right[:, :, None] * spins.T[right_white]
               + black_field[:, :, None])  # (L, h, 2^h)
    log_m = (_log_two_cosh(control[..., None, None] + up[:, :, None, None, None] * values[:, None]
                           + down[:, :, None, None, None] * values[None, :])
             + jnp.roll(white_field, -1, axis=0)[:, :, None, None, None] * values[None, :])  # (L, h, 2^h, 2, 2)
    # M = diag(M_00, M_11)·[[1, M_01/M_00], [M_10/M_11, 1]] (rows: input a, columns: output d)
    log_diagonal = jnp.stack([log_m[..., 0, 0], log_m[..., 1, 1]], axis=-1)  # (L, h, 2^h, 2)
    low_to_high = jnp.exp(log_m[..., 0, 1] - log_m[..., 0, 0])  # (L, h, 2^h)
    high_to_low = jnp.exp(log_m[..., 1, 0] - log_m[..., 1, 1])
    # the diagonal of row i over (input w_{i−1}, control w_i): Σ_k log M_ik[x_k, x_k](c)
    bits = ((jnp.arange(size)[:, None] >> jnp.arange(half)) & 1)  # (2^h, h): bit k of a row value
    log_rows = (jnp.einsum("xk,iky->ixy", bits.astype(dtype), log_diagonal[..., 1] - log_diagonal[..., 0])
                + jnp.sum(log_diagonal[..., 0], axis=1)[:, None, :])  # (L, 2^h, 2^h)
    row_max = jnp.max(log_rows, axis=(1, 2))
    diagonals = jnp.exp(log_rows - row_max[:, None, None])
    last = num_rows - 2  # T_{L−2}: only its entries at w_{L−1} = p are needed
    shrink_max = jnp.max(log_m[last])
    ks = jnp.arange(half)
    num_full = (num_rows - 4) // 2  # pairs of full rows T_2 … T_{L−3}
    full = (diagonals[2:last].reshape(num_full, 2, size, size), low_to_high[2:last].reshape(num_full, 2, half, size),
            high_to_low[2:last].reshape(num_full, 2, half, size))

    def chunk_log_z(chunk):
        q = chunk // (size // batch_size)
        p = (chunk % (size // batch_size)) * batch_size + jnp.arange(batch_size)
        p_bits, q_bits = bits[p], bits[q]  # (B, h), (h,)
        # T_0 from the seam: w_0 = q fixed, w_{L−1} = p → w_1 (a product over k), (B, 2^h)
        log_first = jnp.sum(log_m[0, ks, q][ks, p_bits[:, None, :], bits[None, :, :]], axis=-1)
        # T_1: w_0 = q → w_2 under the control w_1, (2^h, 2^h)
        log_second = jnp.sum(log_m[1][ks, jnp.arange(size)[:, None, None], q_bits, bits[None, :, :]], axis=-1)
        first_max, second_max = jnp.max(log_first, axis=1), jnp.max(log_second)
        state = (jnp.exp(log_first - first_max[:, None]).T[:, None, :]
                 * jnp.exp(log_second - second_max)[:, :, None])  # (w_1, w_2, B), max 1
        log_scale = first_max + second_max

        def two_rows(carry, rows):
            # each vector is divided by its max with the next diagonal (no pass of its own)
            state, top, log_scale = carry
            diagonal, to_high, to_low = rows
            # T_i, i even: w_{i−1} on axis 0 (input), w_i on axis 1 (control)
            state = state * (diagonal[0][:, :, None] / top)
            state = _controlled_butterflies(state, 0, to_high[0], to_low[0], radix_bits)
            log_scale, top = log_scale + jnp.log(top), jnp.max(state, axis=(0, 1))
            # T_{i+1}: w_i on axis 1 (input), w_{i+1} on axis 0 (control)
            state = state * (diagonal[1].T[:, :, None] / top)
            state = _controlled_butterflies(state, 1, to_high[1], to_low[1], radix_bits)
            return (state, jnp.max(state, axis=(0, 1)), log_scale + jnp.log(top)), None

        (state, top, log_scale), _ = jax.lax.scan(two_rows, (state, jnp.ones_like(log_scale), log_scale), full)
        state, log_scale = state / top, log_scale + jnp.log(top)
        # T_{L−2} at w_{L−1} = p: contract w_{L−3} (axis 0) bit by bit, highest first
        shrink = jnp.exp(log_m[last][ks[:, None, None], jnp.arange(size)[None, :, None], :, p_bits.T[:, None, :]]
                         - shrink_max)  # (h, 2^h control, B, 2 input)
        for k in reversed(range(half)):
            state = state.reshape(2, -1, size, batch_size)
            state = state[0] * shrink[k, :, :, 0] + state[1] * shrink[k, :, :, 1]
        state = state.reshape(size, batch_size)  # (w_{L−2}, B)
        # T_{L−1} at w_0 = q under the control w_{L−1} = p: an inner product over w_{L−2}
        log_close = jnp.sum(log_m[num_rows - 1][ks, p[None, :, None], bits[:, None, :], q_bits], axis=-1)
        close_max = jnp.max(log_close, axis=0)
        closing = jnp.sum(jnp.exp(log_close - close_max) * state, axis=0)
        return jax.nn.logsumexp(jnp.log(closing) + close_max + log_scale)

    per_chunk = jax.lax.map(chunk_log_z, jnp.arange(size * size // batch_size, dtype=jnp.int32))
    return jax.nn.logsumexp(per_chunk) + jnp.sum(row_max[2:last]) + half * shrink_max


def default_batch_size() -> int:
    """Seams per checkerboard pass: 8 on a CPU (the state, 2^W × 8 numbers, stays near the
    caches), 1024 on an accelerator (enough parallel work per pass; 512 MB in float64 at
    W = 16)."""
    return 8 if jax.default_backend() == "cpu" else 1024


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
