"""The hard rows of benchmarks/evidence_suite.py (issue 57): each closed-form log Z against
an independent importance-sampling estimate that calls the row's own NumPy likelihood, with a
tolerance of 4 of that estimate's standard errors; the 1-D reductions against quadrature; the
unit-cube transform of the ball prior against the uniform law on the ball.

No jaxz.evidence calls; NumPy only. evidence_suite turns on float64 in JAX when imported: the
fixture imports it and restores the flag after this module's tests.
"""
import math
import os
import sys

import jax
import numpy as np
import pytest
from scipy import integrate, stats

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
DRAWS = 200_000


@pytest.fixture(scope="module")
def suite():
    before = jax.config.jax_enable_x64
    sys.path.insert(0, BENCHMARKS)
    try:
        import evidence_suite

        yield evidence_suite
    finally:
        sys.path.remove(BENCHMARKS)
        jax.config.update("jax_enable_x64", before)


def _log_mean_and_stderr(log_weights):
    """log of the mean of exp(log_weights) and the delta-method s.e. of that log."""
    shift = np.max(log_weights)
    weights = np.exp(log_weights - shift)
    mean = weights.mean()
    return shift + math.log(mean), weights.std(ddof=1) / math.sqrt(weights.size) / mean


def _assert_within(estimate, stderr, exact, name):
    assert stderr < 0.01, f"{name}: the check's own s.e. {stderr:.3g} is too large to check anything"
    assert abs(estimate - exact) < 4 * stderr + 1e-12, (
        f"{name}: exact log Z {exact:.6f}, independent estimate {estimate:.6f} ± {stderr:.2g}")


def _singular_coordinate(rng, eps, k, num, share_below=0.1):
    """t ∈ [0, 1] from a proposal that follows a singularity at 0: with probability
    ``share_below`` t = ε u^(1/k) (density ∝ t^(k−1) on [0, ε]), else log-uniform on [ε, 1].
    Returns t and log q(t)."""
    below = rng.uniform(size=num) < share_below
    t = np.where(below, eps * rng.uniform(size=num) ** (1.0 / k), np.exp(math.log(eps) * rng.uniform(size=num)))
    log_q = np.where(below, math.log(share_below) + math.log(k) + (k - 1) * np.log(t) - k * math.log(eps),
                     math.log1p(-share_below) - np.log(t) - math.log(-math.log(eps)))
    return t, log_q


def _hard(suite, prefix):
    rows = {name: p for name, p in suite.hard_problems().items() if name.startswith(prefix)}
    assert rows, prefix
    return rows


def test_power_law_log_z_matches_importance_sampling_and_quadrature(suite):
    """Z = E_π[max(|x_1|, ε)^(−a)], π uniform on [−1, 1]^d: |x_1| drawn from a proposal with
    mass below ε and log-uniform above (the weights L π / q are then nearly constant), the
    other coordinates from the prior; and the 1-D integral ∫_0^1 max(t, ε)^(−a) dt by quad
    in log t."""
    rng = np.random.default_rng(1)
    for name, problem in _hard(suite, "power").items():
        a, eps = (float(part.split("=")[1]) for part in name.split()[2:4])
        t, log_q = _singular_coordinate(rng, eps, 1, DRAWS)
        x = rng.uniform(-1.0, 1.0, size=(DRAWS, problem.dim))
        x[:, 0] = np.where(rng.uniform(size=DRAWS) < 0.5, -t, t)
        log_weights = problem.log_likelihood(x, np) - log_q  # the density of |x_1| under π is 1 on [0, 1]
        _assert_within(*_log_mean_and_stderr(log_weights), problem.exact, name)
        below = eps ** (1.0 - a)  # ∫_0^ε ε^(−a) dt
        above, _ = integrate.quad(lambda s: math.exp((1.0 - a) * s), math.log(eps), 0.0, epsabs=0, epsrel=1e-12)
        assert math.isclose(math.log(below + above), problem.exact, rel_tol=1e-9), name


def test_radial_log_z_matches_importance_sampling_and_quadrature(suite):
    """Z = E_π[max(|x|, ε)^(−a)], π uniform on the unit ball: a uniform direction times a
    radius from a proposal that follows the singularity, weighted by the radius's density
    d r^(d−1) under π; and ∫_0^1 d r^(d−1) max(r, ε)^(−a) dr by quad in log r."""
    rng = np.random.default_rng(2)
    for name, problem in _hard(suite, "radial").items():
        assert problem.prior == ("ball", 1.0)
        a, dim, eps = float(name.split()[1].split("=")[1]), problem.dim, suite.RADIAL_EPS
        r, log_q = _singular_coordinate(rng, eps, dim, DRAWS)
        direction = rng.normal(size=(DRAWS, dim))
        x = r[:, None] * direction / np.linalg.norm(direction, axis=1, keepdims=True)
        log_weights = problem.log_likelihood(x, np) + math.log(dim) + (dim - 1) * np.log(r) - log_q
        _assert_within(*_log_mean_and_stderr(log_weights), problem.exact, name)
        below = eps ** (dim - a)  # ∫_0^ε d r^(d−1) ε^(−a) dr
        above, _ = integrate.quad(lambda s: dim * math.exp((dim - a) * s), math.log(eps), 0.0, epsabs=0,
                                  epsrel=1e-12)
        assert math.isclose(math.log(below + above), problem.exact, rel_tol=1e-9), name


