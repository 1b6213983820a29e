"""The problems shared by the sharding checks (tests/sharding_check.py, tests/multiprocess_check.py
and tests/test_sharding.py): a 2-d Gaussian geometric path and 256 initial particles, and one
small run of each estimator (``case``) that the 2-process check and its 1-process reference
both call, so that the two sides build exactly the same computation."""
import jax
import jax.numpy as jnp
import numpy as np

import jaxz

# the estimators of the 2-process check (issue 26); the default selection runs only
# "smc_rwmh" in float32 (a cheap compile: CI time), the slow one all of these in both dtypes
ESTIMATORS = ("smc", "ais", "raise_", "particle_filter", "twisted_smc", "sgais", "arm")
DTYPES = ("float32", "float64")
# leaves allowed to differ in their last bits across layouts: sgais's particles move by
# gradients of the model's per-datum dot products, which the CPU's BLAS blocks by the shape
# of the (sharded) particle batch (model arithmetic, outside jaxz's reductions). They are held
# to ROUNDING_ULPS ulps of their largest magnitude, not skipped: measured, 2 processes against
# 1 device, the positions differ by at most 2.4e-7 (float32) and 8.9e-16 (float64), log Ẑ and
# its trace by at most 1 ulp (float64; equal in float32), every other leaf not at all.
MODEL_ROUNDING = {"sgais": ("[1].positions", "[0].log_z", "[1].log_z", "[2].log_z", "[2].log_z_increment")}
ROUNDING_ULPS = 8
# log Ẑ of the estimators listed here is held to LOG_Z_ULPS ulps of its dtype, every other
# estimator's to its bits: the log-likelihoods of particles that differ in their last bits
# differ in theirs (one float32 ulp at log Ẑ ≈ −594 in the check, after its keys changed)
LOG_Z_ULPS = {"sgais": ROUNDING_ULPS}


def within_ulps(a, b, ulps: int) -> bool:
    """|a − b| ≤ ``ulps`` ulps of the largest magnitude in ``a`` (in ``a``'s dtype), elementwise."""
    a, b = np.asarray(a), np.asarray(b)
    scale = np.spacing(np.max(np.abs(a), initial=np.finfo(a.dtype).tiny).astype(a.dtype))
    return bool(np.all(np.abs(a.astype(np.float64) - b.astype(np.float64)) <= ulps * float(scale)))


def same_log_z(name: str, a: float, b: float, dtype: str = "float32") -> bool:
    """Bit-equal log Ẑ, or within LOG_Z_ULPS[name] ulps of ``dtype`` for the estimators listed there."""
    if name not in LOG_Z_ULPS:
        return a == b
    return within_ulps(np.asarray(a, dtype), np.asarray(b, dtype), LOG_Z_ULPS[name])


def differing_leaves(name: str, plain: dict, other: dict) -> list:
    """The leaf paths whose arrays differ between two {path: numpy array} results of estimator
    ``name``: in any bit, or, for its MODEL_ROUNDING leaves, by more than ROUNDING_ULPS ulps of
    the leaf's largest magnitude in ``plain``."""
    differing = []
    for path, a in plain.items():
        b = np.asarray(other[path])
        if a.tobytes() == b.tobytes():
            continue
        if (path in MODEL_ROUNDING.get(name, ()) and a.shape == b.shape and np.issubdtype(a.dtype, np.floating)
                and within_ulps(a, b, ROUNDING_ULPS)):
            continue
        differing.append(path)
    return differing


def leaves_of(result) -> dict:
    """{leaf path: numpy array} of a gathered result."""
    return {jax.tree_util.keystr(path): np.asarray(leaf)
            for path, leaf in jax.tree_util.tree_flatten_with_path(result)[0]}


def from_fingerprint(hexes: dict, like: dict) -> dict:
    """The arrays of a ``fingerprint`` (hex of bytes), shaped and typed as the arrays of ``like``."""
    return {path: np.frombuffer(bytes.fromhex(hexes[path]), a.dtype).reshape(a.shape) for path, a in like.items()}
# state leaves along the particle axis allowed to come back whole on every device: the
# weights (N numbers) may be gathered for the fixed-order sums (issue 26), not the particles
MAY_GATHER = (".log_weights",)


def gaussian_path():
    def log_base(x):
        return -0.5 * jnp.sum(x**2) - jnp.log(2 * jnp.pi)

    def log_target(x):
        return -0.5 * jnp.sum((x - 1.0) ** 2) / 0.09

    return jaxz.paths.geometric(log_base, log_target, sample_base=lambda key, n: jax.random.normal(key, (n, 2)))


def initial_positions(dtype=jnp.float32):
    return jax.random.normal(jax.random.key(1), (256, 2), dtype)


