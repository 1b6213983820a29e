"""The likelihood of one document under latent Dirichlet allocation with known topics,
as a sequential graphical model for ``jaxz.twisted_smc`` (Lindsten, Helske & Vihola
2018, §4.2 and §6.2; the non-twisted sampler is that of Naesseth et al. 2014).

A document w_1..w_T (word ids) has topic labels z_t ∈ {0..K−1} and topic proportions
θ ~ Dirichlet(α); word t is drawn from topic z_t's distribution Φ[z_t, ·]. With θ
integrated out (the Pólya, or Dirichlet-multinomial, distribution of the labels)

    Z = p(w | Φ, α) = Σ_z Π_t Φ[z_t, w_t] · B(α + n(z)) / B(α),                    (*)

where n_k(z) counts the labels equal to k and B(a) = Π_k Γ(a_k) / Γ(Σ_k a_k) is the
Dirichlet normalizer. The sequential targets add one label per word in word order,
γ_t(z_{1:t}) = Π_{s≤t} Φ[z_s, w_s] · B(α + n(z_{1:t})) / B(α) (seed eq. 4), so the
predictive of the next label is the base proposal

    γ_{t+1}(z_{1:t}, k) / γ_t(z_{1:t}) = Φ[k, w_{t+1}] (α_k + n_k) / (t + Σα).

The twisted targets (seed eqs. 5 and 9) multiply γ_t by an EP approximation of the
remaining words' likelihood; see ``sequential_model``. Arrays follow the dtype of Φ.
"""
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz.base import SequentialGraphModel
from jaxz.types import Array

ROW_SUM_TOLERANCE = 1e-4  # |Σ_v Φ[k, v] − 1| allowed (float32 normalizations pass, counts do not)
MAX_ENUMERATED_CONFIGURATIONS = 10**7
TWIST_FLOOR = 0.5  # the twist's Dirichlet parameters stay ≥ TWIST_FLOOR·α (see twist_parameters)


class Document(NamedTuple):
    """One document and the LDA model it is scored under (build it with ``document``).

    topics: (K, V) Φ, each row a topic's word distribution.
    topic_prior: (K,) α > 0, the Dirichlet prior of the topic proportions.
    words: (T,) int32 word ids, in document order.
    distinct_words: (D,) int32 the distinct ids, in order of first occurrence.
    word_index: (T,) int32 position of each word in ``distinct_words``.
    word_counts: (D,) int32 occurrences of each distinct word.
    """

    topics: Array
    topic_prior: Array
    words: Array
    distinct_words: Array
    word_index: Array
    word_counts: Array


class LDAState(NamedTuple):
    """One particle: the labels so far and their counts (so a step costs O(K))."""

    labels: Array  # (T,) int32, −1 where not yet set
    counts: Array  # (K,) n_k of the labels set so far, in the document's float dtype


