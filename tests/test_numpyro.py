"""The NumPyro bridge (jaxz.numpyro): the flat unconstrained vector, the prior in it
(Jacobians included, normalized: Z_0 = 1), the likelihood (observed sites and factors),
the model's own prior draws, the constrained sites back, and the models it refuses.
No estimator runs here: these checks are exact or quadrature-based and fast."""
import importlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

numpyro = pytest.importorskip("numpyro")
dist = numpyro.distributions

import jaxz  # noqa: E402


def structured_model(x, y, counts):
    """Every kind of site the bridge handles: a scalar real, a positive scalar, a vector
    (to_event), a matrix, a plate of unit-interval sites, a simplex, a deterministic,
    observed sites under a plate, and a factor."""
    mu = numpyro.sample("mu", dist.Normal(0.5, 2.0))
    sigma = numpyro.sample("sigma", dist.Gamma(3.0, 2.0))
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([x.shape[1]]).to_event(1))
    matrix = numpyro.sample("matrix", dist.Normal(0.0, 0.5).expand([2, 2]).to_event(2))
    with numpyro.plate("groups", 3):
        rates = numpyro.sample("rates", dist.Beta(2.0, 5.0))
    probs = numpyro.sample("probs", dist.Dirichlet(jnp.array([1.0, 2.0, 3.0])))
    numpyro.deterministic("scale", 2.0 * sigma)
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu + x @ w, sigma), obs=y)
    numpyro.sample("counts", dist.Multinomial(int(np.asarray(counts).sum()), probs), obs=counts)
    numpyro.factor("penalty", -0.5 * jnp.sum(matrix**2) + jnp.sum(jnp.log(rates)))


def structured_data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 2))
    y = x @ np.array([1.0, -1.0]) + 0.3 + rng.normal(size=6)
    return jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32), jnp.array([2.0, 1.0, 4.0])


def test_bridge_sites_and_dimension():
    bridge = jaxz.numpyro.likelihood_tempering(structured_model, structured_data())
    assert bridge.sites == {"mu": (), "sigma": (), "w": (2,), "matrix": (2, 2), "rates": (3,), "probs": (3,)}
    assert bridge.dim == 1 + 1 + 2 + 4 + 3 + 2  # the 3-simplex is 2 unconstrained numbers
    assert bridge.path.log_z0 == 0.0


def test_log_prior_and_likelihood_match_hand_written_densities():
    """log p_u(u) = Σ log p(T(u)) + log|det J| with the bijections numpyro registers
    (exp for positive, sigmoid for (0, 1), stick-breaking for the simplex), computed
    here by hand with scipy; the likelihood adds the factor to the observed sites."""
    x, y, counts = structured_data()
    bridge = jaxz.numpyro.likelihood_tempering(structured_model, (x, y, counts))
    u = jax.random.normal(jax.random.key(3), (bridge.dim,))
    sites = bridge.constrain(u)
    mu, sigma, w, matrix = (np.asarray(sites[k], np.float64) for k in ("mu", "sigma", "w", "matrix"))
    rates, probs = np.asarray(sites["rates"], np.float64), np.asarray(sites["probs"], np.float64)
    assert np.isclose(float(sites["scale"]), 2.0 * sigma, rtol=1e-6)
    assert np.isclose(probs.sum(), 1.0, atol=1e-6) and np.all(probs > 0) and np.all((rates > 0) & (rates < 1))
    log_prior = (stats.norm.logpdf(mu, 0.5, 2.0) + stats.gamma.logpdf(sigma, 3.0, scale=0.5) + np.log(sigma)
                 + stats.norm.logpdf(w).sum() + stats.norm.logpdf(matrix, 0, 0.5).sum()
                 + (stats.beta.logpdf(rates, 2.0, 5.0) + np.log(rates * (1 - rates))).sum()
                 + stats.dirichlet.logpdf(probs / probs.sum(), [1.0, 2.0, 3.0]))
    probs = probs / probs.sum()
    # the simplex's stick-breaking Jacobian: numerically, from the transform itself
    transform = dist.biject_to(dist.constraints.simplex)
    u_probs = transform.inv(jnp.asarray(probs, jnp.float32))
    jacobian = jax.jacfwd(lambda z: transform(z)[:-1])(u_probs)
    log_prior += np.log(abs(np.linalg.det(np.asarray(jacobian, np.float64))))
    np.testing.assert_allclose(float(bridge.log_prior(u)), log_prior, rtol=1e-4)
    log_likelihood = (stats.norm.logpdf(np.asarray(y), mu + np.asarray(x) @ w, sigma).sum()
                      + stats.multinomial.logpmf(np.asarray(counts), 7, probs)
                      - 0.5 * (matrix**2).sum() + np.log(rates).sum())
    np.testing.assert_allclose(float(bridge.log_likelihood(u)), log_likelihood, rtol=1e-4)
    np.testing.assert_allclose(float(bridge.path.log_density(u, 0.3)), log_prior + 0.3 * log_likelihood, rtol=1e-4)


