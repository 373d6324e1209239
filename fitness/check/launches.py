"""What one kernel launch may address, as the sanitizer (`fitness.check.sanitizer`) sees it at the launch:
a region per tensor argument (a task input or output: exactly the elements of each view; scratch the
candidate allocated: its whole storage), with where the uninitialized-read rule tracks its bytes and,
with races on, the race maps. An argument the run-time guard never saw made (`fitness.sandbox.provenance`)
is refused here."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np

from fitness.check.races import Maps, Races
from fitness.check.written import Span, Written
from fitness.sandbox.interp_patch import tensor_span
from fitness.sandbox.provenance import INPUT, OUTPUT, UNWRITTEN_SCRATCH, Provenance, storage_key
from fitness.sandbox.torch_guard import ForbiddenOperation


@dataclass
class Region:
    name: str
    lo: int
    hi: int
    itemsize: int
    span: Span | None = None  # the region's bytes as the uninitialized-read rule tracks them (None: written)
    maps: Maps | None = None  # who touched what, for the race rules


class Launch:
    """The regions one launch may address, and (with races on) its race rules."""

    def __init__(self, kernel: str, regions: list[Region], grid: tuple[int, int, int], races: bool) -> None:
        self.kernel = kernel
        self.regions = sorted(regions, key=lambda r: r.lo)
        self.los = np.array([r.lo for r in self.regions], dtype=np.uint64)
        self.his = np.array([r.hi for r in self.regions] or [0], dtype=np.uint64)
        self.grid = grid
        self.tracked = any(r.span is not None for r in self.regions)  # any region the uninitialized-read rule tracks
        self.races: Races | None = None
        if races:
            self.races = Races(kernel, grid)
            for r in self.regions:
                r.maps = Maps(max(r.hi - r.lo, 0))
                self.races.maps.append(r.maps)

    def me(self, pid: tuple[int, int, int]) -> int:
        return pid[0] + self.grid[0] * (pid[1] + self.grid[1] * pid[2])


def begin(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grid_arg: Any, *, harness: dict[int, list[Any]],
          provenance: Provenance, written: Written, races: bool) -> Launch:
    """The launch of interpreted kernel `fn` with these arguments: its regions, host fills since the last
    launch applied to what `written` tracks (`harness`: the task's views by storage identity)."""
    sig = inspect.signature(fn.fn)
    bound_sig = sig.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in sig.parameters})
    bound = dict(bound_sig.arguments)
    fills = provenance.take_fills()  # host fills since the last launch (or the call's start)
    for fill in fills:
        a = provenance.allocations.get(fill.key)
        if a is not None and not a.initialized:
            written.track(fill.key, a.start, a.start + a.nbytes, a.itemsize, f"scratch from torch.{a.how}")
    written.apply(fills)
    regions: dict[tuple[int, int], Region] = {}
    for name, v in bound.items():
        t = _tensor_of(fn.__name__, name, v)
        if t is None:
            continue
        key, origin = storage_key(t), provenance.origin(t)
        if origin is None:
            raise ForbiddenOperation(
                f"launch passes kernel {fn.__name__} a tensor as '{name}' that is neither a task input or "
                "output (or a view of one) nor memory this call of launch allocated with torch.empty/zeros/"
                "full/... (the *_like and new_* forms too): a tensor made by another constructor, such as "
                "torch.Tensor(n), is not poisoned by the check and is not on the device a GPU kernel reads, "
                "and one kept from an earlier call is state that outlives the call")
        span = None
        if origin in (INPUT, OUTPUT):  # exactly the elements of each view given
            spans = [tensor_span(h) for h in harness.get(key, [t])]
            span = written.spans.get(key) if origin == OUTPUT else None
        else:  # scratch the candidate allocated: its whole storage
            a = provenance.allocations[key]
            spans = [(a.start, a.start + a.nbytes)]
            if origin == UNWRITTEN_SCRATCH:
                span = written.track(key, *spans[0], a.itemsize, f"scratch from torch.{a.how}")
        for lo, hi in spans:
            if (lo, hi) not in regions:
                regions[(lo, hi)] = Region(name, lo, hi, int(t.element_size()), span)
    g = [int(x) for x in (grid_arg(bound) if callable(grid_arg) else grid_arg)] + [1, 1, 1]
    return Launch(fn.__name__, _merge(list(regions.values())), (g[0], g[1], g[2]), races)


def _tensor_of(kernel: str, name: str, v: Any) -> Any:
    """The torch tensor behind a kernel argument (None: not a pointer argument)."""
    from triton.runtime.jit import TensorWrapper

    if isinstance(v, TensorWrapper):  # triton.reinterpret: the same memory under another dtype
        v = v.base
    if hasattr(v, "untyped_storage") and hasattr(v, "data_ptr"):
        return v
    if hasattr(v, "data_ptr"):
        raise ForbiddenOperation(f"launch passes kernel {kernel} an object with data_ptr() as '{name}' that is not "
                                 "a torch tensor: kernels get task tensors and torch allocations only")
    return None


def _merge(regions: list[Region]) -> list[Region]:
    """Overlapping regions (two views of one storage) as one, so an address has one owner."""
    out: list[Region] = []
    for r in sorted(regions, key=lambda r: r.lo):
        if out and r.lo < out[-1].hi:
            last = out[-1]
            last.hi = max(last.hi, r.hi)
            last.name = f"{last.name}+{r.name}" if r.name not in last.name else last.name
            last.span = last.span or r.span
        else:
            out.append(r)
    return out
