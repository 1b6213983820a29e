"""Time to an answer: wall seconds until log Z with an s.e. of at most 0.05 nats (issue 56, item 7).

For each model with a known log Z, each method is timed on

- the **first call**: a fresh process (imports and JAX's backend start-up done, not
  timed), the whole call: for jaxz and jaxns this includes tracing and compiling;
- the **second call**: the same model and data, a new key / seed, in the same process;
- (jaxz only) the **new-data call**: new data of the same shapes, a third key, in the same
  process: ``jaxz.evidence`` passes the data to its compiled programs as arguments, so it
  should compile nothing (``Evidence.compile_seconds`` ~ 0, ``compiled_as`` "arguments").

Methods, each given the same model:

- ``jaxz``: ``jaxz.evidence(model, key, model_args=...)`` with its defaults (an accuracy
  target of 0.05 nats: batches of 8 runs x ``TARGET_PARTICLES`` (128) particles until the pooled s.e. reaches it);
  the model is a NumPyro model.
- ``jaxns``: NumPyro's ``numpyro.contrib.nested_sampling.NestedSampler`` on the same NumPyro
  model (jaxns; its defaults: 25·d live points, max_samples 1e4; s.e.: ``log_Z_uncert``).
  It builds and compiles its sampler on every ``run``, so its second call compiles again.
- ``dynesty``: static ``dynesty.NestedSampler`` (defaults: 500 live points, bound
  "multi", sample "auto", dlogz 0.01) on a NumPy log-likelihood and unit-cube prior
  transform; s.e.: ``results.logzerr[-1]``.
- ``nautilus``: ``nautilus.Sampler`` (defaults: 2000 live points, ``run()`` to n_eff =
  10,000) on the same NumPy functions. nautilus reports no s.e. of log Z; the table uses
  1/sqrt(n_eff) (the s.e. of log Ẑ of an importance sampler with that effective sample
  size), which ignores the error of its bounds: read it as a lower bound.

A peer whose reported s.e. exceeds 0.05 with its defaults is rerun once with its live
points raised by (s.e. / 0.05)² x 1.2 (``RAISE_MARGIN``; capped at ``MAX_RAISE`` x), row
``<peer>@<live points>``; both rows are kept. The ratios compare jaxz with the fastest peer
row whose call reached s.e. <= 0.05 (issue targets: first call <= 1/3, second <= 1/10).

Models (``MODELS``): the six conjugate models (beta-Bernoulli, normal mean with known
variance, linear regression with 3 coefficients and known noise, Dirichlet-multinomial with 4
categories, gamma-Poisson, normal with unknown mean and variance under a normal-inverse-gamma
prior), the eight schools centered and non-centered (mu ~ N(0, 5), tau ~ HalfCauchy(5);
log Z by 2-D quadrature over (mu, log tau) with theta integrated out: -31.31134735 on the
standard data) and the 31-d logistic regression on the breast-cancer data (prior N(0, I);
reference: ``results/evidence_suite_reference.json``, Laplace-t importance sampling; its new
data are the same rows permuted, so its log Z is unchanged). For the peers the two eight-schools
parameterizations are one problem (the unit-cube map is theta = mu + tau·Φ⁻¹(u) either way,
and NumPyro's NestedSampler reparameterizes the centered model to exactly that): they run on
the non-centered model, and the later of the two rows repeats the earlier's result.

Each (model, method) runs in a subprocess; a call past ``--timeout`` seconds (default 300)
is killed and recorded as timed out. float64 throughout. Writes
benchmarks/results/time_to_answer.{json,md}.

    python benchmarks/time_to_answer.py --quick   # conjugate models + eight schools, 1 repetition
                                                  # (about 45 min, 2 loaded cores)
    python benchmarks/time_to_answer.py --full    # all models incl. logistic, 2 repetitions
    python benchmarks/time_to_answer.py --only eight_schools_noncentered --methods jaxz dynesty

Seconds depend on the machine and its load (recorded in the JSON); jaxz and jaxns use
every core through XLA, dynesty and nautilus run single-threaded NumPy (nautilus trains its
networks with scikit-learn).
"""
import argparse
import json
import math
import os
import queue
import subprocess
import sys
import threading
import time
from typing import Callable, NamedTuple

import numpy as np
from scipy import special, stats

try:
    from _results import machine, write
except ImportError:  # run from the repository root
    from benchmarks._results import machine, write

TARGET_STDERR = 0.05
RAISE_MARGIN = 1.2
MAX_RAISE = 16
PEERS = ("jaxns", "dynesty", "nautilus")
METHODS = ("jaxz",) + PEERS
DEFAULT_LIVE = {"dynesty": 500, "nautilus": 2000}  # jaxns: 25·d
MARK = "@@ "  # prefix of the workers' JSON lines
START_TIMEOUT = 180  # seconds a worker may take to import and build its data
HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------------------------------------------------------
# Models: a NumPyro model (jaxz, jaxns), a NumPy log-likelihood of one point and a unit-cube prior transform
# (dynesty, nautilus), data of a seed, and the exact log Z.

