"""The evidence suite (issue 25): jaxz.evidence against nested samplers on problems with
an exact (or cached long-run) log Z, every method in the same process.

Problems (x ∈ R^d; the prior π and the likelihood L; Z = ∫ L π; float64 throughout):

- ``shells d=2,5,10,20,30``: the two Gaussian shells of Feroz, Hobson & Bridges (2009,
  MNRAS 398, §6.2), prior uniform on [−6, 6]^d; exact log Z by the radial quadrature of
  ``calibration_hard.shell_log_z``.
- ``eggbox``: log L = (2 + cos(x/2) cos(y/2))^5 on [0, 10π]² (ibid. §6.1); exact log Z by
  ``calibration_hard.eggbox_log_z`` (2-D Simpson).
- ``two-mode d=2,10,20``: L = 0.3 N(x; −c, 0.1² I) + 0.7 N(x; c, 0.1² I), c = (2.5, 0, …, 0),
  prior uniform on [−5, 5]^d. Z = Σ_k w_k Π_i P(−5 ≤ N(μ_ki, 0.1²) ≤ 5) / 10^d: the box
  clips the Gaussians (by log_ndtr, float64; the clipped mass is below float precision).
- ``correlated d=20``: L = N(x; m, Σ), Σ with eigenvalues from 1 to 10⁻⁴ (condition number
  10⁴) in a random rotation, m from 0.2 to 1 (the covariance of
  ``smc_tuned_vs_peers.gaussian_problem``), prior N(0, 3² I): Z = N(m; 0, Σ + 9 I).
- ``funnel d=10``: Neal's funnel, v ~ N(0, 3²), x_1..9 | v ~ N(0, e^v), posed as a
  likelihood L = funnel density × V over the uniform prior on the box
  B = [−15, 15] × [−20, 20]^9 of volume V: then L π = the funnel density on B, so Z is
  the funnel's mass inside B (log Z = 0 less the clipped tails:
  log ∫ N(v; 0, 9) (1 − 2Φ(−20 e^{−v/2}))^9 dv over [−15, 15], 1-D Simpson).
- ``rosenbrock``: log L = −(1 − x)² − 100 (y − x²)², prior uniform on [−5, 5]²; the y
  integral in closed form (erf), the x integral by 1-D Simpson.
- ``logistic``: Bayesian logistic regression on scikit-learn's breast cancer data
  (``jaxz.data.breast_cancer``: 569 × 31 with the intercept, standardized), prior N(0, I).
  No closed form: the reference is Laplace importance sampling (a multivariate t at the
  MAP, 8·10⁶ draws, float64; ``reference``), computed once and cached in
  benchmarks/results/evidence_suite_reference.json with its s.e. (small against the errors
  scored) and the earlier long waste-free jaxz run as a cross-check.
- Pima M1 / M2 (Friel & Wyse 2012) are left out: no Pima data set is available offline
  (not in scikit-learn's bundled sets, not in the shared data folder).

Hard rows (issue 57; ``hard_problems``, ``--only hard``), each with a closed-form log Z
(tests/test_evidence_suite_exact.py checks each against importance sampling with the row's
own likelihood, and the 1-D reductions against quadrature):

- ``power |x1| a eps d``: L = max(|x_1|, ε)^(−a), prior uniform on [−1, 1]^d:
  Z = ε^(1−a) + (1 − ε^(1−a))/(1 − a) (1 − log ε at a = 1), whatever d.
- ``radial a d``: L = max(|x|, ε)^(−a), ε = 10⁻⁸, prior uniform on the unit ball
  (``ball_transform`` for the unit-cube peers; a normalized Gaussian times u^(1/d) for
  jaxns): Z = ε^(d−a) + d (1 − ε^(d−a))/(d − a).
- ``plateau h v d``: L = h on a ball of volume fraction v centred at (0.5, −0.5, …), 1
  elsewhere, prior uniform on [−1, 1]^d: Z = 1 + (h − 1) v.
- ``needle d=10, 20``: L = N(x; m, Σ), standard deviations log-spaced 10⁻³ … 1 in a random
  rotation, prior uniform on [−1000, 1000]^d: log Z = −d log 2000 (the clipped mass is
  below e^(−8·10⁵)).

Methods (each run independent; same likelihood code for all, written once for NumPy and
jax.numpy):

- ``jaxz``: ``jaxz.evidence(path, key, num_runs=R, num_particles=1000)`` (method="auto":
  adaptive tempered SMC, self-tuned HMC); ``jaxz_waste_free``: the same with
  ``waste_free=True``; ``jaxz_smc_only``: the same with ``importance=False`` (SMC's own
  estimate, without the importance stage; not a default); ``jaxz_nested``: nested sampling as
  SMC (``jaxz.estimators.nested.nested_smc``, its defaults, 500 particles; not yet a method of
  ``jaxz.evidence``); ``jaxz_nested_waste_free``: the same with ``waste_free=True``, 2000
  particles (40 chains of 50 states per level); ``jaxz_nested_importance``: waste-free to
  tolerance 1e-5 with ``record_levels=True``, 1000 particles, then importance sampling from
  the levels' Gaussians (``jaxz.estimators.nested_importance``, 32,000 draws). R runs in one vmap (more batches
  of R where the pooled s.e. misses its target; ``--jaxz-seconds`` caps them); seconds after
  compilation divided by the runs made.
- ``dynesty``: static ``NestedSampler``, 500 live points, its default sampling
  (bound "multi", sample "auto") and stopping rule. Where its default fails (a run
  beyond 3 of its own s.e. from the exact value, or every run beyond 1.96),
  ``dynesty_rslice`` is run as well.
- ``jaxns``: ``DefaultNestedSampler`` with its defaults, compiled once per problem.
- ``blackjax_nss``: ``blackjax.nss`` (nested slice sampling), 500 live points, 50 deleted
  per step, max(5, 2d) slice steps (its docstring's advice), stopped when the live points
  hold < e⁻³ of Z; log Ẑ ± s.e. from 100 simulated volume sequences
  (``blackjax.ns.utils.log_weights``), the way blackjax's examples report it.
- ``nautilus``: ``nautilus.Sampler`` with its defaults (2000 live points), vectorized,
  ``discard_exploration=True``; s.e. 1/√N_eff (``run_nautilus``), likelihood calls ``n_like``.
- ``ultranest``: ``ReactiveNestedSampler`` with its defaults (400 live points, region
  sampling); for d > 10 its documented slice step sampler (2d steps, mixed directions),
  as region sampling does not scale there. ``--quick`` runs it up to d = 5 only (time).

Per method and problem: mean error, sd over runs, MSE = mean (log Ẑ − log Z)², coverage of
its own error bar (``calibration.coverage``: unflagged runs within 1.96 reported s.e.),
log-density and gradient evaluations per run (nested samplers: likelihood calls; jaxz:
``Evidence.num_log_density_evaluations`` / ``num_gradient_evaluations``), seconds per run
after compilation; scores MSE × evaluations (all, and each kind) and MSE × seconds; for
jaxz, the ratio of its MSE × evaluations to the best peer's (below 1: jaxz leads), with a
range from 95% χ² intervals of the MSEs (wide with few runs: "leads" / "trails" only where
the whole range is on one side of 1).

    python benchmarks/evidence_suite.py --quick     # 5 problems, 4 jaxz runs, 2 peer runs
    python benchmarks/evidence_suite.py --full      # every problem, 16 jaxz runs, 5 peer runs
    python benchmarks/evidence_suite.py --quick --merge --only "funnel d=10"  # add to the committed JSON
    python benchmarks/evidence_suite.py --replot    # scores, table and figure again from the stored runs
    python benchmarks/evidence_suite.py --only hard --results evidence_suite_hard   # the hard rows

Writes benchmarks/results/evidence_suite.{json,md,png} (``--results NAME``: NAME.{json,md,png}).
"""
import argparse
import json
import math
import os
import sys
import time
import warnings
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special, stats

jax.config.update("jax_enable_x64", True)

