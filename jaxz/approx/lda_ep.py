"""Expectation propagation for the likelihood of one LDA document (Minka & Lafferty 2002,
"Expectation-propagation for the generative aspect model"), the twist of SMC-Twist in
Lindsten, Helske & Vihola (2018, §4.2 and §6.2).

With the labels summed out, a document's likelihood is an integral over the topic
proportions θ of the prior times one factor per word token,

    p(w | Φ, α) = ∫ Dir(θ; α) Π_d f_d(θ)^{n_d} dθ,    f_d(θ) = Σ_k θ_k Φ[k, v_d],

(v_d the D distinct words, n_d their counts). EP replaces each f_d by a Dirichlet-form
site f̃_d(θ) = s_d Π_k θ_k^{β_dk}, one site per distinct word raised to the power n_d
(Minka & Lafferty's tied sites for repeated words), so the approximate posterior is
q(θ) = Dir(θ; γ), γ = α + Σ_d n_d β_d, and the EP estimate of the likelihood is

    log Z_EP = Σ_d n_d log s_d + log B(γ) − log B(α),    B(a) = Π_k Γ(a_k)/Γ(Σa).

One update of site d (sweeping the distinct words in order of first occurrence):
  1. cavity: remove one copy, γ₋d = γ − β_d;
  2. tilted: p̂(θ) ∝ f_d(θ) Dir(θ; γ₋d) = Σ_k ω_k Dir(θ; γ₋d + e_k), ω_k ∝ γ₋d_k Φ[k, v_d],
     with normalizer Z_d = Σ_k γ₋d_k Φ[k, v_d] / Σγ₋d;
  3. project: the Dirichlet γ' with p̂'s mean and Σ_k E[θ_k²] (Minka's moment match);
  4. fractional update (the copy replaced, the n_d copies re-tied): β_d ← β_d + (γ' − γ₋d − β_d)/n_d,
     log s_d ← log s_d + (log s'_d − log s_d)/n_d with s'_d = Z_d B(γ₋d)/B(γ'),
     which leaves γ = α + Σ n_d β_d equal to γ'.

Guard against non-positive Dirichlet parameters: an update is rejected — site d keeps
its old β_d and s_d for this sweep — when the cavity γ₋d has an entry ≤ 0 (it is then no
distribution to take moments under), or when γ' is not finite and positive, as in the
authors' ``ep_minka_lafferty`` (freli005/smc-pgm-twist). With ``twist_guard=True`` an
update is also rejected when a Dirichlet parameter of the twist, α + Σ_{j>t} β_{w_j} for
some t = 0..T−1 (the prior times the sites of the words not yet included), would become
≤ 0: the authors' ``ep_minka3``, whose output they used to twist. We do not make it the
default: on documents with small α it freezes many sites away from their fixed point,
and then log Z_EP is off by many nats, while the
plain fixed point, with the twist tempered where needed (``jaxz.models.lda.twist_parameters``),
twists as well or better. Rejections are counted.
"""
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz.models.lda import Document, log_dirichlet_normalizer
from jaxz.types import Array


class LDAEPResult(NamedTuple):
    """The EP fit of one document; usable as ``twist`` of ``jaxz.models.lda.sequential_model``.

    log_z: the EP estimate of log p(w | Φ, α).
    posterior: (K,) γ, q(θ) = Dir(θ; γ) = Dir(α + Σ_d n_d β_d).
    site_exponents: (D, K) β_d of the sites f̃_d(θ) = s_d Π_k θ_k^{β_dk}, rows in the order
        of ``doc.distinct_words``.
    log_site_scales: (D,) log s_d.
    iterations: sweeps done (each updates every distinct word once).
    converged: max_change ≤ tol before max_iterations sweeps.
    max_change: the last sweep's max_{d,k} |Δβ_dk| / (1 + |β_dk|).
    num_rejected: updates rejected by the positivity guard, over all sweeps.
    rejected_last_sweep: those of the last sweep (> 0: some site does not satisfy the
        moment-matching condition at the returned point).
    """

    log_z: Array
    posterior: Array
    site_exponents: Array
    log_site_scales: Array
    iterations: Array
    converged: Array
    max_change: Array
    num_rejected: Array
    rejected_last_sweep: Array


