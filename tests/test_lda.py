"""LDA document likelihood (jaxz.models.lda) and its EP twist (jaxz.approx.lda_ep):
exact values by enumeration, the twist against its integral definition, unbiasedness
of SMC-Base and SMC-Twist, EP's fixed point, the toy document of Lindsten et al. (2018)."""
import functools
import itertools
import math
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special

import jaxz
import jaxz.approx
from jaxz.approx.lda_ep import tilted_projection
from jaxz.models import lda

TOY_FILE = "lda_toy_lindsten2018.npz"


def shared_file(name):
    """``jaxz.data.shared_file(name)``; a missing reference file skips the test locally and
    fails it in CI (``CI=true``), so that a check never disappears unnoticed."""
    try:
        return jaxz.data.shared_file(name)
    except FileNotFoundError:
        if os.environ.get("CI", "").lower() == "true":
            raise
        pytest.skip(f"{name} not found (jaxz.data.shared_file; set JAXZ_DATA_DIR)")


# The toy document of seed Fig. 2 (left): 4 topics, 10 distinct words. Its likelihood only
# involves the 10 columns of Φ its words select, so the test carries those (and α) and
# lumps the rest of the 9,294-word vocabulary into one column: the same Z, no data file.
TOY_WORD_PROBABILITIES = np.array([
    [0.00011752934360448042, 0.00014648885353366715, 3.4562375814277754e-05, 0.00014173775345651928,
     2.3116629462638585e-05, 0.00014260108517056313, 0.00013148242788694423, 0.00019156136515047757,
     0.00010059004476316115, 0.0001997940854926932],
    [2.0714529792631815e-05, 5.307328452179501e-06, 0.0002047137707291873, 0.0001736107352547654,
     2.1734791335486724e-06, 6.84640182585759e-05, 5.581703987539323e-05, 9.835442636243865e-05,
     0.00012994886686383417, 0.00018665316587892757],
    [0.000208920800138243, 7.378489029952228e-05, 0.0001587553920514327, 0.00018044492247101446,
     1.9105292259323405e-05, 3.910512265972402e-05, 4.281667759645058e-05, 0.00011560032883089789,
     4.34313783195823e-05, 0.00010279928269180707],
    [8.875927607531484e-06, 0.0001801508408039624, 0.0001981009607928287, 0.0001100495056173849,
     1.9724663833133147e-05, 3.465220086509485e-05, 0.00018400708194440867, 0.00016110481863350554,
     0.0001764271492883059, 0.0001983426615171598],
])
TOY_PRIOR = np.array([0.05717132590129907, 0.4188706827921089, 1.2446621602005559, 0.2792958311060363])


def toy_document_arrays():
    """(topics (4, 11), prior, words 0..9): the toy document over its own words plus one lumped word."""
    topics = np.c_[TOY_WORD_PROBABILITIES, 1.0 - TOY_WORD_PROBABILITIES.sum(axis=1)]
    return topics, TOY_PRIOR, np.arange(10)


def random_document(seed, num_topics=3, vocabulary_size=5, words=(0, 1, 0, 2, 3, 1, 0), prior_scale=1.0):
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.ones(vocabulary_size), size=num_topics)
    prior = prior_scale * rng.uniform(0.5, 1.5, num_topics)
    return topics, prior, np.asarray(words)


def brute_force_log_z(topics, prior, words):
    """float64 numpy: Σ_z Π_t Φ[z_t, w_t] (α_{z_t} + n_{z_t}) / (t + Σα), the Pólya
    probability written as its sequence of predictive probabilities."""
    total = 0.0
    for labels in itertools.product(range(len(prior)), repeat=len(words)):
        counts, term = np.zeros(len(prior)), 1.0
        for t, (k, w) in enumerate(zip(labels, words)):
            term *= topics[k, w] * (prior[k] + counts[k]) / (t + prior.sum())
            counts[k] += 1
        total += term
    return math.log(total)


@functools.partial(jax.jit, static_argnums=2)
def path_log_weights(doc, twist, base, labelings):
    """log γ^ψ_t(z_{1:t}) = Σ_{s≤t} log_potentials(state_s, s)[z_s] along each labeling
    (rows of ``labelings``), for t = 1..T; ``base``: build the model with twist=None."""
    model = lda.sequential_model(doc, None if base else twist)

    def one_path(labels):
        def body(state, inputs):
            t, k = inputs
            return model.assign(state, t, k), model.log_potentials(state, t)[k]

        _, per_step = jax.lax.scan(body, model.initial_state, (jnp.arange(labels.shape[0]), labels))
        return jnp.cumsum(per_step)

    return jax.vmap(one_path)(labelings)


