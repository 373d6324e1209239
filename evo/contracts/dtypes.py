"""Element types shared by the driver (numpy, no torch) and the worker (torch).

bfloat16 has no numpy type: on the host it travels as its raw uint16 bits.
"""

from __future__ import annotations

import numpy as np

# name -> (numpy storage type, is float)
_TYPES: dict[str, tuple[type[np.generic], bool]] = {
    "float64": (np.float64, True),
    "float32": (np.float32, True),
    "float16": (np.float16, True),
    "bfloat16": (np.uint16, True),
    "int64": (np.int64, False),
    "int32": (np.int32, False),
    "int16": (np.int16, False),
    "int8": (np.int8, False),
    "uint8": (np.uint8, False),
    "bool": (np.bool_, False),
}

DTYPES: tuple[str, ...] = tuple(_TYPES)
FLOAT_DTYPES: tuple[str, ...] = tuple(n for n, (_, f) in _TYPES.items() if f)


def check_dtype(name: str) -> str:
    if name not in _TYPES:
        raise ValueError(f"unknown dtype {name!r}; valid: {', '.join(DTYPES)}")
    return name


def storage_type(name: str) -> np.dtype:
    """The numpy dtype whose bytes hold elements of `name`."""
    return np.dtype(_TYPES[check_dtype(name)][0])


def is_float(name: str) -> bool:
    return _TYPES[check_dtype(name)][1]


def itemsize(name: str) -> int:
    return storage_type(name).itemsize


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float values to bfloat16 (nearest even) and return the bits."""
    f32 = np.ascontiguousarray(x, dtype=np.float32)
    bits = f32.view(np.uint32).astype(np.uint64)
    nan = np.isnan(f32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    out = rounded.astype(np.uint16)
    out[nan] = 0x7FC0
    return out


def cast(x: np.ndarray, name: str) -> np.ndarray:
    """Values of `x` rounded to `name`, in `name`'s storage type."""
    if name == "bfloat16":
        return _bf16_bits(x)
    return np.asarray(x).astype(storage_type(name))


def to_float64(x: np.ndarray, name: str) -> np.ndarray:
    """Stored elements of dtype `name` as float64 values (what the reference sees)."""
    if name == "bfloat16":
        return (np.asarray(x, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return np.asarray(x).astype(np.float64)


def from_bytes(data: bytes, name: str, shape: tuple[int, ...]) -> np.ndarray:
    return np.frombuffer(data, dtype=storage_type(name)).reshape(shape)


def numpy_name(dtype: np.dtype) -> str:
    """The dtype name of a numpy array (reference outputs)."""
    for name, (t, _) in _TYPES.items():
        if name != "bfloat16" and np.dtype(t) == dtype:
            return name
    raise ValueError(f"unsupported numpy dtype {dtype}")
