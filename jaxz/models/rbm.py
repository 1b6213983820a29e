"""Binary restricted Boltzmann machines: exact log Z by enumeration, CD/PCD training,
the Salakhutdinov–Murray annealing path, and the one-visible-unit-at-a-time
sequence of Fraccaro, Paquet & Winther (ARM, seed §5).

An RBM over v ∈ {0,1}^V, h ∈ {0,1}^H has energy E(v, h) = −a·v − b·h − vᵀW h with
``W`` (V × H). Summing out one layer (seed eq. 13):

    log f(v) = a·v + Σ_j softplus(b_j + (vᵀW)_j)
    log f(h) = b·h + Σ_i softplus(a_i + (W h)_i)

and Z = Σ_v f(v) = Σ_h f(h). Arrays follow the dtype of the RBM's parameters.
"""
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz import _checks
from jaxz.base import SequentialModel
from jaxz.kernels.base import Kernel, from_transition
from jaxz.paths import Path
from jaxz.types import Array, PRNGKey

_LOG2 = float(np.log(2.0))
_MAX_ENUMERATED_BITS = 30


class RBM(NamedTuple):
    W: Array  # (V, H) weights
    a: Array  # (V,) visible biases
    b: Array  # (H,) hidden biases


def check_rbm(rbm: RBM, name: str = "rbm") -> RBM:
    """Shapes agree: W (V, H), a (V,), b (H,), and the parameters are floating. Shapes and
    dtypes are static, so this also runs under jit; a mismatch raises ValueError naming
    the field."""
    if not isinstance(rbm, RBM):
        raise ValueError(f"{name} must be a jaxz.models.rbm.RBM(W, a, b), got {type(rbm).__name__}")
    W_shape, a_shape, b_shape = jnp.shape(rbm.W), jnp.shape(rbm.a), jnp.shape(rbm.b)
    if len(W_shape) != 2:
        raise ValueError(f"{name}.W must be a (num_visible, num_hidden) matrix, got shape {W_shape}")
    if a_shape != (W_shape[0],):
        raise ValueError(f"{name}.a (visible biases) must have shape ({W_shape[0]},) to match W {W_shape}, "
                         f"got {a_shape}")
    if b_shape != (W_shape[1],):
        raise ValueError(f"{name}.b (hidden biases) must have shape ({W_shape[1]},) to match W {W_shape}, "
                         f"got {b_shape}")
    for field in ("W", "a", "b"):
        _checks.floating(f"{name}.{field}", getattr(rbm, field))
    return rbm


class TrainResult(NamedTuple):
    rbm: RBM
    reconstruction_error: Array  # (num_epochs,) mean squared one-step reconstruction error per pixel


# ---------------------------------------------------------------------------------------
# Densities and exact log Z


def log_marginal_visible(rbm: RBM, v: Array) -> Array:
    """log f(v) = a·v + Σ_j softplus(b_j + (vᵀW)_j), hidden units summed out (seed eq. 13).
    ``v``: (..., V); returns (...)."""
    check_rbm(rbm)
    return v @ rbm.a + jnp.sum(jax.nn.softplus(v @ rbm.W + rbm.b), axis=-1)


def log_marginal_hidden(rbm: RBM, h: Array) -> Array:
    """log f(h) = b·h + Σ_i softplus(a_i + (W h)_i), visible units summed out.
    ``h``: (..., H); returns (...)."""
    check_rbm(rbm)
    return h @ rbm.b + jnp.sum(jax.nn.softplus(h @ rbm.W.T + rbm.a), axis=-1)


def _binary_states(indices: Array, num_bits: int, dtype) -> Array:
    """Row k holds the bits of indices[k] (least significant first)."""
    return ((indices[:, None] >> jnp.arange(num_bits, dtype=jnp.int32)) & 1).astype(dtype)


