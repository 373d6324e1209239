"""Happens-before among the programs of one kernel launch, for the race rules of the sanitizer
(`fitness.check.races`).

Triton's interpreter runs a launch's programs one after another, each from start to end, so only the
running program's vector clock is live: what it has acquired, as "program t's accesses up to t's
local clock c happen before me". A program's local clock counts its ``tl.debug_barrier()`` calls;
every access is stamped with an *epoch*, one per (program, local clock), so that one int32 per
element says who accessed it and when.

Edges come only from atomics whose semantics give them (Triton's defaults: ``sem="acq_rel"``,
``scope="gpu"``): a release on an address publishes the releasing program's clock there (a
*snapshot*), an acquire on the address joins the snapshot into the acquirer's clock. Read-modify-
writes continue a release sequence (a ``relaxed`` one keeps the snapshot as it was); a plain store
ends it. ``relaxed`` atomics, and any atomic with ``scope="cta"`` (atomic only among one program's
threads), give no edge to other programs. A release publishes only what its program did before its
last barrier: the atomic runs on one thread, the program's stores on all of them, and without a
barrier between them another thread's store may land after the release (the reason Triton's
layer-norm tutorial puts ``tl.debug_barrier()`` before it releases its lock).
"""

from __future__ import annotations

import numpy as np

NONE = -1  # an element nobody accessed in the launch (or, as a snapshot id, a release sequence: none)
SEVERAL = -2  # an element accessed by several programs that nothing orders among themselves


class Clocks:
    """The launch's epochs and the running program's vector clock; release snapshots by id."""

    def __init__(self, programs: int) -> None:
        self.vc = np.full(max(programs, 1), NONE, dtype=np.int32)  # per program: the last local clock seen
        self._touched: list[int] = []  # entries of `vc` the running program set (reset when it ends)
        self.me = NONE
        self.local = 0
        self.epoch = NONE
        self._barrier = False  # a barrier since the epoch began: the next access starts a new one
        self._owner = np.zeros(256, dtype=np.int32)  # per epoch: its program
        self._clock = np.zeros(256, dtype=np.int32)  # per epoch: its program's local clock
        self._snapshots: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id -> (programs, clocks)
        self._next_id = 0
        self._mine: int | None = None  # the snapshot of the running program's clock, while it holds
        self.collect_at = 4096  # snapshots held before the unreferenced ones are dropped (`collect`)

    # -- epochs ----------------------------------------------------------------------------------

    def at(self, me: int) -> int:
        """The epoch of an access that program `me` makes now (a new program starts one)."""
        if me != self.me:
            for t in self._touched:
                self.vc[t] = NONE
            self._touched.clear()
            self.me, self.local, self._barrier = me, 0, False
            self._new_epoch()
        elif self._barrier:
            self._barrier = False
            self._new_epoch()
        return self.epoch

    def barrier(self) -> None:
        """``tl.debug_barrier()`` in the running program: its earlier accesses are done on every thread.
        (Consecutive barriers with no access between them make one epoch: a loop of them costs nothing.)"""
        if self.me != NONE and not self._barrier:
            self.local += 1
            self._barrier = True
            self._mine = None

    def _new_epoch(self) -> None:
        self.epoch += 1
        if self.epoch >= self._owner.size:
            self._owner = np.resize(self._owner, self._owner.size * 2)
            self._clock = np.resize(self._clock, self._clock.size * 2)
        self._owner[self.epoch] = self.me
        self._clock[self.epoch] = self.local
        self._mine = None

    def owner(self, epochs: np.ndarray) -> np.ndarray:
        return self._owner[epochs]

    def ordered(self, epochs: np.ndarray) -> np.ndarray:
        """Per epoch (each >= 0): whether its accesses happen before what the running program does now
        (its own earlier accesses do: the read-back rule judges those)."""
        owner = self._owner[epochs]
        return (owner == self.me) | (self._clock[epochs] <= self.vc[owner])

    # -- synchronization -------------------------------------------------------------------------

    def acquire(self, ids: np.ndarray) -> None:
        """An acquire that read from the release sequences `ids` (NONE: no release there)."""
        for sid in np.unique(ids[ids >= 0]).tolist():
            programs, clocks = self._snapshots[sid]
            seen = self.vc[programs]
            newer = clocks > seen
            if newer.any():
                self._touched.extend(programs[newer & (seen == NONE)].tolist())
                self.vc[programs[newer]] = clocks[newer]
                self._mine = None

    def release(self, before: np.ndarray) -> np.ndarray:
        """A release on elements whose release sequences were `before`: the snapshot ids they hold after
        (the running program's clock, joined with an earlier snapshot it does not cover)."""
        mine = self._snapshot()
        after = np.full(before.shape, mine, dtype=np.int32)
        for sid in np.unique(before[(before >= 0) & (before != mine)]).tolist():
            programs, clocks = self._snapshots[sid]
            own = self._published(programs)
            if (clocks <= own).all():
                continue  # (an acquire-release has just joined it: the common case)
            mp, mc = self._snapshots[mine]
            allp = np.concatenate([mp, programs])
            allc = np.concatenate([mc, clocks])
            order = np.lexsort((-allc, allp))  # per program its largest clock first
            allp, allc = allp[order], allc[order]
            first = np.concatenate(([True], allp[1:] != allp[:-1]))
            after[before == sid] = self._store(allp[first], allc[first])
        return after

    def _published(self, programs: np.ndarray) -> np.ndarray:
        """What a release now publishes of each of `programs`: the clock the running program has seen,
        and for itself what it did before its last barrier."""
        seen = self.vc[programs].copy()
        own = programs == self.me
        seen[own] = np.maximum(seen[own], self.local - 1)
        return seen

    def _snapshot(self) -> int:
        if self._mine is None:
            programs = np.unique(np.array([*self._touched, self.me], dtype=np.int32))
            clocks = self._published(programs)
            keep = clocks >= 0
            self._mine = self._store(programs[keep], clocks[keep])
        return self._mine

    def _store(self, programs: np.ndarray, clocks: np.ndarray) -> int:
        sid = self._next_id
        self._next_id += 1
        self._snapshots[sid] = (programs.astype(np.int32), clocks.astype(np.int32))
        return sid

    def held(self) -> int:
        return len(self._snapshots)

    def collect(self, live: np.ndarray) -> None:
        """Drop the snapshots no element refers to any more (`live`: the ids that elements hold)."""
        keep = set(np.unique(live[live >= 0]).tolist())
        if self._mine is not None:
            keep.add(self._mine)
        self._snapshots = {k: v for k, v in self._snapshots.items() if k in keep}
        self.collect_at = max(4096, 2 * len(self._snapshots))