def all_labelings(num_topics, num_words):
    return jnp.asarray(list(itertools.product(range(num_topics), repeat=num_words)), jnp.int32)


class Twist(NamedTuple):
    site_exponents: jax.Array
    log_site_scales: jax.Array


def zero_twist(doc):
    """β = 0, log s = 0: the twisted model is then exactly SMC-Base."""
    num_distinct, num_topics = doc.distinct_words.shape[0], doc.topic_prior.shape[0]
    dtype = doc.topic_prior.dtype
    return Twist(jnp.zeros((num_distinct, num_topics), dtype), jnp.zeros((num_distinct,), dtype))


def as_twist(ep):
    return Twist(ep.site_exponents, ep.log_site_scales)


@functools.partial(jax.jit, static_argnums=(3, 4))
def runs(doc, twist, key, num_particles, num_runs):
    """num_runs vmapped SMC runs. Document and twist are traced arguments, so every
    document of one shape, base (zero twist) and twist alike, shares one compilation."""
    estimator = jaxz.twisted_smc(lda.sequential_model(doc, twist))
    return jax.vmap(lambda k: jaxz.run(estimator, k, num_particles).estimate)(jax.random.split(key, num_runs))


def assert_unbiased(log_z_hat, log_z):
    """mean Ẑ/Z within 4 standard errors (from the runs' spread) of 1."""
    ratios = np.exp(np.asarray(log_z_hat, np.float64) - float(log_z))
    stderr = ratios.std(ddof=1) / math.sqrt(ratios.size)
    assert abs(ratios.mean() - 1.0) < 4.0 * stderr, (ratios.mean(), stderr)


# ---------------------------------------------------------------------------------------
# The model and its exact log Z


def test_exact_log_z_matches_direct_sum_on_tiny_document():
    topics, prior, words = random_document(0, words=(0, 1, 0, 2, 4))
    reference = brute_force_log_z(topics, prior, words)
    with jax.enable_x64(True):
        doc = lda.document(topics, prior, words)
        # 3^5 = 243 labelings in chunks of 7: the last chunk is padded and masked
        assert float(lda.exact_log_z(doc, chunk_size=7)) == pytest.approx(reference, abs=1e-10)
        direct = jax.nn.logsumexp(lda.log_joint(doc, all_labelings(3, 5)))
        assert float(direct) == pytest.approx(reference, abs=1e-10)
    doc32 = lda.document(topics.astype(np.float32), prior, words)
    assert doc32.topics.dtype == jnp.float32
    assert float(lda.exact_log_z(doc32)) == pytest.approx(reference, abs=1e-4)


def test_exact_log_z_refuses_more_than_max_configurations():
    topics, prior, _ = random_document(1)
    doc = lda.document(topics, prior, np.zeros(15, int))  # 3^15 ≈ 1.4e7
    with pytest.raises(ValueError, match="max_configurations"):
        lda.exact_log_z(doc)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(topics=np.full((3, 5), 0.3)), "sum to 1"),
        (dict(topics=-np.eye(3, 5)), "nonnegative"),
        (dict(prior=np.array([1.0, 0.0, 1.0])), "topic_prior"),
        (dict(prior=np.ones(2)), "topic_prior must have shape"),
        (dict(words=np.array([0, 5])), r"\[0, 5\)"),
        (dict(words=np.array([], int)), "non-empty"),
        (dict(topics=np.c_[np.full((3, 4), 0.25), np.zeros(3)], words=np.array([4])), "probability 0"),
    ],
)
def test_document_rejects_bad_arguments(change, message):
    topics, prior, words = random_document(2)
    arguments = dict(topics=topics, prior=prior, words=words) | change
    with pytest.raises(ValueError, match=message):
        lda.document(arguments["topics"], arguments["prior"], arguments["words"])


def test_sequential_model_rejects_twist_of_another_document():
    topics, prior, words = random_document(3)
    other = lda.document(topics, prior, words[:3])
    with pytest.raises(ValueError, match="site_exponents"):
        lda.sequential_model(lda.document(topics, prior, words), twist=jaxz.approx.lda_ep(other))
    with pytest.raises(ValueError, match="twist_floor"):
        lda.sequential_model(other, twist=jaxz.approx.lda_ep(other), twist_floor=1.0)


# ---------------------------------------------------------------------------------------
# The twisted targets: telescoping (Prop. 1-style consistency) and eq. (9)