def exact_log_z(rbm: RBM, *, chunk_bits: int = 12) -> Array:
    """log Z by enumerating the smaller layer, 2^``chunk_bits`` states at a time under
    ``lax.map``: memory stays O(2^chunk_bits · max(V, H)) whatever the layer size.

    Raises ValueError when the smaller layer has more than 30 units, or when a
    (concrete) parameter is not finite.
    """
    check_rbm(rbm)
    for field in ("W", "a", "b"):  # RBM(W, a, b) takes anything; a nan parameter makes log Z nan
        _checks.finite(f"rbm.{field}", getattr(rbm, field))
    num_visible, num_hidden = np.shape(rbm.W)
    num_bits = min(num_visible, num_hidden)
    if num_bits > _MAX_ENUMERATED_BITS:
        raise ValueError(
            f"exact_log_z enumerates the smaller layer: it must have at most {_MAX_ENUMERATED_BITS} units, "
            f"got {num_bits} (W has shape {np.shape(rbm.W)})"
        )
    if int(chunk_bits) < 0:
        raise ValueError(f"chunk_bits must be >= 0, got {chunk_bits}")
    if num_hidden <= num_visible:
        log_marginal = lambda states: log_marginal_hidden(rbm, states)  # noqa: E731
    else:
        log_marginal = lambda states: log_marginal_visible(rbm, states)  # noqa: E731
    chunk_bits = min(int(chunk_bits), num_bits)
    chunk_size = 2**chunk_bits
    num_chunks = 2 ** (num_bits - chunk_bits)
    dtype = jnp.result_type(rbm.W)

    def chunk_log_z(chunk):
        indices = chunk * chunk_size + jnp.arange(chunk_size, dtype=jnp.int32)
        return jax.nn.logsumexp(log_marginal(_binary_states(indices, num_bits, dtype)))

    per_chunk = jax.lax.map(chunk_log_z, jnp.arange(num_chunks, dtype=jnp.int32))
    return jax.nn.logsumexp(per_chunk)


# ---------------------------------------------------------------------------------------
# Gibbs conditionals (work on one particle (V,) or a batch (..., V))


def _bernoulli(rng_key: PRNGKey, logits: Array) -> Array:
    uniforms = jax.random.uniform(rng_key, jnp.shape(logits), jnp.result_type(logits))
    return (uniforms < jax.nn.sigmoid(logits)).astype(jnp.result_type(logits))


def sample_hidden(rng_key: PRNGKey, rbm: RBM, v: Array) -> Array:
    """h ~ p(h | v): independent Bernoulli(σ(b + vᵀW))."""
    return _bernoulli(rng_key, v @ rbm.W + rbm.b)


def sample_visible(rng_key: PRNGKey, rbm: RBM, h: Array) -> Array:
    """v ~ p(v | h): independent Bernoulli(σ(a + W h))."""
    return _bernoulli(rng_key, h @ rbm.W.T + rbm.a)


def gibbs_sweep(rng_key: PRNGKey, rbm: RBM, v: Array) -> Array:
    """One blocked Gibbs sweep v → h ~ p(h | v) → v' ~ p(v | h)."""
    key_hidden, key_visible = jax.random.split(rng_key)
    return sample_visible(key_visible, rbm, sample_hidden(key_hidden, rbm, v))


# ---------------------------------------------------------------------------------------
# Base-rate model and the Salakhutdinov–Murray annealing path


def base_rate(data, pseudo_count: float = 1.0) -> RBM:
    """The base-rate RBM of Salakhutdinov & Murray (2008): no hidden units, visible
    biases a_i = logit(p_i) from the smoothed pixel means
    p_i = (Σ_n v_ni + pseudo_count) / (N + 2 · pseudo_count).

    Its log Z = Σ_i softplus(a_i) is exact (``exact_log_z`` returns it instantly:
    there is nothing to enumerate). ``data``: (N, V) binary; dtype follows it.
    """
    data = jnp.asarray(data)
    if data.ndim != 2:
        raise ValueError(f"data must be a 2-D (num_examples, num_visible) array, got shape {data.shape}")
    if not isinstance(data, jax.core.Tracer) and not np.all(np.isin(np.asarray(data), (0, 1))):
        raise ValueError("data must be binary (every entry 0 or 1); binarize it first, e.g. jaxz.data.digits_binarized")
    if not pseudo_count > 0:
        raise ValueError(f"pseudo_count must be > 0, got {pseudo_count}")
    dtype = data.dtype if jnp.issubdtype(data.dtype, jnp.floating) else jnp.result_type(float)
    data = data.astype(dtype)
    means = (jnp.sum(data, axis=0) + pseudo_count) / (data.shape[0] + 2.0 * pseudo_count)
    num_visible = data.shape[1]
    return RBM(jnp.zeros((num_visible, 0), dtype), jnp.log(means) - jnp.log1p(-means), jnp.zeros((0,), dtype))


