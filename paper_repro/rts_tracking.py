"""Seed Figure 5 (Carlson et al., ICML 2016, §4.4): train and validation log-likelihood
of an RBM tracked by RTS during training, with AIS (and, for a small RBM, exact)
checkpoints for comparison.

The seed trains on MNIST; offline, scikit-learn's 8×8 digits binarized at half
intensity (``jaxz.data.digits_binarized``: 1,437 training images, 360 held out as the
validation set) stand in. Training: persistent CD-1 with an optax optimizer (SGD,
learning rate 0.01, momentum 0.9), minibatches of 100 (14 updates per epoch: the
parameters move slowly enough between updates for α = 0.2 to follow them). Tracking as in the
seed: RTS chains carried across
parameter updates, 25 Gibbs sweeps between updates, prior r_k ∝ exp(2β_k), partial
updates of log Ẑ with α = 0.2 (``jaxz.rts(..., initial_iterations=0, log_z_hat=...,
alpha=0.2)`` per update, Ẑ and chains carried); §2.4 initial iterations once at the
start. Mean log-likelihood = mean log f(v) − log Ẑ (hidden units summed out).

--quick (default; a few minutes on 2 shared cores): 20 hidden units (exact log Z at
checkpoints), 200 chains (the seed: 2,000), K = 50, 10 epochs, AIS checkpoints with
1,000 temperatures × 100 chains every 2 epochs. --full: 100 hidden units (no exact
value), 2,000 chains, K = 100, 100 epochs, AIS every 10 epochs with 10,000 temperatures.

Writes paper_repro/out/rts_tracking.{json,png}.
"""
import json
import os

import jax
import jax.numpy as jnp
import matplotlib
import optax

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

import jaxz  # noqa: E402
from jaxz.models import rbm as rbm_lib  # noqa: E402
from _cli import machine, parse_mode  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
BATCH, SWEEPS_BETWEEN_UPDATES, ALPHA = 100, 25, 0.2


