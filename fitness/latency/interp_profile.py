"""Profile what a candidate's ``launch`` launches, in the interpreter, on a sample of programs.

Runs in the interpreter worker (``TRITON_INTERPRET=1``). While ``launch`` runs, every kernel
launch is intercepted: instead of interpreting the whole grid (far too slow at bench sizes), a
sample of programs runs under `fitness.latency.interp_hooks.Recorder` (see `fitness.latency.sampling` for which
programs and loop iterations, and how they are scaled), and the launch's counts are extrapolated
to the grid. A launch identical to an earlier one in the same call (same kernel, grid, argument
shapes and constants) is counted once more without being interpreted again.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from fitness.latency.counts import BufferTraffic, LaunchCounts
from fitness.latency.interp_hooks import Buffer, BufferCount, ProgramCounts, Recorder
from fitness.latency.interp_wrap import wrap_bool, wrap_builder_method, wrap_reduce
from fitness.latency.sampling import Pid, normalize_grid, program_scales, programs, reuse_probes, sample_programs

_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "debug")


@dataclass(frozen=True)
class ProfileSettings:
    """How much to interpret. The SM figures bound the reuse probes: a program further away in
    launch order than all programs that can be resident at once cannot share L2 with it."""

    inner_samples: int = 2
    loop_keep: int = 2
    max_profiled_launches: int = 16
    sms: int = 132
    max_blocks_per_sm: int = 32
    max_warps_per_sm: int = 64

    def max_resident(self, warps: int) -> int:
        return self.sms * max(1, min(self.max_blocks_per_sm, self.max_warps_per_sm // max(warps, 1)))


def _is_constexpr(annotation: Any) -> bool:
    return "constexpr" in str(annotation)


def _tensors(bound: dict[str, Any]) -> list[Buffer]:
    """One Buffer per distinct storage among the tensor arguments (aliases share one)."""
    found: dict[int, Buffer] = {}
    for name, v in bound.items():
        if hasattr(v, "untyped_storage") and hasattr(v, "data_ptr"):
            storage = v.untyped_storage()
            start = int(storage.data_ptr())
            if start in found:
                found[start].name += f"+{name}"
            else:
                found[start] = Buffer(name, start, start + int(storage.nbytes()))
    return list(found.values())


def _launch_key(fn: Any, bound: dict[str, Any], grid: Pid, options: dict[str, Any]) -> str:
    parts = [fn.__name__, repr(grid), repr(sorted(options.items()))]
    for name, v in bound.items():
        if hasattr(v, "data_ptr"):
            parts.append(f"{name}:{tuple(v.shape)}:{tuple(v.stride())}:{v.dtype}")
        else:
            parts.append(f"{name}={v!r}")
    return "|".join(parts)


class _Patches:
    """Installs the recorder into the interpreter; `restore` undoes every change."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def set(self, obj: Any, name: str, value: Any, *, instance: bool = False) -> None:
        if instance:
            had = name in vars(obj)
            old = vars(obj).get(name)
            setattr(obj, name, value)
            self._undo.append(lambda: setattr(obj, name, old) if had else delattr(obj, name))
        else:
            old = getattr(obj, name)
            setattr(obj, name, value)
            self._undo.append(lambda: setattr(obj, name, old))

    def set_item(self, d: dict[str, Any], key: str, value: Any) -> None:
        had, old = key in d, d.get(key)
        d[key] = value
        self._undo.append(lambda: d.__setitem__(key, old) if had else d.pop(key, None))

    def restore(self) -> None:
        while self._undo:
            self._undo.pop()()


def _install(rec: Recorder, fn_globals: dict[str, Any]) -> _Patches:
    import triton.language as tl
    from triton.runtime import interpreter as interp

    p = _Patches()
    builder = interp.interpreter_builder
    for name in dir(type(builder)):
        if name.startswith("create_"):
            p.set(builder, name, wrap_builder_method(rec, name, getattr(builder, name)), instance=True)
    for cls_name in ("ReduceScanOpInterface", "ReduceOps", "ScanOps"):  # names differ across versions
        cls = getattr(interp, cls_name, None)
        if cls is not None and "apply" in vars(cls):
            p.set(cls, "apply", wrap_reduce(rec, cls.apply))
    p.set_item(fn_globals, "range", rec.sampled_range)  # `range` in kernels of this module
    original_patch = interp._patch_lang
    ours: list[Callable[..., Any]] = []

    def patch_lang(fn: Any) -> Any:
        # the interpreter re-patches triton.language on every device-function call: re-apply ours
        scope = original_patch(fn)
        for lang in (tl, tl.core):
            lang.range = rec.tl_range
            lang.static_range = rec.tl_range
        if tl.core.tensor.__bool__ not in ours:
            ours.append(wrap_bool(rec, tl.core.tensor.__bool__))
            tl.core.tensor.__bool__ = ours[-1]
        return scope

    p.set(interp, "_patch_lang", patch_lang)
    return p


