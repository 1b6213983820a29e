"""The NumPyro bridge: a model's evidence path on one flat unconstrained vector.

A NumPyro model (a callable with ``numpyro.sample`` sites, the data observed through
``obs=``) defines a joint density p(θ, y) = p(θ) p(y | θ). Its latent sites θ are
mapped to one flat unconstrained vector u, site by site, with the bijection that
NumPyro registers for the site's support, θ_s = T_s(u_s) with
T_s = ``numpyro.distributions.biject_to(support_s)``. In u the prior has the density

    p_u(u) = p(T(u)) |det ∂T/∂u|,

a normalized density (Z_0 = 1), and the evidence is unchanged:

    Z = ∫ p(θ) p(y | θ) dθ = ∫ p_u(u) p(y | T(u)) du.

``likelihood_tempering`` returns the path f_β(u) = p_u(u) p(y | T(u))^β of
``jaxz.paths.likelihood_tempering`` (f_0 = the prior, f_1 = the joint, Z_1 = the
evidence), with exact prior draws made by the model itself (its ``sample`` statements
under ``numpyro.handlers.seed``) and mapped to u by T⁻¹.

What counts where:

- latent sites (``sample`` without ``obs``): the prior p(θ), each with the log |det J|
  of its bijection; continuous sites only (a discrete latent site raises ValueError:
  enumerate or marginalize it in the model);
- observed sites (``sample`` with ``obs=``, or a site fixed by
  ``numpyro.handlers.condition``): the likelihood p(y | θ), tempered by β;
- ``numpyro.factor`` sites: the likelihood too (an observed site of NumPyro's ``Unit``
  distribution): they are tempered with it, so the evidence is
  ∫ p(θ) p(y | θ) exp(Σ factors) dθ. A factor that belongs to the prior (a soft
  constraint) makes the prior unnormalized: fold it into a proper prior instead;
- ``numpyro.deterministic`` sites: returned with the latent sites by ``constrain``;
- ``numpyro.param`` sites: refused (ValueError) unless the user fixed them (wrap the model
  in ``numpyro.handlers.substitute(model, data={name: value})``): the evidence integrates
  over latent sites, and a parameter would otherwise sit at its initial value;
- ``Delta`` latent sites (point masses): refused; use ``numpyro.deterministic``;
- a site's ``scale`` (``numpyro.handlers.scale``) multiplies its log density; masks
  (``.mask`` / ``handlers.mask``) apply as NumPyro applies them.

The model must have the same latent sites (names and shapes) on every run: control
flow that adds or drops sites at random is not supported. Plates with
``subsample_size`` (mini-batches) are refused: the evidence needs the full data.
Model arguments (arrays, data) are closed over as constants.

numpyro is imported inside the functions: ``import jaxz.numpyro`` works without it;
install it with ``pip install "jaxz[numpyro]"``.
"""
import functools
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxz.paths import Path, likelihood_tempering as _likelihood_tempering


class ModelPath(NamedTuple):
    """A NumPyro model as a likelihood-tempering path on a flat unconstrained vector u.

    path: ``jaxz.paths.Path`` with log f_β(u) = log p_u(u) + β log p(y | T(u)),
        log_z0 = 0 and ``sample_base(rng_key, num) -> (num, dim)`` exact prior draws.
    log_prior: u ↦ log p_u(u) (the prior in u, Jacobians included; normalized).
    log_likelihood: u ↦ Σ observed sites' log p(y_s | θ) + Σ factors.
    sample_prior: ``path.sample_base``.
    constrain: u ↦ {site: value}, the latent sites in their own (constrained) space
        and the ``numpyro.deterministic`` sites, for one particle (vmap it for many).
    sites: {latent site: its shape} in the model's order.
    dim: the length of u.
    """

    path: Path
    log_prior: Callable
    log_likelihood: Callable
    sample_prior: Callable
    constrain: Callable
    sites: dict
    dim: int


def _import_numpyro():
    try:
        import numpyro  # noqa: F401
        from numpyro import handlers
        from numpyro.distributions import biject_to
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError('jaxz.numpyro needs numpyro: pip install "jaxz[numpyro]"') from error
    return handlers, biject_to


def _innermost(fn):
    """The distribution under NumPyro's wrappers (Independent, Expanded, Masked)."""
    seen = 0
    while hasattr(fn, "base_dist") and seen < 32:
        fn = fn.base_dist
        seen += 1
    return fn


def _is_latent(site) -> bool:
    return site["type"] == "sample" and not site["is_observed"]