import jaxz  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _results import machine, write  # noqa: E402
from calibration import coverage  # noqa: E402
from calibration_hard import (EGGBOX_SIDE, SHELL_BOX, SHELL_CENTRE, SHELL_RADIUS, SHELL_WIDTH,  # noqa: E402
                              _simpson_weights, eggbox_log_z, shell_log_z)

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
REFERENCE_FILE = os.path.join(RESULTS, "evidence_suite_reference.json")
REFERENCE_DRAWS, REFERENCE_DOF = 8_000_000, 10.0  # the logistic reference (Laplace-t importance sampling)
NUM_PARTICLES, NUM_LIVE, NUM_LIVE_BLACKJAX, NUM_DELETE_BLACKJAX = 1000, 500, 500, 50
PEERS = ("dynesty", "dynesty_rslice", "jaxns", "blackjax_nss", "ultranest", "nautilus")
JAXZ_METHODS = ("jaxz", "jaxz_waste_free", "jaxz_smc_only", "jaxz_nested",  # smc_only: importance=False
                "jaxz_nested_waste_free", "jaxz_nested_importance")
NESTED_PARTICLES = 500  # jaxz_nested: particles per run
NESTED_WASTE_FREE_PARTICLES = 2000  # jaxz_nested_waste_free: 40 chains of 50 states per level
NESTED_IMPORTANCE_PARTICLES = 1000  # jaxz_nested_importance: waste-free levels of 20 chains, then 32,000 draws
QUICK = ("shells d=10", "eggbox", "two-mode d=10", "correlated d=20", "rosenbrock")
QUICK_ULTRANEST_MAX_DIM = 5


# --------------------------------------------------------------------------------------
# Problems: a prior, a log-likelihood written once for NumPy and jax.numpy (x of shape
# (..., d)), and the exact log Z
# --------------------------------------------------------------------------------------

class Problem(NamedTuple):
    name: str
    dim: int
    prior: tuple  # ("box", low, high), ("normal", scale) or ("ball", radius): uniform on the ball
    log_likelihood: Callable  # (x, xp) -> log L, x (..., d), xp = numpy or jax.numpy
    exact: float
    reference: str


def _log_normal(x, mean, sd, xp):
    """Σ_i log N(x_i; mean_i, sd²) over the last axis."""
    return xp.sum(-0.5 * ((x - mean) / sd) ** 2, axis=-1) - x.shape[-1] * math.log(sd * math.sqrt(2 * math.pi))


def shells(dim):
    centre = np.zeros(dim)
    centre[0] = SHELL_CENTRE

    def log_likelihood(x, xp):
        log_norm = -math.log(SHELL_WIDTH * math.sqrt(2 * math.pi))
        near, far = (xp.sqrt(xp.sum((x - c) ** 2, axis=-1)) for c in (centre, -centre))
        return xp.logaddexp(log_norm - 0.5 * ((near - SHELL_RADIUS) / SHELL_WIDTH) ** 2,
                            log_norm - 0.5 * ((far - SHELL_RADIUS) / SHELL_WIDTH) ** 2)

    return Problem(f"shells d={dim}", dim, ("box", -SHELL_BOX, SHELL_BOX), log_likelihood, shell_log_z(dim),
                   "exact (radial Simpson quadrature)")


def eggbox():
    def log_likelihood(x, xp):
        return (2.0 + xp.cos(x[..., 0] / 2) * xp.cos(x[..., 1] / 2)) ** 5

    return Problem("eggbox", 2, ("box", 0.0, EGGBOX_SIDE), log_likelihood, eggbox_log_z(),
                   "exact (2-D Simpson quadrature)")


TWO_MODE_WEIGHTS, TWO_MODE_WIDTH, TWO_MODE_OFFSET, TWO_MODE_BOX = (0.3, 0.7), 0.1, 2.5, 5.0


def two_mode(dim):
    offset = np.zeros(dim)
    offset[0] = TWO_MODE_OFFSET
    means = (-offset, offset)

    def log_likelihood(x, xp):
        light, heavy = (math.log(w) + _log_normal(x, m, TWO_MODE_WIDTH, xp) for w, m in zip(TWO_MODE_WEIGHTS, means))
        return xp.logaddexp(light, heavy)

    def log_mass_in_box(mean):
        upper = special.log_ndtr((TWO_MODE_BOX - mean) / TWO_MODE_WIDTH)
        lower = special.log_ndtr((-TWO_MODE_BOX - mean) / TWO_MODE_WIDTH)
        return float(np.sum(upper + np.log1p(-np.exp(lower - upper))))

    exact = special.logsumexp([math.log(w) + log_mass_in_box(m) for w, m in zip(TWO_MODE_WEIGHTS, means)])
    return Problem(f"two-mode d={dim}", dim, ("box", -TWO_MODE_BOX, TWO_MODE_BOX), log_likelihood,
                   float(exact - dim * math.log(2 * TWO_MODE_BOX)), "exact (Gaussian masses in the box, log_ndtr)")


CORRELATED_PRIOR_SCALE = 3.0


def correlated(dim=20, condition=1e4, seed=0):
    rng = np.random.default_rng(seed)  # the construction of smc_tuned_vs_peers.gaussian_problem
    rotation, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
    covariance = rotation @ np.diag(np.geomspace(1.0, 1.0 / condition, dim)) @ rotation.T
    precision, mean = np.linalg.inv(covariance), np.linspace(0.2, 1.0, dim)
    log_norm = -0.5 * np.linalg.slogdet(2 * np.pi * covariance)[1]

    def log_likelihood(x, xp):
        centred = x - mean
        return log_norm - 0.5 * xp.sum(centred * (centred @ precision), axis=-1)

    exact = stats.multivariate_normal.logpdf(mean, np.zeros(dim), covariance + CORRELATED_PRIOR_SCALE**2 * np.eye(dim))
    return Problem(f"correlated d={dim}", dim, ("normal", CORRELATED_PRIOR_SCALE), log_likelihood, float(exact),
                   "exact (Gaussian convolution)")


FUNNEL_SCALE, FUNNEL_BOX_V, FUNNEL_BOX_X = 3.0, 15.0, 20.0


def funnel(dim=10):
    low = np.r_[-FUNNEL_BOX_V, np.full(dim - 1, -FUNNEL_BOX_X)]
    log_volume = float(np.sum(np.log(-2 * low)))

    def log_likelihood(x, xp):
        v, rest = x[..., 0], x[..., 1:]
        log_v = -0.5 * (v / FUNNEL_SCALE) ** 2 - math.log(FUNNEL_SCALE * math.sqrt(2 * math.pi))
        log_rest = (-0.5 * xp.sum(rest**2, axis=-1) * xp.exp(-v) - 0.5 * (dim - 1) * v
                    - 0.5 * (dim - 1) * math.log(2 * math.pi))
        return log_v + log_rest + log_volume

    grid = np.linspace(-FUNNEL_BOX_V, FUNNEL_BOX_V, 60001)
    log_f = (stats.norm.logpdf(grid, 0.0, FUNNEL_SCALE)
             + (dim - 1) * np.log1p(-2 * special.ndtr(-FUNNEL_BOX_X * np.exp(-grid / 2))))
    exact = math.log(_simpson_weights(grid.size, grid[1] - grid[0]) @ np.exp(log_f))
    return Problem(f"funnel d={dim}", dim, ("box", low, -low), log_likelihood, exact,
                   "exact (the funnel's mass in the box, 1-D Simpson)")


ROSENBROCK_BOX, ROSENBROCK_B = 5.0, 100.0


def rosenbrock():
    def log_likelihood(x, xp):
        return -(1.0 - x[..., 0]) ** 2 - ROSENBROCK_B * (x[..., 1] - x[..., 0] ** 2) ** 2

    grid = np.linspace(-ROSENBROCK_BOX, ROSENBROCK_BOX, 200001)
    root_b = math.sqrt(ROSENBROCK_B)  # ∫_{-5}^{5} exp(−b (y − x²)²) dy in closed form
    inner = 0.5 * math.sqrt(math.pi / ROSENBROCK_B) * (special.erf(root_b * (ROSENBROCK_BOX - grid**2))
                                                        - special.erf(root_b * (-ROSENBROCK_BOX - grid**2)))
    integral = _simpson_weights(grid.size, grid[1] - grid[0]) @ (np.exp(-(1.0 - grid) ** 2) * inner)
    exact = math.log(integral) - 2 * math.log(2 * ROSENBROCK_BOX)
    return Problem("rosenbrock", 2, ("box", -ROSENBROCK_BOX, ROSENBROCK_BOX), log_likelihood, exact,
                   "exact (y in closed form, x by 1-D Simpson)")


