"""The generalized leapfrog of Riemannian-manifold HMC (Girolami & Calderhead 2011,
eqs. 16–18), as an integrator for ``blackjax.rmhmc``'s ``integrator=`` slot.

With H(x, p) = −log π(x) + ½ log|G(x)| + ½ pᵀ G(x)⁻¹ p (blackjax's Riemannian kinetic
energy), one step of size ε is

    p' = p − ε/2 ∇ₓH(x, p')                      (implicit in p', x fixed)     (16)
    x' = x + ε/2 [G(x)⁻¹ + G(x')⁻¹] p'            (implicit in x')             (17)
    p'' = p' − ε/2 ∇ₓH(x', p')                    (explicit)                    (18)

with ∇ₓ of the kinetic part ½ tr(G⁻¹ ∂G) − ½ uᵀ ∂G u, u = G⁻¹p, taken as ONE
vector–Jacobian product of ``metric_fn`` against ½(G⁻¹ − u uᵀ). So (16)'s fixed-point
iterations reuse one Cholesky factor of G(x) and one ``jax.vjp`` and cost two triangular
solves each; (17)'s iterations cost a factorization of G(x') each. blackjax's default
implicit midpoint instead re-differentiates the whole Hamiltonian (metric, Cholesky and
log-determinant) in every iteration of a joint (x, p) fixed point.

The scheme is reversible and volume-preserving only where the fixed points are solved.
A step whose iterations have not met ``tolerance`` after ``max_iterations`` (or went
non-finite) ends the trajectory as a failure: the state keeps its start and its log
density becomes −inf, so the Metropolis test rejects the proposal, instead of accepting
an unsolved step as blackjax's implicit midpoint does.
"""
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from blackjax.mcmc.integrators import IntegratorState


def generalized_leapfrog(metric_fn, *, max_iterations: int = 20, tolerance: float = 1e-8):
    """An integrator factory ``(logdensity_fn, kinetic_energy_fn) -> one_step`` for
    ``blackjax.rmhmc(..., integrator=...)``.

    metric_fn: x ↦ G(x), (d, d) symmetric positive definite, for a position x that
        flattens to d numbers (the same callable blackjax is given as ``mass_matrix``).
    max_iterations: fixed-point iterations allowed for (16) and for (17).
    tolerance: convergence when the largest change of an iterate, relative to
        max(1, its largest entry), is below this.
    """
    if int(max_iterations) < 1:
        raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
    if not float(tolerance) > 0:
        raise ValueError(f"tolerance must be > 0, got {tolerance}")
    max_iterations = int(max_iterations)

    def integrator(logdensity_fn, kinetic_energy_fn):
        del kinetic_energy_fn  # the kinetic part is formed from metric_fn directly (same H)

        def one_step(state: IntegratorState, step_size) -> IntegratorState:
            flat_position, unravel = ravel_pytree(state.position)
            flat_momentum, unravel_momentum = ravel_pytree(state.momentum)
            dtype = flat_position.dtype
            size = flat_position.shape[0]
            identity = jnp.eye(size, dtype=dtype)
            half = 0.5 * step_size

            log_density_and_grad = jax.value_and_grad(lambda y: logdensity_fn(unravel(y)))

            def metric(y):
                return jnp.asarray(metric_fn(unravel(y)), dtype)

            def metric_parts(x):
                """Cholesky factor of G(x), G(x)⁻¹ and the vjp of x ↦ G(x)."""
                value, pullback = jax.vjp(metric, x)
                cholesky = jnp.linalg.cholesky(value)
                inverse = jax.scipy.linalg.cho_solve((cholesky, True), identity)
                return cholesky, inverse, pullback

            def kinetic_gradient(parts, p):
                """∇ₓ[½ log|G| + ½ pᵀG⁻¹p] = vjp(½ G⁻¹ − ½ u uᵀ), u = G⁻¹p."""
                cholesky, inverse, pullback = parts
                u = jax.scipy.linalg.cho_solve((cholesky, True), p)
                return pullback(0.5 * (inverse - jnp.outer(u, u)))[0]

            def velocity(cholesky, p):  # G⁻¹p from G's Cholesky factor
                return jax.scipy.linalg.cho_solve((cholesky, True), p)

            def solve(update, start):
                """Fixed point of ``update`` from ``start``; (value, converged)."""

                def change(new, old):
                    return jnp.max(jnp.abs(new - old)) / jnp.maximum(1.0, jnp.max(jnp.abs(new)))

                def cond(carry):
                    iteration, _, delta = carry
                    return (iteration < max_iterations) & (delta > tolerance) & jnp.isfinite(delta)

                def body(carry):
                    iteration, value, _ = carry
                    new = update(value)
                    return iteration + 1, new, change(new, value)

                first = update(start)
                _, value, delta = jax.lax.while_loop(cond, body, (1, first, change(first, start)))
                return value, jnp.isfinite(delta) & (delta <= tolerance)

            x, p = flat_position, flat_momentum
            log_density_gradient = ravel_pytree(state.logdensity_grad)[0]
            parts = metric_parts(x)
            # (16): p' = p − ε/2 [−∇log π(x) + ∇ₓT(x, p')]
            p_half, momentum_ok = solve(
                lambda q: p - half * (kinetic_gradient(parts, q) - log_density_gradient), p
            )
            # (17): x' = x + ε/2 [G(x)⁻¹ + G(x')⁻¹] p'
            # (17)'s iterations need only the factor of G(x'), not its inverse or vjp
            start_velocity = velocity(parts[0], p_half)
            x_new, position_ok = solve(
                lambda y: x + half * (start_velocity + velocity(jnp.linalg.cholesky(metric(y)), p_half)),
                x + step_size * start_velocity,
            )
            # (18): p'' = p' − ε/2 [−∇log π(x') + ∇ₓT(x', p')]
            log_density, gradient = log_density_and_grad(x_new)
            p_new = p_half - half * (kinetic_gradient(metric_parts(x_new), p_half) - gradient)

            # a failed solve (or an earlier failed step: log density −inf) ends the trajectory
            ok = momentum_ok & position_ok & jnp.isfinite(state.logdensity) & jnp.isfinite(log_density)
            ok = ok & jnp.all(jnp.isfinite(x_new)) & jnp.all(jnp.isfinite(p_new))
            x_new = jnp.where(ok, x_new, x)
            p_new = jnp.where(ok, p_new, p)
            log_density = jnp.where(ok, log_density, -jnp.inf)
            gradient = jnp.where(ok, gradient, log_density_gradient)
            return IntegratorState(unravel(x_new), unravel_momentum(p_new), log_density, unravel(gradient))

        return one_step

    return integrator


__all__ = ["generalized_leapfrog"]