# XLA's fusion emitters, its default, for the compared programs: the tests' process compiles with its loop emitters
# (conftest.py), under which the one-device and the 4-device programs of smc_rwmh differ in the last bit of float32
# log Z; the bits are promised for XLA's defaults
EMITTERS = {"xla_cpu_use_fusion_emitters": True}


def _bits_of_keys(tree):
    """Typed PRNG keys as their uint32 data (so that results can be gathered across processes)."""
    return jax.tree.map(lambda leaf: jax.random.key_data(leaf) if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key)
                        else leaf, tree)


def case(name: str, dtype: str, split=lambda tree: tree, layout=None):
    """(jitted function, arguments) of one run of estimator ``name`` in ``dtype``; call it inside
    ``jax.enable_x64(dtype == "float64")``. The function returns (estimate, state, trace) of
    ``jaxz.run`` (for ``arm``, of 8 independent runs: vmapped over their keys).

    split(tree): places a pytree whose leading axis is split over the devices (particles, or
    the key data of independent runs); the identity on one device.
    layout: the ``particle_sharding`` of the estimators that create their particles in init
    (particle_filter, twisted_smc); None on one device.
    """
    dtype = jnp.dtype(dtype)
    path = gaussian_path()

    def whole(estimator, *static, max_steps=None):
        """jit of key, *arrays -> (estimate, state, trace); ``static`` (particle counts) come first."""
        return jax.jit(lambda key, *arrays: _bits_of_keys(
            jaxz.run(estimator, key, *static, *arrays, max_steps=max_steps)[:3]), compiler_options=EMITTERS)

    if name == "smc_rwmh":  # adaptive schedule, a fixed random walk, 64 particles: the CI check
        estimator = jaxz.smc(path, jaxz.kernels.rwmh(path, 0.5))
        return whole(estimator, max_steps=20), (jax.random.key(0), split(initial_positions(dtype)[:64]))
    if name in ("smc", "ais", "raise_"):
        estimator = {"smc": lambda: jaxz.smc(path, jaxz.kernels.hmc(path)),
                     "ais": lambda: jaxz.ais(path, jaxz.kernels.hmc(path, 0.2, 5), jaxz.schedules.linear(20)),
                     "raise_": lambda: jaxz.raise_(path, jaxz.kernels.hmc(path, 0.2, 5), jaxz.schedules.linear(20)),
                     }[name]()
        return whole(estimator, max_steps=60), (jax.random.key(0), split(initial_positions(dtype)))
    if name == "sgais":
        from jaxz.models import streaming
        data, _ = streaming.linear_regression_data(jax.random.key(2), 400, dtype=dtype)
        sgais = jaxz.sgais(streaming.linear_log_prior, streaming.linear_log_likelihood, chunk_size=100,
                           num_particles=16, target_ess=8.0)
        prior_draws = streaming.linear_sample_prior(jax.random.key(3), 16, dtype=dtype)
        return whole(sgais), (jax.random.key(4), split(prior_draws), data)
    if name == "particle_filter":
        from jaxz.models import lgssm
        params = lgssm.default(dtype=dtype)
        _, observations = lgssm.simulate(jax.random.key(6), params, 30)
        filter_ = jaxz.particle_filter(*lgssm.particle_filter_callables(params), particle_sharding=layout)
        return whole(filter_, 128), (jax.random.key(9), observations)
    if name == "twisted_smc":
        from jaxz.models import ising
        field = 0.3 * jax.random.normal(jax.random.key(8), (4, 4), dtype)
        twisted = jaxz.twisted_smc(ising.sequential_model(ising.periodic_lattice(field, jnp.asarray(0.4, dtype))),
                                   particle_sharding=layout)
        return whole(twisted, 128), (jax.random.key(9),)
    if name == "arm":  # independent runs, their keys split over the devices
        from jaxz.models import rbm as rbm_lib
        rbm = rbm_lib.RBM(0.5 * jax.random.normal(jax.random.key(7), (8, 4), dtype), 0.1 * jnp.ones(8, dtype),
                          -0.1 * jnp.ones(4, dtype))
        arm = jaxz.arm(rbm_lib.sequential_model(rbm, np.arange(8), 2), 64, gamma_threshold=0.95, max_generate=2)
        key_data = jax.random.key_data(jax.random.split(jax.random.key(5), 8))
        runs = jax.vmap(lambda data: _bits_of_keys(jaxz.run(arm, jax.random.wrap_key_data(data))[:3]))
        return jax.jit(runs, compiler_options=EMITTERS), (split(np.asarray(key_data)),)
    raise ValueError(f"no case {name!r}")


def fingerprint(result) -> dict:
    """{leaf path: hex of its bytes} of a gathered result (numpy leaves), and the log Ẑ values."""
    return {path: array.tobytes().hex() for path, array in leaves_of(result).items()}
