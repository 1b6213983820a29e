"""Adaptive tempered SMC: jaxz.smc vs blackjax.adaptive_tempered_smc vs particles.

One problem, solved in the same process by the three libraries: the log evidence of
the quickstart's Bayesian logistic regression (scikit-learn's breast-cancer data,
569 × 31 with intercept, prior N(0, I)), along the likelihood-tempering path
p(θ) p(y|θ)^β, with

- 1,000 particles, target ESS 0.5 for the adaptive choice of each β, systematic resampling;
- the same moves: HMC with identity mass matrix, leapfrog step 0.15, 10 leapfrog steps,
  applied 5 times per particle per tempering stage (the quickstart's settings).

Libraries and their moves, honestly:

- ``jaxz.smc(path, jaxz.kernels.hmc(...), target_ess=0.5, num_mcmc_steps=5)``: β chosen
  on the conditional ESS, resampling only when ESS < N/2 (so about every other stage),
  HMC from blackjax. float32.
- ``blackjax.adaptive_tempered_smc`` with ``blackjax.hmc`` moves (same parameters,
  ``num_mcmc_steps=5``): resamples at every stage, β chosen on the ESS of the
  increment. log Ẑ is the sum of ``info.log_likelihood_increment``. float32.
- ``particles`` (N. Chopin, 0.4): ``smc_samplers.AdaptiveTempering(ESSrmin=0.5,
  wastefree=False)`` run by ``particles.SMC(N=1000)`` with an
  ``AdaptiveMCMCSequence(len_chain=6)`` (5 moves per stage). particles has no HMC,
  so the move is an HMC step written here against its ``ArrayMCMC`` extension API,
  vectorized over particles in NumPy (same step size, leapfrog steps and identity
  mass; one Metropolis accept per particle), not one of particles' own moves
  (its built-in ``ArrayRandomWalk`` is a calibrated Gaussian random walk). particles
  resamples at every stage (systematic) and solves the ESS equation with Brent's
  method. float64.

Measured: compiled wall time of one run (median of 5 after a warm-up, with
``block_until_ready``; jaxz and blackjax timed alternately so machine load hits both
alike) and the spread (sd) of log Ẑ over independent runs (40 each for jaxz and
blackjax, for a sd known to about 11%; particles as many as fit in
``--particles-budget`` seconds).

blackjax takes more tempering stages than jaxz and particles at the same nominal
target ESS: it solves for β_{t+1} on the particles before they are resampled and moved
at β_t, ignoring their weights (they still follow β_{t−1}), so its steps come out
shorter and its realized ESS after reweighting is above 0.5. ``jaxz_matched_schedule``
reruns jaxz with ``target_ess`` set to that realized ESS, for a variance comparison at
about the same number of stages and HMC moves (the same cost).

Set-up (particles is NOT a jaxz dependency: particles 0.4 pins numpy<2, which jax
cannot use, yet it runs on numpy 2; it also needs numba)::

    pip install -e ".[bench]" && pip install --no-deps particles && pip install numba
    python benchmarks/smc_vs_peers.py

Writes benchmarks/results/smc_vs_peers.json.

The comparison without hand-set step sizes (issue 13: jaxz's self-tuning kernels and
waste-free SMC vs blackjax's inner-kernel tuning vs particles' waste-free defaults,
scored by variance × gradient evaluations, on this posterior and on a 20-d Gaussian
with condition number 10⁴) is ``python benchmarks/smc_vs_peers.py --tuned``, which runs
``benchmarks/smc_tuned_vs_peers.py`` and writes ``results/smc_tuned_vs_peers.json``.
"""
import argparse
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

import jaxz
from _results import machine

NUM_PARTICLES = 1000
PRIOR_SD = 1.0
STEP_SIZE = 0.15
NUM_INTEGRATION_STEPS = 10
NUM_MCMC_STEPS = 5
TARGET_ESS = 0.5
MAX_STEPS = 200

data = jaxz.data.breast_cancer()
INPUTS = np.asarray(data.inputs, np.float64)
LABELS = np.asarray(data.labels, np.float64)
NUM_FEATURES = INPUTS.shape[1]
inputs = jnp.asarray(INPUTS, jnp.float32)
labels = jnp.asarray(LABELS, jnp.float32)


# --- the model, in JAX (shared by jaxz and blackjax) ---------------------------------
def log_prior(theta):
    return jnp.sum(jax.scipy.stats.norm.logpdf(theta, 0.0, PRIOR_SD))


def log_likelihood(theta):
    logits = inputs @ theta
    return jnp.sum(labels * logits - jnp.logaddexp(0.0, logits))


def sample_prior(rng_key, num):
    return PRIOR_SD * jax.random.normal(rng_key, (num, NUM_FEATURES))


