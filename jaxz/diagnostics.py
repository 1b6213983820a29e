"""Chain diagnostics: integrated autocorrelation time and effective sample size."""
import jax.numpy as jnp
import numpy as np

from jaxz import _checks
from jaxz.types import Array


def autocorrelation(chain: Array) -> Array:
    """Normalized autocorrelation ρ(t) of a scalar chain (axis 0 = time), by FFT.
    Extra trailing axes are independent chains/coordinates."""
    n = chain.shape[0]
    centred = chain - jnp.mean(chain, axis=0)
    size = 1 << (2 * n - 1).bit_length()  # a power of two >= 2n, from the static shape (jittable)
    spectrum = jnp.fft.rfft(centred, n=size, axis=0)
    acov = jnp.fft.irfft(spectrum * jnp.conj(spectrum), n=size, axis=0)[:n]
    return acov / acov[0]


def integrated_autocorrelation_time(chain: Array, window_factor: float = 5.0) -> Array:
    """τ = 1 + 2 Σ_{t≥1} ρ(t), summed up to Sokal's automatic window: the smallest M
    with M ≥ ``window_factor`` · τ(M). Axis 0 is time (at least 2 steps).

    ``chain`` must be finite and ``window_factor`` a finite number > 0: concrete values
    that are not are a ValueError; traced ones give nan."""
    if np.ndim(chain) == 0 or np.shape(chain)[0] < 2:
        raise ValueError(f"chain must have a time axis (axis 0) of at least 2 steps, got shape {np.shape(chain)}")
    _checks.finite("chain", chain)
    _checks.positive_scalar("window_factor", window_factor)
    rho = autocorrelation(chain)
    tau_partial = 2.0 * jnp.cumsum(rho, axis=0) - 1.0
    lags = jnp.arange(rho.shape[0]).reshape((-1,) + (1,) * (rho.ndim - 1))
    in_window = lags < window_factor * tau_partial
    window = jnp.minimum(jnp.argmin(in_window, axis=0), rho.shape[0] - 1)
    tau = jnp.take_along_axis(tau_partial, window[None], axis=0)[0]
    return jnp.where(window_factor > 0, tau, jnp.nan)  # a traced window_factor <= 0 would read τ(0) = 1


def effective_sample_size(chain: Array) -> Array:
    """ESS of a chain: n / τ (axis 0 is time)."""
    return chain.shape[0] / integrated_autocorrelation_time(chain)
