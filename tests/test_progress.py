"""jaxz.run(..., progress=True): a tqdm bar fed from inside jit, one bar under vmap,
the same numbers as without it, and nothing traced when it is off."""
import sys
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz import _progress
from jaxz.types import Array

DIM, SCALE, SHIFT = 2, 0.5, 1.0
MEAN = SHIFT * np.arange(1, DIM + 1) / DIM
EXACT_LOG_Z = 0.5 * DIM * np.log(2 * np.pi * SCALE**2)  # of exp(−|x − μ|²/(2σ²))
NUM_RUNS, NUM_PARTICLES, MAX_STEPS = 4, 512, 40


def _log_base(x):
    return -0.5 * jnp.sum(x**2) - 0.5 * DIM * jnp.log(2 * jnp.pi)


def _log_target(x):
    return -0.5 * jnp.sum((x - MEAN) ** 2) / SCALE**2


def _exact_draw(rng_key, x, beta):
    """An exact draw of f_β ∝ N(0, I)^{1−β} N(μ, σ²I)^β (a Gaussian): a cheap perfect kernel."""
    precision = (1.0 - beta) + beta / SCALE**2
    mean = beta * MEAN / SCALE**2 / precision
    return mean + jax.random.normal(rng_key, x.shape) / jnp.sqrt(precision), 1.0


PATH = jaxz.paths.geometric(_log_base, _log_target)
KERNEL = jaxz.kernels.from_transition(_exact_draw)
SMC = jaxz.smc(PATH, KERNEL, target_ess=0.5)  # adaptive: lax.while_loop


class RecordingBar:
    """Stands in for tqdm.tqdm: records every bar opened, its updates, postfix and close."""

    opened = []

    def __init__(self, total=None, desc=None, unit=None, leave=None):
        self.total, self.n, self.closed, self.postfix = total, 0, False, ""
        RecordingBar.opened.append(self)

    def update(self, count):
        assert not self.closed, "update after close"
        self.n += count

    def set_postfix_str(self, text, refresh=True):
        self.postfix = text

    def close(self):
        self.closed = True

    def shown(self):
        """The postfix as a dict of floats (and the 'done' count as a string)."""
        items = dict(item.split("=") for item in self.postfix.split(", "))
        return {key: (value if key == "done" else float(value)) for key, value in items.items()}


@pytest.fixture
def bars(monkeypatch):
    RecordingBar.opened = []
    monkeypatch.setattr(_progress, "tqdm_class", lambda: RecordingBar)
    return RecordingBar.opened


def _positions(key):
    return jax.random.normal(key, (NUM_PARTICLES, DIM))


def _finish(tree):
    jax.block_until_ready(tree)
    jax.effects_barrier()  # host callbacks run asynchronously to the outputs
    return tree


@pytest.fixture(scope="module")
def smc_runs():
    """Adaptive SMC (a lax.while_loop), vmapped over runs, with and without the bar in
    one compiled program; and the bars it opened."""

    def both(key):
        init_key, run_key = jax.random.split(key)
        positions = _positions(init_key)
        return (jaxz.run(SMC, run_key, positions, max_steps=MAX_STEPS, progress=True),
                jaxz.run(SMC, run_key, positions, max_steps=MAX_STEPS))

    RecordingBar.opened = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_progress, "tqdm_class", lambda: RecordingBar)
        with_bar, without = _finish(jax.jit(jax.vmap(both))(jax.random.split(jax.random.key(0), NUM_RUNS)))
    return with_bar, without, list(RecordingBar.opened)


