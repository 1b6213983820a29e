"""Argument checks shared across jaxz: a bad argument fails where it is passed, with a
ValueError that names it and the accepted range (DESIGN.md §4, "Bad arguments fail at
construction"). Values under tracing (``jit`` / ``vmap``) cannot be inspected: the value
checks here pass a ``jax.core.Tracer`` through unchecked; shapes and dtypes are static and
checked all the same, and a count (``integer``), which sets a shape, cannot be traced."""
import jax
import jax.numpy as jnp
import numpy as np


def is_traced(value) -> bool:
    """True when any leaf of ``value`` is a tracer (its numbers are not known yet)."""
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(value))


def integer(name: str, value, minimum: int = 1, what: str = "") -> int:
    """``value`` as a Python int, refusing non-integers (2.5 would silently become 2),
    booleans and values below ``minimum``. ``what`` says what the count counts."""
    detail = f" ({what})" if what else ""
    if isinstance(value, jax.core.Tracer):  # a count sets a shape: it cannot be a traced value
        raise ValueError(f"{name} must be a Python int >= {minimum}{detail} (static: it sets a shape), got a "
                         f"traced {value.aval}: close over it or mark it static under jit")
    if isinstance(value, (bool, np.bool_)) or np.ndim(value) != 0:
        raise ValueError(f"{name} must be an integer >= {minimum}{detail}, got {value!r}")
    try:
        as_int = int(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be an integer >= {minimum}{detail}, got {value!r}") from None
    if as_int != value or as_int < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}{detail}, got {value!r}")
    return as_int


def real(name: str, value):
    """Refuse complex numbers, which ``astype(float)`` would silently make real."""
    if jnp.iscomplexobj(value):
        raise ValueError(f"{name} must be real (a floating array), got the complex dtype {jnp.result_type(value)}")
    return value


def finite(name: str, value) -> None:
    """Every entry of a concrete (array or pytree) ``value`` finite; a traced one passes."""
    if is_traced(value):
        return
    for leaf in jax.tree.leaves(value):
        array = np.asarray(leaf)
        if jnp.iscomplexobj(array):
            real(name, array)
        if not np.all(np.isfinite(array.astype(np.float64) if array.dtype.kind in "biu" else array)):
            raise ValueError(f"{name} must be finite (no nan or inf entries)")


def floating(name: str, value) -> None:
    """A floating array (float32 or float64), not an integer or bool one, which would meet
    float updates inside a scan ("carry types differ"); the dtype is static, so this also
    runs under tracing."""
    dtype = value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype
    if dtype.kind in "biu":
        raise ValueError(f"{name} must be a floating array (float32 or float64), got {dtype}")


def positive_scalar(name: str, value) -> None:
    """One number (shape (), checked also under tracing), finite and > 0 where concrete."""
    if np.ndim(value) != 0:
        raise ValueError(f"{name} must be a scalar (one number), got shape {np.shape(value)}")
    positive(name, value)


def positive(name: str, value) -> None:
    """Every entry of a concrete ``value`` finite and > 0; a traced one passes."""
    if is_traced(value):
        return
    array = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(array) & (array > 0)):
        raise ValueError(f"{name} must be finite and > 0, got {value if array.size <= 8 else 'an array'}")