def logistic(reference):
    data = jaxz.data.breast_cancer()
    inputs, labels = np.asarray(data.inputs, np.float64), np.asarray(data.labels, np.float64)

    def log_likelihood(x, xp):
        logits = x @ (inputs.T if xp is np else jnp.asarray(inputs.T))
        return xp.sum(labels * logits - xp.logaddexp(0.0, logits), axis=-1)

    problem = Problem("logistic", inputs.shape[1], ("normal", 1.0), log_likelihood, float("nan"), "")
    if reference is None:
        return problem
    return problem._replace(exact=reference["log_z"], reference=(
        f"Laplace-t importance sampling ({reference['draws']:,} draws; s.e. {reference['log_z_stderr']:.4f})"))


def problems(reference):
    out = [shells(d) for d in (2, 5, 10, 20, 30)] + [eggbox()] + [two_mode(d) for d in (2, 10, 20)]
    return {p.name: p for p in out + [correlated(), funnel(), rosenbrock(), logistic(reference)]}


# --------------------------------------------------------------------------------------
# Hard problems (issue 57): singular, flat and needle-thin likelihoods, each with a
# closed-form log Z
# --------------------------------------------------------------------------------------

POWER_BOX, RADIAL_EPS = 1.0, 1e-8


def _short(value):
    """1e-08 -> '1e-8', 10000.0 -> '1e4', 0.9 -> '0.9' (row names)."""
    mantissa, exponent = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}" if float(f"{mantissa}e{exponent}") == value and abs(int(exponent)) > 2 \
        else f"{value:g}"
PLATEAU_BOX, PLATEAU_CENTRE = 1.0, 0.5  # the plateau's centre: ±0.5 in each coordinate, off the box's centre
NEEDLE_BOX, NEEDLE_SD = 1000.0, (1e-3, 1.0)


def power_integral(a, eps, k):
    """∫_0^1 k t^(k−1) max(t, ε)^(−a) dt = ε^(k−a) + k (1 − ε^(k−a)) / (k − a), and 1 + k log(1/ε)
    at a = k: the mean of max(t, ε)^(−a) when t ~ Beta(k, 1) (t = |x_1| for k = 1 under the
    uniform prior on [−1, 1]^d; t = |x| under the uniform prior on the unit ball in k dimensions)."""
    if a == k:
        return 1.0 - k * math.log(eps)
    return eps ** (k - a) + k * (1.0 - eps ** (k - a)) / (k - a)


def power_law(a, eps, dim):
    """L = max(|x_1|, ε)^(−a) on the uniform prior on [−1, 1]^d: |x_1| ~ U(0, 1), the other
    coordinates integrate to 1, so Z = power_integral(a, ε, 1) whatever d."""

    def log_likelihood(x, xp):
        return -a * xp.log(xp.maximum(xp.abs(x[..., 0]), eps))

    return Problem(f"power |x1| a={a:g} eps={_short(eps)} d={dim}", dim, ("box", -POWER_BOX, POWER_BOX), log_likelihood,
                   math.log(power_integral(a, eps, 1)), "exact (closed form: ε^(1−a) + (1 − ε^(1−a))/(1 − a))")


def radial(a, dim, eps=RADIAL_EPS):
    """L = max(|x|, ε)^(−a), |x| Euclidean, on the uniform prior on the unit ball in d
    dimensions: |x| ~ Beta(d, 1), so Z = power_integral(a, ε, d)."""

    def log_likelihood(x, xp):  # log max(r, ε) as ½ log max(r², ε²): no square root at 0 (finite gradients)
        return -0.5 * a * xp.log(xp.maximum(xp.sum(x**2, axis=-1), eps**2))

    return Problem(f"radial a={a:g} d={dim}", dim, ("ball", 1.0), log_likelihood, math.log(power_integral(a, eps, dim)),
                   f"exact (closed form: ε^(d−a) + d (1 − ε^(d−a))/(d − a), ε = {eps:g})")


def log_ball_volume(dim, radius=1.0):
    return 0.5 * dim * math.log(math.pi) - special.gammaln(0.5 * dim + 1) + dim * math.log(radius)


def plateau_geometry(fraction, dim):
    """(centre, radius) of the plateau: a ball of ``fraction`` of the box [−1, 1]^d's volume,
    centred at (0.5, −0.5, 0.5, …) and inside the box."""
    centre = PLATEAU_CENTRE * (-1.0) ** np.arange(dim)
    radius = math.exp((math.log(fraction) + dim * math.log(2 * PLATEAU_BOX) - log_ball_volume(dim)) / dim)
    if PLATEAU_CENTRE + radius > PLATEAU_BOX:
        raise ValueError(f"a plateau of volume fraction {fraction} in d={dim} leaves the box (radius {radius:.3g})")
    return centre, radius


def plateau(height, fraction, dim):
    """L = h on a ball of volume fraction v of the box, 1 elsewhere, on the uniform prior on
    [−1, 1]^d: Z = 1 + (h − 1) v. Flat almost everywhere: no gradient points to the ball."""
    centre, radius = plateau_geometry(fraction, dim)
    log_height = math.log(height)

    def log_likelihood(x, xp):
        return xp.where(xp.sum((x - centre) ** 2, axis=-1) <= radius**2, log_height, 0.0)

    return Problem(f"plateau h={_short(height)} v={_short(fraction)} d={dim}", dim, ("box", -PLATEAU_BOX, PLATEAU_BOX),
                   log_likelihood, math.log1p((height - 1.0) * fraction), "exact (1 + (h − 1) v)")


def needle_parameters(dim, seed=0):
    """(mean, covariance) of the needle: standard deviations log-spaced from 10⁻³ to 1 along
    the axes of a random rotation (fixed seed), the mean uniform in [−0.5, 0.5]^d."""
    rng = np.random.default_rng(seed)
    rotation, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
    covariance = rotation @ np.diag(np.geomspace(*NEEDLE_SD, dim) ** 2) @ rotation.T
    return rng.uniform(-0.5, 0.5, dim), covariance


def needle_log_clipped(dim, seed=0):
    """log of a bound on the Gaussian mass outside the box, Σ_i P(|N(m_i, Σ_ii)| > 1000)."""
    mean, covariance = needle_parameters(dim, seed)
    sd = np.sqrt(np.diag(covariance))
    above, below = special.log_ndtr(-(NEEDLE_BOX - mean) / sd), special.log_ndtr(-(NEEDLE_BOX + mean) / sd)
    return float(special.logsumexp(np.concatenate([above, below])))


def needle(dim, seed=0):
    """L = N(x; m, Σ), standard deviations 10⁻³ … 1 in a random rotation, on the uniform prior
    on [−1000, 1000]^d: Z = (the Gaussian's mass in the box) / 2000^d. The mass outside is
    below Σ_i P(|N(m_i, Σ_ii)| > 1000) ≈ e^(−5·10⁵) (``needle_log_clipped``): below float
    precision, so log Z = −d log 2000."""
    mean, covariance = needle_parameters(dim, seed)
    precision = np.linalg.inv(covariance)
    log_norm = -0.5 * np.linalg.slogdet(2 * np.pi * covariance)[1]

    def log_likelihood(x, xp):
        centred = x - mean
        return log_norm - 0.5 * xp.sum(centred * (centred @ precision), axis=-1)

    log_clipped = needle_log_clipped(dim, seed)
    return Problem(f"needle d={dim}", dim, ("box", -NEEDLE_BOX, NEEDLE_BOX), log_likelihood,
                   float(math.log1p(-math.exp(log_clipped)) - dim * math.log(2 * NEEDLE_BOX)),
                   f"exact (−d log 2000; the mass outside the box < e^{log_clipped:.3g})")


