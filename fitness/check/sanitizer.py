"""The race and bounds sanitizer of the check: what a GPU's compute-sanitizer would say, and more,
while the interpreter runs the candidate's programs one after another.

Installed in the interpreter worker around every check run (`fitness.worker`). For every launch it
knows the memory each tensor argument may address (a task input or output: exactly its elements;
scratch the candidate allocated: its storage) and watches every load, store and atomic of every
program as it happens:

- an access (load or store, masked or not) whose active lanes fall outside every tensor argument
  is ``unsafe`` at once: not judged later by the guard zones' contents, which a store could write
  back unchanged;
- with `races` on (check sizes): two programs of one launch storing to one element, a program
  reading an element another program of the launch stored, or a plain access to an element other
  programs update atomically, is ``unsafe``: the interpreter runs programs in order, a GPU does
  not, so the kernel's result depends on scheduling. Atomics may overlap each other (the order
  programs run in is shuffled for them: `fitness.sandbox.program_order`);
- with `races` on, lanes of one store writing different values to one element are ``unsafe`` (a GPU
  keeps one, unspecified which; the interpreter the last);
- with `races` on, a program reading (or updating atomically) an element it stored itself earlier
  in the launch, or reading one it updated atomically, with no ``tl.debug_barrier()`` between, is
  ``unsafe``: the interpreter runs a program's lanes in lockstep, a GPU runs them on many threads,
  and Triton puts no barrier between a global store and a load (a store and its read-back may even
  get different thread layouts), so another thread's load can run before the store is visible.

The message names the kernel, both programs and the element (tensor argument and index). Masked-off
lanes of a load without ``other`` read poison that differs between runs
(`fitness.sandbox.masked_poison`): relying on the interpreter's zeros shows as wrong output.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fitness.sandbox.interp_patch import Patches, program_label, tensor_span
from fitness.sandbox.masked_poison import poison_masked_off
from fitness.sandbox.runner import UnsafeAccess

EPOCHS = 2**31 - 1  # sync epochs wrap within int32 (an epoch repeats only after 2^31 programs and barriers)


@dataclass
class _Region:
    name: str
    lo: int
    hi: int
    itemsize: int
    writer: np.ndarray | None = None  # program that stored each byte offset (-1: none)
    reader: np.ndarray | None = None  # program that loaded it (-1: none, -2: several)
    atomic: np.ndarray | None = None  # program that updated it atomically (-1: none, -2: several)
    # the sync epoch of the last plain store there (e), or of an atomic update (-e - 2); -1: none. An epoch
    # belongs to one program (`_Launch.at`), so a match means "this program, since its last barrier"
    stored_in: np.ndarray | None = None


class _Launch:
    """The regions one launch may address, and who touched what in it."""

    def __init__(self, kernel: str, regions: list[_Region], grid: tuple[int, int, int], races: bool) -> None:
        self.kernel = kernel
        self.regions = sorted(regions, key=lambda r: r.lo)
        self.los = np.array([r.lo for r in self.regions], dtype=np.uint64)
        self.grid = grid
        if races:
            for r in self.regions:
                n = max(r.hi - r.lo, 0)
                # int32: four maps of a byte each cost 16 bytes per byte of every buffer the launch is given
                r.writer = np.full(n, -1, dtype=np.int32)
                r.reader = np.full(n, -1, dtype=np.int32)
                r.atomic = np.full(n, -1, dtype=np.int32)
                r.stored_in = np.full(n, -1, dtype=np.int32)
        # a sync epoch: between two barriers of one program (a new program, or tl.debug_barrier(), starts one)
        self.epoch = 0
        self.program = -1

    def at(self, me: int) -> int:
        """The sync epoch of an access by program `me`."""
        if me != self.program:
            self.program, self.epoch = me, (self.epoch + 1) % EPOCHS
        return self.epoch

    def pid(self, linear: int) -> tuple[int, int, int]:
        g = self.grid
        return linear % g[0], (linear // g[0]) % g[1], linear // (g[0] * g[1])


class Sanitizer:
    """A context manager around one ``launch`` call in the interpreter worker."""

    def __init__(self, harness: list[Any], *, races: bool, run: int) -> None:
        """`harness`: the task's input and output tensors as the candidate receives them."""
        self.harness: dict[int, list[Any]] = {}
        for t in harness:
            self.harness.setdefault(int(t.untyped_storage().data_ptr()), []).append(t)
        self.races = races
        self.run = run
        self.launch: _Launch | None = None
        self._patches = Patches()

    # -- installation ---------------------------------------------------------------------------

    def __enter__(self) -> Sanitizer:
        from triton.runtime import interpreter as interp

        builder = interp.interpreter_builder
        for name, kind in (("create_masked_load", "load"), ("create_masked_store", "store"),
                           ("create_atomic_rmw", "atomic"), ("create_atomic_cas", "atomic")):
            self._patches.set(builder, name, self._wrap(kind, name, getattr(builder, name)), instance=True)
        barrier = builder.create_barrier

        def create_barrier() -> Any:  # tl.debug_barrier(): the program's earlier stores are visible to it
            if self.launch is not None:
                self.launch.epoch = (self.launch.epoch + 1) % EPOCHS
            return barrier()

        self._patches.set(builder, "create_barrier", create_barrier, instance=True)
        original_run = interp.InterpretedFunction.run
        sanitizer = self

        def run(fn_self: Any, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
            if warmup:
                return original_run(fn_self, *args, grid=grid, warmup=warmup, **kwargs)
            outer = sanitizer.launch
            sanitizer.launch = sanitizer._begin(fn_self, args, kwargs, grid)
            try:
                return original_run(fn_self, *args, grid=grid, warmup=warmup, **kwargs)
            finally:
                sanitizer.launch = outer

        def getitem(fn_self: Any, grid: Any) -> Callable[..., Any]:
            return lambda *args, **kwargs: run(fn_self, *args, grid=grid, **kwargs)

        self._patches.set(interp.InterpretedFunction, "run", run)
        self._patches.set(interp.InterpretedFunction, "__getitem__", getitem)
        return self

    def __exit__(self, *exc: object) -> None:
        self._patches.restore()

    def _begin(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grid_arg: Any) -> _Launch:
        sig = inspect.signature(fn.fn)
        bound_sig = sig.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in sig.parameters})
        bound = dict(bound_sig.arguments)
        regions: dict[tuple[int, int], _Region] = {}
        for name, v in bound.items():
            if not (hasattr(v, "untyped_storage") and hasattr(v, "data_ptr")):
                continue
            storage = v.untyped_storage()
            start = int(storage.data_ptr())
            if start in self.harness:  # a task input or output: exactly the elements of each view given
                spans = [tensor_span(t) for t in self.harness[start]]
            else:  # scratch the candidate allocated: its whole storage
                spans = [(start, start + int(storage.nbytes()))]
            for lo, hi in spans:
                if (lo, hi) not in regions:
                    regions[(lo, hi)] = _Region(name, lo, hi, int(v.element_size()))
        g = [int(x) for x in (grid_arg(bound) if callable(grid_arg) else grid_arg)] + [1, 1, 1]
        return _Launch(fn.__name__, _merge(list(regions.values())), (g[0], g[1], g[2]), self.races)

    # -- accesses -------------------------------------------------------------------------------

    def _wrap(self, kind: str, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            launch = self.launch
            if launch is not None:
                if name == "create_masked_load":
                    self._access(launch, "load", args[0], args[1])
                elif name == "create_masked_store":
                    self._access(launch, "store", args[0], args[2], args[1])
                elif name == "create_atomic_rmw":
                    self._access(launch, "atomic", args[1], args[3])
                else:  # atomic_cas: every lane
                    self._access(launch, "atomic", args[0], None)
            out = fn(*args, **kwargs)
            if name == "create_masked_load" and len(args) > 2 and args[2] is None:
                poison_masked_off(out, args[1], self.run)
            return out

        return wrapped

    def _access(self, launch: _Launch, kind: str, ptr: Any, mask: Any, value: Any = None) -> None:
        from triton.runtime.interpreter import interpreter_builder

        shape = np.asarray(ptr.data).shape
        addr = np.asarray(ptr.data).astype(np.uint64, copy=False).reshape(-1)
        active = None if mask is None else np.broadcast_to(np.asarray(mask.data, dtype=bool), shape).reshape(-1)
        if active is not None:
            addr = addr[active]
        if not addr.size:
            return
        item = max(ptr.get_element_ty().primitive_bitwidth // 8, 1)
        gx, gy, _ = launch.grid
        x, y, z = interpreter_builder.grid_idx
        me = x + gx * (y + gy * z)
        idx = np.searchsorted(launch.los, addr, side="right").astype(np.int64) - 1
        inside = idx >= 0
        his = np.array([r.hi for r in launch.regions] or [0], dtype=np.uint64)
        inside[inside] &= addr[inside] + np.uint64(item) <= his[idx[inside]]
        if not inside.all():
            bad = int(addr[~inside][0])
            what = {"load": "loads", "store": "stores to", "atomic": "updates"}[kind]
            raise UnsafeAccess(
                f"out-of-bounds access in kernel {launch.kernel}: {program_label((x, y, z))} {what} address "
                f"{bad:#x}, outside every tensor argument of the launch (the interpreter does no bounds "
                "checking; on a GPU this is an illegal access or silent corruption)")
        if not self.races:
            return
        if value is not None:
            self._lanes_agree(launch, addr, value, shape, active, idx, (x, y, z))
        for r_i in np.unique(idx):
            region = launch.regions[int(r_i)]
            offs = np.unique((addr[idx == r_i] - np.uint64(region.lo)).astype(np.int64))
            self._race(launch, region, kind, offs, me)

    @staticmethod
    def _lanes_agree(launch: _Launch, addr: np.ndarray, value: Any, shape: tuple[int, ...],
                     active: np.ndarray | None, idx: np.ndarray, pid: tuple[int, int, int]) -> None:
        """Lanes of one store that write one element must write the same bits: a GPU keeps one of their
        values, which one unspecified (the interpreter keeps the last lane's)."""
        if addr.size < 2:
            return
        order = np.argsort(addr, kind="stable")
        same = addr[order][1:] == addr[order][:-1]
        if not same.any():
            return
        vals = np.ascontiguousarray(np.broadcast_to(np.asarray(value.data), shape)).reshape(-1)
        if active is not None:
            vals = vals[active]
        if vals.dtype.itemsize in (1, 2, 4, 8):
            vals = vals.view(f"u{vals.dtype.itemsize}")  # bits: NaN == NaN, -0.0 != 0.0
        differ = same & (vals[order][1:] != vals[order][:-1])
        if differ.any():
            k = int(order[1:][int(np.argmax(differ))])
            region = launch.regions[int(idx[k])]
            raise UnsafeAccess(
                f"conflicting lanes in kernel {launch.kernel}: {program_label(pid)} stores different values "
                f"from several lanes to {region.name}[{(int(addr[k]) - region.lo) // region.itemsize}] in one "
                "store: a GPU keeps one of them, which one is unspecified (the interpreter keeps the last)")

    def _race(self, launch: _Launch, region: _Region, kind: str, offs: np.ndarray, me: int) -> None:
        assert region.writer is not None and region.reader is not None and region.atomic is not None
        assert region.stored_in is not None
        w, r, a = region.writer[offs], region.reader[offs], region.atomic[offs]
        epoch = launch.at(me)
        if kind != "store":
            last = region.stored_in[offs]
            stored = last == epoch
            unsynced = stored | ((last == -epoch - 2) & (kind == "load"))  # atomics after atomics are ordered
            if unsynced.any():
                k = int(np.argmax(unsynced))
                raise UnsafeAccess(
                    f"unsynchronized read-back in kernel {launch.kernel}: {program_label(launch.pid(me))} "
                    f"{'reads' if kind == 'load' else 'updates atomically'} {region.name}"
                    f"[{int(offs[k]) // region.itemsize}], which it {'stored' if stored[k] else 'updated atomically'}"
                    " earlier with no tl.debug_barrier() between: on a GPU another thread of the program may have "
                    "written that element, and the access can run before the write is visible (add "
                    "tl.debug_barrier() after the writes, or keep the values in registers)")
        other_w = (w >= 0) & (w != me)
        other_r = ((r >= 0) & (r != me)) | (r == -2)
        other_a = ((a >= 0) & (a != me)) | (a == -2)
        if kind == "load":
            conflict, who, verb = other_w | other_a, np.where(other_w, w, a), "reads"
        elif kind == "store":
            conflict, verb = other_w | other_r | other_a, "stores to"
            who = np.where(other_w, w, np.where(other_r, r, a))
        else:
            conflict, who, verb = other_w | other_r, np.where(other_w, w, r), "updates atomically"
        if conflict.any():
            k = int(np.argmax(conflict))
            other = int(who[k])
            by = "other programs" if other == -2 else program_label(launch.pid(other))
            did = "stored to" if other_w[k] else ("updated atomically" if other_a[k] else "read")
            raise UnsafeAccess(
                f"race in kernel {launch.kernel}: {program_label(launch.pid(me))} {verb} {region.name}"
                f"[{int(offs[k]) // region.itemsize}], which {by} of the same launch {did}: without atomics "
                "on both sides the result depends on the order in which a GPU runs programs")
        if kind == "load":
            region.reader[offs] = np.where((r == -1) | (r == me), me, -2)
        elif kind == "store":
            region.writer[offs] = me
            region.stored_in[offs] = epoch
        else:
            region.atomic[offs] = np.where((a == -1) | (a == me), me, -2)
            region.stored_in[offs] = -epoch - 2  # (a plain store of this epoch there was refused above)


def _merge(regions: list[_Region]) -> list[_Region]:
    """Overlapping regions (two views of one storage) as one, so an address has one owner."""
    out: list[_Region] = []
    for r in sorted(regions, key=lambda r: r.lo):
        if out and r.lo < out[-1].hi:
            last = out[-1]
            last.hi = max(last.hi, r.hi)
            last.name = f"{last.name}+{r.name}" if r.name not in last.name else last.name
        else:
            out.append(r)
    return out