DIRICHLET_CONCENTRATION = np.array([1.0, 2.0, 1.5, 3.0])
NIG = dict(m0=0.0, k0=1.0, a0=2.0, b0=2.0)  # mu | s2 ~ N(m0, s2 / k0), s2 ~ InvGamma(a0, b0)
SCHOOLS_Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SCHOOLS_SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
SCHOOLS_LOG_Z = -31.31134735  # the known value on the standard data
LOG_2PI = math.log(2 * math.pi)


class Model(NamedTuple):
    name: str
    dim: int
    numpyro_model: Callable  # model(*args)
    data: Callable  # data(seed) -> tuple of numpy arrays (seed 0: the benchmark's data; 1: new data, same shapes)
    exact: Callable  # exact(*args) -> log Z (or the reference)
    log_likelihood: Callable  # log_likelihood(x, *args): x a point (dim,) of the prior transform's output
    prior_transform: Callable  # u in [0, 1]^dim -> x
    quick: bool = True
    reference: str = "exact"


def _numpyro():
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    return jnp, numpyro, dist


def beta_bernoulli_model(y):
    jnp, numpyro, dist = _numpyro()
    p = numpyro.sample("p", dist.Beta(2.0, 3.0))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Bernoulli(p), obs=y)


def normal_mean_model(y):
    jnp, numpyro, dist = _numpyro()
    mu = numpyro.sample("mu", dist.Normal(0.5, 2.0))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


def regression_model(x, y):
    jnp, numpyro, dist = _numpyro()
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([x.shape[1]]).to_event(1))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(x @ w, 0.5), obs=y)


def dirichlet_multinomial_model(counts):
    jnp, numpyro, dist = _numpyro()
    probs = numpyro.sample("probs", dist.Dirichlet(jnp.asarray(DIRICHLET_CONCENTRATION)))
    with numpyro.plate("rows", counts.shape[0]):
        numpyro.sample("counts", dist.Multinomial(6, probs), obs=counts)


def gamma_poisson_model(y):
    jnp, numpyro, dist = _numpyro()
    rate = numpyro.sample("rate", dist.Gamma(2.0, 0.5))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Poisson(rate), obs=y)


def normal_inverse_gamma_model(y):
    jnp, numpyro, dist = _numpyro()
    variance = numpyro.sample("variance", dist.InverseGamma(NIG["a0"], NIG["b0"]))
    mu = numpyro.sample("mu", dist.Normal(NIG["m0"], jnp.sqrt(variance / NIG["k0"])))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, jnp.sqrt(variance)), obs=y)


def schools_centered_model(y, sigma):
    jnp, numpyro, dist = _numpyro()
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("schools", y.shape[0]):
        theta = numpyro.sample("theta", dist.Normal(mu, tau))
        numpyro.sample("y", dist.Normal(theta, sigma), obs=y)


def schools_noncentered_model(y, sigma):
    jnp, numpyro, dist = _numpyro()
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("schools", y.shape[0]):
        theta_tilde = numpyro.sample("theta_tilde", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(mu + tau * theta_tilde, sigma), obs=y)


def logistic_model(inputs, labels):
    jnp, numpyro, dist = _numpyro()
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([inputs.shape[1]]).to_event(1))
    with numpyro.plate("data", labels.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=inputs @ w), obs=labels)


def _normal_log_pdf(y, mean, sd):
    return -0.5 * ((y - mean) / sd) ** 2 - np.log(sd) - 0.5 * LOG_2PI


# --- data ---

def _rng(name, seed):
    return np.random.default_rng([seed, sum(map(ord, name))])


def beta_bernoulli_data(seed):
    return ((_rng("bb", seed).uniform(size=15) < 0.3).astype(float),)


def normal_mean_data(seed):
    return (_rng("nm", seed).normal(1.0, 1.0, size=10),)


def regression_data(seed):
    rng = _rng("reg", seed)
    x = rng.normal(size=(20, 3))
    return x, x @ np.array([1.0, -0.5, 0.3]) + 0.5 * rng.normal(size=20)


def dirichlet_multinomial_data(seed):
    return (_rng("dm", seed).multinomial(6, [0.1, 0.3, 0.2, 0.4], size=3).astype(float),)


def gamma_poisson_data(seed):
    return (_rng("gp", seed).poisson(3.0, size=12).astype(float),)


def normal_inverse_gamma_data(seed):
    return (_rng("nig", seed).normal(1.0, 0.7, size=10),)