def hard_problems():
    """The hard rows (``--only hard``), by name."""
    out = [power_law(1.0, 1e-8, 2), power_law(1.0, 1e-8, 5), power_law(1.0, 1e-4, 2), power_law(0.9, 1e-8, 2),
           power_law(0.9, 1e-4, 5), power_law(0.5, 1e-8, 5),
           radial(1.9, 2), radial(4.5, 5), radial(4.9, 5),
           plateau(1e8, 1e-6, 2), plateau(1e4, 1e-3, 2), plateau(1e6, 1e-5, 5),
           needle(10), needle(20)]
    return {p.name: p for p in out}


# --------------------------------------------------------------------------------------
# Priors in each library's terms
# --------------------------------------------------------------------------------------

def jax_prior(problem):
    """(log π(x), sample(key, n)) in JAX."""
    kind, *arguments = problem.prior
    dim = problem.dim
    if kind == "box":
        low, high = (np.broadcast_to(np.asarray(a, np.float64), (dim,)) for a in arguments)
        log_volume = float(np.sum(np.log(high - low)))

        def log_prior(x):
            inside = jnp.all((x >= low) & (x <= high))
            return jnp.where(inside, -log_volume, -jnp.inf)

        def sample(key, num):
            return jax.random.uniform(key, (num, dim), jnp.float64, low, high)
    elif kind == "ball":
        (radius,) = arguments
        log_volume = log_ball_volume(dim, radius)

        def log_prior(x):
            return jnp.where(jnp.sum(x**2) <= radius**2, -log_volume, -jnp.inf)

        def sample(key, num):  # a uniform direction times a radius with density ∝ r^(d−1)
            key_direction, key_radius = jax.random.split(key)
            direction = jax.random.normal(key_direction, (num, dim), jnp.float64)
            direction = direction / jnp.linalg.norm(direction, axis=-1, keepdims=True)
            return radius * jax.random.uniform(key_radius, (num, 1), jnp.float64) ** (1.0 / dim) * direction
    else:
        (scale,) = arguments

        def log_prior(x):
            return jnp.sum(jax.scipy.stats.norm.logpdf(x, 0.0, scale))

        def sample(key, num):
            return scale * jax.random.normal(key, (num, dim), jnp.float64)
    return log_prior, sample


def unit_cube_transform(problem):
    """u ∈ [0, 1]^d (..., d) -> x with law π (NumPy), for dynesty and UltraNest."""
    kind, *arguments = problem.prior
    if kind == "box":
        low, high = (np.broadcast_to(np.asarray(a, np.float64), (problem.dim,)) for a in arguments)
        return lambda u: low + (high - low) * u
    if kind == "ball":
        return lambda u: ball_transform(u, arguments[0])
    (scale,) = arguments
    return lambda u: scale * special.ndtri(u)


def ball_transform(u, radius=1.0):
    """u ∈ [0, 1]^d (..., d) -> x uniform on the ball of ``radius`` (d ≥ 2), one to one: the
    radius r = R u_0^(1/d) (density ∝ r^(d−1)); hyperspherical angles φ_1 … φ_(d−2) ∈ [0, π]
    with densities ∝ sin^(d−1−k) φ_k, drawn as cos φ_k = 1 − 2 B_k, B_k ~ Beta(m/2, m/2),
    m = d − k (by its inverse CDF); φ_(d−1) = 2π u_(d−1) uniform."""
    u = np.asarray(u, np.float64)
    dim = u.shape[-1]
    r = radius * u[..., 0] ** (1.0 / dim)
    x = np.empty_like(u)
    sines = np.ones_like(r)  # Π_(j<k) sin φ_j
    for k in range(1, dim - 1):
        m = dim - k
        cos = 1.0 - 2.0 * special.betaincinv(0.5 * m, 0.5 * m, u[..., k])
        x[..., k - 1] = sines * cos
        sines = sines * np.sqrt(np.clip(1.0 - cos**2, 0.0, None))
    angle = 2 * np.pi * u[..., dim - 1]
    x[..., dim - 2] = sines * np.cos(angle)
    x[..., dim - 1] = sines * np.sin(angle)
    return r[..., None] * x


# --------------------------------------------------------------------------------------
# Methods: each returns dict(runs=[{log_z, stderr, status, log_density_evaluations,
# gradient_evaluations, seconds}], compile_seconds, settings) or dict(available=False, reason)
# --------------------------------------------------------------------------------------

def tempering_path(problem):
    """(the likelihood-tempering path from the JAX prior to the posterior, the prior's sampler)."""
    log_prior, sample = jax_prior(problem)
    path = jaxz.paths.likelihood_tempering(log_prior, lambda x: problem.log_likelihood(x, jnp),
                                           sample_prior=sample)
    return path, sample


def run_jaxz(problem, num_runs, seed, **options):
    path, _ = tempering_path(problem)
    result = jaxz.evidence(path, jax.random.key(seed), num_runs=num_runs, num_particles=options.pop(
        "num_particles", NUM_PARTICLES), **options)
    runs = result.runs
    ran = int(np.size(runs.log_z))  # num_runs, or a multiple: batches added until the s.e. target is met
    per_run = dict(log_density_evaluations=result.num_log_density_evaluations / ran,
                   gradient_evaluations=result.num_gradient_evaluations / ran, seconds=result.seconds / ran)
    return dict(runs=[dict(log_z=float(z), stderr=float(s), status=int(f), status_names=list(jaxz.status_names(f)),
                           **per_run)
                      for z, s, f in zip(np.asarray(runs.log_z), np.asarray(runs.log_z_stderr),
                                         np.asarray(runs.status))],
                compile_seconds=result.compile_seconds, pooled_log_z=float(result.log_z),
                pooled_stderr=float(result.log_z_stderr), pooled_status=int(result.status),
                pooled_status_names=list(jaxz.status_names(result.status)), target_met=result.target_met,
                stages=np.asarray(result.num_stages).tolist(),
                settings=f"jaxz.evidence, {num_runs} vmapped runs x {NUM_PARTICLES} particles, {options or 'defaults'}")


def run_jaxz_nested(problem, num_runs, seed, waste_free=False, importance=False):
    """``jaxz.estimators.nested.nested_smc`` (nested sampling as SMC, its defaults; or waste-free; or waste-free
    to tolerance 1e-5 followed by ``jaxz.estimators.nested_importance``), R runs of NESTED_PARTICLES (waste-free:
    NESTED_WASTE_FREE_PARTICLES; importance: NESTED_IMPORTANCE_PARTICLES) particles vmapped in one compiled call;
    seconds after compilation."""
    from jaxz.estimators import nested_importance as _nested_importance
    from jaxz.estimators.nested import nested_smc

    path, sample = tempering_path(problem)
    if importance:
        estimator = nested_smc(path, waste_free=True, tolerance=_nested_importance.TOLERANCE, record_levels=True)
        num_particles = NESTED_IMPORTANCE_PARTICLES
    else:
        estimator = nested_smc(path, waste_free=waste_free)
        num_particles = NESTED_WASTE_FREE_PARTICLES if waste_free else NESTED_PARTICLES
    stage = _nested_importance.nested_importance(path)

    def one(key):
        key_draws, key_run, key_importance = jax.random.split(key, 3)
        result = jaxz.run(estimator, key_run, sample(key_draws, num_particles), max_steps=1000)
        if importance:
            result = jaxz.run(stage, key_importance, result)
        return result.estimate, result.state.log_density_evaluations

    runs = jax.jit(jax.vmap(one))
    keys = jax.random.split(jax.random.key(seed), num_runs)
    start = time.perf_counter()
    compiled = runs.lower(keys).compile()
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    estimates, evaluations = jax.block_until_ready(compiled(keys))
    seconds = (time.perf_counter() - start) / num_runs
    return dict(runs=[dict(log_z=float(z), stderr=float(s), status=int(f), status_names=list(jaxz.status_names(f)),
                           log_density_evaluations=float(n), gradient_evaluations=0.0, seconds=seconds)
                      for z, s, f, n in zip(np.asarray(estimates.log_z), np.asarray(estimates.log_z_stderr),
                                            np.asarray(estimates.status), np.asarray(evaluations))],
                compile_seconds=compile_seconds,
                settings=f"jaxz.estimators.nested.nested_smc ({'waste_free=True' if waste_free else 'defaults'})"
                         + (", tolerance 1e-5, then nested_importance (defaults)" if importance else "")
                         + f", {num_runs} vmapped runs x {num_particles} particles")