def _check_latent(site) -> None:
    """ValueError for a latent site jaxz cannot integrate over: discrete, improper, or a
    point mass (``Delta``)."""
    from numpyro.distributions import Delta, ImproperUniform

    name, fn = site["name"], site["fn"]
    if fn.support.is_discrete:
        raise ValueError(
            f"latent site {name!r} is discrete ({type(_innermost(fn)).__name__}, support {fn.support}): "
            "jaxz integrates over continuous latent sites only; enumerate or marginalize it in the model "
            "(sum over its values with a mixture distribution such as MixtureSameFamily, or logsumexp in a "
            "numpyro.factor), or observe it with obs="
        )
    if isinstance(_innermost(fn), ImproperUniform):
        raise ValueError(
            f"latent site {name!r} has an improper prior (ImproperUniform): the evidence needs a proper, "
            "normalized prior to sample from; give the site a proper distribution"
        )
    if isinstance(_innermost(fn), Delta):
        raise ValueError(
            f"latent site {name!r} is a Delta (a point mass, not a density over a continuous value): jaxz "
            "integrates over latent densities, and a Delta's log_prob is -inf off its point, so the evidence "
            f"would be wrong; write it as numpyro.deterministic({name!r}, value) (and add a Delta's log_density, "
            "if any, with numpyro.factor)"
        )


def _check_param(site) -> None:
    """ValueError for a ``numpyro.param`` site that nothing fixed: its value would be its
    initial value, silently, and the evidence that of a model the user did not choose."""
    if site["value"] is None:
        raise ValueError(
            f"site {site['name']!r} is a numpyro.param: the evidence integrates over latent sites (numpyro.sample) "
            "and a parameter is neither, so its value must be fixed by the user, e.g. "
            f"numpyro.handlers.substitute(model, data={{{site['name']!r}: value}}), or given a prior with "
            "numpyro.sample to integrate over it"
        )


def _trace(model, model_args, model_kwargs, rng_key, substitute_fn=None):
    handlers, _ = _import_numpyro()
    seeded = handlers.seed(model, rng_seed=rng_key)
    if substitute_fn is not None:
        seeded = handlers.substitute(seeded, substitute_fn=substitute_fn)
    return handlers.trace(seeded).get_trace(*model_args, **model_kwargs)


def _site_log_density(site):
    """Σ log p(value) of one sample site, times its scale."""
    log_prob = jnp.sum(site["fn"].log_prob(site["value"]))
    if site.get("scale") is not None:
        log_prob = site["scale"] * log_prob
    return log_prob