def schools_data(seed):
    """Seed 0: the standard data; later seeds: y ~ N(theta, sigma), theta ~ N(5, 5)."""
    if seed == 0:
        return SCHOOLS_Y, SCHOOLS_SIGMA
    rng = _rng("schools", seed)
    return rng.normal(rng.normal(5.0, 5.0, size=8), SCHOOLS_SIGMA), SCHOOLS_SIGMA


def logistic_data(seed):
    """Seed 0: breast cancer (569 x 31 with the intercept); later seeds: its rows permuted
    (new arrays of the same shapes, the same log Z)."""
    import jaxz
    data = jaxz.data.breast_cancer()
    inputs, labels = np.asarray(data.inputs, np.float64), np.asarray(data.labels, np.float64)
    if seed:
        order = _rng("logistic", seed).permutation(labels.shape[0])
        inputs, labels = inputs[order], labels[order]
    return inputs, labels


# --- exact log Z ---

def beta_bernoulli_exact(y):
    k, n = y.sum(), y.shape[0]
    return special.betaln(2.0 + k, 3.0 + n - k) - special.betaln(2.0, 3.0)


def normal_mean_exact(y):
    n = y.shape[0]
    return stats.multivariate_normal.logpdf(y, np.full(n, 0.5), np.eye(n) + 4.0 * np.ones((n, n)))


def regression_exact(x, y):
    return stats.multivariate_normal.logpdf(y, np.zeros(y.shape[0]), x @ x.T + 0.25 * np.eye(y.shape[0]))


def dirichlet_multinomial_exact(counts):
    def log_beta(a):
        return special.gammaln(a).sum() - special.gammaln(a.sum())

    coefficients = (special.gammaln(counts.sum(-1) + 1) - special.gammaln(counts + 1).sum(-1)).sum()
    return coefficients + log_beta(DIRICHLET_CONCENTRATION + counts.sum(0)) - log_beta(DIRICHLET_CONCENTRATION)


def gamma_poisson_exact(y):
    a, b, total, n = 2.0, 0.5, y.sum(), y.shape[0]
    return (a * np.log(b) - special.gammaln(a) + special.gammaln(a + total) - (a + total) * np.log(b + n)
            - special.gammaln(y + 1).sum())


def normal_inverse_gamma_exact(y):
    m0, k0, a0, b0 = NIG["m0"], NIG["k0"], NIG["a0"], NIG["b0"]
    n, mean = y.shape[0], y.mean()
    kn, an = k0 + n, a0 + n / 2
    bn = b0 + 0.5 * np.sum((y - mean) ** 2) + k0 * n * (mean - m0) ** 2 / (2 * kn)
    return (-0.5 * n * LOG_2PI + 0.5 * np.log(k0 / kn) + a0 * np.log(b0) - an * np.log(bn)
            + special.gammaln(an) - special.gammaln(a0))


def schools_exact(y, sigma):
    """2-D quadrature over (mu, log tau), theta integrated out: y_j | mu, tau ~ N(mu, sigma_j² + tau²)."""
    mu = np.linspace(-40.0, 40.0, 2001)
    log_tau = np.linspace(-12.0, 9.0, 2001)
    tau = np.exp(log_tau)
    sd = np.sqrt(sigma[:, None] ** 2 + tau[None, :] ** 2)  # (schools, tau)
    log_like = _normal_log_pdf(y[:, None, None], mu[None, :, None], sd[:, None, :]).sum(0)  # (mu, tau)
    log_f = (_normal_log_pdf(mu, 0.0, 5.0)[:, None] + stats.halfcauchy.logpdf(tau, scale=5.0)[None, :]
             + log_tau[None, :] + log_like)
    top = log_f.max()
    return float(np.log(np.trapezoid(np.trapezoid(np.exp(log_f - top), log_tau, axis=1), mu)) + top)


def logistic_reference(inputs, labels):
    with open(os.path.join(HERE, "results", "evidence_suite_reference.json")) as handle:
        return json.load(handle)["log_z"]


# --- NumPy log-likelihoods of one point and unit-cube prior transforms ---

def beta_bernoulli_log_likelihood(x, y):
    p = x[0]
    return float(np.sum(y * np.log(p) + (1 - y) * np.log1p(-p)))


def normal_mean_log_likelihood(x, y):
    return float(np.sum(_normal_log_pdf(y, x[0], 1.0)))


def regression_log_likelihood(x, inputs, y):
    return float(np.sum(_normal_log_pdf(y, inputs @ x, 0.5)))


def dirichlet_multinomial_log_likelihood(x, counts):
    """x: the first K - 1 probabilities (the samplers keep the transform's output d-dimensional)."""
    probs = np.concatenate([x, [1.0 - np.sum(x)]])
    coefficients = special.gammaln(counts.sum(-1) + 1) - special.gammaln(counts + 1).sum(-1)
    return float(np.sum(coefficients) + np.sum(counts * np.log(probs)))