def run_dynesty(problem, num_runs, seed, sample="auto", max_calls=None):
    import dynesty

    transform = unit_cube_transform(problem)
    log_likelihood = lambda x: float(problem.log_likelihood(x, np))  # noqa: E731
    runs = []
    for index in range(num_runs):
        sampler = dynesty.NestedSampler(log_likelihood, transform, problem.dim, nlive=NUM_LIVE, sample=sample,
                                        rstate=np.random.default_rng(seed + index))
        start = time.perf_counter()
        sampler.run_nested(print_progress=False, maxcall=max_calls)
        seconds = time.perf_counter() - start
        results = sampler.results
        calls = int(np.sum(results.ncall))
        runs.append(dict(log_z=float(results.logz[-1]), stderr=float(results.logzerr[-1]),
                         status=int(max_calls is not None and calls >= max_calls), log_density_evaluations=calls,
                         gradient_evaluations=0, seconds=seconds))
    return dict(runs=runs, compile_seconds=0.0, settings=f"dynesty {dynesty.__version__} static NestedSampler, "
                f"nlive={NUM_LIVE}, bound='multi', sample='{sample}', default dlogz; max calls {max_calls}")


JAXNS_BAD_TERMINATION = 1 | 16 | 64 | 128 | 1024  # max samples, max evaluations, efficiency, plateau, no seeds


def run_jaxns(problem, num_runs, seed):
    from importlib.metadata import version

    import tensorflow_probability.substrates.jax as tfp
    from jaxns import Model, Prior
    from jaxns.public import DefaultNestedSampler

    tfpd = tfp.distributions
    kind, *arguments = problem.prior
    if kind == "box":
        low, high = (jnp.broadcast_to(jnp.asarray(a, jnp.float64), (problem.dim,)) for a in arguments)
        distribution = tfpd.Uniform(low=low, high=high)
    elif kind == "normal":
        distribution = tfpd.Normal(loc=jnp.zeros(problem.dim), scale=arguments[0] * jnp.ones(problem.dim))

    def prior_model():
        if kind == "ball":  # a uniform direction (a normalized Gaussian) times R u^(1/d): d + 1 prior variables
            z = yield Prior(tfpd.Normal(loc=jnp.zeros(problem.dim), scale=jnp.ones(problem.dim)), name="z")
            u = yield Prior(tfpd.Uniform(low=jnp.float64(0.0), high=jnp.float64(1.0)), name="u")
            return arguments[0] * u ** (1.0 / problem.dim) * z / jnp.linalg.norm(z)
        x = yield Prior(distribution, name="x")
        return x

    model = Model(prior_model=prior_model, log_likelihood=lambda x: problem.log_likelihood(x, jnp))
    sampler = DefaultNestedSampler(model=model)
    start = time.perf_counter()
    compiled = jax.jit(sampler).lower(jax.random.key(seed)).compile()
    compile_seconds = time.perf_counter() - start
    runs = []
    for index in range(num_runs):
        start = time.perf_counter()
        termination_reason, state = jax.block_until_ready(compiled(jax.random.key(seed + index)))
        seconds = time.perf_counter() - start
        results = sampler.to_results(termination_reason=termination_reason, state=state)
        reason = int(np.bitwise_or.reduce(np.atleast_1d(np.asarray(termination_reason))))
        runs.append(dict(log_z=float(results.log_Z_mean), stderr=float(results.log_Z_uncert),
                         status=int(bool(reason & JAXNS_BAD_TERMINATION)), termination_reason=reason,
                         log_density_evaluations=int(results.total_num_likelihood_evaluations),
                         gradient_evaluations=0, seconds=seconds))
    return dict(runs=runs, compile_seconds=compile_seconds,
                settings=f"jaxns {version('jaxns')} DefaultNestedSampler defaults ({sampler.num_live_points} live "
                f"points), compiled once")


def run_blackjax_nss(problem, num_runs, seed, stop=-3.0):
    import blackjax
    from blackjax.ns import utils as ns_utils
    from blackjax.ns.base import NSInfo

    log_prior, sample = jax_prior(problem)
    inner_steps = max(5, 2 * problem.dim)
    algorithm = blackjax.nss(logprior_fn=log_prior, loglikelihood_fn=lambda x: problem.log_likelihood(x, jnp),
                             num_delete=NUM_DELETE_BLACKJAX, num_inner_steps=inner_steps)

    def step(key, state):
        state, info = algorithm.step(key, state)
        slices = info.update_info  # SliceInfo, (num_delete, inner_steps): both bracket ends, then each step
        calls = jnp.sum(2 + slices.num_expansions + slices.num_shrink)
        gap = state.integrator.logZ_live - state.integrator.logZ
        return state, info.particles, calls, gap

    init = jax.jit(algorithm.init)
    key = jax.random.key(seed)
    start = time.perf_counter()
    state0 = init(sample(key, NUM_LIVE_BLACKJAX))
    compiled = jax.jit(step).lower(key, state0).compile()
    compile_seconds = time.perf_counter() - start
    runs = []
    for index in range(num_runs):
        key_init, key_run, key_weights = jax.random.split(jax.random.key(seed + 1000 + index), 3)
        start = time.perf_counter()
        state = init(sample(key_init, NUM_LIVE_BLACKJAX))
        dead, calls, gap = [], NUM_LIVE_BLACKJAX, math.inf
        while gap > stop:
            key_run, key_step = jax.random.split(key_run)
            state, particles, step_calls, gap = compiled(key_step, state)
            dead.append(NSInfo(particles, None))
            calls += int(step_calls)
            gap = float(gap)
        final = ns_utils.finalise(state, dead, update_info=False)
        log_z_draws = jax.scipy.special.logsumexp(ns_utils.log_weights(key_weights, final, shape=100), axis=0)
        log_z_draws = np.asarray(jax.block_until_ready(log_z_draws))
        seconds = time.perf_counter() - start
        runs.append(dict(log_z=float(log_z_draws.mean()), stderr=float(log_z_draws.std(ddof=1)), status=0,
                         log_density_evaluations=calls, gradient_evaluations=0, seconds=seconds))
    return dict(runs=runs, compile_seconds=compile_seconds,
                settings=f"blackjax {blackjax.__version__} nss, {NUM_LIVE_BLACKJAX} live, delete "
                f"{NUM_DELETE_BLACKJAX}, {inner_steps} slice steps, stop at log(Z_live/Z) < {stop}")


def run_ultranest(problem, num_runs, seed, max_calls=None):
    import logging

    import ultranest
    import ultranest.stepsampler

    transform = unit_cube_transform(problem)
    names = [f"x{i}" for i in range(problem.dim)]
    runs = []
    for index in range(num_runs):
        np.random.seed(seed + index)  # UltraNest draws from NumPy's global generator
        sampler = ultranest.ReactiveNestedSampler(names, lambda x: problem.log_likelihood(x, np), transform,
                                                  vectorized=True)
        logging.getLogger("ultranest").setLevel(logging.WARNING)  # its per-iteration DEBUG lines
        if problem.dim > 10:
            sampler.stepsampler = ultranest.stepsampler.SliceSampler(
                nsteps=2 * problem.dim, generate_direction=ultranest.stepsampler.generate_mixture_random_direction)
        start = time.perf_counter()
        result = sampler.run(show_status=False, viz_callback=False, max_ncalls=max_calls)
        seconds = time.perf_counter() - start
        calls = int(result["ncall"])
        runs.append(dict(log_z=float(result["logz"]), stderr=float(result["logzerr"]),
                         status=int(max_calls is not None and calls >= max_calls), log_density_evaluations=calls,
                         gradient_evaluations=0, seconds=seconds))
    return dict(runs=runs, compile_seconds=0.0, settings=f"UltraNest {ultranest.__version__} ReactiveNestedSampler "
                f"defaults{'; SliceSampler(2d steps)' if problem.dim > 10 else ''}; max calls {max_calls}")


