"""The race rules of the sanitizer (`fitness.check.sanitizer`), per element of every buffer a launch is
given, with happens-before from acquire/release atomics (`fitness.check.happens_before`).

Two accesses by different programs of one launch to one element, at least one of them a write, are a
race unless both are atomic (with ``scope="gpu"`` or ``"sys"``: a ``"cta"`` atomic is atomic only
among one program's threads, so across programs it is a plain access) or one happens before the
other. Where several programs read (or update atomically) an element and nothing orders them among
themselves, a later conflicting access must be ordered after all of them; the maps keep only that
"several" happened, so such an access is a race (the safe side).

Within one program: reading an element it stored (or updated atomically) earlier, or updating
atomically one it stored, with no ``tl.debug_barrier()`` between, is unsafe: the interpreter runs a
program's lanes in lockstep, a GPU on many threads, and Triton orders no global store before a load.
Lanes of one store writing different values to one element are unsafe (a GPU keeps one, unspecified).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fitness.check.happens_before import NONE, SEVERAL, Clocks
from fitness.check.stale import History
from fitness.sandbox.interp_patch import program_label
from fitness.sandbox.runner import UnsafeAccess

NOTHING_ORDERS = (
    "nothing orders the two (only an acquire/release chain of atomics on one address does: sem=\"relaxed\" and "
    "scope=\"cta\" give none across programs, and a release publishes only what its program did before its "
    "last tl.debug_barrier()), so the result depends on the order in which a GPU runs programs")


@dataclass(frozen=True)
class Op:
    """One memory instruction: ``load``/``store`` (plain), ``rmw`` (atomic read-modify-write, CAS too),
    ``atomic_load``/``atomic_store``; with its memory semantics and scope as Triton spells them."""

    kind: str
    sem: str = "acq_rel"
    scope: str = "gpu"

    @property
    def reads(self) -> bool:
        return self.kind in ("load", "rmw", "atomic_load")

    @property
    def writes(self) -> bool:
        return self.kind in ("store", "rmw", "atomic_store")

    @property
    def atomic(self) -> bool:
        """Atomic towards other programs."""
        return self.kind in ("rmw", "atomic_load", "atomic_store") and self.scope != "cta"

    @property
    def acquires(self) -> bool:
        return self.atomic and self.sem in ("acquire", "acq_rel")

    @property
    def releases(self) -> bool:
        return self.atomic and self.sem in ("release", "acq_rel")

    def verb(self) -> str:
        if self.kind in ("rmw", "atomic_store") and self.scope == "cta":
            return 'updates with scope="cta"'
        return {"load": "reads", "store": "stores to", "rmw": "updates atomically",
                "atomic_load": "reads atomically", "atomic_store": "stores atomically to"}[self.kind]


class Maps:
    """Who touched each byte offset of one region in the launch, as epochs (`Clocks`), NONE or SEVERAL."""

    def __init__(self, n: int) -> None:
        # int32 each: 16 bytes per byte of every buffer the launch is given (the two maps only atomics need:
        # 8 more, made at a region's first atomic)
        self.store = np.full(n, NONE, dtype=np.int32)  # plain stores (and "cta" atomics)
        self.read = np.full(n, NONE, dtype=np.int32)  # plain loads
        self.atomic = np.full(n, NONE, dtype=np.int32)  # atomic writes (read-modify-writes, atomic stores)
        # the epoch of the last plain store there (e), or atomic update (-e - 2): the read-back rule
        self.stored_in = np.full(n, NONE, dtype=np.int32)
        self.n = n
        self.aread: np.ndarray | None = None  # atomic loads
        self.sync: np.ndarray | None = None  # per element: the snapshot id its release sequence holds
        self.history: History | None = None  # for stale reads (`fitness.check.stale`)

    def atomics(self) -> tuple[np.ndarray, np.ndarray]:
        if self.aread is None or self.sync is None:
            self.aread = np.full(self.n, NONE, dtype=np.int32)
            self.sync = np.full(self.n, NONE, dtype=np.int32)
        return self.aread, self.sync

    def past(self) -> History:
        if self.history is None:
            self.history = History(self.n)
        return self.history


class Races:
    """The race rules for one launch."""

    def __init__(self, kernel: str, grid: tuple[int, int, int]) -> None:
        self.kernel = kernel
        self.grid = grid
        self.clocks = Clocks(grid[0] * grid[1] * grid[2])
        self.maps: list[Maps] = []

    def pid(self, linear: int) -> tuple[int, int, int]:
        g = self.grid
        return linear % g[0], (linear // g[0]) % g[1], linear // (g[0] * g[1])

    def _unordered(self, epochs: np.ndarray) -> np.ndarray:
        out = epochs == SEVERAL
        single = epochs >= 0
        if single.any():
            out[single] = ~self.clocks.ordered(epochs[single])
        return out

    def _joined(self, epochs: np.ndarray, epoch: int) -> np.ndarray:
        """`epochs` after an access in `epoch`: it alone where it comes after them all, else SEVERAL."""
        dominated = epochs == NONE
        single = epochs >= 0
        if single.any():
            dominated[single] = self.clocks.ordered(epochs[single])
        return np.where(dominated, epoch, SEVERAL).astype(np.int32)

    def check(self, maps: Maps, name: str, itemsize: int, op: Op, offs: np.ndarray, me: int,
              reading: np.ndarray | None = None, writing: np.ndarray | None = None) -> np.ndarray:
        """Judge `op` by program `me` on the byte offsets `offs` of a region, then record it; the offsets
        where it reads stale (`fitness.check.stale`). `reading`, `writing`: of an atomic `op`, the offsets
        where it only reads (`fitness.check.atomics`) and where it writes."""
        epoch = self.clocks.at(me)
        if op.reads:
            self._read_back(maps, name, itemsize, op, offs, me, epoch)
        stale = np.empty(0, dtype=np.int64)
        if op.atomic and reading is not None and reading.size:
            stale = self._stale(maps, reading, me)
        plain = not op.atomic  # (a "cta" atomic is a plain access to other programs)
        candidates: list[tuple[np.ndarray, str]] = [(maps.store, "stored to")]
        if op.writes:
            candidates.append((maps.read, "read"))
        if plain:
            candidates.append((maps.atomic, "updated atomically"))
            if op.writes and maps.aread is not None:
                candidates.append((maps.aread, "read atomically"))
        for m, did in candidates:
            seen = m[offs]
            bad = self._unordered(seen)
            if bad.any():
                k = int(np.argmax(bad))
                who = int(seen[k])
                by = ("other programs" if who == SEVERAL
                      else program_label(self.pid(int(self.clocks.owner(seen[k:k + 1])[0]))))
                cta = (' (an atomic with scope="cta" is atomic only among the threads of one program)'
                       if op.scope == "cta" and op.kind != "load" and op.kind != "store" else "")
                raise UnsafeAccess(
                    f"race in kernel {self.kernel}: {program_label(self.pid(me))} {op.verb()} {name}"
                    f"[{int(offs[k]) // itemsize}], which {by} of the same launch {did}{cta}: {NOTHING_ORDERS}")
        if not op.writes:
            if plain:
                maps.read[offs] = self._joined(maps.read[offs], epoch)
            else:
                aread, _ = maps.atomics()
                aread[offs] = self._joined(aread[offs], epoch)
        elif plain:  # every earlier access was ordered before it (else the race above): it stands for them
            maps.store[offs] = epoch
            maps.read[offs] = NONE
            maps.atomic[offs] = NONE
            if maps.aread is not None and maps.sync is not None:
                maps.aread[offs] = NONE
                maps.sync[offs] = NONE  # a plain store ends a release sequence
            maps.stored_in[offs] = epoch if op.kind == "store" else -epoch - 2
        else:  # atomic: ordered after the plain accesses before it, not after other programs' atomics
            if writing is not None:  # lanes that only read are reads, not the element's last write
                aread, _ = maps.atomics()
                assert reading is not None
                aread[reading] = self._joined(aread[reading], epoch)
                offs = writing
            maps.atomic[offs] = self._joined(maps.atomic[offs], epoch)
            maps.store[offs] = NONE
            maps.read[offs] = NONE
            maps.stored_in[offs] = -epoch - 2
        return stale

    def _stale(self, maps: Maps, offs: np.ndarray, me: int) -> np.ndarray:
        """Of the offsets an atomic only reads, those whose last write is another program's atomic update
        that nothing orders before the read, and that this program has not read stale yet. (Only the last
        write matters: once it is ordered before the read, the read cannot return an older value.)"""
        last = maps.stored_in[offs]
        atomic = last <= -2
        if not atomic.any():
            return np.empty(0, dtype=np.int64)
        offs = offs[atomic]
        history = maps.past()
        stale = ~self.clocks.ordered(-last[atomic] - 2) & (history.staled[offs] != me)
        history.staled[offs[stale]] = me
        return offs[stale]

    def _read_back(self, maps: Maps, name: str, itemsize: int, op: Op, offs: np.ndarray, me: int,
                   epoch: int) -> None:
        last = maps.stored_in[offs]
        stored = last == epoch
        unsynced = stored | ((last == -epoch - 2) & (op.kind == "load"))  # atomics after atomics are ordered
        if unsynced.any():
            k = int(np.argmax(unsynced))
            raise UnsafeAccess(
                f"unsynchronized read-back in kernel {self.kernel}: {program_label(self.pid(me))} "
                f"{'updates atomically' if op.kind == 'rmw' else 'reads'} {name}[{int(offs[k]) // itemsize}], "
                f"which it {'stored' if stored[k] else 'updated atomically'} earlier with no tl.debug_barrier() "
                "between: on a GPU another thread of the program may have written that element, and the access "
                "can run before the write is visible (add tl.debug_barrier() after the writes, or keep the values "
                "in registers)")

    def synchronize(self, maps: Maps, op: Op, acquired: np.ndarray, released: np.ndarray) -> None:
        """After an atomic `op` ran: its acquire on the byte offsets `acquired` (every lane it read) and its
        release on `released` (the lanes that wrote: a compare-and-swap that failed wrote nothing)."""
        if not (op.acquires or op.releases):
            return
        _, sync = maps.atomics()
        if op.acquires:
            self.clocks.acquire(sync[acquired])
        if op.releases and released.size:
            sync[released] = self.clocks.release(sync[released])
            if self.clocks.held() > self.clocks.collect_at:
                live = [m.sync for m in self.maps if m.sync is not None]
                self.clocks.collect(np.concatenate(live) if live else np.empty(0, np.int32))

    def barrier(self) -> None:
        self.clocks.barrier()


def lanes_agree(kernel: str, name: str, itemsize: int, lo: int, addr: np.ndarray, value: np.ndarray,
                pid: tuple[int, int, int]) -> None:
    """Lanes of one store that write one element must write the same bits: a GPU keeps one of their
    values, which one unspecified (the interpreter keeps the last lane's). `addr` and `value`: the active
    lanes of one region, flat."""
    if addr.size < 2:
        return
    order = np.argsort(addr, kind="stable")
    same = addr[order][1:] == addr[order][:-1]
    if not same.any():
        return
    vals = value
    if vals.dtype.itemsize in (1, 2, 4, 8):
        vals = vals.view(f"u{vals.dtype.itemsize}")  # bits: NaN == NaN, -0.0 != 0.0
    differ = same & (vals[order][1:] != vals[order][:-1])
    if differ.any():
        k = int(order[1:][int(np.argmax(differ))])
        raise UnsafeAccess(
            f"conflicting lanes in kernel {kernel}: {program_label(pid)} stores different values "
            f"from several lanes to {name}[{(int(addr[k]) - lo) // itemsize}] in one "
            "store: a GPU keeps one of them, which one is unspecified (the interpreter keeps the last)")
