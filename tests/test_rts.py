"""RTS on the 10-D two-Gaussian mixture of the seed's §4.1 (exact log Z), with the
per-temperature adapted HMC of App. E; argument checks; float64."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz.estimators.rts import MIN_TOURS_PER_BATCH
from jaxz.models import gmm10

NUM_RUNS = 6
NUM_CHAINS = 30
BETAS = np.linspace(0.0, 1.0, 20) ** 2


@pytest.fixture(scope="module")
def gmm_runs():
    model = gmm10.make()
    path = gmm10.path(model)
    kernel, adapt = jaxz.kernels.tempered_hmc(path, BETAS, 0.5, 8)
    estimator = jaxz.rts(
        path, kernel, BETAS, num_sweeps=600, initial_iterations=6, sweeps_per_iteration=40, adapt=adapt
    )

    @jax.jit
    @jax.vmap
    def one(key):
        key_init, key_run = jax.random.split(key)
        result = jaxz.run(estimator, key_run, path.sample_base(key_init, NUM_CHAINS))
        return result.estimate, result.state, result.trace

    estimate, state, trace = one(jax.random.split(jax.random.key(0), NUM_RUNS))
    return float(gmm10.exact_log_z(model)), estimate, state, trace


def test_rts_log_z_agrees_with_exact_on_10d_mixture(gmm_runs):
    """The mean error over runs is within 4 s.e. (spread of runs) of 0, and the
    batch-means standard error is of the size of that spread. Six runs catch only gross
    failures (an sd from 6 runs is ±32 %: an s.e. 3x too small passes 71 % of the time); the
    s.e. is checked at 400 runs by tests/test_calibration.py's RTS row."""
    exact, estimate, _, _ = gmm_runs
    errors = np.asarray(estimate.log_z) - exact
    spread = errors.std(ddof=1)
    assert abs(errors.mean()) < 4 * spread / np.sqrt(NUM_RUNS), errors
    assert 0.3 < float(np.mean(estimate.log_z_stderr)) / spread < 3.0
    assert np.all(np.asarray(estimate.status) == 0)


def test_tempered_hmc_adapts_step_size_per_temperature_then_freezes(gmm_runs):
    """Adapted ε_k shrink from the broad base to the narrow target; the long run's
    acceptance is near the 0.65 target; the table does not move in the long run."""
    _, estimate, state, trace = gmm_runs
    log_step_sizes = np.asarray(state.kernel_states.inner.log_step_sizes)  # (runs, chains, K)
    assert np.all(log_step_sizes[:, 0, 0] > log_step_sizes[:, 0, -1] + 0.5)
    assert np.all(log_step_sizes == log_step_sizes[:, :1])  # one table shared by all chains
    long_run = np.asarray(trace.long_run)
    acceptance = np.asarray(trace.acceptance_rate)[long_run]
    assert 0.5 < acceptance.mean() < 0.85
    # cost: every sweep of every chain is one HMC trajectory, initial iterations included
    steps = np.asarray(long_run.sum(1)) + np.asarray(state.iteration) * 40
    np.testing.assert_array_equal(np.asarray(estimate.cost), steps * NUM_CHAINS)


@pytest.mark.slow  # CI time: run with pytest -m slow
def test_rts_partial_update_moves_log_z_hat_by_alpha_in_float64():
    """§4.4: with step α the estimate is log Ẑ_old + α · (eq. 12 correction); without
    initial iterations α changes nothing else in the run. Float64 input stays float64."""
    with jax.enable_x64(True):
        model = gmm10.make(dim=2, dtype=jnp.float64)
        path = gmm10.path(model)
        betas = np.linspace(0.0, 1.0, 5)
        kernel, _ = jaxz.kernels.tempered_hmc(path, betas, 0.5, 3)
        log_z_hat = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
        results = {}
        for alpha in (0.2, 1.0):
            estimator = jaxz.rts(path, kernel, betas, num_sweeps=50, initial_iterations=0, log_z_hat=log_z_hat,
                                 alpha=alpha)
            results[alpha] = jax.jit(lambda key, x: jaxz.run(estimator, key, x))(
                jax.random.key(2), path.sample_base(jax.random.key(1), 10))
        result = results[0.2]
        assert result.estimate.log_z.dtype == jnp.float64
        # α changes nothing else in the run: the same key gives the same chains, visits and sums, bit for bit
        for part, whole in zip(jax.tree.leaves(result.state), jax.tree.leaves(results[1.0].state)):
            assert np.asarray(part).tobytes() == np.asarray(whole).tobytes()
        full = np.asarray(jaxz.rts_estimates(result.state, alpha=1.0).rts)
        np.testing.assert_allclose(float(results[1.0].estimate.log_z), full[-1], atol=1e-10)
        expected = log_z_hat + 0.2 * (full - log_z_hat)
        np.testing.assert_allclose(float(result.estimate.log_z), expected[-1], atol=1e-10)
        # a sane (short-run) estimate: within 4 of its own batch-means s.e.
        assert abs(full[-1] - float(gmm10.exact_log_z(model))) < 4 * float(results[1.0].estimate.log_z_stderr)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_sweeps=0), "num_sweeps"),
        (dict(num_sweeps=10, initial_iterations=-1), "initial_iterations"),
        (dict(num_sweeps=10, sweeps_per_iteration=0), "sweeps_per_iteration"),
        (dict(num_sweeps=10, alpha=1.5), "alpha"),
        (dict(num_sweeps=10, log_prior_weights=np.zeros(3)), "log_prior_weights"),
        (dict(num_sweeps=10, log_z_hat=np.zeros(3)), "log_z_hat"),
        (dict(num_sweeps=10, num_batches=1), "num_batches"),
        (dict(num_sweeps=10, record_draws="yes"), "record_draws"),
    ],
)
def test_rts_rejects_bad_arguments(kwargs, match):
    path = gmm10.path(gmm10.make(dim=2))
    with pytest.raises(ValueError, match=match):
        jaxz.rts(path, jaxz.kernels.rwmh(path, 1.0), np.linspace(0, 1, 5), **kwargs)
    with pytest.raises(ValueError, match="betas"):
        jaxz.rts(path, jaxz.kernels.rwmh(path, 1.0), np.linspace(0.1, 1, 5), num_sweeps=10)


