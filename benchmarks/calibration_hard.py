"""Hard rows of benchmarks/calibration.py (issue 23): the eggbox and Gaussian shells of
Feroz, Hobson & Bridges (2009, MNRAS 398, §6.1–6.2) for default, waste-free and two-pass
SMC and AIS, every one with an exact log Z.

- Eggbox: log L(x, y) = (2 + cos(x/2) cos(y/2))^5, prior uniform on [0, 10π]²: 18 modes
  (8 whole, 8 halved by an edge, 2 quartered by a corner) about 0.1 wide. log Z by a
  2-D quadrature (``eggbox_log_z``: the composite Simpson rule on a grid of spacing
  ≈ 0.005, float64; the paper's 235.88 is a nested-sampling estimate).
- Gaussian shells: L(x) = Σ_{c = ±3.5 e_1} N(|x − c|; r = 2, w = 0.1²), prior uniform on
  [−6, 6]^d. The two shells lie inside the prior box and do not overlap, so
  Z = 2 ∫ N(ρ; 2, 0.1²) S_d ρ^{d−1} dρ / 12^d with S_d = 2π^{d/2}/Γ(d/2)
  (``shell_log_z``: the radial integral by the composite Simpson rule, float64).

``rows(Row, Problem)`` returns a list of ``Row`` specs (the types of calibration.py, passed
in so that this file does not import it back). Only the public API is used.
"""
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

import jaxz

EGGBOX_SIDE = 10.0 * math.pi
SHELL_RADIUS, SHELL_WIDTH, SHELL_CENTRE, SHELL_BOX = 2.0, 0.1, 3.5, 6.0
SHELL_DIMENSIONS = (2, 5, 10, 20)
SHELL_PAPER_LOG_Z = {2: -1.75, 5: -5.67, 10: -14.59, 20: -36.09}  # Feroz et al. (2009), Table 2 "analytical"


# --------------------------------------------------------------------------------------
# Exact values
# --------------------------------------------------------------------------------------

def _simpson_weights(num: int, spacing: float) -> np.ndarray:
    """Composite Simpson weights for ``num`` (odd) equally spaced points."""
    weights = np.ones(num)
    weights[1:-1:2], weights[2:-1:2] = 4.0, 2.0
    return weights * spacing / 3.0


@functools.cache
def eggbox_log_z(num: int = 3001) -> float:
    """log ∫∫ exp((2 + cos(x/2) cos(y/2))^5) dx dy / (10π)² over [0, 10π]², by the
    composite Simpson rule on a num × num grid (float64, rows accumulated in log space)."""
    grid = np.linspace(0.0, EGGBOX_SIDE, num)
    weights = _simpson_weights(num, grid[1] - grid[0])
    cos_half = np.cos(grid / 2.0)
    peak = 3.0**5
    total = 0.0
    for start in range(0, num, 500):
        block = slice(start, min(start + 500, num))
        log_l = (2.0 + cos_half[block, None] * cos_half[None, :]) ** 5
        total += float(weights[block] @ np.exp(log_l - peak) @ weights)
    return peak + math.log(total) - 2.0 * math.log(EGGBOX_SIDE)


def shell_log_z(dim: int, num: int = 20001) -> float:
    """log Z of the two Gaussian shells in [−6, 6]^d: log of
    2 ∫ N(ρ; r, w²) S_d ρ^{d−1} dρ / 12^d, the radial integral over r ± 12 w by Simpson."""
    radius = np.linspace(SHELL_RADIUS - 12 * SHELL_WIDTH, SHELL_RADIUS + 12 * SHELL_WIDTH, num)
    weights = _simpson_weights(num, radius[1] - radius[0])
    log_normal = -0.5 * ((radius - SHELL_RADIUS) / SHELL_WIDTH) ** 2 - math.log(SHELL_WIDTH * math.sqrt(2 * math.pi))
    log_integrand = log_normal + (dim - 1) * np.log(radius)
    top = log_integrand.max()
    log_radial = top + math.log(weights @ np.exp(log_integrand - top))
    log_sphere = math.log(2.0) + 0.5 * dim * math.log(math.pi) - math.lgamma(0.5 * dim)
    return math.log(2.0) + log_radial + log_sphere - dim * math.log(2 * SHELL_BOX)


# --------------------------------------------------------------------------------------
# Paths (likelihood tempering from the uniform prior)
# --------------------------------------------------------------------------------------

def _uniform_box(low: float, high: float, dim: int):
    """log density and sampler of the uniform prior on [low, high]^dim."""
    log_volume = dim * math.log(high - low)

    def log_prior(x):
        inside = jnp.all((x >= low) & (x <= high))
        return jnp.where(inside, -jnp.asarray(log_volume, x.dtype), -jnp.inf)

    def sample(key, num, dtype=jnp.float32):
        return jax.random.uniform(key, (num, dim), dtype, low, high)

    return log_prior, sample