def gamma_poisson_log_likelihood(x, y):
    return float(np.sum(y * np.log(x[0]) - x[0] - special.gammaln(y + 1)))


def normal_inverse_gamma_log_likelihood(x, y):
    variance, mu = x
    return float(np.sum(_normal_log_pdf(y, mu, np.sqrt(variance))))


def schools_log_likelihood(x, y, sigma):
    theta = x[2:]
    return float(np.sum(_normal_log_pdf(y, theta, sigma)))


def logistic_log_likelihood(x, inputs, labels):
    logits = inputs @ x
    return float(np.sum(labels * logits - np.logaddexp(0.0, logits)))


def beta_bernoulli_transform(u):
    return special.betaincinv(2.0, 3.0, u)


def normal_mean_transform(u):
    return 0.5 + 2.0 * special.ndtri(u)


def standard_normal_transform(u):
    return special.ndtri(u)


def dirichlet_transform(u):
    """Stick-breaking: v_k ~ Beta(alpha_k, sum_{j>k} alpha_j), p_k = v_k prod_{j<k} (1 - v_j)."""
    alpha = DIRICHLET_CONCENTRATION
    tails = np.cumsum(alpha[::-1])[::-1][1:]  # sum_{j>k} alpha_j, k = 0 .. K-2
    v = special.betaincinv(alpha[:-1], tails, u)
    remaining = np.concatenate([[1.0], np.cumprod(1.0 - v)])
    return v * remaining[:-1]  # p_1 .. p_{K-1}; p_K = 1 - their sum


def gamma_transform(u):
    return special.gammaincinv(2.0, u) / 0.5


def normal_inverse_gamma_transform(u):
    variance = NIG["b0"] / special.gammaincinv(NIG["a0"], 1.0 - u[0])
    return np.array([variance, NIG["m0"] + np.sqrt(variance / NIG["k0"]) * special.ndtri(u[1])])


def schools_transform(u):
    mu, tau = 5.0 * special.ndtri(u[0]), 5.0 * np.tan(0.5 * np.pi * u[1])
    return np.concatenate([[mu, tau], mu + tau * special.ndtri(u[2:])])


MODELS = {model.name: model for model in (
    Model("beta_bernoulli", 1, beta_bernoulli_model, beta_bernoulli_data, beta_bernoulli_exact,
          beta_bernoulli_log_likelihood, beta_bernoulli_transform),
    Model("normal_mean", 1, normal_mean_model, normal_mean_data, normal_mean_exact, normal_mean_log_likelihood,
          normal_mean_transform),
    Model("linear_regression", 3, regression_model, regression_data, regression_exact, regression_log_likelihood,
          standard_normal_transform),
    Model("dirichlet_multinomial", 3, dirichlet_multinomial_model, dirichlet_multinomial_data,
          dirichlet_multinomial_exact, dirichlet_multinomial_log_likelihood, dirichlet_transform),
    Model("gamma_poisson", 1, gamma_poisson_model, gamma_poisson_data, gamma_poisson_exact,
          gamma_poisson_log_likelihood, gamma_transform),
    Model("normal_inverse_gamma", 2, normal_inverse_gamma_model, normal_inverse_gamma_data,
          normal_inverse_gamma_exact, normal_inverse_gamma_log_likelihood, normal_inverse_gamma_transform),
    Model("eight_schools_centered", 10, schools_centered_model, schools_data, schools_exact, schools_log_likelihood,
          schools_transform, reference="exact (2-D quadrature over mu, log tau)"),
    Model("eight_schools_noncentered", 10, schools_noncentered_model, schools_data, schools_exact,
          schools_log_likelihood, schools_transform, reference="exact (2-D quadrature over mu, log tau)"),
    Model("logistic_breast_cancer", 31, logistic_model, logistic_data, logistic_reference, logistic_log_likelihood,
          standard_normal_transform, quick=False,
          reference="Laplace-t importance sampling (results/evidence_suite_reference.json); new data: rows permuted"),
)}
# The peers see one unit-cube problem for both eight-schools parameterizations (module docstring).
PEER_ALIAS = {"eight_schools_centered": "eight_schools_noncentered"}

# ---------------------------------------------------------------------------------------------------------------
# Workers: one (model, method) in a fresh process, one JSON line per event on stdout.


def _say(**event):
    print(MARK + json.dumps(event), flush=True)


def _jax_ready():
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    jnp.zeros(1).block_until_ready()  # the backend started, not timed
    return jax, jnp


