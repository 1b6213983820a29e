"""Exact log Z of periodic Ising lattices by transfer matrices (``jaxz.models.ising.exact_log_z``):
row to row, one spin at a time, or over the white sites of a checkerboard with the black ones
summed out in closed form. The models are ``jaxz.models.ising.IsingModel`` lattices
(``periodic_lattice``); this module reads their ``lattice_shape``, ``edge_array``, ``field`` and
``couplings`` only, so it does not import the model module."""
import itertools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxz.types import Array


def _spins(indices: Array, num_bits: int, dtype) -> Array:
    """Row k holds the spins 2·bit − 1 of indices[k] (least significant bit first)."""
    return (2 * ((indices[:, None] >> jnp.arange(num_bits, dtype=jnp.int32)) & 1) - 1).astype(dtype)



def _lattice_terms(model):
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
def _transfer_matrix_log_z(model, batch_size: int = 4) -> Array:
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


def _checkerboard_applies(model) -> bool:
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
def _checkerboard_log_z(model, batch_size: int = 8, radix_bits: int = 1) -> Array:
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
    2^{2W}·(L − 4)·W/2 multiply-adds in all, bound by the caches' bandwidth on a CPU.
    Each vector is rescaled to max 1 after every row with its log-scale carried. Timings:
    benchmarks/results/ising_exact_timing.json (CPU) and ising_exact_timing_gpu.json.
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