def eggbox_path(dtype=jnp.float32):
    log_prior, sample = _uniform_box(0.0, EGGBOX_SIDE, 2)

    def log_likelihood(x):
        return (2.0 + jnp.cos(x[0] / 2) * jnp.cos(x[1] / 2)) ** 5

    return jaxz.paths.likelihood_tempering(log_prior, log_likelihood,
                                           sample_prior=lambda key, num: sample(key, num, dtype))


def shell_path(dim: int, dtype=jnp.float32):
    log_prior, sample = _uniform_box(-SHELL_BOX, SHELL_BOX, dim)
    centre = np.zeros(dim)
    centre[0] = SHELL_CENTRE
    log_norm = -math.log(SHELL_WIDTH * math.sqrt(2 * math.pi))

    def log_likelihood(x):
        centres = jnp.stack([jnp.asarray(centre, x.dtype), jnp.asarray(-centre, x.dtype)])
        distance = jnp.sqrt(jnp.sum((x[None, :] - centres) ** 2, axis=-1))
        return jax.nn.logsumexp(log_norm - 0.5 * ((distance - SHELL_RADIUS) / SHELL_WIDTH) ** 2)

    return jaxz.paths.likelihood_tempering(log_prior, log_likelihood,
                                           sample_prior=lambda key, num: sample(key, num, dtype))


def hard_problems() -> dict:
    """name -> (path builder, dimension, exact log Z, reference text)."""
    problems = {"eggbox": (eggbox_path, 2, eggbox_log_z(), "exact (2-D Simpson quadrature, float64)")}
    for dim in SHELL_DIMENSIONS:
        problems[f"shells d={dim}"] = (lambda dtype=jnp.float32, dim=dim: shell_path(dim, dtype), dim,
                                       shell_log_z(dim), "exact (1-D radial Simpson quadrature, float64)")
    return problems


# --------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------

CONFIGURATIONS = {
    "default": dict(),
    "waste_free": dict(waste_free=True),
    "two_pass": dict(schedule="two_pass"),
}


def estimator_for(configuration: str, path, num_particles: int):
    """(estimator, max_steps) of one configuration on ``path`` with tuned HMC."""
    kernel = jaxz.kernels.hmc(path)
    if configuration == "ais":
        return jaxz.ais(path, kernel, jaxz.schedules.geometric(AIS_TEMPERATURES)), None
    return jaxz.smc(path, kernel, target_ess=0.5, **CONFIGURATIONS[configuration]), 400


AIS_TEMPERATURES = 200


def hard_row(Row, Problem, model: str, configuration: str, num_particles: int, quick: bool = True):
    def build():
        path_fn, dim, exact, reference = hard_problems()[model]
        path = path_fn(jnp.float32)
        estimator, max_steps = estimator_for(configuration, path, num_particles)

        def run(key):
            key_init, key_run = jax.random.split(key)
            positions = path.sample_base(key_init, num_particles)
            return jaxz.run(estimator, key_run, positions, max_steps=max_steps).estimate

        return Problem(run, exact, reference)

    text = {"default": "adaptive target_ess=0.5, tuned HMC", "waste_free": "waste-free, target_ess=0.5, tuned HMC",
            "two_pass": "two-pass, target_ess=0.5, tuned HMC",
            "ais": f"geometric ladder, {AIS_TEMPERATURES} temperatures, tuned HMC"}[configuration]
    return Row("ais" if configuration == "ais" else "smc", text, model, num_particles, build, quick)


def rows(Row, Problem) -> list:
    """Default, waste-free and two-pass SMC and AIS on the eggbox and the four shells.
    Default SMC at N = 500 and waste-free at N = 1000 (M = 20 chains of 50: with M = 10,
    N = 500, the eggbox row covered 0.85 with 8% of unflagged runs beyond 3 s.e.) in the
    --quick table for the eggbox and the low-dimensional shells; d = 10, 20 and the
    slower configurations (two-pass: twice the cost; AIS: 200 rungs) in --full only."""
    out = []
    for model in ("eggbox", "shells d=2", "shells d=5", "shells d=10", "shells d=20"):
        light = model in ("eggbox", "shells d=2", "shells d=5")
        out.append(hard_row(Row, Problem, model, "default", 500 if light else 1000, quick=light))
        out.append(hard_row(Row, Problem, model, "waste_free", 1000, quick=light))
        out.append(hard_row(Row, Problem, model, "two_pass", 1000, quick=False))
        out.append(hard_row(Row, Problem, model, "ais", 500, quick=False))
    return out


if __name__ == "__main__":
    print(f"eggbox log Z = {eggbox_log_z():.4f} (3001² grid), {eggbox_log_z(12001):.4f} (12001² grid)")
    for dim in SHELL_DIMENSIONS:
        print(f"shells d={dim}: log Z = {shell_log_z(dim):.4f} (paper {SHELL_PAPER_LOG_Z[dim]})")
