"""Guard zones and poison: the byte patterns around and inside every buffer the candidate sees.

Each tensor lives inside a larger storage: ``guard | data | guard``. Guards hold a repeating
pattern of NaN, +huge and -huge (ints: max, min, -1), so an out-of-bounds *load* spoils a sum, a
max or a min alike, and an out-of-bounds *store* changes bytes the driver checks afterwards
(the Triton interpreter does no bounds checking). Outputs start poisoned: NaN on the first run,
an odd finite value on the second, zero on others, so an element never written is caught whatever it
is compared with. The worker only lays buffers out; every check happens in the driver.
"""

from __future__ import annotations

import numpy as np

from evo.contracts import dtypes

GUARD_BYTES = 64 * 1024


def guard_elems(dtype: str) -> int:
    return max(GUARD_BYTES // dtypes.itemsize(dtype), 1)


def _pattern_values(dtype: str) -> np.ndarray:
    st = dtypes.storage_type(dtype)
    if dtype == "bfloat16":
        return np.array([0x7FC1, 0x7F00, 0xFF00], dtype=np.uint16)  # NaN, +1.7e38, -1.7e38
    if dtypes.is_float(dtype):
        big = np.finfo(st).max / 2
        return np.array([np.nan, big, -big], dtype=st)
    if dtype == "bool":
        return np.array([True], dtype=st)
    info = np.iinfo(st)
    return np.array([info.max, info.min, -1 if info.min < 0 else info.max // 3], dtype=st)


def guard(dtype: str) -> np.ndarray:
    """The guard zone content of one side of a buffer of `dtype`."""
    n = guard_elems(dtype)
    values = _pattern_values(dtype)
    return np.resize(values, n)


NAN, ODD, ZERO = 0, 1, 2  # the kinds of poison outputs are filled with; see `poison`


def poison(dtype: str, run: int) -> np.ndarray:
    """A one-element array holding the poison of kind `run` (`NAN`: NaN-like, `ODD`: an odd finite value,
    `ZERO`: zero, what a user's fresh buffer often holds: a kernel that reads its output before writing it
    and branches on a NaN or an odd value finds neither there)."""
    st = dtypes.storage_type(dtype)
    if run == ZERO:
        return np.zeros(1, dtype=st)
    if dtype == "bfloat16":
        return np.array([0x7FD5 if run == 0 else 0x45F3], dtype=np.uint16)  # NaN payload / 7776.0
    if dtypes.is_float(dtype) and run == 0:
        # a NaN with an unusual payload, unlike any NaN arithmetic produces
        bits = {np.float16: (0x7E5A, np.uint16), np.float32: (0x7FC0DEAD, np.uint32),
                np.float64: (0x7FF8DEADBEEF0000, np.uint64)}[st.type]
        return np.array([bits[0]], dtype=bits[1]).view(st)
    if dtypes.is_float(dtype):
        return np.array([7776.0], dtype=st)
    if dtype == "bool":
        return np.array([run == 0], dtype=st)
    info = np.iinfo(st)
    return np.array([info.max - 3 if run == 0 else info.min + 5], dtype=st)


def numel(shape: tuple[int, ...] | list[int]) -> int:
    return int(np.prod(shape, dtype=np.int64)) if len(shape) else 1


def layout(data: np.ndarray, dtype: str) -> np.ndarray:
    """The full guarded storage (flat, storage type) holding `data`."""
    g = guard(dtype)
    return np.concatenate([g, np.ascontiguousarray(data).reshape(-1), g])


def filled(shape: tuple[int, ...] | list[int], dtype: str, run: int) -> np.ndarray:
    """An array of `shape` (storage type) holding the poison of `run` everywhere (np.full: np.resize
    of one element takes seconds at bench sizes)."""
    p = poison(dtype, run)
    return np.full(tuple(shape), p[0], dtype=p.dtype)


def poisoned(shape: tuple[int, ...], dtype: str, run: int) -> np.ndarray:
    g = guard(dtype)
    return np.concatenate([g, filled((numel(shape),), dtype, run), g])


def split(storage: bytes, dtype: str, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(front guard, data with `shape`, back guard) of a storage returned by the worker."""
    flat = np.frombuffer(storage, dtype=dtypes.storage_type(dtype))
    n, g = numel(shape), guard_elems(dtype)
    if flat.size != n + 2 * g:
        raise ValueError(f"storage has {flat.size} elements, expected {n + 2 * g}")
    return flat[:g], flat[g : g + n].reshape(shape), flat[g + n :]


def guards_intact(storage: bytes, dtype: str, shape: tuple[int, ...]) -> bool:
    front, _, back = split(storage, dtype, shape)
    g = guard(dtype)
    return front.tobytes() == g.tobytes() and back.tobytes() == g.tobytes()