def test_rts_flags_a_long_run_with_fewer_ladder_trips_than_batches(gmm_runs):
    """Batch means need batches that are nearly independent; on the two-mode mixture the
    chains change mode only at the hot end of the ladder. With 200 temperatures and a long
    run of 100 sweeps (20 batches) the runs made 8-14 one-way trips between the ends, their
    errors reached 6.7 reported s.e., and every run is flagged STATUS_FEW_CHAINS; the fixture's
    600 sweeps on 20 temperatures make 170-216 trips and are not flagged."""
    _, estimate, state, _ = gmm_runs
    assert np.all(np.asarray(state.tours) >= MIN_TOURS_PER_BATCH * 20)
    model = gmm10.make()
    path = gmm10.path(model)
    betas = np.linspace(0.0, 1.0, 200) ** 2
    kernel, adapt = jaxz.kernels.tempered_hmc(path, betas, 0.5, 8)
    estimator = jaxz.rts(path, kernel, betas, num_sweeps=100, initial_iterations=6, sweeps_per_iteration=40,
                         adapt=adapt)

    @jax.jit
    @jax.vmap
    def one(key):
        key_init, key_run = jax.random.split(key)
        result = jaxz.run(estimator, key_run, path.sample_base(key_init, NUM_CHAINS))
        return result.estimate, result.state.tours

    short, tours = one(jax.random.split(jax.random.key(0), 4))
    assert np.all(np.asarray(tours) < 20)
    assert np.all(np.asarray(short.status) & jaxz.STATUS_FEW_CHAINS)
    assert not np.any(np.asarray(estimate.status) & jaxz.STATUS_FEW_CHAINS)


def test_trace_holds_every_sweeps_estimates_and_draws():
    """Each sweep's RTSInfo carries the β = 1 end of every ladder of rts_estimates of the
    state after that sweep (in the long run), and with record_draws=True the chains'
    (x, β) after it: checked against stepping the estimator by hand with jaxz.run's keys.
    Initial iterations stop early here, so the run idles at its end (zero Info)."""
    model = gmm10.make(dim=2)
    path = gmm10.path(model)
    betas = np.linspace(0.0, 1.0, 6) ** 2
    kernel, adapt = jaxz.kernels.tempered_hmc(path, betas, 0.5, 3)
    estimator = jaxz.rts(path, kernel, betas, num_sweeps=40, initial_iterations=6, sweeps_per_iteration=20,
                         adapt=adapt, record_draws=True)
    positions = path.sample_base(jax.random.key(1), 32)
    trace = jax.jit(lambda key: jaxz.run(estimator, key, positions).trace)(jax.random.key(2))

    @jax.jit
    def by_hand(key):  # jaxz.run's keys: init, then one per step
        init_key, loop_key = jax.random.split(key)

        def body(state, step_key):
            new_state, _ = estimator.step(step_key, state)
            ladders = jax.tree.map(lambda ladder: ladder[-1], jaxz.rts_estimates(new_state))
            return new_state, (ladders, new_state.kernel_states.position, new_state.beta_index,
                               new_state.long_run & ~state.done, state.long_run & ~state.done)

        state = estimator.init(init_key, positions)
        return jax.lax.scan(body, state, jax.random.split(loop_key, estimator.num_steps))

    final, (ladders, position, beta_index, in_long_run, long_run) = by_hand(jax.random.key(2))
    long_run = np.asarray(long_run)
    np.testing.assert_array_equal(np.asarray(trace.long_run), long_run)
    assert long_run.sum() == 40 and int(final.iteration) < 6  # stopped early: idle steps at the end
    for field, method in (("log_z", "rts"), ("log_z_ts", "ts"), ("log_z_ti_riemann", "ti_riemann"),
                          ("log_z_ti_trapezoid", "ti_trapezoid"), ("log_z_ti_rb", "ti_rb")):
        np.testing.assert_allclose(np.asarray(getattr(trace, field))[long_run],
                                   np.asarray(getattr(ladders, method))[long_run], rtol=1e-6, err_msg=field)
    in_long_run = np.asarray(in_long_run)
    np.testing.assert_array_equal(np.asarray(trace.draws.in_long_run), in_long_run)
    np.testing.assert_array_equal(np.asarray(trace.draws.beta_index)[in_long_run], np.asarray(beta_index)[in_long_run])
    np.testing.assert_allclose(np.asarray(trace.draws.position)[in_long_run], np.asarray(position)[in_long_run],
                               rtol=1e-6)
    assert jaxz.rts(path, kernel, betas, num_sweeps=4).step(jax.random.key(0), final)[1].draws is None