@pytest.mark.parametrize("prior_scale", [1.0, 0.02])  # 0.02: EP's partial sums need tempering
def test_log_potentials_telescope_to_exact_z_for_base_and_twist(prior_scale):
    """Σ_z Π_t exp(potential_t(z_{1:t−1})[z_t]) = Σ_z γ^ψ_T(z) / γ^ψ_0 = Z exactly: the
    increments of the twisted targets telescope (γ^ψ_0 = 1, γ^ψ_T = γ_T), whatever ψ."""
    topics, prior, words = random_document(4, words=(0, 1, 0, 2, 3, 0, 1), prior_scale=prior_scale)
    with jax.enable_x64(True):
        doc = lda.document(topics, prior, words)
        exact = float(lda.exact_log_z(doc))
        ep = jaxz.approx.lda_ep(doc)
        remaining, _ = lda.twist_parameters(doc, ep)
        untempered = np.cumsum(np.asarray(ep.site_exponents)[np.asarray(doc.word_index)][::-1], axis=0)[::-1]
        tempered = not np.allclose(remaining[:-1], untempered)
        assert tempered == (prior_scale < 1.0)  # both branches of twist_parameters are exercised
        labelings = all_labelings(3, len(words))
        per_model = []
        for twist, base in ((zero_twist(doc), True), (zero_twist(doc), False), (as_twist(ep), False)):
            log_weights = path_log_weights(doc, twist, base, labelings)  # log γ^ψ_t(z_{1:t})
            assert float(jax.nn.logsumexp(log_weights[:, -1])) == pytest.approx(exact, abs=1e-9)
            per_model.append(np.asarray(log_weights))
        np.testing.assert_array_equal(per_model[0], per_model[1])  # the zero twist is SMC-Base
        np.testing.assert_allclose(per_model[2][:, -1], per_model[0][:, -1], atol=1e-9)  # γ^ψ_T = γ_T
        assert np.abs(per_model[2][:, :-1] - per_model[0][:, :-1]).max() > 0.1  # ψ_t ≠ 1 before T


def test_twist_equals_its_integral_definition_for_two_topics():
    """ψ_t(z_{1:t}) = ∫ Π_{j>t} f̃_{w_j}(θ) p(θ | z_{1:t}) dθ (seed eq. 9), by quadrature
    over θ_1 ∈ (0, 1) with K = 2, against the twist implied by the model's potentials:
    log ψ_t = Σ_{s≤t} potential_s − log γ_t(z_{1:t})."""
    topics, prior, words = random_document(5, num_topics=2, words=(0, 1, 2, 0, 3), prior_scale=3.0)
    with jax.enable_x64(True):
        doc = lda.document(topics, prior, words)
        ep = jaxz.approx.lda_ep(doc, tol=1e-12)
        remaining, _ = lda.twist_parameters(doc, ep)
        assert np.all(np.asarray(doc.topic_prior + remaining) >= lda.TWIST_FLOOR * prior)  # no tempering here
        exponents = np.asarray(ep.site_exponents)[np.asarray(doc.word_index)]  # (T, 2)
        log_scales = np.asarray(ep.log_site_scales)[np.asarray(doc.word_index)]
        for labels in ([0, 1, 1, 0, 1], [1, 1, 1, 1, 1]):
            log_twisted = np.asarray(path_log_weights(doc, as_twist(ep), False, jnp.asarray([labels], jnp.int32))[0])
            for t in range(1, len(words)):
                log_gamma = float(lda.log_joint(lda.document(topics, prior, words[:t]), jnp.asarray(labels[:t])))
                a = prior + np.bincount(labels[:t], minlength=2)
                power = exponents[t:].sum(axis=0)
                log_beta = special.betaln(a[0], a[1])
                integrand = lambda x: x ** (a[0] + power[0] - 1) * (1 - x) ** (a[1] + power[1] - 1)  # noqa: E731
                value, _ = integrate.quad(integrand, 0.0, 1.0, epsabs=0, epsrel=1e-11)
                expected = log_scales[t:].sum() + math.log(value) - log_beta
                assert log_twisted[t - 1] - log_gamma == pytest.approx(expected, abs=1e-7)


# ---------------------------------------------------------------------------------------
# SMC-Base and SMC-Twist are unbiased