def positive_definite(name: str, matrix, *, symmetric_tolerance: float | None = None) -> None:
    """A concrete square ``matrix`` that is symmetric (to a relative tolerance of 100·eps
    of its dtype, or ``symmetric_tolerance``) and positive definite (its Cholesky factor
    exists): covariances, precisions, inverse mass matrices. A traced one passes."""
    if is_traced(matrix):
        return
    array = np.asarray(matrix)
    real(name, array)
    if array.ndim != 2 or array.shape[0] != array.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {array.shape}")
    finite(name, array)
    array = array.astype(np.float64)
    if symmetric_tolerance is None:
        dtype = np.asarray(matrix).dtype
        eps = np.finfo(dtype).eps if np.issubdtype(dtype, np.floating) else np.finfo(np.float64).eps
        symmetric_tolerance = 100 * eps
    scale = max(np.max(np.abs(array)), np.finfo(np.float64).tiny)
    if np.max(np.abs(array - array.T)) > symmetric_tolerance * scale:
        raise ValueError(f"{name} must be symmetric, got max |A - A^T| = {np.max(np.abs(array - array.T)):.3g}")
    try:
        np.linalg.cholesky(array)
    except np.linalg.LinAlgError:
        smallest = np.linalg.eigvalsh(array)[0]
        raise ValueError(f"{name} must be positive definite, got smallest eigenvalue {smallest:.3g}") from None


def inverse_mass_matrix(name: str, value) -> None:
    """A concrete inverse mass matrix: diagonal (d,) with entries > 0, or dense (d, d)
    symmetric positive definite. HMC's kinetic energy ½ pᵀ M⁻¹ p is a Gaussian only
    then; otherwise the sampler silently targets the wrong distribution."""
    if value is None or is_traced(value):
        return
    ndim = np.ndim(value)
    if ndim == 1:
        positive(f"{name} (a diagonal)", value)
    elif ndim == 2:
        positive_definite(name, value)
    else:
        raise ValueError(f"{name} must be a diagonal (d,) or dense (d, d) matrix, got shape {np.shape(value)}")


def base_draws(path):
    """The shapes and dtypes (``jax.ShapeDtypeStruct`` leaves) of ``path.sample_base(key, 2)``,
    traced with ``jax.eval_shape`` (nothing is drawn); None without a sampler, or for one that
    needs a legacy key or concrete values (the run then says what)."""
    if path.sample_base is None:
        return None
    try:
        return jax.eval_shape(lambda key: path.sample_base(key, 2), jax.random.key(0))
    except Exception:
        return None


def positions_for_path(path, positions, beta=0.0, name: str = "positions") -> None:
    """``positions`` shaped as the path expects: each leaf of rank 1 + the rank of one
    particle. The expected ranks come from ``path.sample_base`` when it exists (traced
    with ``jax.eval_shape``, nothing is drawn); otherwise a wrong rank shows as an
    IndexError/TypeError of ``path.log_density`` on one particle, turned into a
    ValueError that says what was passed (a raw JAX IndexError says neither)."""
    got = jax.tree.leaves(positions)
    expected = jax.tree.leaves(base_draws(path))  # none without a usable sampler
    if len(expected) == len(got):
        for want, leaf in zip(expected, got):
            if want.ndim != np.ndim(leaf):
                example = ("n",) + tuple(want.shape[1:])
                raise ValueError(
                    f"{name} must have shape (num_particles, ...) as path.sample_base(key, n) returns, "
                    f"i.e. {example} (rank {want.ndim}), got shape {np.shape(leaf)} (rank {np.ndim(leaf)}): "
                    f"pass path.sample_base(key, n)")
    one = jax.tree.map(lambda leaf: leaf[0], positions)
    try:
        jax.eval_shape(path.log_density, one, jnp.asarray(beta))
    except (IndexError, TypeError) as error:
        shapes = [np.shape(leaf) for leaf in got]
        raise ValueError(
            f"path.log_density failed on one particle of {name} (leaf shapes {shapes}, leading axis = particles): "
            f"{type(error).__name__}: {error}. Are the positions of the wrong rank? Pass path.sample_base(key, n) "
            f"or an array of shape (num_particles, *particle_shape)") from error