def tilted_projection(cavity: Array, log_word_probs: Array) -> tuple[Array, Array]:
    """log Z_d and γ' for one site: p̂(θ) ∝ (Σ_k θ_k p_k) Dir(θ; g) projected onto the
    Dirichlet with the same mean and the same Σ_k E[θ_k²] (Minka & Lafferty 2002, §4).

    With S = Σg and ω = softmax(log g + log p), p̂ = Σ_k ω_k Dir(g + e_k), so
    E[θ] = (g + ω)/(S + 1) and, matching a Dirichlet's precision s' = Σ(E θ − E θ²)/Σ Var θ,

        s' = (S + 1)(P + R) / (P + R + (S + 2) Σ_k ω_k(1 − ω_k)),
        P = Σ_k g_k (S − g_k),   R = 2 Σ_k g_k (1 − ω_k),

    a form with no cancellation (every term ≥ 0); γ' = s' E[θ]. (Uninformative p, ω = g/S,
    gives s' = S and γ' = g.) ``cavity``: (K,) g > 0; ``log_word_probs``: (K,) log p.
    """
    total = jnp.sum(cavity)
    log_terms = jnp.log(cavity) + log_word_probs
    log_normalizer = jax.nn.logsumexp(log_terms) - jnp.log(total)  # Z_d = Σ g_k p_k / S
    mixture = jax.nn.softmax(log_terms)  # ω
    mean = (cavity + mixture) / (total + 1.0)
    pairs = jnp.sum(cavity * (total - cavity))
    spread = 2.0 * jnp.sum(cavity * (1.0 - mixture))
    mixing = jnp.sum(mixture * (1.0 - mixture))
    precision = (total + 1.0) * (pairs + spread) / (pairs + spread + (total + 2.0) * mixing)
    return log_normalizer, precision * mean


def _remaining_counts(doc: Document) -> np.ndarray:
    """(T, D) r[t, d] = occurrences of distinct word d at positions ≥ t (0-based)."""
    word_index = np.asarray(doc.word_index)
    one_hot = np.zeros((word_index.shape[0], int(doc.distinct_words.shape[0])), np.int64)
    one_hot[np.arange(word_index.shape[0]), word_index] = 1
    return np.cumsum(one_hot[::-1], axis=0)[::-1]


def lda_ep(
    doc: Document, *, tol: float = 1e-5, max_iterations: int = 5000, twist_guard: bool = False
) -> LDAEPResult:
    """Minka–Lafferty EP for one document (see the module docstring for the algorithm).

    doc: a ``jaxz.models.lda.document`` (K ≥ 2 topics).
    tol: stop when a sweep changes no site exponent by more than tol · (1 + |β_dk|).
    max_iterations: the cap on sweeps; ``converged`` is False if it is hit.
    twist_guard: also reject updates that make a Dirichlet parameter of the twist ≤ 0
        (the authors' ``ep_minka3``; see the module docstring).
    Returns an ``LDAEPResult``; its ``log_z`` is the EP estimate (dotted lines of seed
    Fig. 2) and it is the twist of ``jaxz.models.lda.sequential_model`` (seed eq. 9).
    Runs in the dtype of the document.
    """
    if not isinstance(doc, Document):
        raise ValueError(
            f"doc must be a jaxz.models.lda.Document (use jaxz.models.lda.document), got {type(doc).__name__}"
        )
    num_topics = int(doc.topic_prior.shape[0])
    if num_topics < 2:
        raise ValueError(f"lda_ep needs at least 2 topics (with one, θ is fixed and Z is exact), got {num_topics}")
    if not float(tol) > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    if isinstance(max_iterations, bool) or int(max_iterations) != max_iterations or int(max_iterations) < 1:
        raise ValueError(f"max_iterations must be an integer >= 1, got {max_iterations}")
    dtype = doc.topic_prior.dtype
    log_word_probs = jnp.log(doc.topics[:, doc.distinct_words]).T  # (D, K)
    remaining = jnp.asarray(_remaining_counts(doc), dtype)  # (T, D)
    return _ep(doc.topic_prior, log_word_probs, doc.word_counts.astype(dtype), remaining,
               jnp.asarray(tol, dtype), jnp.int32(max_iterations), bool(twist_guard))


