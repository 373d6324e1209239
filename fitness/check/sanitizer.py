"""The race, bounds and uninitialized-read sanitizer of the check: what a GPU's compute-sanitizer would
say, and more, while the interpreter runs the candidate's programs one after another.

Installed in the interpreter worker around every check run (`fitness.worker`), inside the run's
`CandidateGuard`, which knows the harness's inputs and outputs and every allocation and host fill
candidate code made (`fitness.sandbox.provenance`). For every launch it knows the memory each tensor
argument may address (a task input or output: exactly its elements; scratch the candidate allocated:
its storage) and watches every load, store and atomic of every program as it happens:

- a kernel argument that is neither a harness tensor (or a view of one) nor memory the guard saw
  candidate code allocate (``torch.Tensor(n)``, made by a constructor the guard does not see: neither
  poisoned nor on the device a GPU kernel reads) is a ``lint_error`` at the launch;
- an access (load, store or atomic, masked or not) whose active lanes fall outside every tensor
  argument is ``unsafe`` at once: not judged later by the guard zones' contents, which a store could
  write back unchanged;
- a read (a load, an atomic read-modify-write, a compare-and-swap) of an element of an output or of
  uninitialized scratch that nothing in this call of ``launch`` has written yet is ``unsafe``
  (`fitness.check.written`: tracked at every size);
- with `races` on (check sizes), the race rules of `fitness.check.races`: two programs' accesses to
  one element, one a write, not both atomic and not ordered by happens-before through acquire/release
  atomics (`fitness.check.happens_before`: ``sem`` and ``scope`` as a GPU reads them); a program's
  read-back of its own store without a barrier; lanes of one store writing different values to one
  element. An atomic that only reads returns what a GPU may return when the update it would see is
  not ordered before it: the value from before that update (`fitness.check.stale`).

The message names the kernel, the program(s) and the element (tensor argument and index). Masked-off
lanes of a load without ``other`` read poison that differs between runs
(`fitness.sandbox.masked_poison`): relying on the interpreter's zeros shows as wrong output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fitness.check.atomics import cas_wrote, decode
from fitness.check.launches import Launch, Region, begin
from fitness.check.races import Op, lanes_agree
from fitness.check.stale import play
from fitness.check.written import Span, Written
from fitness.sandbox.interp_patch import Patches, program_label, tensor_span
from fitness.sandbox.masked_poison import poison_masked_off
from fitness.sandbox.provenance import Provenance, storage_key
from fitness.sandbox.runner import UnsafeAccess
from fitness.sandbox.torch_guard import active_guard


class Sanitizer:
    """A context manager around one ``launch`` call in the interpreter worker, inside its `CandidateGuard`."""

    def __init__(self, harness: list[Any], *, races: bool, run: int) -> None:
        """`harness`: the task's input and output tensors as the candidate receives them."""
        self.harness: dict[int, list[Any]] = {}
        for t in harness:
            self.harness.setdefault(storage_key(t), []).append(t)
        self.races = races
        self.run = run
        self.launch: Launch | None = None
        self.written = Written()
        self.provenance = Provenance()
        self._nested = False  # inside an atomic load or poll, whose plain loads are its own
        self._patches = Patches()

    # -- installation ---------------------------------------------------------------------------

    def __enter__(self) -> Sanitizer:
        from triton.runtime import interpreter as interp

        guard = active_guard()
        if guard is None or not guard.provenance.knows_harness:
            raise RuntimeError("the sanitizer runs inside the run's CandidateGuard, given the harness's inputs "
                               "and outputs (CandidateGuard(..., inputs=, outputs=))")
        self.provenance = guard.provenance
        for i, views in enumerate(self.provenance.outputs.values()):
            for t in views:  # outputs start unwritten, whatever poison they hold
                lo, hi = tensor_span(t)
                self.written.track(storage_key(t), lo, hi, int(t.element_size()), f"output {i}")
        builder = interp.interpreter_builder
        for name in ("create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas",
                     "create_atomic_load", "create_atomic_store", "create_atomic_poll"):
            self._patches.set(builder, name, self._wrap(name, getattr(builder, name)), instance=True)
        barrier = builder.create_barrier

        def create_barrier() -> Any:  # tl.debug_barrier(): the program's earlier accesses are done
            if self.launch is not None and self.launch.races is not None:
                self.launch.races.barrier()
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

        self._patches.launches(run)
        return self

    def __exit__(self, *exc: object) -> None:
        self._patches.restore()

    def _begin(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grid_arg: Any) -> Launch:
        return begin(fn, args, kwargs, grid_arg, harness=self.harness, provenance=self.provenance,
                     written=self.written, races=self.races)

    # -- accesses -------------------------------------------------------------------------------

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            launch = self.launch
            if launch is None or (self._nested and name in ("create_masked_load", "create_masked_store")):
                out = fn(*args, **kwargs)
            elif name == "create_masked_load":
                self._access(launch, Op("load"), args[0], args[1])
                out = fn(*args, **kwargs)
            elif name == "create_masked_store":
                self._access(launch, Op("store"), args[0], args[2], args[1])
                out = fn(*args, **kwargs)
            else:
                out = self._atomic(launch, name, fn, args, kwargs)
            if name == "create_masked_load" and len(args) > 2 and args[2] is None:
                poison_masked_off(out, args[1], self.run)
            return out

        return wrapped

    def _atomic(self, launch: Launch, name: str, fn: Callable[..., Any], args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
        """An atomic instruction: judged before it runs; after, what it read stale (`fitness.check.stale`),
        then its acquire and release."""
        atomic = decode(name, args)
        touched = self._access(launch, atomic.op, atomic.ptr, atomic.mask, atomic.value, atomic.read_only)
        found = None
        if touched and atomic.op.kind == "atomic_store":  # it returns nothing: what it overwrites, for history
            found = _memory(atomic.ptr, atomic.mask)
        self._nested = True  # (an atomic load or poll runs the interpreter's plain loads: they are this)
        try:
            out = fn(*args, **kwargs)
        finally:
            self._nested = False
        if launch.races is None or not touched:
            return out
        wrote = cas_wrote(args, out) if name == "create_atomic_cas" else None
        returned = None
        if name != "create_atomic_poll" and atomic.op.kind != "atomic_store":
            returned = np.array(out.data, copy=True).reshape(-1)
        for region, offs, lanes, stale in touched:
            assert region.maps is not None
            if returned is not None or found is not None:
                play(returned if returned is not None else np.asarray(found).copy(), lanes, atomic.read_only, stale,
                     region.maps.past(), found)
            released = offs if wrote is None else np.unique(lanes[wrote & (lanes >= 0)])
            launch.races.synchronize(region.maps, atomic.op, offs, released)
        if returned is not None:
            out.data = returned.reshape(np.shape(out.data))
        return out

    def _access(self, launch: Launch, op: Op, ptr: Any, mask: Any, value: Any = None,
                read_only: np.ndarray | None = None
                ) -> list[tuple[Region, np.ndarray, np.ndarray, np.ndarray]]:
        """Judge one instruction's active lanes (`read_only`: per lane, an atomic that only reads); per region
        touched (with races on): the region, its unique byte offsets, every lane's byte offset there (flat,
        in lane order; -1 where a lane is off or elsewhere), and the offsets it reads stale."""
        from triton.runtime.interpreter import interpreter_builder

        shape = np.asarray(ptr.data).shape
        addr = np.asarray(ptr.data).astype(np.uint64, copy=False).reshape(-1)
        active = None if mask is None else np.broadcast_to(np.asarray(mask.data, dtype=bool), shape).reshape(-1)
        if active is not None:
            addr = addr[active]
        if not addr.size:
            return []
        item = max(ptr.get_element_ty().primitive_bitwidth // 8, 1)
        pid: tuple[int, int, int] = interpreter_builder.grid_idx
        idx = np.searchsorted(launch.los, addr, side="right").astype(np.int64) - 1
        inside = idx >= 0
        inside[inside] &= addr[inside] + np.uint64(item) <= launch.his[idx[inside]]
        if not inside.all():
            bad = int(addr[~inside][0])
            what = {"load": "loads", "atomic_load": "loads", "store": "stores to", "atomic_store": "stores to",
                    "rmw": "updates"}[op.kind]
            raise UnsafeAccess(
                f"out-of-bounds access in kernel {launch.kernel}: {program_label(pid)} {what} address "
                f"{bad:#x}, outside every tensor argument of the launch (the interpreter does no bounds "
                "checking; on a GPU this is an illegal access or silent corruption)")
        races = launch.races
        if races is None and not launch.tracked:
            return []
        first, last = int(idx.min()), int(idx.max())  # (most instructions address one tensor)
        regions = [first] if first == last else np.unique(idx).tolist()
        for r_i in regions:
            region = launch.regions[r_i]
            if region.span is not None:
                self._initialized(launch, region, region.span, op, addr if first == last else addr[idx == r_i],
                                  item, pid)
        if races is None:
            return []
        if value is not None:
            vals = np.ascontiguousarray(np.broadcast_to(np.asarray(value.data), shape)).reshape(-1)
            vals = vals if active is None else vals[active]
            for r_i in regions:
                region, sel = launch.regions[r_i], idx == r_i
                lanes_agree(launch.kernel, region.name, region.itemsize, region.lo, addr[sel], vals[sel], pid)
        touched = []
        for r_i in regions:
            region = launch.regions[r_i]
            assert region.maps is not None
            lanes = np.where(idx == r_i, (addr - np.uint64(region.lo)).astype(np.int64), -1)
            offs = np.unique(lanes[lanes >= 0])
            if active is not None:
                lanes = _spread(lanes, active)
            reading = writing = None
            if read_only is not None:
                reading = np.unique(lanes[read_only & (lanes >= 0)])
                writing = np.unique(lanes[~read_only & (lanes >= 0)])
            stale = races.check(region.maps, region.name, region.itemsize, op, offs, launch.me(pid), reading, writing)
            touched.append((region, offs, lanes, stale))
        return touched

    @staticmethod
    def _initialized(launch: Launch, region: Region, span: Span, op: Op, addr: np.ndarray, item: int,
                     pid: tuple[int, int, int]) -> None:
        """The uninitialized-read rule: reads need written elements; writes write them."""
        offs = (addr - np.uint64(span.lo)).astype(np.int64)
        if op.reads:
            bad = span.first_unwritten(offs, item)
            if bad is not None:
                raise UnsafeAccess(
                    f"uninitialized read in kernel {launch.kernel}: {program_label(pid)} {op.verb()} {region.name}"
                    f"[{bad // span.itemsize}] ({span.label}), which nothing in this call of launch has written "
                    "yet: on a GPU it holds whatever the memory held before, so a kernel that decides anything on "
                    "it is right under the check's poison and wrong on memory that happens to hold zeros (write "
                    "each element before reading it, or allocate with torch.zeros or fill it first)")
        if op.writes:
            span.mark(offs, item)


def _memory(ptr: Any, mask: Any) -> np.ndarray:
    """What memory holds at the active lanes of a pointer handle (flat; zeros elsewhere; the sanitizer
    checked the active lanes' bounds)."""
    from triton.runtime import interpreter as interp

    addrs = np.asarray(ptr.data, dtype=np.uint64)
    on = np.ones(addrs.shape, dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask.data, dtype=bool),
                                                                               addrs.shape)
    dtype = interp._get_np_dtype(ptr.get_element_ty())
    held = interp._interpreter.load(addrs, np.ascontiguousarray(on), np.zeros(addrs.shape, dtype=dtype), dtype)
    return np.asarray(held).reshape(-1)


def _spread(lanes: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Per-lane values of the active lanes, spread back over every lane (-1 where inactive)."""
    out = np.full(active.shape, -1, dtype=np.int64)
    out[active] = lanes
    return out