def run_nautilus(problem, num_runs, seed, max_calls=None, max_seconds=None):
    """nautilus (Lange 2023, MNRAS 525, 3181): neural-network-bounded importance nested
    sampling, its defaults (2000 live points, f_live = 0.01, n_eff = 10⁴), vectorized, with
    ``discard_exploration=True`` (the exploration phase's points left out of the estimate:
    the unbiased estimate, per its docstring). nautilus reports no error bar for log Z; the
    s.e. used is 1/√N_eff with its ``Sampler.n_eff`` = (Σ_i Z_i)² / Σ_i Z_i²/N_eff,i over its
    shells: the delta-method s.e. of log Ẑ = log Σ_i Ẑ_i from the shells' importance
    weights (it leaves out the noise of the shells' volume estimates). Likelihood calls:
    ``Sampler.n_like`` (exploration included). A run stopped by ``max_calls`` or
    ``max_seconds`` (its ``timeout``) is flagged."""
    from importlib.metadata import version

    from nautilus import Sampler

    transform = unit_cube_transform(problem)
    runs = []
    for index in range(num_runs):
        sampler = Sampler(transform, lambda x: problem.log_likelihood(x, np), n_dim=problem.dim, vectorized=True,
                          pass_dict=False, seed=seed + index)
        start = time.perf_counter()
        finished = sampler.run(discard_exploration=True, n_like_max=np.inf if max_calls is None else max_calls,
                               timeout=np.inf if max_seconds is None else max_seconds)
        seconds = time.perf_counter() - start
        n_eff = float(sampler.n_eff)
        runs.append(dict(log_z=float(sampler.log_z), stderr=1.0 / math.sqrt(n_eff) if n_eff > 0 else float("nan"),
                         status=int(not finished), n_eff=n_eff, log_density_evaluations=int(sampler.n_like),
                         gradient_evaluations=0, seconds=seconds))
    return dict(runs=runs, compile_seconds=0.0, settings=f"nautilus {version('nautilus-sampler')} Sampler defaults "
                f"({sampler.n_live} live), discard_exploration=True, s.e. 1/sqrt(n_eff); max calls {max_calls}, "
                f"max seconds {max_seconds}")


# --------------------------------------------------------------------------------------
# Scores
# --------------------------------------------------------------------------------------

def summarize(record, exact):
    """Error statistics, coverage and costs of one method's runs on one problem."""
    runs = record["runs"]
    log_z = np.array([r["log_z"] for r in runs])
    stderr = np.array([r["stderr"] for r in runs])
    status = np.array([r["status"] for r in runs])
    finite = np.isfinite(log_z)
    errors = log_z[finite] - exact
    squared = errors**2
    mse = float(squared.mean()) if errors.size else float("nan")
    mean = {k: float(np.mean([r[k] for r in runs])) for k in ("log_density_evaluations", "gradient_evaluations",
                                                                "seconds")}
    # 95% interval of the MSE from R runs, as if the errors were centred Gaussian: R MSE / MSE_true ~ χ²_R
    low, high = (squared.size * mse / stats.chi2.ppf(q, squared.size) for q in (0.975, 0.025))
    evaluations = mean["log_density_evaluations"] + mean["gradient_evaluations"]
    flags = {}  # status names (jaxz) or "flagged" (a peer's capped / failed run): how many runs
    for r in runs:
        for name in r.get("status_names") or (["flagged"] if r["status"] else []):
            flags[name] = flags.get(name, 0) + 1
    with np.errstate(divide="ignore", invalid="ignore"):
        silent = int(np.sum((status == 0) & ((np.isfinite(stderr) & ~(np.abs(log_z - exact) <= 3 * stderr))
                                             | ~finite)))  # a non-finite log Ẑ with status 0 counts too
    pooled = {}
    if "pooled_log_z" in record:  # jaxz.evidence's pooled estimate over all its runs
        pooled = dict(pooled_log_z=record["pooled_log_z"], pooled_stderr=record["pooled_stderr"],
                      pooled_status_names=record.get("pooled_status_names", []),
                      pooled_error_in_stderr=float(np.divide(record["pooled_log_z"] - exact, record["pooled_stderr"])))
    return dict(flags=flags, silent_misses=silent, **pooled,
        num_runs=len(runs), runs_nonfinite=int((~finite).sum()), mean_error=float(errors.mean()),
        sd=float(errors.std(ddof=1)) if errors.size > 1 else float("nan"), mse=mse,
        mse_stderr=float(squared.std(ddof=1) / math.sqrt(squared.size)) if squared.size > 1 else float("nan"),
        mse_95=[float(low), float(high)],
        rms_reported_stderr=float(np.sqrt(np.nanmean(stderr**2))), **coverage(log_z, stderr, status, exact),
        log_density_evaluations_per_run=mean["log_density_evaluations"],
        gradient_evaluations_per_run=mean["gradient_evaluations"], evaluations_per_run=evaluations,
        seconds_per_run=mean["seconds"], mse_x_evaluations=mse * evaluations,
        mse_x_log_density_evaluations=mse * mean["log_density_evaluations"],
        mse_x_gradient_evaluations=mse * mean["gradient_evaluations"], mse_x_seconds=mse * mean["seconds"])


def compare(methods):
    """jaxz's MSE × evaluations (and × seconds) over the best peer's, per jaxz method."""
    peers = {m: s for m, s in methods.items() if m in PEERS and s.get("available", True)
             and math.isfinite(s.get("mse_x_evaluations", float("nan")))}
    if not peers:
        return {}
    out = {}
    for name in JAXZ_METHODS:
        mine = methods.get(name)
        if not mine or not mine.get("available", True):
            continue
        best = min(peers, key=lambda m: peers[m]["mse_x_evaluations"])
        best_time = min(peers, key=lambda m: peers[m]["mse_x_seconds"])
        ratio = mine["mse_x_evaluations"] / peers[best]["mse_x_evaluations"]
        # the ratio's range from the two MSE intervals (χ², see summarize), against every peer's upper end
        cost = mine["evaluations_per_run"]
        low = mine["mse_95"][0] * cost / min(p["mse_95"][1] * p["evaluations_per_run"] for p in peers.values())
        high = mine["mse_95"][1] * cost / min(p["mse_95"][0] * p["evaluations_per_run"] for p in peers.values())
        verdict = "leads" if high < 1 else "trails" if low > 1 else "level within the run-to-run noise"
        out[name] = dict(best_peer=best, ratio_mse_x_evaluations=ratio, ratio_95=[low, high], verdict=verdict,
                         best_peer_by_seconds=best_time,
                         ratio_mse_x_seconds=mine["mse_x_seconds"] / peers[best_time]["mse_x_seconds"],
                         meets_issue_bar=bool(ratio <= 0.2 and mine.get("coverage", 0.0) >= 0.9))
    return out


# --------------------------------------------------------------------------------------
# Reference for the logistic regression
# --------------------------------------------------------------------------------------

def reference(compute):
    """The logistic regression's reference log Z, cached (computed when asked or missing):
    Laplace importance sampling, a multivariate t (``REFERENCE_DOF`` degrees of freedom) at
    the MAP with scale H⁻¹ (``sgais_logistic_reference``'s fit and sampler), ``REFERENCE_DRAWS``
    draws in float64: unbiased for Z, the t's tails heavier than the log-concave
    posterior's. Independent of SMC; the earlier long waste-free jaxz run is kept beside it
    as a cross-check."""
    if os.path.exists(REFERENCE_FILE) and not compute:
        with open(REFERENCE_FILE) as handle:
            stored = json.load(handle)
        if stored.get("method", "").startswith("Laplace"):
            return stored
    from sgais_logistic_reference import importance_sample, laplace_fit
    problem = logistic(None)
    log_prior, _ = jax_prior(problem)

    def log_joint(theta):  # the suite's own prior and likelihood, one θ at a time
        return log_prior(theta) + problem.log_likelihood(theta, jnp)

    print(f"logistic reference: Laplace-t importance sampling, {REFERENCE_DRAWS} draws ...", flush=True)
    start = time.perf_counter()
    mode, hessian, laplace, gradient_norm = laplace_fit(lambda theta: -log_joint(theta), jnp.zeros(problem.dim))
    log_z, stderr, ess = importance_sample(jax.random.key(2026), log_joint, mode, hessian, REFERENCE_DOF,
                                           REFERENCE_DRAWS, 10_000)
    earlier = {}
    if os.path.exists(REFERENCE_FILE):
        with open(REFERENCE_FILE) as handle:
            earlier = json.load(handle)
    out = dict(method=f"Laplace importance sampling: multivariate t ({REFERENCE_DOF} dof) at the MAP, scale H^-1",
               draws=REFERENCE_DRAWS, dof=REFERENCE_DOF, log_z=log_z, log_z_stderr=stderr, ess=ess, laplace=laplace,
               map_gradient_norm=gradient_norm, seconds=time.perf_counter() - start, machine=machine(),
               cross_check=earlier.get("cross_check") or {k: earlier[k] for k in ("num_runs", "num_particles",
                                                                                  "waste_free", "log_z", "log_z_stderr")
                                                          if k in earlier})
    with open(REFERENCE_FILE, "w") as handle:
        json.dump(out, handle, indent=2)
    print(f"  log Z = {log_z:.4f} ± {stderr:.4f}, ESS {ess:.0f} (wrote {REFERENCE_FILE})", flush=True)
    return out