@functools.partial(jax.jit, static_argnums=6)
def _ep(alpha, log_word_probs, counts, remaining, tol, max_iterations, twist_guard) -> LDAEPResult:
    num_distinct, num_topics = log_word_probs.shape
    dtype = alpha.dtype

    def update_site(d, carry):
        posterior, exponents, log_scales, twist_parameters, rejected = carry
        site = exponents[d]
        cavity = posterior - site  # step 1: remove one copy
        valid_cavity = jnp.all(cavity > 0)
        log_normalizer, projected = tilted_projection(jnp.where(valid_cavity, cavity, posterior), log_word_probs[d])
        new_site = site + (projected - cavity - site) / counts[d]  # step 4: fractional update
        new_twist_parameters = twist_parameters + remaining[:, d, None] * (new_site - site)
        accept = (
            valid_cavity
            & jnp.all(jnp.isfinite(projected) & (projected > 0))
            & (jnp.all(new_twist_parameters > 0) | (not twist_guard))
            & jnp.isfinite(log_normalizer)
        )
        full_log_scale = log_normalizer + log_dirichlet_normalizer(cavity) - log_dirichlet_normalizer(projected)
        new_log_scale = log_scales[d] + (full_log_scale - log_scales[d]) / counts[d]
        return (
            jnp.where(accept, projected, posterior),
            exponents.at[d].set(jnp.where(accept, new_site, site)),
            log_scales.at[d].set(jnp.where(accept, new_log_scale, log_scales[d])),
            jnp.where(accept, new_twist_parameters, twist_parameters),
            rejected + (~accept).astype(jnp.int32),
        )

    def sweep(carry):
        iteration, exponents, log_scales, _, _, total_rejected = carry
        # recomputed from the sites each sweep so rounding cannot drift γ away from α + Σ n_d β_d
        twist_parameters = alpha + remaining @ exponents  # (T, K): α + Σ_{j≥t} β_{w_j}; row 0 is γ
        start = (twist_parameters[0], exponents, log_scales, twist_parameters, jnp.int32(0))
        _, new_exponents, new_log_scales, _, rejected = jax.lax.fori_loop(0, num_distinct, update_site, start)
        change = jnp.max(jnp.abs(new_exponents - exponents) / (1.0 + jnp.abs(exponents)))
        return iteration + 1, new_exponents, new_log_scales, change, rejected, total_rejected + rejected

    def not_done(carry):
        iteration, _, _, change, _, _ = carry
        return (iteration < max_iterations) & (change > tol)

    start = (jnp.int32(0), jnp.zeros((num_distinct, num_topics), dtype), jnp.zeros((num_distinct,), dtype),
             jnp.asarray(jnp.inf, dtype), jnp.int32(0), jnp.int32(0))
    iterations, exponents, log_scales, change, rejected, total_rejected = jax.lax.while_loop(not_done, sweep, start)
    posterior = alpha + counts @ exponents
    log_z = jnp.sum(counts * log_scales) + log_dirichlet_normalizer(posterior) - log_dirichlet_normalizer(alpha)
    converged = change <= tol
    return LDAEPResult(log_z, posterior, exponents, log_scales, iterations, converged, change, total_rejected, rejected)


__all__ = ["lda_ep", "LDAEPResult", "tilted_projection"]