# --- jaxz ----------------------------------------------------------------------------
def jaxz_run_fn(target_ess=TARGET_ESS):
    path = jaxz.paths.likelihood_tempering(log_prior, log_likelihood, sample_prior=sample_prior)
    kernel = jaxz.kernels.hmc(path, step_size=STEP_SIZE, num_integration_steps=NUM_INTEGRATION_STEPS)
    estimator = jaxz.smc(path, kernel, target_ess=target_ess, num_mcmc_steps=NUM_MCMC_STEPS)

    def one_run(rng_key):
        prior_key, smc_key = jax.random.split(rng_key)
        result = jaxz.run(estimator, smc_key, sample_prior(prior_key, NUM_PARTICLES), max_steps=MAX_STEPS)
        realized_ess = jnp.sum(result.trace.ess) / result.num_steps  # ESS / N after each reweighting
        return result.estimate.log_z, result.num_steps, realized_ess

    return one_run


# --- blackjax ------------------------------------------------------------------------
def blackjax_run_fn():
    sampler = blackjax.adaptive_tempered_smc(
        log_prior, log_likelihood, blackjax.hmc.build_kernel(), blackjax.hmc.init,
        # shared by all particles: a leading axis of size 1 (blackjax's documented usage)
        mcmc_parameters=blackjax.smc.extend_params(dict(
            step_size=STEP_SIZE, inverse_mass_matrix=jnp.ones(NUM_FEATURES), num_integration_steps=NUM_INTEGRATION_STEPS
        )),
        resampling_fn=blackjax.smc.resampling.systematic, target_ess=TARGET_ESS, num_mcmc_steps=NUM_MCMC_STEPS,
    )

    def one_run(rng_key):
        prior_key, smc_key = jax.random.split(rng_key)
        state = sampler.init(sample_prior(prior_key, NUM_PARTICLES))

        def cond(carry):
            state, _, _, steps, _ = carry
            return (state.tempering_param < 1.0) & (steps < MAX_STEPS)

        def body(carry):
            state, key, log_z, steps, ess_sum = carry
            key, step_key = jax.random.split(key)
            state, info = sampler.step(step_key, state)
            ess_fraction = 1.0 / jnp.sum(state.weights**2) / NUM_PARTICLES  # after reweighting
            return state, key, log_z + info.log_likelihood_increment, steps + 1, ess_sum + ess_fraction

        init = (state, smc_key, jnp.float32(0.0), jnp.int32(0), jnp.float32(0.0))
        _, _, log_z, steps, ess_sum = jax.lax.while_loop(cond, body, init)
        return log_z, steps, ess_sum / steps

    return one_run


# --- particles (NumPy), with an HMC move written against its ArrayMCMC API ------------
def particles_run_fn():
    import particles
    from particles import distributions, smc_samplers

    def sigmoid(z):
        return 0.5 * (1.0 + np.tanh(0.5 * z))

    class LogisticRegression(smc_samplers.StaticModel):
        def loglik(self, theta, t=None):  # theta: (N, d) -> (N,)
            logits = theta @ INPUTS.T
            return np.sum(LABELS * logits - np.logaddexp(0.0, logits), axis=1)

    class ArrayHMC(smc_samplers.ArrayMCMC):
        """HMC at the current tempering exponent: identity mass, fixed leapfrog."""

        def step(self, x, target=None):
            exponent = x.shared["exponents"][-1]

            def grad_log_post(theta):
                return -theta / PRIOR_SD**2 + exponent * ((LABELS - sigmoid(theta @ INPUTS.T)) @ INPUTS)

            theta = smc_samplers.view_2d_array(x.theta)
            momentum = np.random.standard_normal(theta.shape)
            position, new_momentum = theta.copy(), momentum + 0.5 * STEP_SIZE * grad_log_post(theta)
            for leap in range(NUM_INTEGRATION_STEPS):
                position = position + STEP_SIZE * new_momentum
                scale = 1.0 if leap < NUM_INTEGRATION_STEPS - 1 else 0.5
                new_momentum = new_momentum + scale * STEP_SIZE * grad_log_post(position)
            proposal = x.__class__(theta=position)
            target(proposal)
            log_accept = (proposal.lpost - 0.5 * np.sum(new_momentum**2, 1)) - (x.lpost - 0.5 * np.sum(momentum**2, 1))
            log_accept = np.where(np.isnan(log_accept), -np.inf, log_accept)
            accept_probability = np.exp(np.minimum(log_accept, 0.0))
            x.copyto(proposal, where=np.random.uniform(size=x.N) < accept_probability)
            return np.mean(accept_probability)

    prior = distributions.MvNormal(loc=np.zeros(NUM_FEATURES), scale=PRIOR_SD, cov=np.eye(NUM_FEATURES))
    model = LogisticRegression(prior=prior)

    def one_run(seed):
        np.random.seed(seed)
        move = smc_samplers.AdaptiveMCMCSequence(mcmc=ArrayHMC(), len_chain=NUM_MCMC_STEPS + 1)
        feynman_kac = smc_samplers.AdaptiveTempering(
            model=model, ESSrmin=TARGET_ESS, wastefree=False, len_chain=NUM_MCMC_STEPS + 1, move=move
        )
        sampler = particles.SMC(
            fk=feynman_kac, N=NUM_PARTICLES, resampling="systematic", ESSrmin=TARGET_ESS, verbose=False, collect="off"
        )
        sampler.run()
        return float(sampler.logLt), len(sampler.X.shared["exponents"]) - 1

    return one_run