def document(topics, topic_prior, words) -> Document:
    """Validate and package one document under LDA with known topics.

    topics: (K, V) nonnegative, each row summing to 1 (within 1e-4).
    topic_prior: (K,) α, every entry > 0.
    words: (T,) integer word ids in [0, V), T ≥ 1; every word must have positive
        probability under at least one topic (else Z = 0).
    The float dtype of the model is that of ``topics`` (float64 under x64).
    """
    topics = jnp.asarray(topics)
    dtype = topics.dtype if jnp.issubdtype(topics.dtype, jnp.floating) else jnp.result_type(float)
    topics = topics.astype(dtype)
    host_topics = np.asarray(topics, np.float64)
    if host_topics.ndim != 2 or host_topics.shape[0] < 1 or host_topics.shape[1] < 1:
        raise ValueError(f"topics must be a 2-D (num_topics, vocabulary_size) array, got shape {host_topics.shape}")
    num_topics, vocabulary_size = host_topics.shape
    if not np.all(np.isfinite(host_topics)) or np.any(host_topics < 0):
        raise ValueError("topics must be finite and nonnegative (rows are word distributions)")
    row_sums = host_topics.sum(axis=1)
    worst = int(np.argmax(np.abs(row_sums - 1.0)))
    if abs(row_sums[worst] - 1.0) > ROW_SUM_TOLERANCE:
        raise ValueError(
            f"every row of topics must sum to 1 (within {ROW_SUM_TOLERANCE}); row {worst} sums to {row_sums[worst]:.6g}"
        )
    host_prior = np.asarray(topic_prior, np.float64)
    if host_prior.shape != (num_topics,):
        raise ValueError(f"topic_prior must have shape ({num_topics},) (one entry per topic), got {host_prior.shape}")
    if not np.all(np.isfinite(host_prior)) or np.any(host_prior <= 0):
        raise ValueError(f"topic_prior must be finite and > 0 in every entry, got min {host_prior.min():.6g}")
    host_words = np.asarray(words)
    if host_words.ndim != 1 or host_words.shape[0] < 1:
        raise ValueError(f"words must be a non-empty 1-D array of word ids, got shape {host_words.shape}")
    if not np.issubdtype(host_words.dtype, np.integer):
        if not np.all(np.isfinite(host_words)) or np.any(host_words != np.round(host_words)):
            raise ValueError("words must be integer word ids")
        host_words = host_words.astype(np.int64)
    if host_words.min() < 0 or host_words.max() >= vocabulary_size:
        raise ValueError(
            f"words must be ids in [0, {vocabulary_size}) (the vocabulary of topics), "
            f"got range [{host_words.min()}, {host_words.max()}]"
        )
    unseen = np.flatnonzero(host_topics[:, host_words].max(axis=0) <= 0)
    if unseen.size:
        raise ValueError(
            f"word {int(host_words[unseen[0]])} (position {int(unseen[0])}) has probability 0 under every topic: "
            "the document's likelihood is 0"
        )
    distinct, first, inverse, counts = np.unique(host_words, return_index=True, return_inverse=True, return_counts=True)
    by_first = np.argsort(first)  # order distinct words by first occurrence
    rank = np.empty_like(by_first)
    rank[by_first] = np.arange(by_first.size)
    return Document(
        topics,
        jnp.asarray(host_prior, dtype),
        jnp.asarray(host_words, jnp.int32),
        jnp.asarray(distinct[by_first], jnp.int32),
        jnp.asarray(rank[inverse.reshape(-1)], jnp.int32),
        jnp.asarray(counts[by_first], jnp.int32),
    )


def log_dirichlet_normalizer(a: Array) -> Array:
    """log B(a) = Σ_k log Γ(a_k) − log Γ(Σ_k a_k) over the last axis."""
    return jnp.sum(jax.lax.lgamma(a), axis=-1) - jax.lax.lgamma(jnp.sum(a, axis=-1))


def log_word_probabilities(doc: Document) -> Array:
    """(T, K) log Φ[k, w_t] of every word and topic."""
    return jnp.log(doc.topics[:, doc.words]).T


def log_joint(doc: Document, labels: Array) -> Array:
    """log p(w, z | Φ, α) = Σ_t log Φ[z_t, w_t] + log B(α + n(z)) − log B(α), the
    summand of (*). ``labels``: (..., T) int; returns (...)."""
    labels = jnp.asarray(labels, jnp.int32)
    log_emission = log_word_probabilities(doc)  # (T, K)
    num_topics = doc.topic_prior.shape[0]
    per_word = log_emission[jnp.arange(log_emission.shape[0]), labels]  # log Φ[z_t, w_t]
    counts = jnp.sum(jax.nn.one_hot(labels, num_topics, dtype=doc.topic_prior.dtype), axis=-2)
    return (
        jnp.sum(per_word, axis=-1)
        + log_dirichlet_normalizer(doc.topic_prior + counts)
        - log_dirichlet_normalizer(doc.topic_prior)
    )


