"""Mantissa truncation of float32 values: how the CPU check makes a result as inexact as the GPU's.

A TF32 tensor-core dot keeps 10 of float32's 23 mantissa bits of its operands, and an approximate
special-function instruction (libdevice's `fast_tanhf`, `tanh.approx.f32`) about 11 of its result; the
interpreter computes both exactly, so without this a kernel would pass a tolerance here that it fails there.
"""

from __future__ import annotations

import numpy as np

FLOAT32_MANTISSA_BITS = 23


def keep_mantissa_bits(data: np.ndarray, keep: int) -> np.ndarray:
    """float32 values with all but the `keep` high bits of their 23-bit mantissa set to zero (truncation
    towards zero; inf and nan stay so)."""
    if not 0 <= keep <= FLOAT32_MANTISSA_BITS:
        raise ValueError(f"keep must be within 0..{FLOAT32_MANTISSA_BITS}, not {keep}")
    bits = np.ascontiguousarray(data, dtype=np.float32).view(np.uint32)
    mask = (0xFFFFFFFF << (FLOAT32_MANTISSA_BITS - keep)) & 0xFFFFFFFF
    return (bits & np.uint32(mask)).view(np.float32)
