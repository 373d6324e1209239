"""Comparing a candidate's output with the float64 reference, with a graded error for search.

An element passes when ``|out - ref| <= atol * rms(ref) + rtol * |ref|`` (see `evo.contracts.task`); NaN
matches NaN and an infinity the same infinity. Integer and bool outputs must match exactly. The
graded error is the mean over elements of ``0`` (pass) or ``1 + log2(|out - ref| / tolerance)``
(capped at 33): zero iff the output passes, smaller when fewer elements are off or they are off by
less, so a STOKE chain can walk through wrong programs back to right ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evo.contracts import dtypes
from evo.contracts.task import Tolerance

_CAP = 33.0


@dataclass(frozen=True)
class Diff:
    elements: int
    mismatches: int
    max_ratio: float
    max_abs: float
    graded: float  # mean per-element error, 0 iff pass
    first_bad: tuple[int, ...] | None = None
    got: float = 0.0
    want: float = 0.0
    exact: bool = False  # an integer or bool output: no tolerance

    @property
    def ok(self) -> bool:
        return self.mismatches == 0

    def describe(self) -> str:
        if self.ok:
            return "matches"
        at = f" e.g. at index {list(self.first_bad)}: got {self.got:.6g}, expected {self.want:.6g}" if (
            self.first_bad is not None) else ""
        if self.exact:
            return (f"{self.mismatches} of {self.elements} elements differ (an integer output must match exactly; "
                    f"max abs error {self.max_abs:.3g}){at}")
        return (f"{self.mismatches} of {self.elements} elements outside tolerance "
                f"(worst {self.max_ratio:.3g}x the tolerance, max abs error {self.max_abs:.3g}){at}")


def rms(x: np.ndarray) -> float:
    finite = x[np.isfinite(x)]
    if finite.size == 0:
        return 1.0
    value = float(np.sqrt(np.mean(np.square(finite))))
    return value if value > 0 else 1.0


def _as_values(out: np.ndarray, dtype: str) -> np.ndarray:
    return dtypes.to_float64(out, dtype) if dtypes.is_float(dtype) else out


def compare(out: np.ndarray, dtype: str, expected: np.ndarray, tol: Tolerance) -> Diff:
    """`out` is in `dtype`'s storage type, `expected` in float64 (or the exact integer type)."""
    got = _as_values(out, dtype)
    n = int(got.size)
    if n == 0:
        return Diff(0, 0, 0.0, 0.0, 0.0)
    if not dtypes.is_float(dtype):
        bad = got != expected.astype(got.dtype)
        mism = int(bad.sum())
        first = tuple(int(i) for i in np.argwhere(bad)[0]) if mism else None
        return Diff(n, mism, float("inf") if mism else 0.0,
                    float(np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64)))),
                    mism / n, first,
                    float(got[first]) if first is not None else 0.0,
                    float(expected[first]) if first is not None else 0.0, exact=True)
    ref = expected.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        tolerance = tol.atol * rms(ref) + tol.rtol * np.abs(ref)
        diff = np.abs(got - ref)
        special = (np.isnan(got) & np.isnan(ref)) | (np.isinf(ref) & (got == ref))
        ok = (diff <= tolerance) | special
        ratio = np.where(ok, 0.0, np.where(tolerance > 0, diff / np.where(tolerance > 0, tolerance, 1), np.inf))
        ratio = np.where(np.isnan(ratio), np.inf, ratio)
    bad = ~ok
    mism = int(bad.sum())
    with np.errstate(divide="ignore"):
        per = np.where(bad, 1.0 + np.minimum(np.log2(np.maximum(ratio, 1.0)), _CAP - 1), 0.0)
    finite_diff = diff[np.isfinite(diff) & bad]
    first = tuple(int(i) for i in np.argwhere(bad)[0]) if mism else None
    return Diff(
        elements=n,
        mismatches=mism,
        max_ratio=float(ratio.max()) if mism else 0.0,
        max_abs=float(finite_diff.max()) if finite_diff.size else (float("inf") if mism else 0.0),
        graded=float(per.mean()),
        first_bad=first,
        got=float(got[first]) if first is not None else 0.0,
        want=float(ref[first]) if first is not None else 0.0,
    )


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise bitwise equality (NaN payloads included)."""
    n = a.size
    x = np.ascontiguousarray(a).reshape(-1).view(np.uint8).reshape(n, -1)
    y = np.ascontiguousarray(b).reshape(-1).view(np.uint8).reshape(n, -1)
    return np.asarray((x == y).all(axis=1)).reshape(a.shape)