def floating_positions(path, kernel, positions, beta, name: str = "positions") -> None:
    """Integer or bool ``positions`` only where the kernel and path move them (a discrete
    kernel such as ``jaxz.kernels.gibbs`` takes int8 spins): otherwise a ValueError naming
    ``name`` and the dtype, not JAX's "dtype argument to `normal` must be a float" from
    inside the kernel (or a blamed rank). One kernel move on one particle is traced with
    ``jax.eval_shape`` (nothing runs), and only for non-floating positions; a move that
    fails for floating positions of the same shapes is left to the other checks."""
    leaves = jax.tree.leaves(positions)
    dtypes = [jnp.result_type(leaf) for leaf in leaves]
    wrong = [dtype for dtype in dtypes if dtype.kind in "biu"]
    if not wrong or any(np.ndim(leaf) == 0 or np.shape(leaf)[0] == 0 for leaf in leaves):
        return  # no particle axis: the particle-count check says what
    beta = jnp.asarray(beta, jnp.result_type(float))

    def one_move(one, beta, key):
        path.log_density(one, beta)
        return kernel.step(key, kernel.init(one, beta), beta)

    one = jax.tree.map(lambda leaf: leaf[0], positions)
    try:
        jax.eval_shape(one_move, one, beta, jax.random.key(0))
    except Exception as error:
        as_float = jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(jnp.shape(leaf), jnp.result_type(float)), one)
        try:
            jax.eval_shape(one_move, as_float, beta, jax.random.key(0))
        except Exception:
            return  # not the dtype: the shape checks that follow say what
        raise ValueError(f"{name} must be a floating array (float32 or float64), got {wrong[0]}: the kernel cannot "
                         f"move it ({type(error).__name__}: {str(error).splitlines()[0]}); pass "
                         f"{name}.astype(float), or use a discrete kernel (jaxz.kernels.gibbs) for integer "
                         "states") from None


def schedule_valid(betas):
    """True for a concrete schedule (``schedules.validate`` checked it at construction);
    for a traced one, a traced bool: does it increase strictly from 0 to 1?"""
    if not isinstance(betas, jax.core.Tracer):
        return True
    return (betas[0] == 0.0) & (betas[-1] == 1.0) & jnp.all(jnp.diff(betas) > 0)


def fraction(name: str, value):
    """A fraction in (0, 1], returned as a float; a traced value (a hyper-parameter swept
    under vmap) passes unchecked and is returned as it is."""
    if isinstance(value, jax.core.Tracer):
        return value
    if np.ndim(value) != 0:
        raise ValueError(f"{name} must be a scalar in (0, 1], got shape {np.shape(value)}")
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}") from None
    if not 0.0 < value <= 1.0:
        raise ValueError(f"{name} must be in (0, 1], got {value}")
    return value


def batch_size(value):
    """None (all particles at once) or a positive int, the particles per chunk of a
    chunked ``vmap``; returned as an int."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"batch_size must be None or an int >= 1 (particles per chunk), got {value!r}")
    return int(value)


def path(value) -> None:
    """A ``jaxz.paths.Path`` whose parts are usable: a callable log_density and a finite
    log_z0 (when concrete)."""
    if not callable(getattr(value, "log_density", None)):
        raise ValueError(f"path must be a jaxz.paths.Path with a callable log_density, got {type(value).__name__}")
    log_z0 = value.log_z0
    if not isinstance(log_z0, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(log_z0, float))):
        raise ValueError(f"path.log_z0 must be finite (log Z of the base, beta = 0), got {log_z0}")


def scalar_function(name: str, fn, *args) -> None:
    """``fn(*args)`` (one particle) must return a floating scalar: a clear error at init
    instead of a shape error deep inside a vmap (``None``, a vector, an int). Traced with
    ``jax.eval_shape``: nothing is evaluated."""
    try:
        out = jax.eval_shape(fn, *args)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} failed on one particle: {error}") from error
    if not hasattr(out, "shape") or out.shape != () or not jnp.issubdtype(out.dtype, jnp.floating):
        got = type(out).__name__ if not hasattr(out, "shape") else f"shape {out.shape}, dtype {out.dtype}"
        raise ValueError(f"{name} must return a floating scalar for one particle, got {got}")
