"""A 784-visible RBM with exact log Z: ARM (plain, anticipate, reseed), RM, AIS and RTS at
matched cost (issue 28, item 1; seed: Fraccaro, Paquet & Winther 2016, §5 and Fig. 4).

Data. MNIST cannot be fetched offline, so scikit-learn's 8 × 8 digits (``load_digits``,
1,797 images, intensities 0–16) are upsampled to 28 × 28 by bilinear interpolation
(``jax.image.resize``) and binarized at half intensity (≥ 8/16), split as
``jaxz.data.digits_binarized`` splits them (seed 0, 20 % test): 1,437 training images of
784 binary pixels (142 pixels are 0 in every image). Two RBMs with 20 hidden units:
CD-1 (30 epochs, SGD 0.05, momentum 0.9: the ``jaxz.models.rbm.train`` defaults) and
PCD-1 (100 epochs, SGD with momentum 0.5 and a learning rate decaying linearly from
0.05 to 0; at a constant rate PCD stayed at the base-rate model's likelihood).

Exact values. log Z by enumerating the 2^20 hidden states (``exact_log_z``, chunked
``lax.map``, float64). For the diagnosis the same enumeration, in blocks of 2^12 hidden
states under ``lax.scan``, gives every level of ARM's sequence at once: with the units
in ARM's order (decreasing data variance, seed §5.1),

    log Z_n = logsumexp_h [b·h + Σ_{i≤n} softplus(a_i + (W h)_i)],   n = 1..784,

with the exact hidden means E_{p_n}[h] and the entropy of p_n(h) (effective number of
hidden states exp(entropy)). log Z_784 is checked against ``exact_log_z``.

Protocol (that of ``benchmarks/rbm_gibbs_roofline.py``, part 2). A budget B of full-sweep
equivalents × particles per run; a Gibbs move at ARM level n costs t·n/784 full sweeps
(the seed's O(tHn); ``Estimate.cost``), reseeded particles are charged their
``reseed_sweeps`` full sweeps (an upper bound). Each method is given settings that
spend B:

- AIS (base-rate start, sigmoidal schedule): K chains × B/K steps;
- RTS (100 linear temperatures, 10 initial iterations of 50 sweeps counted): C chains × B/C sweeps;
- RM (``max_generate=0``): R = B / (t · Σ_{n=2}^{784} n/784) particles;
- ARM, ARM-anticipate, ARM-reseed (seed Alg. 2, §3.2, §5.1): R from a pilot so that the mean
  cost meets B (``--full``), or from a guessed cost per particle (``--quick``; the actual cost
  is reported and the ratios use variance × cost).

``--full`` tunes each family over a small grid (``tune_runs`` runs each, smallest MSE
kept) and evaluates the winner on fresh keys; ``--quick`` runs one setting per family.
Reported per method: bias (mean of log Ẑ − log Z), sd, RMSE, coverage of the method's own
standard error (|err| ≤ 1.96 s.e.; ARM/RM give none), mean cost, wall time per run, and
variance × cost and MSE × cost relative to AIS.

Diagnosis (ARM and RM, from the evaluation runs' traces): mean log-increment per level
against the exact log Z_{n+1} − log Z_n, the cumulative deficit and the levels where
it accumulates, γ = ESS/R before generating, generate iterations and pool sizes per
level; and from a few traced runs, the particles' weighted hidden means
E[σ(b + Σ_{i≤n} v_i W_i)] against the exact E_{p_n}[h] (which hidden features the
particles lose, and where).

Reading (--full run: tuned, 16 runs per method at matched cost; results/rbm784.md). ARM
loses, badly: on the CD-1 RBM (exact log Z 714.88) ARM is 42.0 nats low (sd 5.7), RM 43.9,
ARM-anticipate 40.2, against AIS 5.1 low (sd 2.1) and RTS 3.3 low (sd 5.8); on the PCD-1
RBM (573.36) ARM 13.0 low, RM 15.1, anticipate 14.5, AIS 1.0, RTS 4.7 low; MSE × cost is
56–75× AIS's. Forcing generation (γ_thr = 0.9 or 1) made ARM worse in tuning. ARM-reseed
is 208 (CD-1) and 98 (PCD-1) nats HIGH. Exact hidden means (CD-1): hidden unit 10
(|W| > 1 on 152 pixels) has E_{p_n}[h] 1.0 up to level 184 and 0.00 from level 188; the
particles keep it at 1.0 to level ~236 and drop it only by level ~284 (PCD-1: unit 16,
exact 0.02 → 0.96 between levels 362 and 378, particles 0.0 → 0.64 by level 442). The
quick run (8 runs) reads the same. Why, from the exact ladder (quick-run figures): after ~100 pixels p_n(h) is nearly
deterministic (exp(entropy) = 1–4 hidden states), and its dominant hidden state switches
as pixels are added. On CD-1, half the deficit is lost between levels 188 and 194 and 75 %
by level 213 (−24 and −16 nats in levels 100–199 and 200–299; single levels 5.5 nats short
of exact increments of 5–6.5 nats); at level 201 the particles hold a hidden configuration
that p_n no longer favors (5 of the 20 hidden means off by 0.9–1.0). A blocked Gibbs sweep
cannot switch it: several hidden units, each strongly coupled to many included pixels,
would have to flip together. Since every particle sits in the same wrong mode, the smooth
weights are nearly equal: γ = ESS/R before generating stays 0.75–0.9, ARM generates at
0.2 iterations per level (mostly in the first 100 levels) and resamples at 7 % of levels —
the ESS test cannot see mass in modes no particle visits, so the generate loop (and
anticipate's splitting) never fires where it matters, and when it fires it only moves the
same particles inside their mode. Reseeding from data-started Gibbs chains does reach
other modes, but those particles are not draws from p_n; Prop. 1 pools them as if they
were, and their smooth weights are larger (+0.27 nats per level on CD-1). Since this run
``jaxz.arm`` checks each reseed against the old set (``RESEED_DISAGREEMENT``): rerun on 4 runs
per RBM (R = 43), every ARM-reseed run is flagged STATUS_LOW_ESS (max |z| 10-145 on CD-1,
7-20 on PCD-1), where the table above shows status 0; and ``jaxz.rts`` counts the chains'
one-way trips along the ladder: on CD-1 (4 runs) 0-2 in the long run, fewer than its 20
batches, so those runs are flagged too (PCD-1: 130-150 trips, not flagged). RTS's batch-means
s.e. covered 0 of 8 runs on both RBMs; AIS's covered 1/8 (CD-1) and 6/8 (PCD-1).

Run:  python benchmarks/rbm784.py [--quick | --full]     (quick: ≤ 15 min on 2 cores)
Writes benchmarks/results/rbm784.json and rbm784.md.
"""
import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm import tqdm

