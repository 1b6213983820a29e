"""jaxz.approx.loopy_bp: the fixed point against its own message equations, the Bethe
log Z and twisted SMC exact on trees (seed Props. 1-2), convergence reporting."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from jaxz.approx import loopy_bp
from jaxz.approx.lbp import bethe_log_z
from jaxz.models import ising


def brute_force_log_z(edges, couplings, field):
    """log Σ_x exp(Σ_e J_e x_u x_v + Σ_i H_i x_i) over all spin vectors, float64 numpy."""
    edges, field = np.asarray(edges).reshape(-1, 2), np.asarray(field, np.float64)
    couplings = np.broadcast_to(np.asarray(couplings, np.float64), (edges.shape[0],))
    x = np.array(list(itertools.product([-1.0, 1.0], repeat=field.shape[0])))
    log_f = x @ field + (x[:, edges[:, 0]] * x[:, edges[:, 1]]) @ couplings
    return log_f.max() + np.log(np.exp(log_f - log_f.max()).sum())


def random_tree(num_variables, seed):
    """A random tree whose every node's parent has a smaller index, so that the first t
    variables always form a connected subtree (the condition of seed Prop. 2)."""
    rng = np.random.default_rng(seed)
    edges = np.array([(int(rng.integers(0, child)), child) for child in range(1, num_variables)])
    return edges, rng.normal(0.0, 0.8, num_variables - 1), rng.normal(0.0, 0.7, num_variables)


def message_equations(edges, couplings, field, log_messages):
    """One parallel sum-product update written from the definitions, float64 numpy:
    μ_{e→v}(y) ∝ Σ_x exp(J_e x y + H_u x + Σ_{e'∋u, e'≠e} log μ_{e'→u}(x)), normalized."""
    values = np.array([-1.0, 1.0])
    into = [np.zeros(2) + field[i] * values for i in range(field.shape[0])]  # log φ_i + Σ_e log μ_{e→i}
    for e, (u, v) in enumerate(edges):
        into[u] = into[u] + log_messages[e, 0]
        into[v] = into[v] + log_messages[e, 1]
    updated = np.empty_like(log_messages)
    for e, (u, v) in enumerate(edges):
        for end, (sender, received) in enumerate(((v, 1), (u, 0))):
            cavity = into[sender] - log_messages[e, received]
            message = np.log(np.exp(couplings[e] * values[:, None] * values[None, :] + cavity[:, None]).sum(axis=0))
            updated[e, end] = message - np.log(np.exp(message).sum())
    return updated


def test_loopy_bp_fixed_point_satisfies_its_message_equations_on_a_lattice():
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        model = ising.periodic_lattice(jnp.asarray(rng.uniform(-1, 1, (5, 4))), 0.4407)
        result = loopy_bp(model, max_sweeps=500, tol=1e-11)
        assert bool(result.converged) and int(result.num_sweeps) < 500
        log_messages = np.asarray(result.log_messages)
        np.testing.assert_allclose(np.exp(log_messages).sum(axis=-1), 1.0, rtol=1e-12)  # normalized
        updated = message_equations(model.edge_array, np.asarray(model.couplings), np.asarray(model.field),
                                    log_messages)
        np.testing.assert_allclose(updated, log_messages, atol=1e-9)
        # and the starting (uniform) messages are far from it: the check can fail
        assert np.max(np.abs(message_equations(model.edge_array, np.asarray(model.couplings), np.asarray(model.field),
                                               np.full_like(log_messages, -np.log(2.0))) + np.log(2.0))) > 0.1


def test_bethe_log_z_and_twisted_smc_are_exact_on_a_tree():
    """On a tree, BP converges in two sweeps to the exact messages: the Bethe log Z is
    log Z (seed Prop. 2), and twisted SMC with those messages is the optimal twist of
    Prop. 1 — every run returns Ẑ = Z, at any particle count, up to round-off."""
    edges, couplings, field = random_tree(14, seed=1)
    expected = brute_force_log_z(edges, couplings, field)
    with jax.enable_x64(True):
        model = ising.pairwise(edges, couplings, field)
        result = loopy_bp(model, tol=1e-12)
        assert bool(result.converged) and int(result.num_sweeps) <= 3  # two sweeps, and one that changes nothing
        np.testing.assert_allclose(result.log_z, expected, rtol=1e-12)
        # the optimal twist and, for contrast, ψ ≡ 1 (SMC-Base, zero log messages), one compiled sampler
        twists = jnp.stack([result.log_messages, jnp.zeros_like(result.log_messages)])

        def one_run(log_messages, key):
            estimator = jaxz.twisted_smc(ising.sequential_model(model, twist=log_messages))
            return jaxz.run(estimator, key, 4).estimate.log_z

        keys = jax.random.split(jax.random.key(0), 50)
        twisted, base = jax.jit(jax.vmap(jax.vmap(one_run, in_axes=(None, 0)), in_axes=(0, None)))(twists, keys)
        np.testing.assert_allclose(twisted, expected, rtol=0, atol=1e-10)
        assert np.std(base) > 1e-3  # without the twist the same sampler is not exact: the check can fail


def test_bethe_log_z_matches_the_free_energy_written_from_beliefs():
    """−F_Bethe from node and edge beliefs, in float64 numpy, on a loopy graph."""
    rng = np.random.default_rng(2)
    with jax.enable_x64(True):
        model = ising.periodic_lattice(jnp.asarray(rng.uniform(-1, 1, (3, 3))), 0.3)
        log_messages = np.asarray(loopy_bp(model, tol=1e-10).log_messages)
        value = float(bethe_log_z(model, jnp.asarray(log_messages)))
    edges, couplings, field = model.edge_array, np.asarray(model.couplings), np.asarray(model.field)
    values = np.array([-1.0, 1.0])
    node = field[:, None] * values
    for e, (u, v) in enumerate(edges):
        node[u] += log_messages[e, 0]
        node[v] += log_messages[e, 1]
    b_node = np.exp(node) / np.exp(node).sum(axis=1, keepdims=True)
    expected = np.sum(b_node * field[:, None] * values)
    degree = np.bincount(edges.reshape(-1), minlength=field.shape[0])
    expected += np.sum((degree - 1) * np.sum(b_node * np.log(b_node), axis=1))
    for e, (u, v) in enumerate(edges):
        energy = couplings[e] * np.outer(values, values)
        b_edge = np.exp(energy + (node[u] - log_messages[e, 0])[:, None] + (node[v] - log_messages[e, 1])[None, :])
        b_edge /= b_edge.sum()
        expected += np.sum(b_edge * energy) - np.sum(b_edge * np.log(b_edge))
    np.testing.assert_allclose(value, expected, rtol=1e-12)
    # the Bethe value is an approximation on this loopy lattice, not the exact log Z
    assert abs(value - brute_force_log_z(edges, couplings, field)) > 1e-3


def test_loopy_bp_reports_convergence_and_rejects_bad_arguments():
    model = ising.periodic_lattice(jnp.asarray(np.random.default_rng(3).uniform(-1, 1, (4, 4)), jnp.float32), 0.4407)
    stopped = loopy_bp(model, max_sweeps=1, tol=1e-6)
    assert int(stopped.num_sweeps) == 1 and not bool(stopped.converged) and float(stopped.max_change) >= 1e-6
    assert stopped.log_messages.shape == (32, 2, 2) and stopped.log_messages.dtype == jnp.float32
    with pytest.raises(ValueError, match="max_sweeps"):
        loopy_bp(model, max_sweeps=0)
    with pytest.raises(ValueError, match="tol"):
        loopy_bp(model, tol=0.0)
    with pytest.raises(ValueError, match="twist"):
        ising.sequential_model(model, twist=jnp.zeros((3, 2, 2)))
