"""Type aliases shared across jaxz."""
from typing import Any, Callable

import jax

Array = jax.Array
ArrayTree = Any  # a pytree whose leaves are arrays
PRNGKey = jax.Array
LogDensityFn = Callable[..., Array]

__all__ = ["Array", "ArrayTree", "PRNGKey", "LogDensityFn"]