import jaxz
from jaxz.models import rbm as rbm_lib
from _results import machine, write

NUM_HIDDEN = 20
SIDE = 28
MIN_RESEED = 10  # the seed's floor is 100 (at R up to 10^4); here R is ~50
RTS_TEMPERATURES = 100
RTS_INITIAL = (10, 50)  # initial iterations × sweeps per iteration (seed §2.4), counted in the cost
QUICK = dict(budget=100_000, runs=8, tune_runs=0, reseed_sweeps=10, traced_runs=4)
FULL = dict(budget=100_000, runs=16, tune_runs=6, reseed_sweeps=10, traced_runs=8)


# ---------------------------------------------------------------------------------------
# Data and RBMs


def digits_28():
    """8 × 8 digits → 28 × 28 (bilinear) → binary at half intensity; the digits_binarized split."""
    from sklearn.datasets import load_digits

    images = load_digits().data.reshape(-1, 8, 8) / 16.0
    upsampled = np.asarray(jax.image.resize(jnp.asarray(images), (images.shape[0], SIDE, SIDE), "bilinear"))
    binary = (upsampled >= 0.5).astype(np.float32).reshape(images.shape[0], SIDE * SIDE)
    order = np.random.RandomState(0).permutation(binary.shape[0])
    num_test = int(round(0.2 * binary.shape[0]))
    return binary[order[num_test:]], binary[order[:num_test]]