def _integrate_exp(log_fn, grid):
    """∫ exp(log_fn) by the trapezoid rule on a 1-D or 2-D grid (log space)."""
    values = np.asarray(log_fn)
    top = values.max()
    inner = np.trapezoid(np.exp(values - top), grid[-1], axis=-1)
    if len(grid) == 2:
        inner = np.trapezoid(inner, grid[0])
    return float(np.log(inner) + top)


@pytest.mark.parametrize("prior", ["gamma", "beta", "lognormal", "dependent_uniform", "dirichlet"])
def test_prior_in_unconstrained_space_is_normalized(prior):
    """∫ p_u(u) du = 1 by quadrature: the Jacobian of each support's bijection is in the
    prior (a missing or wrong one changes the integral by O(1)). dependent_uniform has a
    support that depends on another latent site: θ ~ Uniform(0, τ), τ ~ Gamma."""

    def model():
        if prior == "gamma":
            numpyro.sample("a", dist.Gamma(2.5, 1.5))
        elif prior == "beta":
            numpyro.sample("a", dist.Beta(0.7, 3.0))
        elif prior == "lognormal":
            numpyro.sample("a", dist.LogNormal(0.3, 0.8))
        elif prior == "dependent_uniform":
            tau = numpyro.sample("tau", dist.Gamma(4.0, 2.0))
            numpyro.sample("theta", dist.Uniform(0.0, tau))
        else:
            numpyro.sample("p", dist.Dirichlet(jnp.array([1.5, 2.0, 2.5])))
        numpyro.factor("data", jnp.zeros(()))

    with jax.enable_x64(True):
        bridge = jaxz.numpyro.likelihood_tempering(model)
        line = np.linspace(-12.0, 12.0, 1201 if bridge.dim == 2 else 20001)
        if bridge.dim == 1:
            log_p = jax.vmap(bridge.log_prior)(jnp.asarray(line)[:, None])
            grid = (line,)
        else:
            mesh = np.stack(np.meshgrid(line, line, indexing="ij"), -1).reshape(-1, 2)
            log_p = jax.vmap(bridge.log_prior)(jnp.asarray(mesh)).reshape(line.size, line.size)
            grid = (line, line)
        assert abs(_integrate_exp(log_p, grid)) < 1e-3


def test_prior_draws_come_from_the_model():
    """Draws of sample_prior, mapped back by constrain, have the prior's moments
    (Gamma(3, 2): mean 1.5, Beta(2, 5): mean 2/7; within 4 s.e. of 4000 draws)."""
    bridge = jaxz.numpyro.likelihood_tempering(structured_model, structured_data())
    draws = bridge.sample_prior(jax.random.key(0), 4000)
    assert draws.shape == (4000, bridge.dim) and bool(jnp.all(jnp.isfinite(draws)))
    sites = jax.vmap(bridge.constrain)(draws)
    for values, mean, variance in [(sites["sigma"], 1.5, 3.0 / 4.0), (sites["rates"][:, 1], 2 / 7, 10 / (49 * 8))]:
        assert abs(float(jnp.mean(values)) - mean) < 4 * np.sqrt(variance / 4000)
    np.testing.assert_allclose(np.asarray(jnp.mean(sites["probs"], 0)), [1 / 6, 2 / 6, 3 / 6], atol=4 * 0.19 / 63)