def annealing(base: RBM, target: RBM) -> tuple[Path, Kernel]:
    """The RBM annealing path of Salakhutdinov & Murray (2008) and its Gibbs kernel.

    The joint state is (v, h_A, h_B) with the hidden units of both models; summed out,

        log f_β(v) = ((1−β) a_A + β a_B)·v + Σ_j softplus((1−β)(b_A + vᵀW_A)_j)
                     + Σ_k softplus(β (b_B + vᵀW_B)_k) − β H_A log 2 − (1−β) H_B log 2,

    where the last two (v-free) terms make f_0 = f_A and f_1 = f_B exactly. The path
    state is v (V,); ``log_z0 = exact_log_z(base)``; ``sample_base`` draws exactly from
    a weightless base (as ``base_rate`` returns; None when the base has weights).
    The kernel is one blocked Gibbs sweep at β: (h_A, h_B) | v, then v | (h_A, h_B).
    """
    check_rbm(base, "base")
    check_rbm(target, "target")
    if np.shape(base.W)[0] != np.shape(target.W)[0]:
        raise ValueError(
            f"base and target must have the same number of visible units, got {np.shape(base.W)[0]} "
            f"and {np.shape(target.W)[0]}"
        )
    dtype = jnp.result_type(target.W)
    base = RBM(*(jnp.asarray(p, dtype) for p in base))
    num_hidden_base, num_hidden_target = base.W.shape[1], target.W.shape[1]
    weights = jnp.concatenate([base.W, target.W], axis=1)  # both hidden layers side by side
    hidden_biases = jnp.concatenate([base.b, target.b])
    is_base = jnp.arange(num_hidden_base + num_hidden_target) < num_hidden_base

    def hidden_scale(beta):  # (1−β) on h_A, β on h_B
        return jnp.where(is_base, 1.0 - beta, beta).astype(dtype)

    def log_density(v, beta):
        beta = jnp.asarray(beta, dtype)
        visible = ((1.0 - beta) * base.a + beta * target.a) @ v
        hidden = jnp.sum(jax.nn.softplus(hidden_scale(beta) * (v @ weights + hidden_biases)), axis=-1)
        constant = (beta * num_hidden_base + (1.0 - beta) * num_hidden_target) * _LOG2
        return visible + hidden - constant

    def transition(rng_key, v, beta):
        beta = jnp.asarray(beta, dtype)
        key_hidden, key_visible = jax.random.split(rng_key)
        scale = hidden_scale(beta)
        hidden = _bernoulli(key_hidden, scale * (v @ weights + hidden_biases))
        visible_logits = (1.0 - beta) * base.a + beta * target.a + (scale * hidden) @ weights.T
        return _bernoulli(key_visible, visible_logits), jnp.ones((), dtype)

    weightless = not isinstance(base.W, jax.core.Tracer) and not np.any(np.asarray(base.W))
    def sample_base(rng_key, num):  # exact only when the base has no weights
        return _bernoulli(rng_key, jnp.broadcast_to(base.a, (num, base.a.shape[0])))

    path = Path(log_density, exact_log_z(base).astype(dtype), sample_base if weightless else None)
    return path, from_transition(transition)


# ---------------------------------------------------------------------------------------
# Training: CD-k and persistent CD


def _init_rbm(rng_key, data, num_hidden, init_scale) -> RBM:
    dtype = data.dtype
    means = (jnp.sum(data, axis=0) + 1.0) / (data.shape[0] + 2.0)
    weights = init_scale * jax.random.normal(rng_key, (data.shape[1], num_hidden), dtype)
    return RBM(weights, jnp.log(means) - jnp.log1p(-means), jnp.zeros((num_hidden,), dtype))