# --------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------

def _fmt(value, digits=2):
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "n/a"
    if value == 0:
        return "0"
    return f"{value:.{digits}g}" if abs(value) < 10**digits else f"{value:,.0f}"


def markdown(results):
    settings = results["settings"]
    lines = ["# The evidence suite: jaxz against nested samplers", "",
             f"Mode `{settings['mode']}`: {settings['jaxz_runs']} jaxz runs × {NUM_PARTICLES} particles, "
             f"{settings['peer_runs']} runs per peer; float64; {results['machine']['cpu_count']} cores, load "
             f"{results['machine']['load_average_at_start'][0]:.1f} at the start (seconds are indicative). "
             "MSE = mean (log Ẑ − log Z)² over the runs; coverage = fraction of unflagged runs within 1.96 of "
             "their own s.e. (flagged = fraction of runs with a status bit set); evaluations per run: "
             "log densities / gradients (a nested sampler's likelihood calls are log densities). "
             "ratio = jaxz's MSE × evaluations over the best peer's (below 1: jaxz leads). flags: runs per "
             "status name (jaxz) or runs flagged (a peer's capped / failed run); silent: runs with status 0 beyond 3 "
             "of their own s.e.", ""]
    if settings.get("note"):
        lines += [f"Note: {settings['note']}", ""]
    for name, problem in results["problems"].items():
        lines += [f"## {name}", "", f"log Z = {problem['exact_log_z']:.4f} ({problem['reference']})", "",
                  "| method | runs | mean error | sd | MSE | coverage (flagged) | flags; silent | log-density evals "
                  "| gradient evals | s/run | MSE × evals | MSE × s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for method, s in problem["methods"].items():
            if not s.get("available", True):
                lines.append(f"| {method} | not run: {s['reason'][:90]} |" + " |" * 10)
                continue
            flags = ", ".join(f"{k} {v}" for k, v in s.get("flags", {}).items()) or "none"
            lines.append(
                f"| {method} | {s['num_runs']} | {s['mean_error']:+.3f} | {_fmt(s['sd'])} | {_fmt(s['mse'])} | "
                f"{_fmt(s['coverage'])} ({_fmt(s['fraction_flagged'])}) | {flags}; {s.get('silent_misses', 'n/a')} | "
                f"{_fmt(s['log_density_evaluations_per_run'])} | {_fmt(s['gradient_evaluations_per_run'])} | "
                f"{_fmt(s['seconds_per_run'])} | {_fmt(s['mse_x_evaluations'])} | {_fmt(s['mse_x_seconds'])} |")
        for method in JAXZ_METHODS:
            s = problem["methods"].get(method, {})
            if "pooled_log_z" in s:
                lines.append(f"\n{method} pooled: {s['pooled_log_z']:.4f} ± {s['pooled_stderr']:.4f} "
                             f"({s['pooled_error_in_stderr']:+.1f} s.e. off; status "
                             f"{'|'.join(s['pooled_status_names']) or 'OK'}).")
        for method, c in problem.get("jaxz_vs_best_peer", {}).items():
            lines.append(f"\n{method}: MSE × evals {_fmt(c['ratio_mse_x_evaluations'])}× the best peer's "
                         f"({c['best_peer']}; 95% range {_fmt(c['ratio_95'][0])}–{_fmt(c['ratio_95'][1])}: "
                         f"{c['verdict']}); MSE × seconds {_fmt(c['ratio_mse_x_seconds'])}× "
                         f"({c['best_peer_by_seconds']}).")
        lines.append("")
    lines += ["## Summary: jaxz's MSE × evaluations over the best peer's", "",
              "Ranges: from 95% intervals of each MSE (χ² with R degrees of freedom, as if the errors were "
              "centred Gaussian), so a few runs give wide ranges; 'leads' / 'trails' only where the whole range "
              "is below / above 1.", "",
              "| problem | jaxz (default) | jaxz waste-free | jaxz SMC only (importance=False) | jaxz nested SMC "
              "| jaxz nested SMC, waste-free | jaxz nested SMC + importance | best peer |",
              "|---|---|---|---|---|---|---|---|"]
    for name, problem in results["problems"].items():
        c = problem.get("jaxz_vs_best_peer", {})
        cells = [f"{_fmt(c[m]['ratio_mse_x_evaluations'])}× [{_fmt(c[m]['ratio_95'][0])}, "
                 f"{_fmt(c[m]['ratio_95'][1])}] {c[m]['verdict']}" if m in c else "n/a" for m in JAXZ_METHODS]
        best = next(iter(c.values()))["best_peer"] if c else "n/a"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {best} |")
    return "\n".join(lines) + "\n"


METHOD_STYLE = {"jaxz": ("C0", "o"), "jaxz_waste_free": ("C1", "s"), "jaxz_smc_only": ("C7", "o"),
                "jaxz_nested": ("C8", "h"), "jaxz_nested_waste_free": ("C9", "H"),
                "jaxz_nested_importance": ("k", "d"),
                "dynesty": ("C2", "^"),
                "dynesty_rslice": ("C2", "v"), "jaxns": ("C3", "D"), "blackjax_nss": ("C4", "P"),
                "ultranest": ("C5", "X"), "nautilus": ("C6", "*")}


def figure(results, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["problems"])
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(8, 0.9 * len(names) + 3), 7), sharex=True)
    for method, (color, marker) in METHOD_STYLE.items():
        xs, scores, covers = [], [], []
        for i, name in enumerate(names):
            s = results["problems"][name]["methods"].get(method)
            if s and s.get("available", True) and math.isfinite(s.get("mse_x_evaluations", float("nan"))):
                xs.append(i + 0.08 * (list(METHOD_STYLE).index(method) - (len(METHOD_STYLE) - 1) / 2))
                scores.append(max(s["mse_x_evaluations"], 1e-3))
                covers.append(s["coverage"])
        top.scatter(xs, scores, color=color, marker=marker, label=method)
        bottom.scatter(xs, covers, color=color, marker=marker)
    top.set_yscale("log")
    top.set_ylabel("MSE × evaluations per run\n(lower is better)")
    top.legend(fontsize=8, ncol=4)
    bottom.axhline(0.95, color="grey", lw=0.8, ls="--")
    bottom.set_ylim(-0.05, 1.05)
    bottom.set_ylabel("coverage of own\n1.96 s.e. bar")
    bottom.set_xticks(range(len(names)), names, rotation=40, ha="right")
    bottom.set_xlim(-0.5, len(names) - 0.5)
    fig.suptitle(f"Evidence suite ({results['settings']['mode']}): jaxz vs nested samplers")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def rescore(results):
    """Scores and comparisons again from the runs stored in ``results`` (in place)."""
    for problem in results["problems"].values():
        for entry in problem["methods"].values():
            if entry.get("available", True):
                entry.update(summarize(entry, problem["exact_log_z"]))
        problem["jaxz_vs_best_peer"] = compare(problem["methods"])
    return results


def load_results(name="evidence_suite"):
    with open(os.path.join(RESULTS, f"{name}.json")) as handle:
        return json.load(handle)