def _sum(records: list[tuple[ProgramCounts, float]], get: Callable[[ProgramCounts], float]) -> float:
    return sum(get(r) * s for r, s in records)


class LaunchProfiler:
    """Replaces ``InterpretedFunction.run`` while a candidate's ``launch`` runs."""

    def __init__(self, filename: str, settings: ProfileSettings = ProfileSettings()) -> None:
        self.filename = filename
        self.settings = settings
        self.launches: list[LaunchCounts] = []
        self._by_key: dict[str, int] = {}
        self.calls = 0
        self.seconds = 0.0

    def __enter__(self) -> LaunchProfiler:
        from triton.runtime.interpreter import InterpretedFunction

        profiler = self
        self._patches = _Patches()

        def run(fn_self: Any, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> None:
            if not warmup:
                profiler.profile(fn_self, args, kwargs, grid)

        def getitem(fn_self: Any, grid: Any) -> Callable[..., None]:
            # kernel[grid](...) reaches `run` in recent Triton, a grid executor directly in older ones
            return lambda *args, **kwargs: run(fn_self, *args, grid=grid, **kwargs)

        self._patches.set(InterpretedFunction, "run", run)
        self._patches.set(InterpretedFunction, "__getitem__", getitem)
        return self

    def __exit__(self, *exc: object) -> None:
        self._patches.restore()

    def profile(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grid_arg: Any) -> None:
        start = time.perf_counter()
        raw = fn.fn
        sig = inspect.signature(raw)
        options = {k: v for k, v in kwargs.items() if k in _OPTIONS}
        kernel_kwargs = {k: v for k, v in kwargs.items() if k in sig.parameters}
        bound_sig = sig.bind(*args, **kernel_kwargs)
        bound_sig.apply_defaults()
        bound = dict(bound_sig.arguments)
        grid = normalize_grid(tuple(grid_arg(bound) if callable(grid_arg) else grid_arg))
        key = _launch_key(fn, bound, grid, options)
        self.calls += 1
        if key in self._by_key or len(self.launches) >= self.settings.max_profiled_launches:
            i = self._by_key.get(key)
            if i is None:  # too many distinct launches: count this one like the latest of its kernel
                i = max(j for j, c in enumerate(self.launches) if c.kernel == fn.__name__) if any(
                    c.kernel == fn.__name__ for c in self.launches) else len(self.launches) - 1
            prev = self.launches[i]
            self.launches[i] = replace(prev, repeats=prev.repeats + 1)
            return
        counts = self._interpret(fn, bound, sig, grid, options)
        self._by_key[key] = len(self.launches)
        self.launches.append(replace(counts, call_index=self.calls - 1))
        self.seconds += time.perf_counter() - start

    def _interpret(self, fn: Any, bound: dict[str, Any], sig: inspect.Signature, grid: Pid,
                   options: dict[str, Any]) -> LaunchCounts:
        from triton.runtime import interpreter as interp

        warps = int(options.get("num_warps", 4))
        stages = int(options.get("num_stages", 3))
        buffers = _tensors(bound)
        rec = Recorder(buffers, warps, self.filename, loop_keep=self.settings.loop_keep)
        samples, base = sample_programs(grid, inner=self.settings.inner_samples)
        probes = reuse_probes(base, grid, self.settings.max_resident(warps)) if samples else []
        rewritten = fn.rewrite()
        patches = _install(rec, fn.fn.__globals__)
        scope = interp._patch_lang(fn.fn)  # our wrapper: language patched, then our range and bool
        records: list[tuple[Pid, ProgramCounts]] = []
        distances = [0] * len(rec.buffers)
        try:
            constexprs = {n for n, p in sig.parameters.items() if _is_constexpr(p.annotation)}
            call_args = {n: v if n in constexprs else interp._implicit_cvt(v) for n, v in bound.items()}
            interp.interpreter_builder.set_grid_dim(*grid)

            def run(pid: Pid) -> ProgramCounts:
                interp.interpreter_builder.set_grid_idx(*pid)
                rec.begin_program()
                rec.active = True
                try:
                    rewritten(**call_args)
                finally:
                    rec.active = False
                return rec.program

            for pid in samples:
                records.append((pid, run(pid)))
            base_sectors = dict(records)[base].sectors if records else {}
            # probes only need addresses (the first iteration of each loop), nearest first, and
            # stop once every buffer the base program loads has found its nearest sharer
            rec.loop_keep, rec.loop_tail = 1, False
            for offset, pid in probes:
                if all(distances[b] or not sectors for b, sectors in base_sectors.items()):
                    break
                probe = run(pid).sectors
                for b, seen in base_sectors.items():
                    mine = probe.get(b)
                    if not distances[b] and seen and mine and len(mine & seen) >= 0.5 * len(mine):
                        distances[b] = abs(offset)
        finally:
            if scope is not None and hasattr(scope, "restore"):
                scope.restore()
            patches.restore()
        return _extrapolate(fn.__name__, grid, warps, stages, rec.buffers, records, distances, rec.notes)


def _extrapolate(kernel: str, grid: Pid, warps: int, stages: int, buffers: list[Buffer],
                 records: list[tuple[Pid, ProgramCounts]], distances: list[int], notes: set[str]) -> LaunchCounts:
    scales = program_scales([p for p, _ in records], grid)
    weighted = [(r, scales[p]) for p, r in records]
    total = max(programs(grid), 1)
    traffic = []
    for i, buf in enumerate(buffers):
        size = buf.end - buf.start
        span = max(buf.hi - buf.lo, 0) if buf.hi else 0
        store_span = max(buf.store_hi - buf.store_lo, 0) if buf.store_hi else 0
        t = BufferCount()
        for r, scale in weighted:
            c = r.buffers.get(i)
            if c is not None:
                t.requests += c.requests * scale
                t.unique += c.unique * scale
                t.store_requests += c.store_requests * scale
                t.store_unique += c.store_unique * scale
        traffic.append(BufferTraffic(
            name=buf.name, size=size, requests=t.requests, unique=t.unique, span=float(min(span, size)),
            reuse_distance=distances[i], store_requests=t.store_requests, store_unique=t.store_unique,
            store_span=float(min(store_span, size)),
        ))
    tensor: dict[str, float] = {}
    for r, s in weighted:
        for k, v in r.tensor_flops.items():
            tensor[k] = tensor.get(k, 0.0) + v * s

    def rounds(r: ProgramCounts, which: str) -> float:
        if which == "pipelined":
            return sum(x.weight for x in r.rounds if x.dot_fed)
        return sum(x.weight for x in r.rounds if not x.dot_fed and x.new == (which == "dram"))

    return LaunchCounts(
        kernel=kernel, grid=grid, num_warps=warps, num_stages=stages, buffers=tuple(traffic),
        tensor_flops=tensor,
        fma_flops=_sum(weighted, lambda r: r.fma_flops),
        alu_flops=_sum(weighted, lambda r: r.alu_flops),
        sfu_ops=_sum(weighted, lambda r: r.sfu_ops),
        warp_instructions=_sum(weighted, lambda r: r.warp_instructions),
        rounds_dram_per_program=_sum(weighted, lambda r: rounds(r, "dram")) / total,
        rounds_reuse_per_program=_sum(weighted, lambda r: rounds(r, "reuse")) / total,
        rounds_pipelined_per_program=_sum(weighted, lambda r: rounds(r, "pipelined")) / total,
        reductions_per_program=_sum(weighted, lambda r: r.reductions) / total,
        unique_bytes_per_program=_sum(weighted, lambda r: sum(c.unique for c in r.buffers.values())) / total,
        dot_min_m=min((r.dot_min_m for r, _ in weighted if r.dot_min_m), default=0),
        data_dependent=tuple(sorted(notes)),
        sampled_programs=len(records),
    )
