"""Triton's atomic instructions as the sanitizer sees them (`fitness.check.sanitizer`): which lanes, what
memory semantics and scope, and which lanes only read.

An atomic whose operand cannot change memory, whatever the memory holds (``atomic_add(p, 0)``,
``atomic_max(p, -inf)``, a compare-and-swap whose new value is its comparand, ``atomic_load``,
``atomic_poll``), is a read: the race rules ask that whatever it reads was ordered before it
(`fitness.check.races`: the stale-read rule).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fitness.check.races import Op


@dataclass(frozen=True)
class Atomic:
    """One atomic instruction: its `Op`, pointer and mask handles, the value it stores (for the lanes
    rule; None), and per lane (flat) whether it only reads."""

    op: Op
    ptr: Any
    mask: Any
    value: Any
    read_only: np.ndarray


def decode(name: str, args: tuple[Any, ...]) -> Atomic:
    """The atomic of an interpreter builder call `name` with positional `args`."""
    shape = np.asarray(args[1 if name == "create_atomic_rmw" else 0].data).shape
    every = np.ones(int(np.prod(shape, dtype=np.int64)), dtype=bool)
    if name == "create_atomic_rmw":  # (rmw op, ptr, val, mask, sem, scope)
        op = Op("rmw", _sem(args[4]), _scope(args[5]))
        return Atomic(op, args[1], args[3], None, _rmw_reads_only(args[0], args[2], shape))
    if name == "create_atomic_cas":  # (ptr, cmp, val, sem, scope): every lane
        same = _same_bits(np.broadcast_to(np.asarray(args[1].data), shape),
                          np.broadcast_to(np.asarray(args[2].data), shape))
        return Atomic(Op("rmw", _sem(args[3]), _scope(args[4])), args[0], None, None, same.reshape(-1))
    if name == "create_atomic_load":  # (ptr, mask, sem, scope)
        return Atomic(Op("atomic_load", _sem(args[2]), _scope(args[3])), args[0], args[1], None, every)
    if name == "create_atomic_store":  # (ptr, val, mask, sem, scope)
        return Atomic(Op("atomic_store", _sem(args[3]), _scope(args[4])), args[0], args[2], args[1], ~every)
    if name == "create_atomic_poll":  # (ptr, expected, timeout, sem, scope): loads until each lane matches
        return Atomic(Op("atomic_load", _sem(args[3]), _scope(args[4])), args[0], None, None, every)
    raise ValueError(f"not an atomic: {name}")


def cas_wrote(args: tuple[Any, ...], out: Any) -> np.ndarray:
    """Per lane (flat): whether a compare-and-swap wrote (it found its comparand); one that did not
    released nothing."""
    old = np.asarray(out.data)
    return _same_bits(old, np.broadcast_to(np.asarray(args[1].data), old.shape)).reshape(-1)


def _rmw_reads_only(rmw: Any, val: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Per lane: whether a read-modify-write with this operand leaves every possible value as it was."""
    v = np.ascontiguousarray(np.broadcast_to(np.asarray(val.data), shape)).reshape(-1)
    kind = getattr(rmw, "name", "")
    if kind == "FADD" and v.dtype == np.uint16:  # bfloat16, held as its bits: +0.0 or -0.0
        return np.asarray((v & 0x7FFF) == 0)
    if kind in ("ADD", "FADD", "OR", "XOR"):
        return np.asarray(v == 0)
    if v.dtype.kind not in "iu" or v.dtype.itemsize not in (2, 4, 8):
        return np.zeros(v.shape, dtype=bool)  # (floating max and min reach here as integers: see below)
    bits = v.view(f"u{v.dtype.itemsize}")
    width = 8 * v.dtype.itemsize
    top = np.uint64((1 << width) - 1)
    sign = np.uint64(1 << (width - 1))
    inf = np.uint64({32: 0x7F800000, 64: 0x7FF0000000000000}.get(width, 0))
    if kind == "AND":
        return np.asarray(bits == top)
    if kind == "MAX":  # signed; a float max's non-negative lanes: its bits as an integer
        return np.asarray(bits == sign)
    if kind == "UMAX":
        return np.asarray(bits == 0)
    if kind == "MIN":  # signed; a float min's non-negative lanes (+inf keeps every float but NaN)
        return np.asarray((bits == sign - np.uint64(1)) | ((bits == inf) & (inf > 0)))
    if kind == "UMIN":  # unsigned; a float max's negative lanes (-inf keeps every float but NaN)
        return np.asarray((bits == top) | ((bits == (inf | sign)) & (inf > 0)))
    return np.zeros(v.shape, dtype=bool)  # XCHG


def _sem(sem: Any) -> str:
    return {"ACQUIRE": "acquire", "RELEASE": "release", "RELAXED": "relaxed"}.get(getattr(sem, "name", ""), "acq_rel")


def _scope(scope: Any) -> str:
    return {"CTA": "cta", "SYSTEM": "sys"}.get(getattr(scope, "name", ""), "gpu")


def _same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype == b.dtype and a.dtype.itemsize in (1, 2, 4, 8):
        u = f"u{a.dtype.itemsize}"
        return np.asarray(np.ascontiguousarray(a).view(u) == np.ascontiguousarray(b).view(u))
    return np.asarray(a == b)