def test_progress_under_vmap_gives_the_same_numbers_one_bar_closed_at_the_end(smc_runs):
    with_bar, without, bars = smc_runs
    for got, want in zip(jax.tree.leaves(with_bar), jax.tree.leaves(without)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    # One bar for the four vmapped runs, closed when the last run finished, at the
    # step count of the longest run; it shows every run done at β = 1.
    assert len(bars) == 1
    (bar,) = bars
    assert bar.closed and bar.total is None
    assert bar.n == int(np.max(without.num_steps))
    shown = bar.shown()
    assert shown["done"] == f"{NUM_RUNS}/{NUM_RUNS}"
    assert shown["β"] == 1.0 and shown["acc"] == 1.0
    # The bar watched sound runs: their pooled log Ẑ is within 4 s.e. of the exact one
    # (the adaptive schedule's O(1/N) bias is ~2% at N = 512, well inside).
    pooled = jax.jit(jaxz.combine_runs)(without.estimate)
    assert int(pooled.status) == 0
    assert abs(float(pooled.log_z) - EXACT_LOG_Z) < 4 * float(pooled.log_z_stderr)


class ToyState(NamedTuple):
    log_weights: Array
    beta: Array
    done: Array


class ToyInfo(NamedTuple):
    beta: Array
    ess: Array
    acceptance_rate: Array


def _toy_annealer(num_steps=None):
    """A cheap-to-compile estimator for the driver's tests: AIS with exact draws at each
    β from N(0, 1) to f_1(x) = exp(−x²/(2σ²)), with steps of random length when
    ``num_steps`` is None (an adaptive loop). It keeps no running log Ẑ, so the bar
    reads finalize's."""
    log_z0 = 0.5 * np.log(2 * np.pi)

    def init(rng_key, num_particles):
        return ToyState(jnp.zeros((num_particles,)), jnp.float32(0.0), jnp.bool_(False))

    def log_f(x, beta):  # f_β(x) = exp(−x²/2 · ((1 − β) + β/σ²)), Z_β = √(2π / ((1 − β) + β/σ²))
        return -0.5 * x**2 * ((1.0 - beta) + beta / SCALE**2)

    @jaxz.base.freeze_when_done
    def step(rng_key, state):
        key_beta, key_x = jax.random.split(rng_key)
        size = 1.0 / num_steps if num_steps else jax.random.uniform(key_beta, (), minval=0.1, maxval=0.4)
        beta = jnp.minimum(state.beta + size, 1.0)
        precision = (1.0 - state.beta) + state.beta / SCALE**2
        x = jax.random.normal(key_x, state.log_weights.shape) / jnp.sqrt(precision)  # exact draws of f_{β_t}
        log_weights = state.log_weights + log_f(x, beta) - log_f(x, state.beta)  # Neal (2001), eq. (3)
        new_state = ToyState(log_weights, beta, beta >= 1.0 - 1e-6)
        return new_state, ToyInfo(beta, jaxz.weights.ess(log_weights), jnp.float32(1.0))

    def finalize(state):
        log_z = jaxz.weights.log_mean_exp(state.log_weights) + log_z0
        return jaxz.Estimate(log_z, jaxz.weights.stderr_log_mean_exp(state.log_weights), jnp.float32(0.0),
                             jnp.int32(0))

    return jaxz.Estimator(init, step, finalize, num_steps)


TOY_EXACT_LOG_Z = 0.5 * np.log(2 * np.pi * SCALE**2)


def test_progress_on_one_jitted_run_shows_its_final_log_z_and_reopens_per_call(bars):
    toy = _toy_annealer()
    one = jax.jit(lambda key: jaxz.run(toy, key, 256, max_steps=MAX_STEPS, progress=True))
    first = _finish(one(jax.random.key(1)))
    second = _finish(one(jax.random.key(2)))
    assert len(bars) == 2 and all(bar.closed for bar in bars)
    for bar, result in zip(bars, (first, second)):
        assert bar.total is None and bar.n == int(result.num_steps) > 1
        shown = bar.shown()
        assert "done" not in shown  # a single run has no run count
        np.testing.assert_allclose(shown["log Ẑ"], float(result.estimate.log_z), rtol=1e-3, atol=1e-3)
        assert shown["β"] == 1.0
        # The toy is a sound estimator: log Ẑ within 4 s.e. of the exact log Z.
        assert abs(float(result.estimate.log_z) - TOY_EXACT_LOG_Z) < 4 * float(result.estimate.log_z_stderr)


def test_progress_on_a_static_schedule_gives_the_same_numbers_and_counts_to_its_length(bars):
    toy = _toy_annealer(num_steps=8)
    keys = jax.random.split(jax.random.key(4), NUM_RUNS)

    def both(key):  # one compiled program holds the run with and without the bar
        return jaxz.run(toy, key, 256, progress=True), jaxz.run(toy, key, 256)

    with_bar, without = _finish(jax.jit(jax.vmap(both))(keys))
    for got, want in zip(jax.tree.leaves(with_bar), jax.tree.leaves(without)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    (bar,) = bars
    assert bar.closed and bar.total == 8 and bar.n == 8
    shown = bar.shown()
    assert shown["done"] == f"{NUM_RUNS}/{NUM_RUNS}" and shown["β"] == 1.0
    # The toy keeps no running log Ẑ: the bar shows finalize's, averaged over the runs.
    np.testing.assert_allclose(shown["log Ẑ"], float(np.mean(without.estimate.log_z)), rtol=1e-3, atol=1e-3)


def test_progress_under_nested_vmap_still_opens_one_bar(bars):
    toy = _toy_annealer()
    keys = jax.random.split(jax.random.key(5), (2, 3))
    result = _finish(jax.jit(jax.vmap(jax.vmap(
        lambda key: jaxz.run(toy, key, 64, max_steps=MAX_STEPS, progress=True))))(keys))
    (bar,) = bars
    assert bar.closed and bar.n == int(np.max(result.num_steps))
    assert bar.shown()["done"] == "6/6"


def test_progress_off_traces_no_callback_and_on_traces_one_per_step():
    x = _positions(jax.random.key(0))

    def jaxpr(progress):
        return str(jax.make_jaxpr(lambda k: jaxz.run(SMC, k, x, max_steps=MAX_STEPS, progress=progress))(
            jax.random.key(0)))

    assert "callback" not in jaxpr(False) and "custom_vmap" not in jaxpr(False)
    assert jaxpr(True).count("custom_vmap_call") == 1


def test_progress_without_tqdm_warns_and_traces_no_callback(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # import tqdm.auto now raises ImportError
    x = _positions(jax.random.key(0))
    with pytest.warns(UserWarning, match="needs tqdm"):
        jaxpr = str(jax.make_jaxpr(lambda k: jaxz.run(SMC, k, x, max_steps=MAX_STEPS, progress=True))(
            jax.random.key(1)))
    assert "custom_vmap_call" not in jaxpr


def test_progress_rejects_a_non_boolean():
    with pytest.raises(ValueError, match="progress must be True or False"):
        jaxz.run(SMC, jax.random.key(0), _positions(jax.random.key(0)), max_steps=MAX_STEPS, progress="yes")


def test_valid_trace_cuts_the_padding_per_run(smc_runs):
    result = smc_runs[1]
    traces = result.valid_trace()
    assert len(traces) == NUM_RUNS
    for index, trace in enumerate(traces):
        count = int(result.num_steps[index])
        assert trace.beta.shape == (count,) and float(trace.beta[-1]) == 1.0
        np.testing.assert_array_equal(np.asarray(trace.beta), np.asarray(result.trace.beta[index, :count]))
        # The padding really is padding: zeros after num_steps.
        assert np.all(np.asarray(result.trace.beta[index, count:]) == 0.0)
        # Σ of the log Ẑ increments of the valid steps is the run's log Ẑ (log Z_0 = 0).
        np.testing.assert_allclose(float(np.sum(trace.log_z_increment)), float(result.estimate.log_z[index]),
                                   rtol=1e-5, atol=1e-6)
    same = result.valid_trace(1)
    np.testing.assert_array_equal(np.asarray(same.ess), np.asarray(traces[1].ess))
    with pytest.raises(ValueError, match="run must index"):
        result.valid_trace((0, 1))
    single = jax.tree.map(lambda leaf: leaf[0], result)
    assert single.valid_trace().beta.shape == (int(result.num_steps[0]),)
    with pytest.raises(ValueError, match="run must be None"):
        single.valid_trace(0)