def test_log_prior_of_draws_matches_the_density_of_the_draws():
    """The draws and the density are of the same law: a 1-D Gamma site's u = log θ draws
    pass a KS test against the density p_u integrated to a CDF."""
    def model():
        numpyro.sample("a", dist.Gamma(2.5, 1.5))
        numpyro.factor("data", jnp.zeros(()))

    with jax.enable_x64(True):
        bridge = jaxz.numpyro.likelihood_tempering(model)
        draws = np.asarray(bridge.sample_prior(jax.random.key(1), 2000))[:, 0]
        line = np.linspace(-15, 8, 20001)
        density = np.exp(np.asarray(jax.vmap(bridge.log_prior)(jnp.asarray(line)[:, None])))
        cdf = np.concatenate([[0.0], np.cumsum(0.5 * (density[1:] + density[:-1]) * np.diff(line))])
        assert stats.kstest(draws, lambda v: np.interp(v, line, cdf)).pvalue > 1e-3


def test_model_kwargs_and_array_arguments():
    def model(y, *, prior_scale):
        mu = numpyro.sample("mu", dist.Normal(0.0, prior_scale))
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)

    y = jnp.array([0.5, 1.5])
    bridge = jaxz.numpyro.likelihood_tempering(model, (y,), {"prior_scale": 3.0})
    u = jnp.array([0.2])
    expected = stats.norm.logpdf(0.2, 0, 3.0) + stats.norm.logpdf([0.5, 1.5], 0.2, 1.0).sum()
    np.testing.assert_allclose(float(bridge.path.log_density(u, 1.0)), expected, rtol=1e-5)


def test_condition_handler_observes_a_site():
    def model():
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(mu, 1.0))

    conditioned = numpyro.handlers.condition(model, {"y": jnp.array(0.7)})
    bridge = jaxz.numpyro.likelihood_tempering(conditioned)
    assert bridge.sites == {"mu": ()}
    np.testing.assert_allclose(float(bridge.log_likelihood(jnp.array([0.1]))), stats.norm.logpdf(0.7, 0.1), rtol=1e-5)


def _observed_normal(mu):
    numpyro.sample("y", dist.Normal(mu, 1.0), obs=jnp.array(0.3))


@pytest.mark.parametrize("case, message", [
    ("discrete", "discrete"),
    ("improper", "improper"),
    ("no_observed", "no observed site"),
    ("no_latent", "no latent"),
    ("subsample", "subsample"),
])
def test_models_it_refuses(case, message):
    def model():
        if case == "discrete":
            k = numpyro.sample("k", dist.Poisson(3.0))
            _observed_normal(k)
        elif case == "improper":
            mu = numpyro.sample("mu", dist.ImproperUniform(dist.constraints.real, (), ()))
            _observed_normal(mu)
        elif case == "no_observed":
            numpyro.sample("mu", dist.Normal(0.0, 1.0))
        elif case == "no_latent":
            _observed_normal(0.0)
        else:
            mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
            with numpyro.plate("data", 10, subsample_size=5):
                numpyro.sample("y", dist.Normal(mu, 1.0), obs=jnp.zeros(5))

    with pytest.raises(ValueError, match=message):
        jaxz.numpyro.likelihood_tempering(model)
    with pytest.raises(ValueError, match=message):
        jaxz.evidence(model, jax.random.key(0))


def test_module_imports_without_numpyro(monkeypatch):
    """``import jaxz.numpyro`` must not need numpyro; using it says how to install it."""
    monkeypatch.setitem(sys.modules, "numpyro", None)
    module = importlib.reload(jaxz.numpyro)
    try:
        with pytest.raises(ImportError, match=r"jaxz\[numpyro\]"):
            module.likelihood_tempering(lambda: None)
    finally:
        monkeypatch.undo()
        importlib.reload(jaxz.numpyro)
