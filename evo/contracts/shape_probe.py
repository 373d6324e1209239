"""A stand-in for a numpy Generator when only the shapes of a task's inputs matter.

A task's `inputs(size, dtype, rng, dist)` is run with it to learn buffer shapes at bench sizes without
drawing them: float draws are constant arrays with zero strides (one element of memory, whatever the
shape), and element-wise arithmetic on them stays that way, so `rng.standard_normal(n) * scale + 1`
costs nothing at n = 2^26. Anything else (integer draws, reductions, concatenation) is computed as
numpy computes it, on the real generator where it draws: shapes come out right either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Constant(np.ndarray):
    """A zero-stride array (every element the same value) that element-wise ufuncs and `astype` keep
    zero-stride; any other operation sees a plain (read-only, broadcast) ndarray."""

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and not kwargs and ufunc.nout == 1 and all(_is_constant(x) for x in inputs):
            shape = np.broadcast_shapes(*(np.shape(x) for x in inputs))
            if 0 not in shape:
                value = ufunc(*(_element(x) for x in inputs))
                return constant(np.asarray(value), shape)
        plain = [x.view(np.ndarray) if isinstance(x, Constant) else x for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, Constant) else o for o in kwargs["out"])
        return getattr(ufunc, method)(*plain, **kwargs)

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        if self.size == 0 or not _is_constant(self):  # a copy numpy made of one (np.sort, np.concatenate)
            return self.view(np.ndarray).astype(dtype, *args, **kwargs)
        return constant(np.asarray(_element(self)).astype(dtype), self.shape)


def constant(value: np.ndarray, shape: tuple[int, ...]) -> Any:
    """`value` (a 0-d array) at every element of `shape`, in one element of memory."""
    one = np.asarray(value).reshape(1)
    return np.lib.stride_tricks.as_strided(one, shape, (0,) * len(shape)).view(Constant)


def _is_constant(x: Any) -> bool:
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return True
    return isinstance(x, np.ndarray) and all(s == 0 for s in x.strides)


def _element(x: Any) -> Any:
    """The value every element of a constant `x` has."""
    return x.view(np.ndarray)[(0,) * x.ndim] if isinstance(x, np.ndarray) else x


# numpy Generator methods that draw floats, and the position of their `size` argument
FLOAT_DRAWS = {"random": 0, "standard_normal": 0, "standard_exponential": 0, "standard_cauchy": 0,
               "normal": 2, "uniform": 2, "lognormal": 2, "laplace": 2, "logistic": 2, "gumbel": 2,
               "beta": 2, "gamma": 2, "exponential": 1, "standard_gamma": 1, "standard_t": 1, "chisquare": 1}


class ShapeProbe:
    """Stands in for a numpy Generator when only shapes matter: float draws are `Constant` zeros
    (no memory, no random numbers); anything else goes to the real generator."""

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng

    def __getattr__(self, name: str) -> Any:
        if name not in FLOAT_DRAWS:
            return getattr(self._rng, name)
        pos = FLOAT_DRAWS[name]

        def draw(*args: Any, size: Any = None, **kwargs: Any) -> Any:
            if size is None and len(args) > pos:
                size = args[pos]
            if size is None:
                return 0.0
            shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
            dtype = kwargs.get("dtype", np.float64)
            return constant(np.zeros((), dtype), shape)

        return draw