def _worker_jaxz(model, repetition):
    jax, jnp = _jax_ready()
    import jaxz
    calls = (("first", 0, 0), ("second", 0, 1), ("new_data", 1, 2))
    for call, data_seed, key_index in calls:
        args = tuple(jnp.asarray(a) for a in model.data(data_seed))
        _say(event="start", call=call)
        start = time.perf_counter()
        result = jaxz.evidence(model.numpyro_model, jax.random.key(1000 * repetition + key_index), model_args=args)
        jax.block_until_ready(result.log_z)
        seconds = time.perf_counter() - start
        _say(event="done", call=call, seconds=seconds, log_z=float(result.log_z), stderr=float(result.log_z_stderr),
             status=int(result.status), compile_seconds=float(result.compile_seconds),
             run_seconds=float(result.seconds),
             phase_seconds=result.phase_seconds, compiled_as=result.compiled_as, target_met=result.target_met,
             evaluations=int(result.num_evaluations),
             log_density_evaluations=int(result.num_log_density_evaluations),
             gradient_evaluations=int(result.num_gradient_evaluations),
             num_runs=int(np.shape(result.runs.log_z)[0]), num_particles=int(np.shape(result.log_weights)[-1]),
             data_seed=data_seed)


def _worker_jaxns(model, repetition, live):
    jax, jnp = _jax_ready()
    from numpyro.contrib.nested_sampling import NestedSampler
    args = tuple(jnp.asarray(a) for a in model.data(0))
    kwargs = {} if live is None else dict(num_live_points=live, max_samples=1e4 * live / (25 * model.dim))
    for call, seed in (("first", 0), ("second", 1)):
        sampler = NestedSampler(model.numpyro_model, constructor_kwargs=kwargs)
        _say(event="start", call=call)
        start = time.perf_counter()
        sampler.run(jax.random.key(100 + 1000 * repetition + seed), *args)
        results = sampler._results  # NestedSampler keeps jaxns's NestedSamplerResults here
        log_z = float(results.log_Z_mean)
        seconds = time.perf_counter() - start
        _say(event="done", call=call, seconds=seconds, log_z=log_z, stderr=float(results.log_Z_uncert),
             status=int(results.termination_reason), evaluations=int(results.total_num_likelihood_evaluations),
             live_points=live or 25 * model.dim, data_seed=0)


def _worker_dynesty(model, repetition, live):
    import dynesty
    args = model.data(0)
    nlive = live or DEFAULT_LIVE["dynesty"]
    for call, seed in (("first", 0), ("second", 1)):
        _say(event="start", call=call)
        start = time.perf_counter()
        sampler = dynesty.NestedSampler(model.log_likelihood, model.prior_transform, model.dim, nlive=nlive,
                                        logl_args=args, rstate=np.random.default_rng(100 + 1000 * repetition + seed))
        sampler.run_nested(print_progress=False)
        results = sampler.results
        seconds = time.perf_counter() - start
        _say(event="done", call=call, seconds=seconds, log_z=float(results.logz[-1]),
             stderr=float(results.logzerr[-1]), status=0, evaluations=int(np.sum(results.ncall)), live_points=nlive,
             data_seed=0)


def _worker_nautilus(model, repetition, live):
    from nautilus import Sampler
    args = model.data(0)
    n_live = live or DEFAULT_LIVE["nautilus"]
    prior, dim = model.prior_transform, model.dim

    def likelihood(x):  # the data in a closure: nautilus passes likelihood_args before the point, not after
        return model.log_likelihood(x[:model.dim], *args)

    if dim == 1:  # nautilus refuses d < 2: a second coordinate, uniform and ignored by the likelihood (Z unchanged)
        def padded(u):
            return np.concatenate([model.prior_transform(u[:1]), u[1:]])
        prior, dim = padded, 2
    for call, seed in (("first", 0), ("second", 1)):
        _say(event="start", call=call)
        start = time.perf_counter()
        sampler = Sampler(prior, likelihood, n_dim=dim, n_live=n_live, seed=100 + 1000 * repetition + seed)
        sampler.run(verbose=False)
        seconds = time.perf_counter() - start
        n_eff = float(sampler.n_eff)
        _say(event="done", call=call, seconds=seconds, log_z=float(sampler.log_z), stderr=1.0 / math.sqrt(n_eff),
             n_eff=n_eff, status=0, evaluations=int(sampler.n_like), live_points=n_live, data_seed=0)


def worker(method, name, repetition, live):
    model = MODELS[name]
    _say(event="ready")
    try:
        if method == "jaxz":
            _worker_jaxz(model, repetition)
        else:
            globals()[f"_worker_{method}"](model, repetition, live)
    except Exception as error:  # noqa: BLE001 - reported in the table, not hidden
        _say(event="error", error=f"{type(error).__name__}: {str(error)[:400]}")


# ---------------------------------------------------------------------------------------------------------------
# The driver: workers in subprocesses, a deadline per call.