def median_time(fn, arg, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(arg))
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def summary(log_z, steps):
    log_z = np.asarray(log_z, np.float64)
    return dict(
        num_runs=int(log_z.size), log_z_mean=float(log_z.mean()), log_z_sd=float(log_z.std(ddof=1)),
        # sd / sqrt(2 (n - 1)): the standard error of a Gaussian sample's sd
        log_z_sd_stderr=float(log_z.std(ddof=1) / np.sqrt(2.0 * (log_z.size - 1))),
        log_z_values=[round(float(v), 4) for v in log_z],
        tempering_steps_mean=float(np.mean(steps)), tempering_steps_range=[int(np.min(steps)), int(np.max(steps))],
    )


def main():
    if "--tuned" in sys.argv:  # the self-tuning comparison (its own options follow)
        sys.argv.remove("--tuned")
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import smc_tuned_vs_peers

        return smc_tuned_vs_peers.main()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="independent runs for the spread of log Z")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs (median) after a warm-up")
    parser.add_argument("--particles-budget", type=float, default=240.0,
                        help="seconds for particles' spread runs (at most --runs of them)")
    parser.add_argument("--no-particles", action="store_true", help="skip particles (jaxz vs blackjax only)")
    args = parser.parse_args()

    results = dict(
        problem=dict(
            model="Bayesian logistic regression, breast cancer (569 x 31), prior N(0, 1)",
            num_particles=NUM_PARTICLES, target_ess=TARGET_ESS, resampling="systematic",
            move=f"HMC, identity mass, step {STEP_SIZE}, {NUM_INTEGRATION_STEPS} leapfrog steps, "
                 f"{NUM_MCMC_STEPS} moves per particle per tempering stage",
        ),
        machine=machine(
            processor=platform.processor(), python=platform.python_version(), jax_backend=jax.default_backend(),
            blackjax=blackjax.__version__, numpy=np.__version__,
        ),
    )

    # jaxz and blackjax: compiled single runs (jit), warmed up once
    runners = {"jaxz": jax.jit(jaxz_run_fn()), "blackjax": jax.jit(blackjax_run_fn())}

    def warm_up(name):
        start = time.perf_counter()
        jax.block_until_ready(runners[name](jax.random.key(0)))
        results.setdefault(name, {})["compile_and_first_run_s"] = time.perf_counter() - start

    def spread(name):
        log_z, steps, realized_ess = [], [], []
        for key in tqdm(jax.random.split(jax.random.key(2), args.runs), desc=f"spread {name}"):
            value, num_steps, ess_fraction = runners[name](key)
            log_z.append(float(value))
            steps.append(int(num_steps))
            realized_ess.append(float(ess_fraction))
        results[name].update(summary(log_z, steps), realized_ess_fraction_mean=float(np.mean(realized_ess)))

    for name in ("jaxz", "blackjax"):
        warm_up(name)
        spread(name)

    # blackjax takes more tempering stages at the same nominal target ESS (see the
    # docstring): its realized ESS after reweighting is above 0.5. A second jaxz run
    # targets that realized ESS, so both use about as many stages and HMC moves.
    matched_target = round(results["blackjax"]["realized_ess_fraction_mean"], 2)
    runners["jaxz_matched_schedule"] = jax.jit(jaxz_run_fn(matched_target))
    warm_up("jaxz_matched_schedule")
    spread("jaxz_matched_schedule")
    results["jaxz_matched_schedule"]["target_ess"] = matched_target
    for name in runners:
        results[name]["moves_per_particle_mean"] = results[name]["tempering_steps_mean"] * NUM_MCMC_STEPS

    times = {name: [] for name in runners}
    cpu_times = {name: [] for name in runners}
    for key in tqdm(jax.random.split(jax.random.key(1), args.repeats), desc="timing jaxz/blackjax"):
        for name, fn in runners.items():  # alternate, so load on the machine hits all alike
            start, start_cpu = time.perf_counter(), time.process_time()
            jax.block_until_ready(fn(key))
            times[name].append(time.perf_counter() - start)
            cpu_times[name].append(time.process_time() - start_cpu)
    for name in runners:
        results[name].update(
            time_median_s=statistics.median(times[name]), times_s=times[name],
            cpu_time_median_s=statistics.median(cpu_times[name]),
        )

    if not args.no_particles:
        one_run = particles_run_fn()
        results["machine"]["particles"] = importlib.metadata.version("particles")
        one_run(0)  # warm-up (numba compilation inside particles' resampling)
        particle_times, particle_cpu_times = [], []
        for seed in tqdm(range(1, args.repeats + 1), desc="timing particles"):
            start, start_cpu = time.perf_counter(), time.process_time()
            one_run(seed)
            particle_times.append(time.perf_counter() - start)
            particle_cpu_times.append(time.process_time() - start_cpu)
        log_z, steps = [], []
        start = time.perf_counter()
        for seed in tqdm(range(100, 100 + args.runs), desc="spread particles"):
            value, num_steps = one_run(seed)
            log_z.append(value)
            steps.append(num_steps)
            if time.perf_counter() - start > args.particles_budget and len(log_z) >= 3:
                break
        results["particles"] = dict(
            time_median_s=statistics.median(particle_times), times_s=particle_times,
            cpu_time_median_s=statistics.median(particle_cpu_times), **summary(log_z, steps),
            realized_ess_fraction_mean=TARGET_ESS,  # solved exactly on uniform weights (Brent)
            note="HMC move written in this script against particles' ArrayMCMC API (particles has no HMC); "
                 "NumPy float64; resamples every stage",
        )

    jaxz_result, blackjax_result = results["jaxz"], results["blackjax"]
    ratios = dict(
        blackjax_time_over_jaxz_time=blackjax_result["time_median_s"] / jaxz_result["time_median_s"],
        blackjax_cpu_time_over_jaxz_cpu_time=blackjax_result["cpu_time_median_s"] / jaxz_result["cpu_time_median_s"],
        jaxz_log_z_sd_over_blackjax_log_z_sd=jaxz_result["log_z_sd"] / blackjax_result["log_z_sd"],
        jaxz_log_z_variance_over_blackjax=(jaxz_result["log_z_sd"] / blackjax_result["log_z_sd"]) ** 2,
    )
    matched = results["jaxz_matched_schedule"]
    ratios.update(
        blackjax_time_over_jaxz_matched_schedule_time=blackjax_result["time_median_s"] / matched["time_median_s"],
        blackjax_cpu_time_over_jaxz_matched_schedule_cpu_time=(
            blackjax_result["cpu_time_median_s"] / matched["cpu_time_median_s"]
        ),
        jaxz_matched_schedule_log_z_sd_over_blackjax_log_z_sd=matched["log_z_sd"] / blackjax_result["log_z_sd"],
    )
    targets = dict(
        jaxz_no_slower_than_blackjax=ratios["blackjax_time_over_jaxz_time"] >= 1.0,
        jaxz_smaller_log_z_variance_than_blackjax=ratios["jaxz_log_z_sd_over_blackjax_log_z_sd"] < 1.0,
        jaxz_matched_schedule_smaller_log_z_variance_than_blackjax=(
            ratios["jaxz_matched_schedule_log_z_sd_over_blackjax_log_z_sd"] < 1.0
        ),
    )
    if "particles" in results:
        ratios["particles_time_over_jaxz_time"] = results["particles"]["time_median_s"] / jaxz_result["time_median_s"]
        ratios["particles_cpu_time_over_jaxz_cpu_time"] = (
            results["particles"]["cpu_time_median_s"] / jaxz_result["cpu_time_median_s"]
        )
        ratios["jaxz_log_z_sd_over_particles_log_z_sd"] = jaxz_result["log_z_sd"] / results["particles"]["log_z_sd"]
        targets["jaxz_at_least_20x_faster_than_particles"] = ratios["particles_time_over_jaxz_time"] >= 20.0
    results["ratios"] = ratios
    results["targets_met"] = targets
    results["machine"]["load_average_at_end"] = list(os.getloadavg())

    os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
    out = os.path.join(os.path.dirname(__file__), "results", "smc_vs_peers.json")
    with open(out, "w") as handle:
        json.dump(results, handle, indent=2)
    for name in ("jaxz", "jaxz_matched_schedule", "blackjax", "particles"):
        if name in results:
            r = results[name]
            print(f"{name:17s} time {r['time_median_s']:.3f} s (cpu {r['cpu_time_median_s']:.3f} s)  "
                  f"log Z {r['log_z_mean']:.3f} ± sd {r['log_z_sd']:.3f} "
                  f"over {r['num_runs']} runs  tempering steps {r['tempering_steps_mean']:.1f}")
    print(json.dumps(ratios, indent=2))
    print(json.dumps(targets, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