def train(
    rng_key: PRNGKey,
    data,
    num_hidden: int,
    *,
    method: str = "cd",
    k: int = 1,
    num_epochs: int = 20,
    batch_size: int = 100,
    optimizer=None,
    init_scale: float = 0.01,
    callback: Callable | None = None,
) -> TrainResult:
    """Train an RBM by contrastive divergence (``method="cd"``, chains restart at the
    minibatch) or persistent CD (``"pcd"``, ``batch_size`` chains carried across
    minibatches and epochs; Tieleman 2008), with k blocked Gibbs sweeps per update.

    The gradient of the negative log-likelihood is −(⟨v hᵀ⟩_data − ⟨v hᵀ⟩_model), with
    hidden probabilities in both phases; ``optimizer`` is any optax transformation
    (default: SGD, learning rate 0.05, momentum 0.9). One epoch is one jitted
    ``lax.scan`` over shuffled minibatches (the remainder is dropped). Returns the RBM
    and the per-epoch reconstruction error (also passed to ``callback(epoch, error)``
    after each epoch, e.g. to print or log progress).
    """
    import optax

    data = jnp.asarray(data)
    if data.ndim != 2:
        raise ValueError(f"data must be a 2-D (num_examples, num_visible) array, got shape {data.shape}")
    if method not in ("cd", "pcd"):
        raise ValueError(f"method must be 'cd' or 'pcd', got {method!r}")
    if int(k) < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if int(num_hidden) < 1:
        raise ValueError(f"num_hidden must be >= 1, got {num_hidden}")
    if int(num_epochs) < 1:
        raise ValueError(f"num_epochs must be >= 1, got {num_epochs}")
    if not 1 <= int(batch_size) <= data.shape[0]:
        raise ValueError(f"batch_size must be in [1, {data.shape[0]}] (the number of examples), got {batch_size}")
    if not jnp.issubdtype(data.dtype, jnp.floating):
        data = data.astype(jnp.result_type(float))
    optimizer = optax.sgd(0.05, momentum=0.9) if optimizer is None else optimizer
    num_batches = data.shape[0] // int(batch_size)
    persistent = method == "pcd"

    def update(carry, batch_and_key):
        rbm, opt_state, chains = carry
        batch, key = batch_and_key
        key_recon, key_chain = jax.random.split(key)
        hidden_data = jax.nn.sigmoid(batch @ rbm.W + rbm.b)
        # one-step reconstruction error, the usual training monitor
        hidden_sample = sample_hidden(key_recon, rbm, batch)
        reconstruction = jax.nn.sigmoid(hidden_sample @ rbm.W.T + rbm.a)
        error = jnp.mean((batch - reconstruction) ** 2)
        start = chains if persistent else batch

        def sweep(v, sweep_key):
            return gibbs_sweep(sweep_key, rbm, v), None

        negative, _ = jax.lax.scan(sweep, start, jax.random.split(key_chain, int(k)))
        hidden_model = jax.nn.sigmoid(negative @ rbm.W + rbm.b)
        scale = 1.0 / batch.shape[0]
        grads = RBM(
            -(batch.T @ hidden_data - negative.T @ hidden_model) * scale,
            -jnp.mean(batch - negative, axis=0),
            -jnp.mean(hidden_data - hidden_model, axis=0),
        )
        updates, opt_state = optimizer.update(grads, opt_state, rbm)
        rbm = optax.apply_updates(rbm, updates)
        return (rbm, opt_state, negative if persistent else chains), error

    @jax.jit
    def epoch(carry, rng_key):
        key_order, key_updates = jax.random.split(rng_key)
        order = jax.random.permutation(key_order, data.shape[0])[: num_batches * int(batch_size)]
        batches = data[order].reshape(num_batches, int(batch_size), data.shape[1])
        carry, errors = jax.lax.scan(update, carry, (batches, jax.random.split(key_updates, num_batches)))
        return carry, jnp.mean(errors)

    key_init, key_chains, key_epochs = jax.random.split(rng_key, 3)
    rbm = _init_rbm(key_init, data, int(num_hidden), init_scale)
    chains = data[jax.random.randint(key_chains, (int(batch_size),), 0, data.shape[0])]
    carry = (rbm, optimizer.init(rbm), chains)
    errors = []
    for index, key in enumerate(jax.random.split(key_epochs, int(num_epochs))):
        carry, error = epoch(carry, key)
        errors.append(error)
        if callback is not None:
            callback(index + 1, float(error))
    return TrainResult(carry[0], jnp.stack(errors))


# ---------------------------------------------------------------------------------------
# The sequence p_1, ..., p_V adding one visible unit per step (ARM, seed §5)


def variance_order(data) -> np.ndarray:
    """Visible units by decreasing data variance (ties by index): the seed's §5.1 order."""
    data = np.asarray(data, dtype=np.float64)
    return np.argsort(-data.var(axis=0), kind="stable").astype(np.int32)