def train_rbms(train):
    num_batches = train.shape[0] // 100
    settings = {
        "CD-1": dict(method="cd", k=1, num_epochs=30),
        "PCD-1": dict(method="pcd", k=1, num_epochs=100,
                      optimizer=optax.sgd(optax.linear_schedule(0.05, 0.0, 100 * num_batches), momentum=0.5)),
    }
    described = {
        "CD-1": "CD-1, 30 epochs, batch 100, SGD 0.05 momentum 0.9",
        "PCD-1": "PCD-1 (100 persistent chains), 100 epochs, batch 100, SGD momentum 0.5, lr 0.05 -> 0 linearly",
    }
    for index, (name, options) in enumerate(settings.items()):
        result = rbm_lib.train(jax.random.key(index), jnp.asarray(train), NUM_HIDDEN, **options)
        yield name, result, described[name]


def as_float64(rbm):
    return rbm_lib.RBM(*(jnp.asarray(np.asarray(p), jnp.float64) for p in rbm))


def exact_ladder(rbm, order, chunk_bits=12):
    """Every level of ARM's sequence by enumerating the hidden layer, in float64: log Z_n,
    E_{p_n}[h] and the entropy of p_n(h) for n = 1..V (units taken in ``order``).

    Per block of 2^chunk_bits hidden states, log f_n(h) = b·h + cumsum_i softplus(a_i + (W h)_i)
    for every n; blocks are merged by a running logsumexp (means re-weighted alike)."""
    with jax.enable_x64(True):
        rbm = as_float64(rbm)
        weights, visible_biases = rbm.W[jnp.asarray(order)], rbm.a[jnp.asarray(order)]
        num_hidden = weights.shape[1]
        size = 2**chunk_bits
        bits = jnp.arange(num_hidden, dtype=jnp.int32)

        def block(carry, index):
            log_z, means, log_f_mean = carry
            states = (((index * size + jnp.arange(size, dtype=jnp.int32))[:, None] >> bits) & 1).astype(jnp.float64)
            log_f = states @ rbm.b + jnp.cumsum(jax.nn.softplus(states @ weights.T + visible_biases), axis=1).T
            block_log_z = jax.nn.logsumexp(log_f, axis=1)  # (V,)
            probabilities = jnp.exp(log_f - block_log_z[:, None])  # (V, size)
            block_means, block_log_f = probabilities @ states, jnp.sum(probabilities * log_f, axis=1)
            total = jnp.logaddexp(log_z, block_log_z)
            old, new = jnp.exp(log_z - total), jnp.exp(block_log_z - total)
            return (total, old[:, None] * means + new[:, None] * block_means,
                    old * log_f_mean + new * block_log_f), None

        num_visible = weights.shape[0]
        start = (jnp.full((num_visible,), -jnp.inf), jnp.zeros((num_visible, num_hidden)), jnp.zeros((num_visible,)))
        blocks = jnp.arange(2 ** (num_hidden - chunk_bits), dtype=jnp.int32)
        log_z, means, log_f_mean = jax.jit(lambda: jax.lax.scan(block, start, blocks)[0])()
        return np.asarray(log_z), np.asarray(means), np.asarray(log_z - log_f_mean)


# ---------------------------------------------------------------------------------------
# Methods at one budget


def rm_particles(budget, sweeps, num_visible):
    per_particle = sweeps * (num_visible * (num_visible + 1) / 2 - 1) / num_visible
    return max(4, int(round(budget / per_particle)))