def run_worker(method, name, repetition, timeout, live=None):
    """{call: record} from one worker; a call past ``timeout`` seconds is killed and recorded
    as {"timed_out": True}; an error ends the worker with {"error": ...}."""
    command = [sys.executable, os.path.abspath(__file__), "--worker", method, name, str(repetition)]
    if live is not None:
        command += ["--live", str(live)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    lines = queue.Queue()

    def read():
        for line in process.stdout:
            if line.startswith(MARK):
                lines.put(json.loads(line[len(MARK):]))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    calls, deadline, pending = {}, time.monotonic() + START_TIMEOUT, None
    while True:
        try:
            event = lines.get(timeout=max(deadline - time.monotonic(), 0.0))
        except queue.Empty:
            process.kill()
            if pending is None:
                calls["error"] = f"no progress within {START_TIMEOUT} s of starting"
            else:
                calls[pending] = dict(timed_out=True, seconds=float(timeout))
                print(f"    {method} {pending}: timed out after {timeout} s", flush=True)
            break
        if event is None:
            break
        if event["event"] == "start":
            pending, deadline = event["call"], time.monotonic() + timeout
        elif event["event"] == "done":
            event.pop("event")
            call = event.pop("call")
            calls[call], pending, deadline = event, None, time.monotonic() + START_TIMEOUT
            print(f"    {method}{'@' + str(live) if live else ''} {call}: {_line(event)}", flush=True)
        elif event["event"] == "error":
            calls["error"] = event["error"]
            print(f"    {method}: {event['error']}", flush=True)
    process.wait()
    return calls


def _line(record):
    extra = f", compile {record['compile_seconds']:.1f} s" if "compile_seconds" in record else ""
    return f"{record['seconds']:.1f} s{extra}, log Z {record['log_z']:.4f} ± {record['stderr']:.4f}"


def score(calls, exact_of):
    """Errors against the exact value (in nats and in s.e.), and whether the s.e. met the target."""
    for call, record in calls.items():
        if not isinstance(record, dict) or record.get("timed_out"):
            continue
        exact = exact_of(record.get("data_seed", 0))
        record["exact_log_z"] = exact
        record["error"] = record["log_z"] - exact
        record["error_in_stderr"] = record["error"] / record["stderr"] if record["stderr"] > 0 else None
        record["stderr_met"] = bool(record["stderr"] <= TARGET_STDERR)
    return calls


def raised_live(method, model, calls):
    """Live points for the one rerun of a peer whose s.e. missed the target (None: no rerun)."""
    stderrs = [r["stderr"] for r in calls.values() if isinstance(r, dict) and "stderr" in r]
    if not stderrs or max(stderrs) <= TARGET_STDERR:
        return None
    default = 25 * model.dim if method == "jaxns" else DEFAULT_LIVE[method]
    factor = min((max(stderrs) / TARGET_STDERR) ** 2 * RAISE_MARGIN, MAX_RAISE)
    return int(math.ceil(default * factor))


def best_peer(rows, call, strict=True):
    """(row name, seconds) of the fastest peer row whose ``call`` gave an answer that reached
    the target (``strict``) or any answer; None if none did."""
    met = [(record[call]["seconds"], label) for label, record in rows.items()
           if label != "jaxz" and isinstance(record.get(call), dict) and "log_z" in record[call]
           and (record[call].get("stderr_met") or not strict)]
    if not met:
        return None
    seconds, label = min(met)
    return label, seconds


def ratios(rows):
    out = {}
    jaxz = rows.get("jaxz", {})
    for strict in (True, False):
        for call in ("first", "second"):
            best = best_peer(rows, call, strict)
            mine = jaxz.get(call)
            key = call if strict else f"{call}_any_peer"
            if best is None or not isinstance(mine, dict) or "log_z" not in mine:
                out[key] = None
                continue
            out[key] = dict(best_peer=best[0], peer_seconds=best[1], jaxz_seconds=mine["seconds"],
                            ratio=mine["seconds"] / best[1], target=1 / 3 if call == "first" else 1 / 10)
    return out


def mean_rows(repetitions):
    """Per method and call, the mean of seconds over repetitions (other fields from the first)."""
    rows = {}
    for label in repetitions[0]:
        merged = {}
        for call, record in repetitions[0][label].items():
            if not isinstance(record, dict) or record.get("timed_out"):
                merged[call] = record
                continue
            seconds = [rep[label][call]["seconds"] for rep in repetitions
                       if isinstance(rep.get(label, {}).get(call), dict) and "log_z" in rep[label][call]]
            merged[call] = {**record, "seconds": float(np.mean(seconds)), "seconds_each": seconds}
        rows[label] = merged
    return rows


def run_model(name, methods, repetitions, timeout, peer_cache):
    model = MODELS[name]
    exact = {seed: float(model.exact(*model.data(seed))) for seed in (0, 1)}
    print(f"{name} (d = {model.dim}): log Z = {exact[0]:.6f} ({model.reference}); new data: {exact[1]:.6f}", flush=True)
    reps = []
    for repetition in range(repetitions):
        rows = {}
        for method in methods:
            alias = PEER_ALIAS.get(name) if method != "jaxz" else None
            problem = alias or name  # what a peer runs on
            if method != "jaxz" and (problem, repetition, method) in peer_cache:
                shared = peer_cache[(problem, repetition, method)]
                rows.update({label: {**calls, "shared_with": shared["_model"]}
                             for label, calls in shared.items() if label != "_model"})
                continue
            calls = score(run_worker(method, alias or name, repetition, timeout), exact.get)
            found = {method: calls}
            live = raised_live(method, model, calls) if method != "jaxz" else None
            if live is not None:
                print(f"    {method}: s.e. above {TARGET_STDERR} with defaults; rerun with {live} live points",
                      flush=True)
                found[f"{method}@{live}"] = score(run_worker(method, alias or name, repetition, timeout, live),
                                                  exact.get)
            if method != "jaxz":
                peer_cache[(problem, repetition, method)] = {**found, "_model": name}
            rows.update(found)
        reps.append(rows)
    rows = mean_rows(reps)
    return dict(dim=model.dim, exact_log_z=exact[0], exact_log_z_new_data=exact[1], reference=model.reference,
                methods=rows, repetitions=reps if repetitions > 1 else None, ratios=ratios(rows))


# ---------------------------------------------------------------------------------------------------------------
# Output


def _cell_seconds(record):
    if record is None:
        return "-"
    if not isinstance(record, dict):
        return str(record)
    if record.get("timed_out"):
        return f"timeout ({record['seconds']:.0f})"
    return f"{record['seconds']:.1f}"


def markdown(results):
    settings = results["settings"]
    load = results["machine"]["load_average_at_start"][0]
    lines = [
        "# Time to an answer: log Z with s.e. <= 0.05 nats",
        "",
        f"`python benchmarks/time_to_answer.py {' '.join(settings['argv'])}`"
        + "".join(f" + `{' '.join(argv)}` (merged)" for argv in settings.get("merged", []))
        + f": {settings['repetitions']} "
        f"repetition(s), timeout {settings['timeout']} s per call, float64, {results['machine']['cpu_count']} cores "
        f"(load {load:.1f} at start, {results['machine']['load_average_at_end'][0]:.1f} at end; run under nice on a "
        "shared machine: seconds are indicative). First call: fresh process, compile included; second: same model, "
        "new key/seed; new data (jaxz): new data of the same shapes, third key. Peers' s.e.: dynesty logzerr, jaxns "
        "log_Z_uncert, nautilus 1/sqrt(n_eff) (a lower bound). `peer@N`: rerun with N live points after its defaults "
        "missed 0.05.",
        "",
        "| model | method | 1st call s | 2nd call s | new data s | compile s (1st / 2nd / new) | log Z error | s.e. | "
        "error / s.e. | s.e. <= 0.05 | status | evaluations |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in results["models"].items():
        for label, calls in row["methods"].items():
            if "error" in calls and not isinstance(calls.get("error"), dict):
                lines.append(f"| {name} | {label} | failed: {calls['error'][:100]} | | | | | | | | | |")
                continue
            first, second, new = calls.get("first"), calls.get("second"), calls.get("new_data")
            shown = [c for c in (first, second, new) if isinstance(c, dict) and "log_z" in c]
            compile_ = " / ".join(f"{c['compile_seconds']:.1f}" if isinstance(c, dict) and "compile_seconds" in c
                                  else "-" for c in (first, second, new)) if label == "jaxz" else "(in the call)"
            errors = ", ".join(f"{c['error']:+.3f}" for c in shown)
            stderrs = ", ".join(f"{c['stderr']:.3f}" for c in shown)
            in_se = ", ".join("-" if c["error_in_stderr"] is None else f"{c['error_in_stderr']:+.1f}" for c in shown)
            met = ", ".join("yes" if c["stderr_met"] else "no" for c in shown)
            status = ", ".join(str(c["status"]) for c in shown)
            evaluations = ", ".join(f"{c['evaluations']:,}" for c in shown)
            shared = f" (run of {calls['shared_with']})" if calls.get("shared_with") else ""
            lines.append(f"| {name} | {label}{shared} | {_cell_seconds(first)} | {_cell_seconds(second)} | "
                         f"{_cell_seconds(new) if label == 'jaxz' else ''} | {compile_} | {errors} | {stderrs} | "
                         f"{in_se} | {met} | {status} | {evaluations} |")
    lines += ["", "Per cell with several values: first call, second call, new data (jaxz). jaxz status: its bit flags "
              "(0 ok); jaxns status: its termination reason; dynesty and nautilus: 0. jaxz evaluations: log densities "
              "+ gradients over all runs; peers: likelihood calls.", "",
              "## Ratios: jaxz seconds / the fastest peer row's", "",
              "Strict: against the fastest peer row whose reported s.e. reached 0.05 on that call; any: against the "
              "fastest peer row with an answer, whatever its s.e. (dynesty's logzerr stays above 0.05 on several "
              "models even with raised live points, so the strict column can skip the fastest peer).", "",
              "| model | first call, strict (target <= 0.33) | second call, strict (target <= 0.10) | first call, any "
              "peer | second call, any peer |", "|---|---|---|---|---|"]
    for name, row in results["models"].items():
        cells = []
        for key in ("first", "second", "first_any_peer", "second_any_peer"):
            r = row["ratios"].get(key)
            cells.append("no peer row" if r is None else
                         f"{r['ratio']:.2f} ({r['jaxz_seconds']:.1f} s vs {r['best_peer']} {r['peer_seconds']:.1f} s)")
        lines.append(f"| {name} | {' | '.join(cells)} |")
    summary = results.get("summary", {})
    if summary:
        lines += ["", "Geometric mean of the ratios over models (models meeting the issue's target): " + "; ".join(
            f"{key.replace('_', ' ')} {summary[key]} ({summary[key + '_met']})"
            for key in ("first", "second", "first_any_peer", "second_any_peer")) + "."]
    return "\n".join(lines) + "\n"


def summarize(models):
    out = {}
    for call, target in (("first", 1 / 3), ("second", 1 / 10), ("first_any_peer", 1 / 3), ("second_any_peer", 1 / 10)):
        values = [row["ratios"][call]["ratio"] for row in models.values() if row["ratios"].get(call)]
        out[call] = f"{math.exp(np.mean(np.log(values))):.2f}" if values else "n/a"
        out[f"{call}_met"] = f"{sum(v <= target for v in values)}/{len(values)}"
    return out


def save(results):
    results["summary"] = summarize(results["models"])
    write(results, "time_to_answer.json")
    out = os.path.join(HERE, "results", "time_to_answer.md")
    with open(out, "w") as handle:
        handle.write(markdown(results))
    print(f"wrote {out}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="conjugate models + eight schools, 1 repetition (default)")
    mode.add_argument("--full", action="store_true", help="every model incl. the logistic regression, 2 repetitions")
    parser.add_argument("--only", nargs="+", choices=sorted(MODELS), help="these models (merged into the committed "
                        "results)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per call (default 300)")
    parser.add_argument("--repetitions", type=int, help="default: 1 (--quick), 2 (--full)")
    parser.add_argument("--worker", nargs=3, metavar=("METHOD", "MODEL", "REPETITION"), help=argparse.SUPPRESS)
    parser.add_argument("--live", type=int, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        method, name, repetition = options.worker
        return worker(method, name, int(repetition), options.live)

    repetitions = options.repetitions or (2 if options.full else 1)
    names = options.only or [name for name, model in MODELS.items() if options.full or model.quick]
    out = os.path.join(HERE, "results", "time_to_answer.json")
    results = dict(machine=machine(), settings=dict(
        argv=sys.argv[1:], repetitions=repetitions, timeout=options.timeout, target_stderr=TARGET_STDERR,
        methods=options.methods, versions=_versions()), models={})
    if options.only and os.path.isfile(out):
        with open(out) as handle:
            previous = json.load(handle)
        results["models"] = previous.get("models", {})
        results["settings"].update(argv=previous["settings"]["argv"],
                                   merged=previous["settings"].get("merged", []) + [sys.argv[1:]])
    peer_cache = {}
    for name in names:
        row = run_model(name, options.methods, repetitions, options.timeout, peer_cache)
        previous_row = results["models"].get(name)
        if previous_row is not None and set(options.methods) != set(METHODS):
            row = merge_methods(previous_row, row, options.methods)
        results["models"][name] = row
        ordered = {n: results["models"][n] for n in MODELS if n in results["models"]}
        results["models"] = ordered
        save(results)  # after every model: an interrupted run keeps what it measured


def merge_methods(previous, row, methods):
    """``previous``'s rows of the methods not rerun, with ``row``'s rows of ``methods`` (a
    peer's raised-live row goes with its peer), and the ratios recomputed."""
    def family(label):
        return label.split("@")[0]

    kept = {label: calls for label, calls in previous["methods"].items() if family(label) not in methods}
    merged = {**kept, **row["methods"]}
    order = {method: index for index, method in enumerate(METHODS)}
    row["methods"] = dict(sorted(merged.items(), key=lambda item: (order[family(item[0])], item[0])))
    row["ratios"] = ratios(row["methods"])
    return row


def _versions():
    from importlib import metadata
    out = {}
    for package in ("jax", "numpyro", "jaxns", "dynesty", "nautilus-sampler"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = "not installed"
    return out


if __name__ == "__main__":
    main()