def _check_order(order, num_visible: int) -> np.ndarray:
    order = np.asarray(order)
    if order.shape != (num_visible,) or not np.array_equal(np.sort(order), np.arange(num_visible)):
        raise ValueError(f"order must be a permutation of the {num_visible} visible units, got {order!r}")
    return order.astype(np.int32)


def _resolve_order(rbm: RBM, order, data) -> np.ndarray:
    num_visible = np.shape(rbm.W)[0]
    if order is None:
        order = np.arange(num_visible) if data is None else variance_order(data)
    return _check_order(order, num_visible)


def sequential_model(
    rbm: RBM, order=None, gibbs_sweeps: int = 10, *, data=None, block_size: int | None = None
) -> SequentialModel:
    """The RBM as the sequence p_n(v_[n]) ∝ f_n(v_[n]) = Σ_h exp(a_[n]·v_[n] + b·h + v_[n]ᵀW_[n] h)
    over the first n units of ``order`` (seed §5): p_V is the RBM, p_1 one unit.

    order: the order in which visible units are added (a permutation); None takes
        them by decreasing variance of ``data`` (seed §5.1) when ``data`` is given,
        else in index order.
    gibbs_sweeps: blocked Gibbs sweeps per ``move`` (over the units included so far).
    block_size: units per block of the work loop below (None: ⌈V/8⌉, 8 blocks): a sweep
        over the n included units costs about the blocks they fill, not a full masked sweep.

    With c = b + Σ_{i≤n} v_i W_i (hidden pre-activations of the included units) and
    u the next unit, the two values of v_u give (seed eq. 14)

        f_{n+1}/f_n = 1 (v_u = 0)  or  exp(a_u + Σ_j [softplus(c_j + W_uj) − softplus(c_j)])  (v_u = 1),

    so the smooth weight is W(v_[n]) = 1 + exp(ℓ_u) = exp(softplus(ℓ_u)) and the
    augmentation draws v_u ~ Bernoulli(σ(ℓ_u)). Particles are full (V,) arrays in the
    original unit order; units not yet included stay unused.

    Work at level n is O(Hn), as in the seed (a move costs O(tHn)): the units are
    taken in blocks of ``block_size`` in the order they enter, and the pre-activations
    and the visible draws loop (``lax.fori_loop`` with a traced trip count) over the
    ⌈n/block_size⌉ blocks that hold included units only. Under ``vmap`` over runs all
    runs share n, so the batched loop does no extra iterations. ``move_cost(n)`` =
    t·n/V full-size sweeps, what ``jaxz.arm`` charges per move.
    """
    check_rbm(rbm)
    rbm = RBM(*(jnp.asarray(p) for p in rbm))  # numpy parameters cannot be indexed by the traced unit below
    order = _resolve_order(rbm, order, data)
    if int(gibbs_sweeps) < 1:
        raise ValueError(f"gibbs_sweeps must be >= 1, got {gibbs_sweeps}")
    num_visible, num_hidden = np.shape(rbm.W)
    block = -(-num_visible // 8) if block_size is None else int(block_size)
    if block < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    num_blocks = -(-num_visible // block)
    padding = num_blocks * block - num_visible
    dtype = jnp.result_type(rbm.W)
    order_array = jnp.asarray(order)
    rank = np.empty_like(order)
    rank[order] = np.arange(num_visible, dtype=np.int32)  # rank[i]: 0-based step at which unit i enters
    rank_array = jnp.asarray(rank)
    # weights and biases in order of entry, padded with zero units to whole blocks
    weights = jnp.pad(jnp.asarray(rbm.W)[order], ((0, padding), (0, 0))).reshape(num_blocks, block, num_hidden)
    biases = jnp.pad(jnp.asarray(rbm.a)[order], (0, padding)).reshape(num_blocks, block)
    within = jnp.arange(block)

    def to_blocks(x):  # (V,) in unit order -> (num_blocks, block) in order of entry
        return jnp.pad(x[order_array], (0, padding)).reshape(num_blocks, block)

    def from_blocks(x_blocks):
        return x_blocks.reshape(-1)[rank_array]

    def blocks_used(n):
        return (n + block - 1) // block

    def pre_activation(x_blocks, n):
        """c = b + Σ_{i≤n} v_i W_i, over the included blocks only."""
        def add(k, c):
            keep = k * block + within < n
            return c + jnp.where(keep, x_blocks[k], 0.0) @ weights[k]
        return jax.lax.fori_loop(0, blocks_used(n), add, jnp.asarray(rbm.b, dtype))

    def draw_visible(rng_key, x_blocks, hidden, n):
        """v_[n] ~ p(v_[n] | h), block by block; units past n keep their values."""
        def draw(k, x_blocks):
            keep = k * block + within < n
            values = _bernoulli(jax.random.fold_in(rng_key, k), biases[k] + weights[k] @ hidden)
            return x_blocks.at[k].set(jnp.where(keep, values, x_blocks[k]))
        return jax.lax.fori_loop(0, blocks_used(n), draw, x_blocks)

    def next_unit_logit(x, n):
        """ℓ_u for u = order[n] (0-based), the unit added by the step n → n + 1."""
        unit = order_array[n]
        pre = pre_activation(to_blocks(x), n)
        gain = jax.nn.softplus(pre + rbm.W[unit]) - jax.nn.softplus(pre)
        return rbm.a[unit] + jnp.sum(gain), unit

    def sample_initial(rng_key):
        logit, unit = next_unit_logit(jnp.zeros((num_visible,), dtype), 0)
        return jnp.zeros((num_visible,), dtype).at[unit].set(_bernoulli(rng_key, logit))

    # Z_1 = Π_j (1 + e^{b_j}) · (1 + e^{ℓ_u}) for the first unit u
    log_z1 = jnp.sum(jax.nn.softplus(rbm.b)) + jax.nn.softplus(next_unit_logit(jnp.zeros((num_visible,), dtype), 0)[0])

    def log_smooth_weight(x, n):  # seed eq. (14)
        return jax.nn.softplus(next_unit_logit(x, n)[0])

    def augment(rng_key, x, n):
        logit, unit = next_unit_logit(x, n)
        return x.at[unit].set(_bernoulli(rng_key, logit))

    def move(rng_key, x, n):
        def sweep(x_blocks, key):
            key_hidden, key_visible = jax.random.split(key)
            hidden = _bernoulli(key_hidden, pre_activation(x_blocks, n))
            return draw_visible(key_visible, x_blocks, hidden, n), None

        x_blocks = jax.lax.scan(sweep, to_blocks(x), jax.random.split(rng_key, int(gibbs_sweeps)))[0]
        return from_blocks(x_blocks)

    def move_cost(n):  # a sweep at level n touches n of the V units: O(Hn) (seed §5)
        return int(gibbs_sweeps) * jnp.asarray(n, jnp.float32) / num_visible

    return SequentialModel(
        num_visible, sample_initial, log_z1.astype(dtype), log_smooth_weight, augment, move, int(gibbs_sweeps),
        move_cost,
    )


def data_reseed(rbm: RBM, data, order=None, *, num_sweeps: int = 100):
    """``reseed_fn(rng_key, n, num)`` for ARM's reseed variant (seed §5.1): ``num``
    training images, restricted to the first n units of ``order``, each run through
    ``num_sweeps`` blocked Gibbs sweeps of p_n. Approximate draws of p_n (exact as
    num_sweeps → ∞); each costs ``num_sweeps`` Gibbs sweeps. ``order`` as in
    ``sequential_model`` (None: by decreasing data variance)."""
    data = jnp.asarray(data, jnp.result_type(rbm.W))
    if data.ndim != 2 or data.shape[1] != np.shape(rbm.W)[0]:
        raise ValueError(f"data must have shape (num_examples, {np.shape(rbm.W)[0]}), got {data.shape}")
    order = _resolve_order(rbm, order if order is not None else variance_order(data), None)
    model = sequential_model(rbm, order, num_sweeps)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0], dtype=np.int32)
    rank = jnp.asarray(rank)

    def reseed_fn(rng_key, n, num):
        key_pick, key_move = jax.random.split(rng_key)
        starts = data[jax.random.randint(key_pick, (num,), 0, data.shape[0])]
        starts = jnp.where(rank < n, starts, 0.0)  # units past n are unused: keep them at 0
        return jax.vmap(model.move, in_axes=(0, 0, None))(jax.random.split(key_move, num), starts, n)

    return reseed_fn


__all__ = [
    "RBM", "TrainResult", "log_marginal_visible", "log_marginal_hidden", "exact_log_z", "sample_hidden",
    "sample_visible", "gibbs_sweep", "base_rate", "annealing", "train", "variance_order", "sequential_model",
    "data_reseed",
]