def configurations(budget, full, num_visible):
    """Settings per family, each spending ``budget`` full sweeps × particles per run."""
    ais = {f"AIS K={k}": dict(chains=k, steps=budget // k) for k in ((10, 30, 100) if full else (30,))}
    rts = {f"RTS C={c}": dict(chains=c, sweeps=budget // c) for c in ((20, 100) if full else (20,))}
    rm = {f"RM t={t}": dict(gibbs_sweeps=t, max_generate=0, particles=rm_particles(budget, t, num_visible))
          for t in ((2, 10) if full else (2,))}
    # guessed cost per particle relative to RM's (quick only; --full measures it with a pilot)
    arm = {f"ARM t=2 g={g} i=3": dict(gibbs_sweeps=2, gamma_threshold=g, max_generate=3, guess=2.0)
           for g in ((0.7, 0.9, 1.0) if full else (0.7,))}
    anticipate = {"ARM-anticipate t=2 g=0.7 i=3": dict(gibbs_sweeps=2, gamma_threshold=0.7, max_generate=3,
                                                       variant="anticipate", guess=3.0)}
    reseed = {"ARM-reseed t=2 g=0.7 i=2": dict(gibbs_sweeps=2, gamma_threshold=0.7, max_generate=2,
                                               variant="reseed", guess=3.0)}
    return {"AIS": ais, "RTS": rts, "RM": rm, "ARM": arm, "ARM-anticipate": anticipate, "ARM-reseed": reseed}


def make_run(family, config, rbm, data, order, reseed_sweeps):
    """``one(key) -> (Estimate, trace or None)`` for one run of a configuration."""
    if family in ("AIS", "RTS"):
        path, kernel = rbm_lib.annealing(rbm_lib.base_rate(data), rbm)
        if family == "AIS":
            estimator = jaxz.ais(path, kernel, jaxz.schedules.sigmoidal(config["steps"] + 1))
        else:
            initial = RTS_INITIAL[0] * RTS_INITIAL[1]
            estimator = jaxz.rts(path, kernel, jaxz.schedules.linear(RTS_TEMPERATURES),
                                 num_sweeps=config["sweeps"] - initial, initial_iterations=RTS_INITIAL[0],
                                 sweeps_per_iteration=RTS_INITIAL[1])

        def one(key):
            key_base, key_run = jax.random.split(key)
            return jaxz.run(estimator, key_run, path.sample_base(key_base, config["chains"])).estimate, None
        return one
    estimator = _arm_estimator(config, rbm, data, order, reseed_sweeps)

    def one(key):
        result = jaxz.run(estimator, key)
        trace = result.trace
        return result.estimate, dict(increment=trace.log_z_increment, gamma=trace.gamma[:, 0],
                                     generate=trace.num_generate, pool=trace.num_particles, resampled=trace.resampled)
    return one


def batch_runs(one, key, num_runs):
    """num_runs vmapped runs; returns (Estimate, traces) as numpy and the compiled wall time per run."""
    batch = jax.jit(jax.vmap(one))
    keys = jax.random.split(key, num_runs)
    compiled = batch.lower(keys).compile()
    start = time.perf_counter()
    estimate, trace = jax.block_until_ready(compiled(keys))
    seconds = (time.perf_counter() - start) / num_runs
    return jax.tree.map(np.asarray, estimate), jax.tree.map(np.asarray, trace), seconds


def set_particles(family, config, rbm, data, order, budget, num_visible, reseed_sweeps, pilot, key):
    """R for the ARM variants: from a pilot at R = 25 (4 runs) or from the guessed cost."""
    config = dict(config)
    if family in ("AIS", "RTS", "RM"):
        return config, None
    rm_per_particle = budget / rm_particles(budget, config["gibbs_sweeps"], num_visible)
    if not pilot:
        config["particles"] = max(4, int(round(budget / (config["guess"] * rm_per_particle))))
        return config, None
    pilot_particles = 25
    estimate, _, _ = batch_runs(make_run(family, dict(config, particles=pilot_particles), rbm, data, order,
                                         reseed_sweeps), key, 4)
    per_particle = float(np.mean(estimate.cost)) / pilot_particles
    config["particles"] = max(4, int(round(budget / per_particle)))
    return config, per_particle


def summarize(estimate, seconds, exact, config):
    errors = np.asarray(estimate.log_z, np.float64) - exact
    stderr = np.asarray(estimate.log_z_stderr, np.float64)
    has_stderr = bool(np.all(np.isfinite(stderr)))
    cost = float(np.mean(estimate.cost))
    return {
        **{k: v for k, v in config.items() if k != "guess"},
        "runs": int(errors.size),
        "bias": float(errors.mean()), "bias_stderr": float(errors.std(ddof=1) / np.sqrt(errors.size)),
        "sd": float(errors.std(ddof=1)), "rmse": float(np.sqrt(np.mean(errors**2))),
        "log_mean_z_hat_minus_log_z": float(jaxz.weights.log_mean_exp(jnp.asarray(errors))),
        "coverage_1.96se": float(np.mean(np.abs(errors) <= 1.96 * stderr)) if has_stderr else None,
        "mean_stderr": float(np.mean(stderr)) if has_stderr else None,
        "cost_mean": cost, "variance_x_cost": float(errors.var(ddof=1) * cost),
        "mse_x_cost": float(np.mean(errors**2) * cost), "seconds_per_run": seconds,
        "status_max": int(np.max(estimate.status)), "errors": errors.tolist(),
    }


# ---------------------------------------------------------------------------------------
# Diagnosis of ARM / RM


def level_diagnosis(trace, ladder_log_z):
    """Per-level deficit of the mean log-increment against the exact one, and where it accumulates."""
    exact_increment = np.diff(ladder_log_z)  # level n -> n + 1, n = 1..V-1
    deficit = np.mean(trace["increment"], axis=0) - exact_increment
    cumulative = np.cumsum(deficit)
    total = cumulative[-1]
    worst = np.argsort(deficit)[:10]
    levels = np.arange(1, deficit.size + 1)
    quantile_levels = {f"{int(q * 100)}%": int(levels[np.argmax(cumulative <= q * total)]) if total < 0 else None
                       for q in (0.25, 0.5, 0.75, 0.9)}
    per_100 = [float(deficit[i:i + 100].sum()) for i in range(0, deficit.size, 100)]
    return {
        "total_deficit": float(total),
        "deficit_per_100_levels": per_100,
        "level_where_cumulative_deficit_reaches": quantile_levels,
        "worst_levels": [{"n": int(levels[i]), "deficit": float(deficit[i]),
                          "exact_increment": float(exact_increment[i]),
                          "gamma_before_generate": float(np.mean(trace["gamma"][:, i])),
                          "generate": float(np.mean(trace["generate"][:, i]))} for i in worst],
        "mean_gamma_before_generate_per_100_levels": [float(np.mean(trace["gamma"][:, i:i + 100]))
                                                      for i in range(0, deficit.size, 100)],
        "fraction_levels_generating": float(np.mean(trace["generate"] > 0)),
        "mean_generate_per_level": float(np.mean(trace["generate"])),
        "generate_per_100_levels": [float(np.mean(trace["generate"][:, i:i + 100]))
                                    for i in range(0, deficit.size, 100)],
        "fraction_levels_resampled": float(np.mean(trace["resampled"])),
        "mean_pool_size": float(np.mean(trace["pool"])),
        "cumulative_deficit": cumulative[::8].tolist(),
    }


def _arm_estimator(config, rbm, data, order, reseed_sweeps):
    """jaxz.arm over the RBM built one visible unit at a time in ``order``, from a tuned config
    (the reseed variant draws its fresh particles from data-started Gibbs chains)."""
    model = rbm_lib.sequential_model(rbm, order, config["gibbs_sweeps"])
    options = {k: v for k, v in config.items() if k not in ("gibbs_sweeps", "particles", "guess")}
    if options.get("variant") == "reseed":
        options.update(reseed_fn=rbm_lib.data_reseed(rbm, data, order, num_sweeps=reseed_sweeps),
                       reseed_cost=reseed_sweeps, min_reseed=MIN_RESEED)
    return jaxz.arm(model, config["particles"], **options)


def hidden_mean_diagnosis(family, config, rbm, data, order, reseed_sweeps, ladder_means, key, num_runs,
                          focus_level=None):
    """Weighted particle means of σ(b + Σ_{i≤n} v_i W_i) at every level against the exact E_{p_n}[h];
    around ``focus_level`` (where the deficit accumulates) the hidden unit the particles get most
    wrong, its exact and particle means level by level, and how strongly it couples to the pixels."""
    estimator = _arm_estimator(config, rbm, data, order, reseed_sweeps)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    rank = jnp.asarray(rank)

    def weighted_hidden(state):
        included = jnp.where(rank[None, :] < state.n, state.positions, 0.0)
        probabilities = jax.nn.sigmoid(included @ rbm.W + rbm.b)  # (R, H)
        return jnp.exp(jaxz.weights.normalize(state.log_weights)) @ probabilities

    @jax.jit
    @jax.vmap
    def traced(key):
        key_init, key_steps = jax.random.split(key)
        state = estimator.init(key_init)

        def body(state, key):
            state, _ = estimator.step(key, state)
            return state, weighted_hidden(state)
        return jax.lax.scan(body, state, jax.random.split(key_steps, estimator.num_steps))[1]

    means = np.asarray(traced(jax.random.split(key, num_runs)))  # (runs, V-1, H): levels 2..V
    exact = ladder_means[1:]
    gap = np.mean(means, axis=0) - exact  # (V-1, H)
    levels = sorted({min(n, exact.shape[0] - 1) for n in (99, 199, 399, 599, exact.shape[0] - 1)})
    focus = {}
    if focus_level is not None:
        index = min(int(focus_level) - 2 + 10, gap.shape[0] - 1)  # a few levels past the focus (levels 2..V)
        unit = int(np.argmax(np.abs(gap[index])))
        window = np.arange(max(0, index - 80), min(gap.shape[0], index + 81), 4)
        crossing = np.nonzero(np.diff(np.sign(exact[:, unit] - 0.5)))[0]
        couplings = np.abs(np.asarray(rbm.W)[:, unit])
        focus = {"focus_level": int(focus_level), "hidden_unit": unit,
                 "levels": (window + 2).tolist(), "exact_mean": np.round(exact[window, unit], 3).tolist(),
                 "particle_mean": np.round(np.mean(means[:, window, unit], axis=0), 3).tolist(),
                 "exact_mean_crosses_half_at_levels": (crossing + 2).tolist(),
                 "pixels_with_abs_weight_above_1": int(np.sum(couplings > 1.0)),
                 "max_abs_weight": float(couplings.max()), "hidden_bias": float(np.asarray(rbm.b)[unit])}
    return {
        "runs": num_runs, "critical_hidden_unit": focus,
        "max_abs_gap_per_100_levels": [float(np.max(np.abs(gap[i:i + 100]))) for i in range(0, gap.shape[0], 100)],
        "at_levels": {str(n + 2): {"exact": np.round(exact[n], 3).tolist(),
                                   "particles": np.round(np.mean(means[:, n], axis=0), 3).tolist(),
                                   "spread_over_runs": np.round(np.std(means[:, n], axis=0), 3).tolist()}
                      for n in levels},
    }


# ---------------------------------------------------------------------------------------


def markdown(report):
    lines = [f"# rbm784 ({report['mode']})", "",
             f"784-visible × {NUM_HIDDEN}-hidden RBMs on 28×28 upsampled binarized digits; budget "
             f"{report['settings']['budget']:,} full sweeps × particles per run; exact log Z by enumeration.", ""]
    for name, entry in report["rbms"].items():
        lines += [f"## {name}: exact log Z = {entry['exact_log_z']:.4f} (train log-lik {entry['train_log_lik']:.2f}, "
                  f"base rate {entry['base_rate_log_lik']:.2f})", "",
                  "| method | setting | runs | bias | sd | RMSE | coverage | cost | var×cost / AIS | "
                  "MSE×cost / AIS | s/run |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        ais = entry["best"]["AIS"]
        for family, best in entry["best"].items():
            coverage = "–" if best["coverage_1.96se"] is None else f"{best['coverage_1.96se']:.2f}"
            size = best.get("particles", best.get("chains"))
            lines.append(
                f"| {family} | {best['configuration']} (R/K/C={size}) | {best['runs']} | {best['bias']:+.3f} | "
                f"{best['sd']:.3f} | {best['rmse']:.3f} | {coverage} | {best['cost_mean']:,.0f} | "
                f"{best['variance_x_cost'] / ais['variance_x_cost']:.3g} | "
                f"{best['mse_x_cost'] / ais['mse_x_cost']:.3g} | "
                f"{best['seconds_per_run']:.2f} |")
        lines.append("")
        for family, diag in entry.get("diagnosis", {}).items():
            levels = diag["levels"]
            lines += [f"**{family}**: total deficit {levels['total_deficit']:.2f} nats; cumulative deficit reaches "
                      f"25/50/75/90 % at levels {list(levels['level_where_cumulative_deficit_reaches'].values())}; "
                      f"deficit per 100 levels {np.round(levels['deficit_per_100_levels'], 2).tolist()}; "
                      f"mean γ before generating per 100 levels "
                      f"{np.round(levels['mean_gamma_before_generate_per_100_levels'], 2).tolist()}; "
                      f"generate iterations per level {levels['mean_generate_per_level']:.2f} "
                      f"(per 100 levels {np.round(levels['generate_per_100_levels'], 2).tolist()}), "
                      f"resampled at {levels['fraction_levels_resampled']:.2f} of levels.", ""]
            if "hidden_means" in diag:
                hidden = diag["hidden_means"]
                lines += [f"  max |particle − exact| hidden mean per 100 levels: "
                          f"{np.round(hidden['max_abs_gap_per_100_levels'], 3).tolist()}", ""]
                focus = hidden["critical_hidden_unit"]
                if focus:
                    lines += [f"  hidden unit {focus['hidden_unit']} (|W| > 1 on "
                              f"{focus['pixels_with_abs_weight_above_1']} pixels, max |W| "
                              f"{focus['max_abs_weight']:.2f}): exact E[h] crosses 1/2 at levels "
                              f"{focus['exact_mean_crosses_half_at_levels']}; levels {focus['levels'][::4]}: exact "
                              f"{focus['exact_mean'][::4]}, particles {focus['particle_mean'][::4]}", ""]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", default=True, help="one setting per method, 8 runs (≤ 15 min)")
    mode.add_argument("--full", action="store_true", help="tuned over a small grid, 32 evaluation runs")
    args = parser.parse_args()
    full = args.full
    settings = FULL if full else QUICK
    budget = settings["budget"]
    train, _ = digits_28()
    num_visible = train.shape[1]
    data = jnp.asarray(train)
    order = rbm_lib.variance_order(train)
    base = rbm_lib.base_rate(data)
    base_log_lik = float(jnp.mean(rbm_lib.log_marginal_visible(base, data)) - rbm_lib.exact_log_z(base))
    report = {"mode": "full" if full else "quick", "machine": machine(),
              "settings": {**settings, "hidden": NUM_HIDDEN, "visible": num_visible,
                           "data": "sklearn load_digits 8x8 -> 28x28 bilinear (jax.image.resize), >= 0.5 -> 1; "
                                   f"{train.shape[0]} training images",
                           "order": "decreasing data variance (seed 5.1)",
                           "rts": f"{RTS_TEMPERATURES} linear temperatures, {RTS_INITIAL[0]} initial iterations x "
                                  f"{RTS_INITIAL[1]} sweeps (counted)",
                           "cost_unit": "full Gibbs sweeps x particles; ARM move at level n = t n / 784 sweeps; "
                                        "a reseeded particle = reseed_sweeps sweeps"},
              "rbms": {}}
    started = time.perf_counter()
    for rbm_index, (name, result, described) in enumerate(train_rbms(train)):
        rbm = result.rbm
        with jax.enable_x64(True):
            exact = float(rbm_lib.exact_log_z(as_float64(rbm)))
            train_log_lik = float(jnp.mean(rbm_lib.log_marginal_visible(as_float64(rbm), jnp.asarray(train,
                                                                                                    jnp.float64))))
        ladder_log_z, ladder_means, ladder_entropy = exact_ladder(rbm, order)
        entry = {"training": described, "exact_log_z": exact, "train_log_lik": train_log_lik - exact,
                 "base_rate_log_lik": base_log_lik,
                 "reconstruction_error_last": float(result.reconstruction_error[-1]),
                 "ladder_check": float(ladder_log_z[-1] - exact),
                 "effective_hidden_states_per_100_levels": np.round(np.exp(ladder_entropy[::100]), 1).tolist()
                 + [float(np.round(np.exp(ladder_entropy[-1]), 1))],
                 "tuning": {}, "best": {}, "diagnosis": {}}
        print(f"{name}: exact log Z {exact:.4f} (ladder {ladder_log_z[-1]:.4f}), "
              f"train log-lik {train_log_lik - exact:.2f}, base rate {base_log_lik:.2f}, "
              f"{time.perf_counter() - started:.0f} s")
        families = configurations(budget, full, num_visible)
        jobs = sum(len(c) for c in families.values()) if full else 0
        jobs += len(families)
        with tqdm(total=jobs, desc=name) as bar:
            for family_index, (family, configs) in enumerate(families.items()):
                key = jax.random.key(1000 * rbm_index + 10 * family_index)
                chosen = {label: set_particles(family, config, rbm, data, order, budget, num_visible,
                                               settings["reseed_sweeps"], full, jax.random.fold_in(key, 7))
                          for label, config in configs.items()}
                if full and len(configs) > 1:
                    scores = {}
                    for index, (label, (config, _)) in enumerate(chosen.items()):
                        one = make_run(family, config, rbm, data, order, settings["reseed_sweeps"])
                        estimate, _, seconds = batch_runs(one, jax.random.fold_in(key, 100 + index),
                                                          settings["tune_runs"])
                        scores[label] = summarize(estimate, seconds, exact, config)
                        bar.update()
                    entry["tuning"][family] = {k: {m: v for m, v in s.items() if m != "errors"}
                                               for k, s in scores.items()}
                    label = min(scores, key=lambda k: scores[k]["rmse"])
                else:
                    label = next(iter(chosen))
                    bar.update(len(configs) if full else 0)
                config, per_particle = chosen[label]
                one = make_run(family, config, rbm, data, order, settings["reseed_sweeps"])
                estimate, trace, seconds = batch_runs(one, jax.random.fold_in(key, 999), settings["runs"])
                best = {"configuration": label, **summarize(estimate, seconds, exact, config)}
                if per_particle is not None:
                    best["pilot_cost_per_particle"] = per_particle
                entry["best"][family] = best
                if trace is not None:
                    entry["diagnosis"][family] = {"levels": level_diagnosis(trace, ladder_log_z)}
                bar.update()
                print(f"  {family:15s} {label:30s} bias {best['bias']:+8.3f} sd {best['sd']:.3f} "
                      f"cost {best['cost_mean']:,.0f} {seconds:.2f} s/run")
        for family in ("RM", "ARM") if full else ("ARM",):
            config = {k: v for k, v in entry["best"][family].items()
                      if k in ("gibbs_sweeps", "gamma_threshold", "max_generate", "variant", "particles")}
            entry["diagnosis"][family]["hidden_means"] = hidden_mean_diagnosis(
                family, config, rbm, data, order, settings["reseed_sweeps"], ladder_means,
                jax.random.key(77 + rbm_index), settings["traced_runs"],
                entry["diagnosis"][family]["levels"]["level_where_cumulative_deficit_reaches"]["50%"])
        ais = entry["best"]["AIS"]
        entry["ratios_vs_AIS"] = {family: {"variance_x_cost": best["variance_x_cost"] / ais["variance_x_cost"],
                                           "mse_x_cost": best["mse_x_cost"] / ais["mse_x_cost"]}
                                  for family, best in entry["best"].items()}
        report["rbms"][name] = entry
    report["seconds_total"] = time.perf_counter() - started
    write(report, "rbm784.json")
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "rbm784.md"), "w") as handle:
        handle.write(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