def exact_log_z(
    doc: Document, *, chunk_size: int = 2**15, max_configurations: int = MAX_ENUMERATED_CONFIGURATIONS
) -> Array:
    """log Z of (*) by enumerating all K^T labelings, ``chunk_size`` at a time under
    ``lax.map`` (memory O(chunk_size · T) whatever K^T is); the last chunk is padded
    and its padding masked out.

    Raises ValueError when K^T exceeds ``max_configurations`` (default 10^7).
    """
    num_topics = int(doc.topic_prior.shape[0])
    num_words = int(doc.words.shape[0])
    num_configurations = num_topics**num_words
    if num_configurations > int(max_configurations):
        raise ValueError(
            f"exact_log_z enumerates K^T labelings: K^T = {num_topics}^{num_words} = {num_configurations} exceeds "
            f"max_configurations = {max_configurations} (use a shorter document or fewer topics)"
        )
    if int(chunk_size) < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    chunk_size = min(int(chunk_size), num_configurations)
    return _enumerated_log_z(doc, chunk_size, -(-num_configurations // chunk_size))


@functools.partial(jax.jit, static_argnums=(1, 2))
def _enumerated_log_z(doc: Document, chunk_size: int, num_chunks: int) -> Array:
    num_topics = doc.topic_prior.shape[0]
    num_words = doc.words.shape[0]
    num_configurations = num_topics**num_words
    # digit t of configuration c in base K is z_t = (c // K^t) mod K (K^T < 2^31 by the limit)
    place_values = jnp.asarray(num_topics ** np.arange(num_words), jnp.int32)

    def chunk_log_z(chunk):
        indices = chunk * chunk_size + jnp.arange(chunk_size, dtype=jnp.int32)
        labels = (indices[:, None] // place_values) % num_topics
        log_terms = log_joint(doc, labels)
        return jax.nn.logsumexp(jnp.where(indices < num_configurations, log_terms, -jnp.inf))

    per_chunk = jax.lax.map(chunk_log_z, jnp.arange(num_chunks, dtype=jnp.int32))
    return jax.nn.logsumexp(per_chunk)


def twist_parameters(doc: Document, twist, *, twist_floor: float = TWIST_FLOOR) -> tuple[Array, Array]:
    """The remaining-site tables of an EP twist (seed eq. 9), for t = 0..T:

    remaining_exponents[t] = λ_t B_t,  B_t = Σ_{j > t} β_{w_j} (1-based j: the sites of the
        words not yet included after t words), B_T = 0;
    remaining_log_scales[t] = λ_t S_t,  S_t = Σ_{j > t} log s_{w_j}, S_T = 0.

    The twist's Dirichlet parameter α + n + B_t must be positive for every count vector
    n ≥ 0, i.e. α + B_t > 0; EP's fixed point only guarantees it at t = 0 (α + B_0 is the
    EP posterior γ). Where α_k + B_tk < ``twist_floor``·α_k for some k, the remaining sites
    are tempered, f̃ → f̃^{λ_t} with λ_t = min_k (1 − twist_floor) α_k / (−B_tk) < 1, so that
    every parameter is ≥ twist_floor·α_k (the authors' "Twist+reg" of test_real.m, whose
    floor is 0.01; 0.5 twists better on small documents). λ_t = 1 elsewhere. Any positive
    ψ_t keeps Ẑ unbiased; this only trades a little of the twist's look-ahead for
    finiteness.

    ``twist`` is a ``jaxz.approx.lda_ep`` result (any object with ``site_exponents``
    (D, K) and ``log_site_scales`` (D,) of the document's distinct words). ValueError if
    the shapes do not fit ``doc`` or the sites are not finite (checked when they are
    concrete: ``doc`` and ``twist`` may also be traced arguments of a jitted function, so
    one compilation serves many documents of the same shape, base and twist alike — the
    zero twist β = 0, log s = 0 is SMC-Base).
    """
    twist_floor = float(twist_floor)
    if not 0.0 < twist_floor < 1.0:
        raise ValueError(f"twist_floor must be in (0, 1), got {twist_floor}")
    num_distinct, num_topics = int(doc.distinct_words.shape[0]), int(doc.topic_prior.shape[0])
    exponents = jnp.asarray(getattr(twist, "site_exponents", None))
    log_scales = jnp.asarray(getattr(twist, "log_site_scales", None))
    if exponents.shape != (num_distinct, num_topics) or log_scales.shape != (num_distinct,):
        raise ValueError(
            "twist must be a jaxz.approx.lda_ep result for this document: site_exponents of shape "
            f"({num_distinct}, {num_topics}) and log_site_scales of shape ({num_distinct},), got "
            f"{exponents.shape} and {log_scales.shape}"
        )
    concrete = not any(isinstance(x, jax.core.Tracer) for x in (exponents, log_scales))
    if concrete and not (np.all(np.isfinite(np.asarray(exponents))) and np.all(np.isfinite(np.asarray(log_scales)))):
        raise ValueError("twist must have finite site_exponents and log_site_scales")
    dtype = doc.topic_prior.dtype
    per_word_exponents = exponents.astype(dtype)[doc.word_index]  # (T, K)
    per_word_log_scales = log_scales.astype(dtype)[doc.word_index]  # (T,)
    remaining_exponents = jnp.concatenate(
        [jnp.cumsum(per_word_exponents[::-1], axis=0)[::-1], jnp.zeros((1, num_topics), dtype)]
    )
    remaining_log_scales = jnp.concatenate([jnp.cumsum(per_word_log_scales[::-1])[::-1], jnp.zeros((1,), dtype)])
    alpha = doc.topic_prior
    negative = remaining_exponents < 0
    allowed = jnp.where(negative, (1.0 - twist_floor) * alpha / jnp.where(negative, -remaining_exponents, 1.0), 1.0)
    below = jnp.any(alpha + remaining_exponents < twist_floor * alpha, axis=1)
    temper = jnp.where(below, jnp.min(allowed, axis=1), 1.0)  # λ_t
    return remaining_exponents * temper[:, None], remaining_log_scales * temper


def sequential_model(doc: Document, twist=None, *, twist_floor: float = TWIST_FLOOR) -> SequentialGraphModel:
    """The labels z_1..z_T in word order as a fully adapted ``jaxz.SequentialGraphModel``.

    twist=None (SMC-Base): step t draws z_t from Φ[k, w_t] · (α_k + n_k)/(t − 1 + Σα)
    (normalized), the locally optimal proposal (seed eq. 2) for the targets γ_t.

    twist = a ``jaxz.approx.lda_ep`` result (SMC-Twist): with the EP sites
    f̃_d(θ) = s_d Π_k θ_k^{β_dk} of the words not yet included put in place of the exact
    factors f_d(θ) = Σ_k θ_k Φ[k, d] (seed eq. 9),

        ψ_t(z_{1:t}) = ∫ Π_{j>t} f̃_{w_j}(θ) p(θ | z_{1:t}) dθ
                     = e^{S_t} B(α + n + B_t) / B(α + n),
        γ^ψ_t(z_{1:t}) = Π_{s≤t} Φ[z_s, w_s] · e^{S_t} B(α + n + B_t) / B(α)         (t ≥ 1)

    (B_t, S_t from ``twist_parameters``, tempered where α + B_t would come below
    ``twist_floor``·α), with γ^ψ_0 = 1 and γ^ψ_T = γ_T since B_T = 0:
    the product of the increments telescopes to γ_T / γ_0, so Ẑ stays unbiased for Z
    (Alg. 1); with c = α + n + B_{t+1} the potential of label k for word t+1 is

        log Φ[k, w_{t+1}] + log c_k − log Σc + log B(c) − log B(α + n + B_t) + S_{t+1} − S_t

    (S_{t+1} − S_t = − log s_{w_{t+1}} untempered; for t = 0, where γ^ψ_0 = 1, log B(α)
    and 0 replace log B(α + n + B_0) and S_0). This is the fully adapted form of the EP
    proposal and weights of eqs. (10)-(11). Each step is O(K).
    """
    dtype = doc.topic_prior.dtype
    num_topics = int(doc.topic_prior.shape[0])
    num_words = int(doc.words.shape[0])
    alpha = doc.topic_prior
    log_emission = log_word_probabilities(doc)  # (T, K)
    if twist is None:
        remaining_exponents = jnp.zeros((num_words + 1, num_topics), dtype)
        remaining_log_scales = jnp.zeros((num_words + 1,), dtype)
    else:
        remaining_exponents, remaining_log_scales = twist_parameters(doc, twist, twist_floor=twist_floor)
    log_beta_prior = log_dirichlet_normalizer(alpha)

    def log_potentials(state: LDAState, t):
        after = alpha + state.counts + remaining_exponents[t + 1]  # c: γ^ψ_{t+1}'s Dirichlet parameter before z_{t+1}
        before = alpha + state.counts + remaining_exponents[t]
        first = t == 0  # γ^ψ_0 = 1
        log_beta_before = jnp.where(first, log_beta_prior, log_dirichlet_normalizer(before))
        log_scale_before = jnp.where(first, 0.0, remaining_log_scales[t]).astype(dtype)
        # log B(c + e_k) = log B(c) + log c_k − log Σc
        common = log_dirichlet_normalizer(after) - log_beta_before + remaining_log_scales[t + 1] - log_scale_before
        return log_emission[t] + jnp.log(after) - jnp.log(jnp.sum(after)) + common

    def assign(state: LDAState, t, k):
        return LDAState(state.labels.at[t].set(k), state.counts.at[k].add(jnp.ones((), dtype)))

    initial_state = LDAState(jnp.full((num_words,), -1, jnp.int32), jnp.zeros((num_topics,), dtype))
    return SequentialGraphModel(
        num_steps=num_words,
        initial_state=initial_state,
        num_values=num_topics,
        log_potentials=log_potentials,
        assign=assign,
        bandwidth=num_words - 1,  # θ integrated out: every label depends on every earlier one
    )


__all__ = [
    "Document",
    "LDAState",
    "document",
    "exact_log_z",
    "log_joint",
    "log_dirichlet_normalizer",
    "log_word_probabilities",
    "sequential_model",
    "twist_parameters",
]