def likelihood_tempering(model: Callable, model_args=(), model_kwargs: dict | None = None) -> ModelPath:
    """The evidence path of a NumPyro model: f_β(u) = p_u(u) p(y | T(u))^β on the flat
    unconstrained vector u of its latent sites (see the module docstring).

    Args:
        model: a NumPyro model, called as ``model(*model_args, **model_kwargs)``.
        model_args, model_kwargs: its arguments (data as arrays, sizes, ...).

    Returns:
        A ``ModelPath``: the ``Path`` for ``jaxz.smc`` / ``jaxz.ais`` (and
        ``jaxz.evidence``), its prior and likelihood, and ``constrain`` to read
        particles as a dict of the model's sites.

    Raises:
        ValueError: the model is not callable, has no latent site, no observed site
        (nor factor), a discrete latent site, an improper prior, a ``Delta`` latent site,
        a ``numpyro.param`` site not fixed by a ``handlers.substitute``, a support with no
        bijection to the reals, or a subsampled plate.
    """
    handlers, biject_to = _import_numpyro()
    if not callable(model):
        raise ValueError(f"model must be a callable NumPyro model, got {type(model).__name__}")
    model_args = tuple(model_args)
    model_kwargs = {} if model_kwargs is None else dict(model_kwargs)

    def refuse(site):
        """Checks run while the model is first traced, before any site is sampled."""
        if site["type"] == "plate":
            size, subsample_size = site["args"][:2]
            if subsample_size is not None and subsample_size != size:
                raise ValueError(f"plate {site['name']!r} subsamples {subsample_size} of {size}: the evidence needs "
                                 "the full data; drop subsample_size")
        elif _is_latent(site):
            _check_latent(site)
        elif site["type"] == "param":  # the model's own handlers (a substitute) have set it, or not
            _check_param(site)
        return None

    latent, observed = [], []

    def discover(rng_key):
        """The sites, traced abstractly (no numbers computed): names in the model's order
        and the unconstrained value of each latent site (its shape and dtype)."""
        try:
            prototype = _trace(model, model_args, model_kwargs, rng_key, refuse)
        except NotImplementedError as error:
            raise ValueError(f"the model could not be sampled ({error}): a latent site has no sampler, e.g. an "
                             "improper prior; give every latent site a proper distribution") from error
        latent.extend(name for name, site in prototype.items() if _is_latent(site))
        observed.extend(name for name, site in prototype.items() if site["type"] == "sample" and site["is_observed"])
        unconstrained = {}
        for name in latent:
            support = prototype[name]["fn"].support
            try:
                transform = biject_to(support)
            except NotImplementedError as error:
                raise ValueError(f"latent site {name!r}: numpyro has no bijection from the reals to its support "
                                 f"{support}, so jaxz cannot integrate over it") from error
            unconstrained[name] = (transform.inv(prototype[name]["value"]), prototype[name]["value"])
        return unconstrained

    shapes = jax.eval_shape(discover, jax.random.key(0))
    if not latent:
        raise ValueError("the model has no latent sample site: there is nothing to integrate over "
                         "(its evidence is its likelihood at the given values)")
    if not observed:
        raise ValueError("the model has no observed site (numpyro.sample with obs=, or numpyro.factor): the "
                         "evidence of a model with no data is 1; pass the data to the model and observe it")
    dtypes = [u.dtype for u, _ in shapes.values() if jnp.issubdtype(u.dtype, jnp.floating)]
    dtype = jnp.result_type(*dtypes) if dtypes else jnp.result_type(float)
    sizes = [math.prod(shapes[name][0].shape) for name in latent]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    dim = int(offsets[-1])
    sites = {name: tuple(shapes[name][1].shape) for name in latent}

    def unravel(u):
        """{site: its unconstrained value} from the flat vector (model order)."""
        return {name: u[offsets[i]:offsets[i + 1]].reshape(shapes[name][0].shape) for i, name in enumerate(latent)}

    def ravel(values):
        return jnp.concatenate([jnp.ravel(values[name]).astype(dtype) for name in latent])

    def run_at(u):
        """The model's trace with its latent sites set to T(u), and {site: (u_s, T_s)}.

        The bijection is read from each site's distribution during this run, so a
        support that depends on other latent sites (Uniform(0, σ)) is followed."""
        values = unravel(u)
        used = {}

        def substitute_fn(site):
            if not _is_latent(site) or site["name"] not in values:
                return None
            transform = biject_to(site["fn"].support)
            used[site["name"]] = (values[site["name"]], transform)
            return transform(values[site["name"]])

        return _trace(model, model_args, model_kwargs, jax.random.key(0), substitute_fn), used

    def log_prior(u):
        """log p_u(u) = Σ_s [log p_s(T_s(u_s)) + log |det ∂T_s/∂u_s|]."""
        tr, used = run_at(u)
        total = jnp.zeros((), dtype)
        for name in latent:
            site = tr[name]
            value_u, transform = used[name]
            total = total + _site_log_density(site)
            total = total + jnp.sum(transform.log_abs_det_jacobian(value_u, site["value"]))
        return total

    def log_likelihood(u):
        """Σ over observed sites (factors included) of log p(y_s | θ)."""
        tr, _ = run_at(u)
        total = jnp.zeros((), dtype)
        for name, site in tr.items():
            if site["type"] == "sample" and site["is_observed"]:
                total = total + _site_log_density(site)
        return total

    def one_prior_draw(rng_key):
        tr = _trace(model, model_args, model_kwargs, rng_key)
        return ravel({name: biject_to(tr[name]["fn"].support).inv(tr[name]["value"]) for name in latent})

    @functools.partial(jax.jit, static_argnums=1)
    def sample_prior(rng_key, num):
        """``num`` exact prior draws, sampled by the model and mapped to u: (num, dim)."""
        return jax.vmap(one_prior_draw)(jax.random.split(rng_key, num))

    def constrain(u):
        tr, _ = run_at(u)
        return {name: site["value"] for name, site in tr.items()
                if _is_latent(site) or site["type"] == "deterministic"}

    # jitted so that a user's eager call runs compiled (inside jaxz's jit they are inlined)
    log_prior, log_likelihood, constrain = jax.jit(log_prior), jax.jit(log_likelihood), jax.jit(constrain)
    path = _likelihood_tempering(log_prior, log_likelihood, sample_prior=sample_prior)
    return ModelPath(path, log_prior, log_likelihood, sample_prior, constrain, sites, dim)


def is_model(target: Any) -> bool:
    """Whether ``target`` can be a NumPyro model (a callable that is not a jaxz Path)."""
    return callable(target) and not isinstance(target, Path)


__all__ = ["ModelPath", "likelihood_tempering", "is_model"]