# 0.02: the EP twist is tempered (1.0 runs under -m slow: CI time)
@pytest.mark.parametrize("prior_scale", [pytest.param(1.0, marks=pytest.mark.slow), 0.02])
def test_base_and_twist_unbiased_on_random_documents(prior_scale):
    """Random Φ and α, a 10-word document (the toy's shapes, so the runs share its
    compilation; repeated words are covered exactly by the telescoping test)."""
    rng = np.random.default_rng(6)
    topics = rng.dirichlet(np.ones(11), size=4)
    prior = prior_scale * rng.uniform(0.5, 1.5, 4)
    words = rng.permutation(11)[:10]
    doc = lda.document(topics, prior, words)
    with jax.enable_x64(True):
        exact = float(lda.exact_log_z(lda.document(topics, prior, words)))
    for seed, twist in enumerate((zero_twist(doc), as_twist(jaxz.approx.lda_ep(doc)))):
        estimate = runs(doc, twist, jax.random.key(seed), 10, 1000)
        assert np.all(np.asarray(estimate.status) & jaxz.STATUS_NONFINITE == 0)
        assert_unbiased(estimate.log_z, exact)


@pytest.fixture(scope="module")
def toy():
    topics, prior, words = toy_document_arrays()
    with jax.enable_x64(True):
        exact = float(lda.exact_log_z(lda.document(topics, prior, words)))
    doc = lda.document(topics, prior, words)  # float32
    ep = jaxz.approx.lda_ep(doc)
    base = runs(doc, zero_twist(doc), jax.random.key(10), 10, 1000)
    twist = runs(doc, as_twist(ep), jax.random.key(11), 10, 1000)
    return dict(doc=doc, exact=exact, ep=ep, base=base, twist=twist)


def test_toy_document_matches_the_data_file():
    data = np.load(shared_file(TOY_FILE))
    np.testing.assert_array_equal(data["topics"][:, data["words"]], TOY_WORD_PROBABILITIES)
    np.testing.assert_array_equal(data["topic_prior"], TOY_PRIOR)
    assert len(set(data["words"].tolist())) == 10
    with jax.enable_x64(True):
        full = lda.exact_log_z(lda.document(data["topics"], data["topic_prior"], data["words"]))
        reduced = lda.exact_log_z(lda.document(*toy_document_arrays()))
    assert float(full) == pytest.approx(float(reduced), abs=1e-10)


def test_sequential_model_bandwidth_is_the_document_length_less_one(toy):
    """θ integrated out: every label's potential reads the counts of all earlier labels."""
    assert lda.sequential_model(toy["doc"]).bandwidth == int(toy["doc"].words.shape[0]) - 1


def test_base_and_twist_unbiased_on_toy(toy):
    assert_unbiased(toy["base"].log_z, toy["exact"])
    assert_unbiased(toy["twist"].log_z, toy["exact"])


def test_one_large_run_within_four_reported_standard_errors_of_exact_on_toy(toy):
    for seed, twist in enumerate((zero_twist(toy["doc"]), as_twist(toy["ep"]))):
        estimate = runs(toy["doc"], twist, jax.random.key(20 + seed), 4000, 1)
        error = float(estimate.log_z[0]) - toy["exact"]
        assert abs(error) < 4.0 * float(estimate.log_z_stderr[0]), (error, estimate.log_z_stderr)


def test_twist_has_lower_variance_than_base_on_toy(toy):
    """log(s²_base / s²_twist) > 4 standard errors, the standard error of each log sample
    variance from the delta method, sqrt((kurtosis − (R−3)/(R−1)) / R) with the sample
    kurtosis (log Ẑ is not normal, so normal theory would understate it)."""

    def log_variance_and_stderr(samples):
        samples = np.asarray(samples, np.float64)
        centred = samples - samples.mean()
        variance = np.mean(centred**2)
        kurtosis = np.mean(centred**4) / variance**2
        count = samples.size
        return math.log(variance), math.sqrt((kurtosis - (count - 3) / (count - 1)) / count)

    base, base_stderr = log_variance_and_stderr(toy["base"].log_z)
    twist, twist_stderr = log_variance_and_stderr(toy["twist"].log_z)
    assert base - twist > 4.0 * math.hypot(base_stderr, twist_stderr), (base, twist, base_stderr, twist_stderr)


# ---------------------------------------------------------------------------------------
# EP


def test_lda_ep_log_z_finite_and_within_a_few_nats_of_exact_on_toy(toy):
    ep = toy["ep"]
    assert bool(ep.converged) and int(ep.num_rejected) == 0
    assert np.isfinite(float(ep.log_z))
    assert abs(float(ep.log_z) - toy["exact"]) < 2.0  # the paper's EP line: about 0.6 nats off