@pytest.mark.parametrize("dim", [2, 5])
def test_ball_transform_is_uniform_on_the_ball(suite, dim):
    """The peers' unit-cube transform of the ball prior: |x| ≤ 1, |x|^d ~ U(0, 1) (KS test),
    mean 0 and covariance I/(d + 2), the moments of the uniform law on the unit ball."""
    x = suite.ball_transform(np.random.default_rng(3).uniform(size=(DRAWS, dim)))
    radius = np.linalg.norm(x, axis=1)
    assert radius.max() <= 1.0 + 1e-12
    assert stats.kstest(radius**dim, "uniform").pvalue > 1e-3
    covariance = np.cov(x.T) * (dim + 2)
    # entries of x x^T (d + 2) have sd below 1.5 here: 5 s.e. of the mean over DRAWS draws
    tolerance = 5 * 1.5 / math.sqrt(DRAWS)
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=tolerance)
    np.testing.assert_allclose(covariance, np.eye(dim), atol=tolerance)


def test_plateau_log_z_matches_importance_sampling(suite):
    """Z = 1 + (h − 1) v: half the draws from the prior (uniform on [−1, 1]^d), half uniform
    on the cube around the plateau's ball (inside the box); the weights L π / q use the
    row's own likelihood, so they check its ball's radius and centre."""
    rng = np.random.default_rng(4)
    for name, problem in _hard(suite, "plateau").items():
        dim = problem.dim
        height, fraction = (float(part.split("=")[1]) for part in name.split()[1:3])
        centre, radius = suite.plateau_geometry(fraction, dim)
        assert np.all(np.abs(centre) + radius <= 1.0) and np.linalg.norm(centre) > radius  # off the centre
        near = rng.uniform(size=DRAWS) < 0.5
        x = np.where(near[:, None], centre + radius * rng.uniform(-1.0, 1.0, size=(DRAWS, dim)),
                     rng.uniform(-1.0, 1.0, size=(DRAWS, dim)))
        in_cube = np.all(np.abs(x - centre) <= radius, axis=1)
        log_prior = -dim * math.log(2.0)
        log_q = np.logaddexp(math.log(0.5) + log_prior,
                             np.where(in_cube, math.log(0.5) - dim * math.log(2 * radius), -np.inf))
        log_weights = problem.log_likelihood(x, np) + log_prior - log_q
        _assert_within(*_log_mean_and_stderr(log_weights), problem.exact, name)
        assert math.isclose(problem.exact, math.log(1.0 + (height - 1.0) * fraction), rel_tol=1e-12)


def test_needle_log_z_matches_importance_sampling(suite):
    """Z = ∫_box N(x; m, Σ) dx / 2000^d: draws from N(m, 1.2² Σ) (wider than the needle, so the
    weights are bounded), weights L π / q with the row's own likelihood and π's box; the
    mass the box clips is bounded by needle_log_clipped (below float precision)."""
    rng = np.random.default_rng(5)
    for name, problem in _hard(suite, "needle").items():
        dim = problem.dim
        mean, covariance = suite.needle_parameters(dim)
        sds = np.sqrt(np.linalg.eigvalsh(covariance))
        assert math.isclose(sds.min(), 1e-3, rel_tol=1e-6) and math.isclose(sds.max(), 1.0, rel_tol=1e-6)
        proposal = stats.multivariate_normal(mean, 1.2**2 * covariance)
        x = proposal.rvs(size=DRAWS, random_state=rng)
        inside = np.all(np.abs(x) <= suite.NEEDLE_BOX, axis=1)
        log_prior = np.where(inside, -dim * math.log(2 * suite.NEEDLE_BOX), -np.inf)
        log_weights = problem.log_likelihood(x, np) + log_prior - proposal.logpdf(x)
        _assert_within(*_log_mean_and_stderr(log_weights), problem.exact, name)
        assert suite.needle_log_clipped(dim) < -1e5
        assert problem.exact == -dim * math.log(2 * suite.NEEDLE_BOX)
