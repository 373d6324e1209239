"""Stale reads: what an atomic that only reads may return on a GPU, played in the interpreter.

An atomic whose operand cannot change memory (``tl.atomic_load``, ``atomic_add(p, 0)``, a
compare-and-swap of a value for itself: `fitness.check.atomics`) reads. Where the element's last write
is another program's atomic update that nothing orders before the read (`fitness.check.happens_before`),
a GPU may place the read before that update and return the value from before it; the interpreter,
which ran that program first, never does. So the first such read by a program returns the value the
element held before that update (later reads of it by the program see memory as it is: a GPU makes the
update visible eventually, and a spin loop ends). A kernel that relies on seeing the update (the last
program to take a ``sem="relaxed"`` ticket reading the others' partial results, say) then computes a
wrong result and fails the check; one that does not use what it read (the old value an accumulating
``atomic_add`` of 0.0 returns) is not affected.
"""

from __future__ import annotations

import numpy as np

from fitness.check.happens_before import NONE


class History:
    """For one region: the bytes each element held before its last atomic write, and which program last
    read it stale (one stale read per program and element)."""

    def __init__(self, n: int) -> None:
        self.prior = np.zeros(n, dtype=np.uint8)
        self.staled = np.full(n, NONE, dtype=np.int32)

    def record(self, offs: np.ndarray, old: np.ndarray) -> None:
        """Atomic writes at byte offsets `offs` (per lane) that found `old` there (per lane): the first lane on
        an element saw what it held before the instruction."""
        if not offs.size:
            return
        offs, first = np.unique(offs, return_index=True)
        raw = np.ascontiguousarray(old[first]).view(np.uint8).reshape(offs.size, -1)
        self.prior[offs[:, None] + np.arange(raw.shape[1])] = raw

    def before(self, offs: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """What the elements at byte offsets `offs` held before their last atomic write."""
        item = dtype.itemsize
        return np.ascontiguousarray(self.prior[offs[:, None] + np.arange(item)]).view(dtype).reshape(-1)


def play(old: np.ndarray, lanes: np.ndarray, reading: np.ndarray, stale: np.ndarray, history: History,
         found: np.ndarray | None = None) -> None:
    """Give the read-only lanes (`reading`, per lane) on `stale` byte offsets the value from before the last
    write (in place, in `old`: what the instruction returns per lane, flat; `lanes`: each lane's byte offset
    in the region, -1 elsewhere); then record what the lanes that wrote found there (`old` as the
    instruction returned it, or `found` for an atomic store, which returns nothing)."""
    hit = reading & (lanes >= 0) & np.isin(lanes, stale)
    mine = old.copy()
    if hit.any():
        old[hit] = history.before(lanes[hit], old.dtype)
    writes = ~reading & (lanes >= 0)
    history.record(lanes[writes], (mine if found is None else found)[writes])