def tilted_moments(cavity, word_probs):
    """float64 numpy: mean and Σ_k E[θ_k²] of p̂ ∝ (Σ_k θ_k p_k) Dir(θ; g), a mixture of
    Dir(g + e_k) with weights ∝ g_k p_k, and its normalizer Σ_k g_k p_k / Σg."""
    total = cavity.sum()
    weights = cavity * word_probs / np.sum(cavity * word_probs)
    mean, second = np.zeros_like(cavity), 0.0
    for k, weight in enumerate(weights):
        a = cavity + np.eye(len(cavity))[k]
        mean += weight * a / (total + 1)
        second += weight * np.sum(a * (a + 1)) / ((total + 1) * (total + 2))
    return mean, second, np.sum(cavity * word_probs) / total


def test_lda_ep_fixed_point_satisfies_moment_matching():
    """At EP's fixed point, for every site d (repeated words included), Dir(γ) has the
    mean and Σ_k E[θ_k²] of the tilted distribution of its cavity γ − β_d, and
    s_d B(γ)/B(γ − β_d) equals the tilted normalizer Z_d."""
    topics, prior, words = random_document(7, num_topics=4, vocabulary_size=6, words=(0, 1, 0, 2, 3, 0, 5, 1))
    with jax.enable_x64(True):
        doc = lda.document(topics, prior, words)
        ep = jaxz.approx.lda_ep(doc, tol=1e-13)
    assert bool(ep.converged) and int(ep.rejected_last_sweep) == 0
    gamma = np.asarray(ep.posterior)
    counts = np.asarray(doc.word_counts)
    assert counts.max() > 1
    np.testing.assert_allclose(gamma, prior + counts @ np.asarray(ep.site_exponents), rtol=1e-12)
    log_beta = lambda a: special.gammaln(a).sum() - special.gammaln(a.sum())  # noqa: E731
    for d, word in enumerate(np.asarray(doc.distinct_words)):
        cavity = gamma - np.asarray(ep.site_exponents)[d]
        mean, second, normalizer = tilted_moments(cavity, topics[:, word])
        np.testing.assert_allclose(gamma / gamma.sum(), mean, rtol=1e-9)
        assert np.sum(gamma * (gamma + 1)) / (gamma.sum() * (gamma.sum() + 1)) == pytest.approx(second, rel=1e-9)
        log_s = float(ep.log_site_scales[d])
        assert log_s + log_beta(gamma) - log_beta(cavity) == pytest.approx(math.log(normalizer), abs=1e-9)


def test_tilted_projection_leaves_an_uninformative_word_unchanged():
    cavity = jnp.asarray([0.3, 2.0, 0.7])
    log_normalizer, projected = jax.jit(tilted_projection)(cavity, jnp.log(jnp.full(3, 0.2)))
    np.testing.assert_allclose(projected, cavity, rtol=1e-5)
    assert float(log_normalizer) == pytest.approx(math.log(0.2), rel=1e-6)


def test_lda_ep_guards_keep_dirichlet_parameters_positive():
    """Small α makes some updates push a Dirichlet parameter to ≤ 0. The default guard
    keeps EP's posterior positive; twist_guard=True (the authors' ep_minka3) also keeps
    every partial sum α + Σ_{j>t} β_{w_j} positive, by rejecting updates."""
    topics, prior, words = random_document(12, words=(0, 1, 0, 2, 3, 4, 1, 2, 2), prior_scale=0.02)
    with jax.enable_x64(True):
        doc = lda.document(topics, prior, words)
        plain = jaxz.approx.lda_ep(doc)
        strict = jaxz.approx.lda_ep(doc, twist_guard=True)
    assert np.all(np.asarray(plain.posterior) > 0)

    def partial(ep):  # α + Σ_{j>t} β_{w_j}, t = 0..T−1
        per_word = np.asarray(ep.site_exponents)[np.asarray(doc.word_index)]
        return prior + np.cumsum(per_word[::-1], axis=0)[::-1]

    assert partial(plain).min() <= 0  # the guard has something to do on this document
    assert int(strict.num_rejected) > 0
    assert partial(strict).min() > 0
    assert np.isfinite(float(plain.log_z)) and np.isfinite(float(strict.log_z))


def test_lda_ep_rejects_bad_arguments():
    topics, prior, words = random_document(9)
    doc = lda.document(topics, prior, words)
    with pytest.raises(ValueError, match="tol"):
        jaxz.approx.lda_ep(doc, tol=0.0)
    with pytest.raises(ValueError, match="max_iterations"):
        jaxz.approx.lda_ep(doc, max_iterations=0)
    with pytest.raises(ValueError, match="at least 2 topics"):
        jaxz.approx.lda_ep(lda.document(topics[:1], prior[:1], words))
