"""Masked-off lanes of a load without ``other`` are undefined on a GPU; the interpreter reads 0.0
there. Wherever candidate code runs in the interpreter (the check, the latency model's profile),
such lanes read poison instead, different between runs, so a kernel that relies on the zero (a
``tl.sum`` over a tile loaded without ``other=0``) shows as wrong output."""

from __future__ import annotations

from typing import Any

import numpy as np


def poison_of(run: int, *, floating: bool, info: Any) -> Any:
    """The check's poison for `run` in a type described by `info` (its finfo or iinfo, numpy's or torch's;
    None for bool): NaN or a third of the largest float, an extreme integer, alternating between runs."""
    if floating:
        return np.nan if run % 2 == 0 else info.max / 3
    if info is None:
        return run % 2 == 0
    return info.max - 7 if run % 2 == 0 else info.min + 11


def poison_value(dtype: np.dtype, run: int) -> Any:
    floating = bool(np.issubdtype(dtype, np.floating))
    info = np.finfo(dtype) if floating else None if dtype == np.bool_ else np.iinfo(dtype)
    return poison_of(run, floating=floating, info=info)


def poison_masked_off(handle: Any, mask: Any, run: int) -> None:
    """Overwrite, in place, the lanes of a loaded `handle` that `mask` switched off."""
    data = handle.data
    if not isinstance(data, np.ndarray) or mask is None:
        return
    off = ~np.broadcast_to(np.asarray(mask.data, dtype=bool), data.shape)
    if off.any():
        data[off] = poison_value(data.dtype, run)