def main():
    args = parse_mode(__doc__)
    if args.full:
        num_hidden, num_chains, num_temperatures, num_epochs, ais_every, ais_rungs = 100, 2000, 100, 100, 10, 10000
    else:
        num_hidden, num_chains, num_temperatures, num_epochs, ais_every, ais_rungs = 20, 200, 50, 10, 2, 1000

    split = jaxz.data.digits_binarized()
    train, valid = jnp.asarray(split.train), jnp.asarray(split.test)
    base = rbm_lib.base_rate(train)
    betas = jaxz.schedules.linear(num_temperatures)
    log_prior = 2.0 * betas  # r_k ∝ exp(2 β_k), §4.4
    optimizer = optax.sgd(0.01, momentum=0.9)
    num_batches = train.shape[0] // BATCH

    key = jax.random.key(0)
    key, key_init = jax.random.split(key)
    means = (jnp.sum(train, axis=0) + 1.0) / (train.shape[0] + 2.0)
    model = rbm_lib.RBM(0.01 * jax.random.normal(key_init, (train.shape[1], num_hidden)),
                        jnp.log(means) - jnp.log1p(-means), jnp.zeros((num_hidden,)))

    def tracker(rbm, log_z_hat, initial_iterations):
        path, kernel = rbm_lib.annealing(base, rbm)
        estimator = jaxz.rts(path, kernel, betas, num_sweeps=SWEEPS_BETWEEN_UPDATES,
                             initial_iterations=initial_iterations, sweeps_per_iteration=50,
                             log_prior_weights=log_prior, log_z_hat=log_z_hat,
                             alpha=ALPHA if initial_iterations == 0 else 1.0)
        return path, estimator

    @jax.jit
    def start(key, rbm):
        path, estimator = tracker(rbm, jnp.zeros(num_temperatures), 10)
        key_init, key_run = jax.random.split(key)
        state = jaxz.run(estimator, key_run, path.sample_base(key_init, num_chains)).state
        return state.kernel_states.position, jaxz.rts_estimates(state).rts

    def update(carry, inputs):
        rbm, opt_state, pcd_chains, rts_chains, log_z_hat = carry
        batch, key = inputs
        key_pcd, key_rts = jax.random.split(key)
        # persistent CD-1 gradient of the negative log-likelihood
        negative = rbm_lib.gibbs_sweep(key_pcd, rbm, pcd_chains)
        hidden_data = jax.nn.sigmoid(batch @ rbm.W + rbm.b)
        hidden_model = jax.nn.sigmoid(negative @ rbm.W + rbm.b)
        grads = rbm_lib.RBM(-(batch.T @ hidden_data - negative.T @ hidden_model) / BATCH,
                            -jnp.mean(batch - negative, axis=0), -jnp.mean(hidden_data - hidden_model, axis=0))
        updates, opt_state = optimizer.update(grads, opt_state, rbm)
        rbm = optax.apply_updates(rbm, updates)
        # RTS tracks log Z of the new parameters: 25 sweeps, partial update α = 0.2
        path, estimator = tracker(rbm, log_z_hat, 0)
        state = jaxz.run(estimator, key_rts, rts_chains).state
        log_z_hat = jaxz.rts_estimates(state, alpha=ALPHA).rts
        return (rbm, opt_state, negative, state.kernel_states.position, log_z_hat), log_z_hat[-1]

    @jax.jit
    def epoch(carry, key):
        key_order, key_updates = jax.random.split(key)
        order = jax.random.permutation(key_order, train.shape[0])[: num_batches * BATCH]
        batches = train[order].reshape(num_batches, BATCH, train.shape[1])
        return jax.lax.scan(update, carry, (batches, jax.random.split(key_updates, num_batches)))

    def mean_log_f(rbm, data):
        return float(jnp.mean(rbm_lib.log_marginal_visible(rbm, data)))

    def ais_log_z(rbm, key):
        path, kernel = rbm_lib.annealing(base, rbm)
        estimator = jaxz.ais(path, kernel, jaxz.schedules.linear(ais_rungs))
        return float(jax.jit(lambda k: jaxz.run(estimator, k, path.sample_base(k, 100)).estimate.log_z)(key))

    key, key_start = jax.random.split(key)
    rts_chains, log_z_hat = start(key_start, model)
    carry = (model, optimizer.init(model), train[:BATCH], rts_chains, log_z_hat)
    history = {"epoch": [], "rts_log_z": [], "train_ll_rts": [], "valid_ll_rts": [],
               "ais_epoch": [], "ais_log_z": [], "train_ll_ais": [], "valid_ll_ais": [],
               "exact_log_z": [], "train_ll_exact": [], "valid_ll_exact": []}
    for index in tqdm(range(num_epochs), desc="epochs"):
        key, key_epoch, key_ais = jax.random.split(key, 3)
        carry, _ = epoch(carry, key_epoch)
        rbm, log_z = carry[0], float(carry[4][-1])
        history["epoch"].append(index + 1)
        history["rts_log_z"].append(log_z)
        history["train_ll_rts"].append(mean_log_f(rbm, train) - log_z)
        history["valid_ll_rts"].append(mean_log_f(rbm, valid) - log_z)
        if (index + 1) % ais_every == 0 or index == 0:
            ais = ais_log_z(rbm, key_ais)
            history["ais_epoch"].append(index + 1)
            history["ais_log_z"].append(ais)
            history["train_ll_ais"].append(mean_log_f(rbm, train) - ais)
            history["valid_ll_ais"].append(mean_log_f(rbm, valid) - ais)
            if num_hidden <= 20:
                exact = float(rbm_lib.exact_log_z(rbm))
                history["exact_log_z"].append(exact)
                history["train_ll_exact"].append(mean_log_f(rbm, train) - exact)
                history["valid_ll_exact"].append(mean_log_f(rbm, valid) - exact)

    report = {"seed_figure": 5, "mode": "full" if args.full else "quick", "num_hidden": num_hidden,
              "num_chains": num_chains, "K": num_temperatures, "sweeps_between_updates": SWEEPS_BETWEEN_UPDATES,
              "alpha": ALPHA, "prior": "r_k ∝ exp(2 β_k)", "updates_per_epoch": num_batches, "history": history,
              "machine": machine()}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "rts_tracking.json"), "w") as handle:
        json.dump(report, handle, indent=1)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(history["epoch"], history["train_ll_rts"], label="train (RTS)", color="C0")
    ax.plot(history["epoch"], history["valid_ll_rts"], label="validation (RTS)", color="C1")
    ax.plot(history["ais_epoch"], history["train_ll_ais"], "s", label="train (AIS)", color="C0", mfc="none")
    ax.plot(history["ais_epoch"], history["valid_ll_ais"], "s", label="validation (AIS)", color="C1", mfc="none")
    if history["exact_log_z"]:
        ax.plot(history["ais_epoch"], history["train_ll_exact"], "x", label="train (exact)", color="k")
        ax.plot(history["ais_epoch"], history["valid_ll_exact"], "+", label="validation (exact)", color="k")
    ax.set_xlabel("epoch")
    ax.set_ylabel("mean log-likelihood (nats)")
    ax.set_title(f"digits RBM, {num_hidden} hidden: RTS tracking ({num_chains} chains, α = {ALPHA})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "rts_tracking.png"), dpi=110)
    print("RTS log Z", np.round(history["rts_log_z"], 3))
    print("AIS log Z", np.round(history["ais_log_z"], 3), "exact", np.round(history["exact_log_z"], 3))


if __name__ == "__main__":
    main()