def save(results, stamp=True, name="evidence_suite"):
    """benchmarks/results/``name``.{json,md,png}."""
    if stamp:
        write(results, f"{name}.json")
    else:  # a replot: the machine record stays the run's
        with open(os.path.join(RESULTS, f"{name}.json"), "w") as handle:
            json.dump(results, handle, indent=2)
    with open(os.path.join(RESULTS, f"{name}.md"), "w") as handle:
        handle.write(markdown(results))
    figure(results, os.path.join(RESULTS, f"{name}.png"))


# --------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------

def run_method(method, problem, runs, seed, max_calls, max_seconds=None, jaxz_options=None):
    try:
        if method == "jaxz":
            return run_jaxz(problem, runs, seed, **(jaxz_options or {}))
        if method == "jaxz_waste_free":
            return run_jaxz(problem, runs, seed, waste_free=True, **(jaxz_options or {}))
        if method == "jaxz_smc_only":
            return run_jaxz(problem, runs, seed, importance=False, **(jaxz_options or {}))
        if method == "jaxz_nested":
            return run_jaxz_nested(problem, runs, seed)
        if method == "jaxz_nested_waste_free":
            return run_jaxz_nested(problem, runs, seed, waste_free=True)
        if method == "jaxz_nested_importance":
            return run_jaxz_nested(problem, runs, seed, importance=True)
        if method == "dynesty":
            return run_dynesty(problem, runs, seed, max_calls=max_calls)
        if method == "dynesty_rslice":
            return run_dynesty(problem, runs, seed, sample="rslice", max_calls=max_calls)
        if method == "jaxns":
            return run_jaxns(problem, runs, seed)
        if method == "blackjax_nss":
            return run_blackjax_nss(problem, runs, seed)
        if method == "ultranest":
            return run_ultranest(problem, runs, seed, max_calls=max_calls)
        if method == "nautilus":
            return run_nautilus(problem, runs, seed, max_calls=max_calls, max_seconds=max_seconds)
    except ImportError as error:
        return dict(available=False, reason=f"not installed: {error}")
    except Exception as error:  # noqa: BLE001 - a peer's failure is a result, reported
        return dict(available=False, reason=f"{type(error).__name__}: {str(error)[:200]}")
    raise ValueError(f"unknown method {method!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="the default: a subset, 4 jaxz runs, 2 peer runs")
    mode.add_argument("--full", action="store_true", help="every problem, 16 jaxz runs, 5 peer runs")
    parser.add_argument("--only", nargs="*", help="problem names; 'hard' for every hard row (hard_problems)")
    parser.add_argument("--results", default="evidence_suite",
                        help="write benchmarks/results/RESULTS.{json,md,png} (and --merge / --replot read it)")
    parser.add_argument("--methods", nargs="*",
                        default=list(JAXZ_METHODS) + [p for p in PEERS if p != "dynesty_rslice"])
    parser.add_argument("--jaxz-runs", type=int)
    parser.add_argument("--peer-runs", type=int)
    parser.add_argument("--max-calls", type=int, help="cap on a dynesty / UltraNest run's likelihood calls "
                        "(a capped run is flagged); default 3e6 quick, none full")
    parser.add_argument("--jaxz-seconds", type=float, help="jaxz.evidence's max_seconds (no further batches of runs "
                        "after it, target_met False); default none")
    parser.add_argument("--jaxz-progress", action="store_true", help="jaxz.evidence's progress lines (stderr)")
    parser.add_argument("--nautilus-seconds", type=float, help="cap on a nautilus run's seconds (its timeout; "
                        "a capped run is flagged); default none")
    parser.add_argument("--reference", action="store_true",
                        help="recompute the logistic reference (Laplace-t importance sampling)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--replot", action="store_true",
                        help="recompute the scores from the runs in the committed JSON; rewrite .json, .md, .png")
    parser.add_argument("--merge", action="store_true", help="add the problems / methods run now to the committed "
                        "JSON (replacing those of the same name) instead of starting a new one")
    options = parser.parse_args()
    if options.replot:
        return save(rescore(load_results(options.results)), stamp=False, name=options.results)
    full = options.full
    jaxz_runs = options.jaxz_runs or (16 if full else 4)
    peer_runs = options.peer_runs or (5 if full else 2)
    max_calls = options.max_calls or (None if full else 3_000_000)
    jaxz_options = {k: v for k, v in (("max_seconds", options.jaxz_seconds), ("progress", options.jaxz_progress))
                    if v}
    hard = hard_problems()
    catalogue = {**problems(reference(options.reference)), **hard}
    chosen = options.only or (list(problems(None)) if full else list(QUICK))
    chosen = [n for name in chosen for n in (hard if name == "hard" else [name])]
    unknown = [n for n in chosen if n not in catalogue]
    if unknown:
        parser.error(f"unknown problems {unknown}; known: {list(catalogue)} or 'hard'")
    results = load_results(options.results) if options.merge else dict(machine=machine(), settings=dict(
        mode="full" if full else "quick", jaxz_runs=jaxz_runs, peer_runs=peer_runs, num_particles=NUM_PARTICLES,
        num_live=NUM_LIVE, max_calls=max_calls, nautilus_seconds=options.nautilus_seconds,
        jaxz_max_seconds=options.jaxz_seconds, methods=options.methods, dtype="float64",
        left_out={"pima": "no Pima data set offline (scikit-learn has none; not in the shared data folder)"},
        not_run_in_this_mode=[n for n in catalogue if n not in chosen]), problems={})
    if options.merge:
        rescore(results)
        results["settings"].setdefault("merged", []).append(dict(problems=chosen, methods=options.methods,
                                                                 machine=machine()))
    started = time.perf_counter()
    for name in chosen:
        problem = catalogue[name]
        print(f"{name}: exact log Z = {problem.exact:.4f}", flush=True)
        entry = dict(exact_log_z=problem.exact, reference=problem.reference, dim=problem.dim, methods={})
        if options.merge and name in results["problems"]:
            entry = results["problems"][name]
        methods = list(options.methods)
        while methods:
            method = methods.pop(0)
            runs = jaxz_runs if method in JAXZ_METHODS else peer_runs
            if method == "ultranest" and not full and problem.dim > QUICK_ULTRANEST_MAX_DIM:
                # its single-threaded runs cost minutes each there
                record = dict(available=False, reason=f"--quick: UltraNest only up to d = {QUICK_ULTRANEST_MAX_DIM} "
                                                      "(time)")
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    record = run_method(method, problem, runs, options.seed, max_calls, options.nautilus_seconds,
                                        jaxz_options)
            if record.get("available", True) is False:
                if "runs" in entry["methods"].get(method, {}):  # --merge: a measured row stays
                    print(f"  {method}: not run now ({record['reason']}); its stored row is kept", flush=True)
                    continue
                entry["methods"][method] = record
                print(f"  {method}: not run ({record['reason']})", flush=True)
                continue
            summary = dict(settings=record["settings"], compile_seconds=record["compile_seconds"],
                           **summarize(record, problem.exact), runs=record["runs"])
            entry["methods"][method] = summary
            print(f"  {method}: error {summary['mean_error']:+.3f}, sd {_fmt(summary['sd'])}, coverage "
                  f"{_fmt(summary['coverage'])}, {_fmt(summary['evaluations_per_run'])} evals/run, "
                  f"{_fmt(summary['seconds_per_run'])} s/run, MSE x evals {_fmt(summary['mse_x_evaluations'])}",
                  flush=True)
            z = [abs(r["log_z"] - problem.exact) / r["stderr"] for r in record["runs"]]
            failed = max(z) > 3 or min(z) > 1.96  # one run beyond 3 s.e., or every run beyond 1.96
            if method == "dynesty" and failed and "dynesty_rslice" not in methods:
                methods.insert(0, "dynesty_rslice")  # its default failed: the slice sampler as well
        entry["jaxz_vs_best_peer"] = compare(entry["methods"])
        for method, c in entry["jaxz_vs_best_peer"].items():
            print(f"  {method} / best peer ({c['best_peer']}): {c['ratio_mse_x_evaluations']:.3g}x MSE x evals",
                  flush=True)
        results["problems"][name] = entry
        results["settings"]["seconds_this_invocation"] = time.perf_counter() - started
        save(results, name=options.results)  # after every problem: an interrupted run keeps what it measured


if __name__ == "__main__":
    main()
