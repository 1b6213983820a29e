"""The parts estimators are assembled from: status bits by cause, the one ESS-triggered
resampling rule, SMC assembled by hand from an engine, a schedule and a mutation (the
same bits as ``jaxz.smc``), the importance stage as an estimator of its own, and each
estimator's own evaluation counts."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz.estimators import smc_mutations, smc_schedules
from jaxz.estimators.smc import assemble


def _gaussian_path(dim=2, scale=0.5):
    """log f_0 = N(0, I) (normalized), log f_1 = N(1, scale² I) unnormalized by a known
    constant: log Z_1 = dim log(scale √(2π))."""
    log_base = lambda x: jnp.sum(jax.scipy.stats.norm.logpdf(x))  # noqa: E731
    log_target = lambda x: jnp.sum(-0.5 * ((x - 1.0) / scale) ** 2)  # noqa: E731
    path = jaxz.paths.geometric(log_base, log_target, sample_base=lambda key, n: jax.random.normal(key, (n, dim)))
    return path, dim * np.log(scale * np.sqrt(2 * np.pi))


def test_status_names_name_each_cause_and_low_ess_is_their_mask():
    assert jaxz.status_names(0) == ()
    assert jaxz.status_names(jaxz.STATUS_MAX_STEPS | jaxz.STATUS_FEW_PARTICLES) == ("MAX_STEPS", "FEW_PARTICLES")
    causes = (jaxz.STATUS_FEW_PARTICLES, jaxz.STATUS_HEAVY_TAIL, jaxz.STATUS_RUNS_DISAGREE, jaxz.STATUS_STUCK,
              jaxz.STATUS_FEW_CHAINS, jaxz.STATUS_COLLAPSED)
    assert len(set(causes)) == len(causes) and all(bin(c).count("1") == 1 for c in causes)
    mask = 0
    for cause in causes:
        mask |= cause
    assert mask == jaxz.STATUS_LOW_ESS and jaxz.STATUS_FEW_PARTICLES == 8  # the old LOW_ESS bit keeps its meaning
    assert len(jaxz.status_names(jaxz.STATUS_LOW_ESS)) == len(causes)
    assert jaxz.status_names(jnp.int32(4096)) == ("UNKNOWN(4096)",)
    with pytest.raises(ValueError, match="status"):
        jaxz.status_names(jnp.zeros(3, jnp.int32))
    with pytest.raises(ValueError, match=">= 0"):
        jaxz.status_names(-1)


def test_resample_if_needed_resamples_only_below_the_threshold():
    log_weights = jaxz.weights.normalize(jnp.asarray([0.0, -5.0, -5.0, -5.0]))  # ESS ≈ 1.04 of 4
    key = jax.random.key(0)
    kept = jaxz.resampling.resample_if_needed(key, log_weights, jaxz.resampling.multinomial, 0.2)
    assert not bool(kept.resampled) and np.array_equal(kept.ancestors, np.arange(4))
    assert np.array_equal(kept.log_weights, log_weights)  # carried as they are
    drawn = jaxz.resampling.resample_if_needed(key, log_weights, jaxz.resampling.multinomial, 0.5)
    assert bool(drawn.resampled) and np.allclose(drawn.log_weights, -np.log(4.0))
    assert np.array_equal(drawn.ancestors, jaxz.resampling.multinomial(key, log_weights))
    forced = jaxz.resampling.resample_if_needed(key, log_weights, jaxz.resampling.multinomial, 0.2, force=True)
    assert bool(forced.resampled)
    never = jaxz.resampling.resample_if_needed(key, log_weights, jaxz.resampling.multinomial, 1.0, allowed=False)
    assert not bool(never.resampled)
    # a padded pool: the first two live slots are kept, renormalized
    mask = jnp.asarray([True, False, True, True])
    pool = jaxz.resampling.resample_if_needed(key, jnp.asarray([0.0, 0.0, -1.0, 0.0]), jaxz.resampling.residual,
                                              0.1, mask=mask, num_samples=2)
    assert not bool(pool.resampled) and pool.ancestors.tolist() == [0, 2]
    assert np.isclose(float(jax.nn.logsumexp(pool.log_weights)), 0.0, atol=1e-6)


def test_smc_assembled_from_parts_gives_the_bits_of_jaxz_smc():
    """docs/architecture.md's example: a fixed ladder and resample-move with systematic
    resampling, assembled by hand, is exactly jaxz.smc with those settings."""
    path, _ = _gaussian_path()
    kernel = jaxz.kernels.rwmh(path, 0.5)
    betas = jnp.linspace(0.0, 1.0, 6)
    parts = assemble(path, kernel, smc_schedules.fixed(jaxz.schedules.validate(betas)),
                     smc_mutations.resample_move(path, kernel, resampling="systematic", resample_ess=0.8,
                                                 count=smc_mutations.MoveCount(3)))
    default = jaxz.smc(path, kernel, betas=betas, resampling="systematic", resample_ess=0.8, num_mcmc_steps=3)
    positions = path.sample_base(jax.random.key(1), 128)
    by_hand, assembled = (jaxz.run(e, jax.random.key(2), positions) for e in (parts, default))
    for a, b in zip(jax.tree.leaves(by_hand.estimate), jax.tree.leaves(assembled.estimate)):
        assert np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)  # systematic: s.e. nan


def test_smc_counts_its_own_evaluations():
    """A fixed ladder of K steps with an untuned kernel: log f at β_t and β_{t+1} per
    particle and step plus the final support check (N (2K + 1)); the kernel's N
    evaluations at β = 0 and one per transition (N (1 + K · moves · transitions))."""
    path, _ = _gaussian_path()
    kernel = jaxz.kernels.rwmh(path, 0.5)
    num_particles, num_steps, moves = 64, 5, 2
    estimator = jaxz.smc(path, kernel, betas=jnp.linspace(0.0, 1.0, num_steps + 1), num_mcmc_steps=moves)
    result = jaxz.run(estimator, jax.random.key(0), path.sample_base(jax.random.key(1), num_particles))
    assert float(result.state.log_density_evaluations) == num_particles * (2 * num_steps + 1)
    refreshes = num_particles * num_steps  # each stage's moves start from states at the previous β
    assert float(result.state.gradient_evaluations) == (num_particles + refreshes
                                                        + num_particles * num_steps * moves * kernel.num_transitions)
    assert np.allclose(np.sum(result.trace.log_density_evaluations) + num_particles,
                       float(result.state.log_density_evaluations))


def test_mixture_importance_is_an_estimator_whose_error_bars_cover():
    """Started from exact draws of f_1 / Z (equal weights), 40 vmapped runs of the importance
    stage: |log Ẑ − log Z| within 3 of their own s.e. in at least 37 (Ẑ unbiased given
    the particles; 95 % coverage expected)."""
    path, exact = _gaussian_path()
    draws = 1.0 + 0.5 * jax.random.normal(jax.random.key(3), (200, 2))
    estimator = jaxz.mixture_importance(path, num_batches=4, candidates=(1, 2))
    estimates = jax.jit(jax.vmap(lambda key: jaxz.run(estimator, key, draws, jnp.zeros(200)).estimate))(
        jax.random.split(jax.random.key(4), 40))
    assert np.all(np.asarray(estimates.cost) == 4 * 200)
    z = np.abs(np.asarray(estimates.log_z) - exact) / np.asarray(estimates.log_z_stderr)
    assert np.sum(z < 3.0) >= 37, z


def test_evidence_prints_readably_and_refuses_pmc_steps_without_a_stage():
    runs = jaxz.Estimate(jnp.asarray([-1.0, -1.1]), jnp.asarray([0.05, 0.06]), jnp.ones(2),
                         jnp.asarray([0, jaxz.STATUS_STUCK], jnp.int32))
    result = jaxz.Evidence(jnp.asarray(-1.05), jnp.asarray(0.04), jnp.int32(jaxz.STATUS_STUCK), runs, 1200, 1000, 200,
                           jnp.asarray([5, 6]), jnp.asarray([0.5, 0.5]), jnp.asarray([0.6, 0.6]), None,
                           jnp.zeros((2, 3)), 0.1, 2.0)
    text = repr(result)
    assert text.startswith("Evidence(log_z=-1.0500 ± 0.0400, status=STUCK, runs=2") and "1,200" in text, text
    path, _ = _gaussian_path()
    with pytest.raises(ValueError, match="pmc_steps"):  # refused before anything compiles
        jaxz.evidence(path, jax.random.key(0), num_runs=2, num_particles=100, importance=False, pmc_steps=2)
