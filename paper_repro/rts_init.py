"""Seed Figure 1 (Carlson, Stinson, Pakman & Paninski, "Partition Functions from
Rao-Blackwellized Tempered Sampling", ICML 2016): log Ẑ_k and ĉ_k over the initial
iterations of §2.4, with Rao-Blackwellization (ĉ_k = mean of q(β_k | x), eq. 9) and
without it (visit frequencies + 0.1, plain tempered sampling).

The seed uses an RBM with 10 hidden units trained on MNIST; offline, scikit-learn's
8×8 digits binarized at half intensity (``jaxz.data.digits_binarized``, 64 visible
units) stand in. Settings as in the seed: 10 hidden units (exact log Z_k is known at
β = 1 by enumeration), K = 100 linearly spaced temperatures, 100 chains, 50 Gibbs
sweeps per iteration, Ẑ_k = 1 to start. Each iteration is one ``jaxz.rts`` block
(initial_iterations=1), Ẑ carried between blocks so every iteration is shown (the
estimator itself would stop once max_k |r_k − ĉ_k| < 0.1/K).

--quick (default; under a minute on 2 shared cores): 10 iterations, RBM trained 10
epochs. --full: 20 iterations, RBM trained 50 epochs.

Writes paper_repro/out/rts_init.{json,png}.
"""
import json
import os

import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

import jaxz  # noqa: E402
from jaxz.models import rbm as rbm_lib  # noqa: E402
from _cli import machine, parse_mode  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
NUM_TEMPERATURES, NUM_CHAINS, SWEEPS_PER_ITERATION, NUM_HIDDEN = 100, 100, 50, 10


def main():
    args = parse_mode(__doc__)
    num_iterations, num_epochs = (20, 50) if args.full else (10, 10)

    data = jnp.asarray(jaxz.data.digits_binarized().train)
    model = rbm_lib.train(jax.random.key(0), data, NUM_HIDDEN, method="pcd", num_epochs=num_epochs).rbm
    exact = float(rbm_lib.exact_log_z(model))
    path, kernel = rbm_lib.annealing(rbm_lib.base_rate(data), model)
    betas = jaxz.schedules.linear(NUM_TEMPERATURES)
    log_prior = np.full(NUM_TEMPERATURES, -np.log(NUM_TEMPERATURES))

    def make_iteration(rao_blackwellize):
        @jax.jit
        def iteration(key, positions, log_z_hat):
            estimator = jaxz.rts(path, kernel, betas, num_sweeps=1, initial_iterations=1,
                                 sweeps_per_iteration=SWEEPS_PER_ITERATION, log_z_hat=log_z_hat,
                                 rao_blackwellize=rao_blackwellize)
            state = jaxz.run(estimator, key, positions).state
            # eq. (12) undone: ĉ_k ∝ r_k exp(log Ẑ_k^new − log Ẑ_k^old)
            step = state.log_z_hat - (log_z_hat - log_z_hat[0] + path.log_z0)
            c_hat = jax.nn.softmax(jnp.asarray(log_prior, step.dtype) + step)
            return state.kernel_states.position, state.log_z_hat, c_hat

        return iteration

    report = {"seed_figure": 1, "exact_log_z": exact, "num_hidden": NUM_HIDDEN, "K": NUM_TEMPERATURES,
              "num_chains": NUM_CHAINS, "sweeps_per_iteration": SWEEPS_PER_ITERATION, "methods": {}}
    for name, rao_blackwellize in (("rao_blackwellized", True), ("counts", False)):
        iteration = make_iteration(rao_blackwellize)
        key = jax.random.key(1)
        positions = path.sample_base(jax.random.key(2), NUM_CHAINS)
        log_z_hat = jnp.zeros(NUM_TEMPERATURES)
        ladders, c_hats = [np.asarray(log_z_hat + path.log_z0)], []
        for _ in tqdm(range(num_iterations), desc=name):
            key, subkey = jax.random.split(key)
            positions, log_z_hat, c_hat = iteration(subkey, positions, log_z_hat)
            ladders.append(np.asarray(log_z_hat))
            c_hats.append(np.asarray(c_hat))
        c_error = [float(np.max(np.abs(c - 1.0 / NUM_TEMPERATURES))) for c in c_hats]
        report["methods"][name] = {
            "log_z_top_per_iteration": [float(l[-1]) for l in ladders],
            "error_log_z_top_per_iteration": [float(l[-1]) - exact for l in ladders],
            "max_abs_c_minus_r_per_iteration": c_error,
            "log_z_ladder_per_iteration": [l.tolist() for l in ladders],
            "c_hat_per_iteration": [c.tolist() for c in c_hats],
        }
    report["machine"] = machine()
    report["mode"] = "full" if args.full else "quick"
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "rts_init.json"), "w") as handle:
        json.dump(report, handle, indent=1)

    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex="col")
    for row, (name, title) in enumerate((("rao_blackwellized", "RTS (Rao-Blackwellized ĉ)"),
                                         ("counts", "TS (visit counts)"))):
        result = report["methods"][name]
        colors = plt.cm.viridis(np.linspace(0, 1, num_iterations + 1))
        for index, ladder in enumerate(result["log_z_ladder_per_iteration"]):
            axes[row, 0].plot(betas, ladder, color=colors[index], lw=1)
        axes[row, 0].axhline(exact, color="k", ls="--", lw=1, label="exact log Z (β = 1)")
        axes[row, 0].set_ylabel(f"{title}\nlog Ẑ_k")
        for index, c_hat in enumerate(result["c_hat_per_iteration"]):
            axes[row, 1].plot(betas, c_hat, color=colors[index + 1], lw=1)
        axes[row, 1].axhline(1.0 / NUM_TEMPERATURES, color="k", ls="--", lw=1, label="r_k")
        axes[row, 1].set_yscale("log")
        axes[row, 1].set_ylabel("ĉ_k")
        axes[row, 0].legend(loc="upper left", fontsize=8)
        axes[row, 1].legend(loc="upper left", fontsize=8)
    axes[1, 0].set_xlabel("β_k")
    axes[1, 1].set_xlabel("β_k")
    fig.suptitle(f"Initial iterations (digits RBM, {NUM_HIDDEN} hidden, K={NUM_TEMPERATURES}, "
                 f"{NUM_CHAINS} chains, {SWEEPS_PER_ITERATION} sweeps/iteration; colour = iteration)")
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "rts_init.png"), dpi=110)
    for name, result in report["methods"].items():
        print(name, "error of log Ẑ_K per iteration:", np.round(result["error_log_z_top_per_iteration"], 3))


if __name__ == "__main__":
    main()
