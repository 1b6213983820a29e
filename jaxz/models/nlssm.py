"""The nonlinear state-space model of the lecture notes (Kitagawa 1996; Gordon, Salmond
& Smith 1993), the classic test of the bootstrap particle filter:

    x_1 ~ N(0, σ_1²)
    x_t = x_{t−1}/2 + 25 x_{t−1} / (1 + x_{t−1}²) + 8 cos(1.2 t) + v_t,   v_t ~ N(0, σ_v²)
    y_t = x_t² / 20 + w_t,                                                w_t ~ N(0, σ_w²)

with σ_1² = 5, σ_v² = 10, σ_w² = 1 by default. The transition depends on t, so one
particle is the pair ``State(x, t)``: the time travels with the particle and the
callables keep the one-particle signatures of ``jaxz.particle_filter``. There is no
closed-form likelihood; the state is one-dimensional, so a fine grid gives a
near-exact reference (see the tests).
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxz.types import Array, PRNGKey

INITIAL_VAR = 5.0
TRANSITION_VAR = 10.0
OBSERVATION_VAR = 1.0


class State(NamedTuple):
    x: Array  # scalar state value
    t: Array  # int32 time index, 1-based


def transition_mean(x: Array, t: Array) -> Array:
    """E[x_t | x_{t−1}] = x_{t−1}/2 + 25 x_{t−1}/(1 + x_{t−1}²) + 8 cos(1.2 t)."""
    return 0.5 * x + 25.0 * x / (1.0 + x**2) + 8.0 * jnp.cos(1.2 * t.astype(x.dtype))


def sample_initial(rng_key: PRNGKey, initial_var=INITIAL_VAR, dtype=float) -> State:
    """x_1 ~ N(0, σ_1²) at t = 1."""
    x = jnp.sqrt(jnp.asarray(initial_var, dtype)) * jax.random.normal(rng_key, (), dtype=dtype)
    return State(x, jnp.int32(1))


def sample_transition(rng_key: PRNGKey, state: State, transition_var=TRANSITION_VAR) -> State:
    """x_t ~ N(transition_mean(x_{t−1}, t), σ_v²), t = t_prev + 1."""
    t = state.t + 1
    noise = jax.random.normal(rng_key, (), dtype=state.x.dtype)
    return State(transition_mean(state.x, t) + jnp.sqrt(jnp.asarray(transition_var, state.x.dtype)) * noise, t)


def log_observation(state: State, y: Array, observation_var=OBSERVATION_VAR) -> Array:
    """log N(y_t; x_t²/20, σ_w²)."""
    residual = y - state.x**2 / 20.0
    return -0.5 * residual**2 / observation_var - 0.5 * jnp.log(2.0 * jnp.pi * observation_var)


def simulate(rng_key: PRNGKey, num_steps: int, dtype=float,
             initial_var=INITIAL_VAR, transition_var=TRANSITION_VAR, observation_var=OBSERVATION_VAR):
    """Draw (x_{1:T}, y_{1:T}), each of shape (T,)."""
    key_init, key_scan = jax.random.split(rng_key)
    first = sample_initial(key_init, initial_var, dtype)

    def body(state, key):
        key_observation, key_transition = jax.random.split(key)
        noise = jax.random.normal(key_observation, (), dtype=dtype)
        y = state.x**2 / 20.0 + jnp.sqrt(jnp.asarray(observation_var, dtype)) * noise
        return sample_transition(key_transition, state, transition_var), (state.x, y)

    _, (states, observations) = jax.lax.scan(body, first, jax.random.split(key_scan, num_steps))
    return states, observations


__all__ = [
    "State",
    "INITIAL_VAR",
    "TRANSITION_VAR",
    "OBSERVATION_VAR",
    "transition_mean",
    "sample_initial",
    "sample_transition",
    "log_observation",
    "simulate",
]
