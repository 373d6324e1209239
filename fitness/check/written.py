"""Which elements of the outputs and of uninitialized scratch one ``launch`` call has written, across all
the kernel launches it makes, for the sanitizer's uninitialized-read rule (`fitness.check.sanitizer`).

A kernel that reads its output, or ``torch.empty`` scratch, before anything wrote it reads poison in the
check and whatever the memory held on a GPU: if it branches on what it finds (a zero, say), it is right
under every poison the check uses and wrong on a buffer that happens to hold zeros. Task inputs and
scratch allocated with contents (``torch.zeros``, ``full``, ``ones``...) are written from the start;
outputs and ``torch.empty``-like scratch are not, until a store, an atomic update or a host fill
(``zero_``, ``fill_``) of their elements.

One bool per element (the buffer's own element size, so a quarter of a float32 buffer's bytes); a
buffer accessed at a finer grain (a byte view of float32 scratch) is refined to one bool per byte.
"""

from __future__ import annotations

import numpy as np

from fitness.sandbox.provenance import Fill


class Span:
    """One tracked buffer: bytes [lo, hi), written or not per `unit` bytes."""

    def __init__(self, lo: int, hi: int, itemsize: int, label: str) -> None:
        self.lo, self.hi = lo, hi
        self.itemsize = itemsize  # the buffer's element size: indices in messages count these
        self.unit = itemsize if (hi - lo) % itemsize == 0 else 1
        self.done = np.zeros((hi - lo) // self.unit, dtype=bool)
        self.label = label

    def _units(self, offs: np.ndarray, item: int) -> np.ndarray:
        """The units that accesses of `item` bytes at byte offsets `offs` cover (flat)."""
        if self.unit > 1 and (item % self.unit or (offs % self.unit).any()):
            self.done = np.repeat(self.done, self.unit)  # a finer grain than the element: bytes
            self.unit = 1
        first = offs // self.unit
        per = max(item // self.unit, 1)
        if per == 1:
            return first
        return (first[:, None] + np.arange(per)).reshape(-1)

    def first_unwritten(self, offs: np.ndarray, item: int) -> int | None:
        """The byte offset of the first access among `offs` that reads an unwritten byte; None if none."""
        units = self._units(offs, item)
        missing = ~self.done[np.minimum(units, self.done.size - 1)]
        if not missing.any():
            return None
        per = max(item // self.unit, 1)
        return int(offs[int(np.argmax(missing)) // per])

    def mark(self, offs: np.ndarray, item: int) -> None:
        units = self._units(offs, item)  # (first: it may refine `done`)
        self.done[units] = True

    def mark_fill(self, fill: Fill) -> None:
        start = fill.start - self.lo
        if fill.dense:
            n = int(np.prod(fill.shape, dtype=np.int64)) * fill.itemsize
            self.mark(np.arange(start, start + n, fill.itemsize, dtype=np.int64), fill.itemsize)
            return
        offs = np.zeros((), dtype=np.int64)
        for size, stride in zip(fill.shape, fill.strides):
            offs = (offs[..., None] + np.arange(size, dtype=np.int64) * stride * fill.itemsize)
        self.mark(start + offs.reshape(-1), fill.itemsize)


class Written:
    """The tracked buffers of one ``launch`` call, by storage identity (`fitness.sandbox.provenance`)."""

    def __init__(self) -> None:
        self.spans: dict[int, Span] = {}

    def track(self, key: int, lo: int, hi: int, itemsize: int, label: str) -> Span:
        """The span of storage `key`, tracked from now on (unwritten) if it was not yet."""
        span = self.spans.get(key)
        if span is None:
            span = self.spans[key] = Span(lo, hi, itemsize, label)
        return span

    def apply(self, fills: list[Fill]) -> None:
        """Host fills since the last launch: their bytes are written (fills of untracked storages, inputs
        or scratch with contents, change nothing here)."""
        for fill in fills:
            span = self.spans.get(fill.key)
            if span is not None:
                span.mark_fill(fill)
