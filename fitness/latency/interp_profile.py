"""Profile what a candidate's ``launch`` launches, in the interpreter, on a sample of programs.

Runs in the interpreter worker (``TRITON_INTERPRET=1``). While ``launch`` runs, every kernel launch
is recorded, not run; once ``launch`` returns (it cannot read what its kernels compute: it may not
compute with torch), the launches run in their order, each on a sample of its programs chosen by
`fitness.latency.sampling` from a generator the caller seeds (from the run's secret), under
`fitness.latency.interp_hooks.Recorder`:

- a launch whose sampled programs store nothing at all runs more programs, drawn at random, until
  one does or every program has run (work cannot hide in programs the sample skips);
- every path the program id decides (``if row % 64 == 37:``, a loop whose trips depend on it) has a
  sampled program, weighted for the programs that take it (`fitness.latency.paths`);
- a launch identical to an earlier one (same kernel, grid, options, scalar arguments and the same
  contents of every tensor argument) would compute the same thing again: it is counted as a repeat
  without running; anything else runs, however many launches there are;
- every launch records the exact specialization it ran (argument types, constants, divisibility,
  options) for the cross-compile of `fitness.latency.target_compile`, and the hints the model does
  not represent (cache modifiers, eviction policies);
- the output elements stored by programs that computed from real data are handed back with their
  values, for the driver to compare with the reference (`Profile.verified`).
"""

from __future__ import annotations

import hashlib
import inspect
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from fitness.latency.counts import BufferTraffic, LaunchCounts
from fitness.latency.interp_hooks import Buffer, BufferCount, MemoryState, ProgramCounts, Recorder
from fitness.latency.interp_wrap import wrap_bool, wrap_builder_method, wrap_reduce
from fitness.latency.paths import kernel_tree, path_labels, stratified, with_strata
from fitness.latency.sampling import (
    Pid,
    draw_points,
    more_programs,
    normalize_grid,
    program_scales,
    programs,
    reuse_probes,
    sample_programs,
)
from fitness.sandbox.interp_patch import Patches, tensor_span

OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "debug")
_COMPILE_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


@dataclass(frozen=True)
class ProfileSettings:
    """How much to interpret. `inner_samples` random programs per launch (besides one per edge
    stratum); loops up to `loop_full` iterations run in full, and every loop of `full_programs` of the
    sampled programs (drawn at random), so that what they store can always be compared. The SM figures
    bound the reuse probes: a program further away in launch order than all programs resident at once
    cannot share L2."""

    inner_samples: int
    loop_full: int
    full_programs: int
    full_iterations: int
    sms: int
    max_blocks_per_sm: int
    max_warps_per_sm: int
    # run every program of every launch, every loop in full: counts are exact and every output element is
    # compared (for a candidate whose sample left too little to compare: the timed run is the checked one)
    every_program: bool = False

    def max_resident(self, warps: int) -> int:
        return self.sms * max(1, min(self.max_blocks_per_sm, self.max_warps_per_sm // max(warps, 1)))


@dataclass
class _Launch:
    fn: Any
    bound: dict[str, Any]
    grid: Pid
    options: dict[str, Any]


@dataclass
class Profile:
    """What the profiled call did: counts per distinct launch, compile specializations, notes, and the
    output elements to judge (per output: flat indices and their values' bytes)."""

    launches: list[LaunchCounts] = field(default_factory=list)
    specs: list[dict[str, Any]] = field(default_factory=list)
    notes: set[str] = field(default_factory=set)
    unmodelled: set[str] = field(default_factory=set)
    verified: list[tuple[bytes, bytes]] = field(default_factory=list)
    written: list[int] = field(default_factory=list)  # output elements stored by sampled programs
    coverage: float = 0.0  # extrapolated share of the outputs' elements the launches store
    programs_run: int = 0
    full_run_s: float = 0.0  # estimated CPU seconds of an interpreted run of every program in full


def _is_constexpr(annotation: Any) -> bool:
    return "constexpr" in str(annotation)


def _digest(t: Any) -> str:
    """The contents of a tensor argument (the bytes it can address), for the launch key."""
    import ctypes

    lo, hi = tensor_span(t)
    return hashlib.sha1(ctypes.string_at(lo, hi - lo)).hexdigest() if hi > lo else "empty"


def _launch_key(launch: _Launch) -> str:
    parts = [launch.fn.__name__, repr(launch.grid), repr(sorted(launch.options.items()))]
    for name, v in launch.bound.items():
        if hasattr(v, "data_ptr"):
            parts.append(f"{name}:{tuple(v.shape)}:{tuple(v.stride())}:{v.dtype}:{v.data_ptr()}:{_digest(v)}")
        else:
            parts.append(f"{name}={v!r}")
    return "|".join(parts)


def _encode_constexpr(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    name = getattr(v, "name", None)  # a tl.dtype
    if isinstance(name, str):
        return {"dtype": name}
    return {"repr": repr(v)}


def bind_launch(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A launch's arguments by parameter name (defaults filled in), and its launch options (num_warps...)."""
    sig = inspect.signature(fn.fn)
    bound = sig.bind(*args, **{k: v for k, v in kwargs.items() if k in sig.parameters})
    bound.apply_defaults()
    return dict(bound.arguments), {k: v for k, v in kwargs.items() if k in OPTIONS}


def compile_spec(fn: Any, bound: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """The specialization Triton's launcher would compile for these arguments (integers equal to 1
    become constants; pointers and integers divisible by 16 are marked so, unless the kernel opts out)."""
    from triton.runtime.jit import mangle_type

    sig = inspect.signature(fn.fn)
    kw = getattr(fn, "kwargs", {}) or {}
    no_spec = set(kw.get("do_not_specialize") or ())
    no_align = set(kw.get("do_not_specialize_on_alignment") or ())
    signature: dict[str, str] = {}
    constexprs: list[list[Any]] = []
    attrs: list[list[Any]] = []
    for i, (name, p) in enumerate(sig.parameters.items()):
        v = bound[name]
        skip_spec = name in no_spec or i in no_spec
        if _is_constexpr(p.annotation) or v is None or (
                isinstance(v, int) and not isinstance(v, bool) and v == 1 and not skip_spec):
            signature[name] = "constexpr"
            constexprs.append([i, _encode_constexpr(v)])
            continue
        signature[name] = mangle_type(v)
        aligned = False
        if hasattr(v, "data_ptr"):
            aligned = v.data_ptr() % 16 == 0 and not (name in no_align or i in no_align)
        elif isinstance(v, int) and not isinstance(v, bool):
            aligned = v % 16 == 0 and not skip_spec
        if aligned:
            attrs.append([i, [["tt.divisibility", 16]]])
    opts = {k: v for k, v in options.items() if k in _COMPILE_OPTIONS}
    return {"kernel": fn.__name__, "signature": signature, "constexprs": constexprs, "attrs": attrs, "options": opts}


def _install(rec: Recorder, fn_globals: dict[str, Any]) -> Patches:
    import triton.language as tl
    from triton.runtime import interpreter as interp

    p = Patches()
    builder = interp.interpreter_builder
    for name in dir(type(builder)):
        if name.startswith("create_"):
            p.set(builder, name, wrap_builder_method(rec, name, getattr(builder, name)), instance=True)
    if hasattr(type(builder), "get_cache_policy"):
        original_policy = builder.get_cache_policy

        def policy(cache_modifier: Any, eviction_policy: Any) -> Any:
            if rec.active:
                rec.cache_policy(cache_modifier, eviction_policy)
            return original_policy(cache_modifier, eviction_policy)

        p.set(builder, "get_cache_policy", policy, instance=True)
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
    """Records the launches of one ``launch`` call (replacing ``InterpretedFunction.run``), then
    `execute` runs them as the module docstring says."""

    def __init__(self, filename: str, settings: ProfileSettings, seed: int, inputs: list[Any],
                 outputs: list[Any]) -> None:
        self.filename = filename
        self.settings = settings
        self.rng = random.Random(seed)
        self.inputs, self.outputs = inputs, outputs
        self.memory = MemoryState([(int(t.data_ptr()), int(t.numel()), int(t.element_size())) for t in outputs])
        self.recorded: list[_Launch] = []
        self.seconds = 0.0

    def __enter__(self) -> LaunchProfiler:
        profiler = self
        self._patches = Patches()

        def run(fn_self: Any, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> None:
            if not warmup:
                profiler.record(fn_self, args, kwargs, grid)

        self._patches.launches(run)
        return self

    def __exit__(self, *exc: object) -> None:
        self._patches.restore()

    def record(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grid_arg: Any) -> None:
        bound, options = bind_launch(fn, args, kwargs)
        grid = normalize_grid(tuple(grid_arg(bound) if callable(grid_arg) else grid_arg))
        self.recorded.append(_Launch(fn, bound, grid, options))

    # -- execution ------------------------------------------------------------------------------

    def _buffers(self, launch: _Launch) -> list[Buffer]:
        """One Buffer per distinct storage among the launch's tensor arguments: a task input or output
        (its exact extent), else scratch (its whole storage)."""
        harness = {int(t.data_ptr()): ("input", -1, t) for t in self.inputs}
        harness.update({int(t.data_ptr()): ("output", i, t) for i, t in enumerate(self.outputs)})
        found: dict[int, Buffer] = {}
        for name, v in launch.bound.items():
            if not (hasattr(v, "untyped_storage") and hasattr(v, "data_ptr")):
                continue
            storage = v.untyped_storage()
            start = int(storage.data_ptr())
            if start in found:
                found[start].name += f"+{name}"
                continue
            kind, index, t = harness.get(start, ("scratch", -1, None))
            if t is not None:
                lo, hi = tensor_span(t)
                found[start] = Buffer(name, lo, hi, kind, index, int(t.element_size()))
            else:
                found[start] = Buffer(name, start, start + int(storage.nbytes()), "scratch", -1,
                                      int(v.element_size()))
        return list(found.values())

    def _full_axes(self, i: int) -> tuple[int, ...]:
        """Axes along which launch `i` runs every program: axes it splits that no later launch has
        (a later launch combines what it computed along them)."""
        later = [launch.grid for launch in self.recorded[i + 1:]]
        if not later:
            return ()
        grid = self.recorded[i].grid
        return tuple(a for a in range(3) if grid[a] > 1 and all(g[a] == 1 for g in later))

    def execute(self, initialized: set[int]) -> Profile:
        """Run the recorded launches; `initialized`: starts of scratch storages allocated with contents."""
        start = time.process_time()  # CPU seconds: the estimate must not depend on how busy the machine is
        out = Profile()
        points = draw_points(self.rng, self.settings.inner_samples)
        by_key: dict[str, int] = {}
        estimated_writes = 0.0
        full_ops: dict[str, float] = {}  # per distinct launch: memory ops of all its programs, in full
        total_ops, ops_run = 0.0, 0
        for i, launch in enumerate(self.recorded):
            key = _launch_key(launch)
            if key in by_key:
                j = by_key[key]
                out.launches[j] = replace(out.launches[j], repeats=out.launches[j].repeats + 1)
                total_ops += full_ops[key]
                continue
            spec = compile_spec(launch.fn, launch.bound, launch.options)
            if spec not in out.specs:
                out.specs.append(spec)
            counts, writes, ran, (full_ops[key], events) = self._interpret(
                launch, points, self._full_axes(i), initialized, out)
            estimated_writes += writes
            total_ops += full_ops[key]
            ops_run += events
            out.programs_run += ran
            by_key[key] = len(out.launches)
            out.launches.append(replace(counts, spec=out.specs.index(spec)))
        for index, t in enumerate(self.outputs):
            # every program ran in full: every element holds its final value, atomic updates included
            idx = np.arange(int(t.numel())) if self.settings.every_program else self.memory.verifiable(index)
            values = t.reshape(-1)[idx]
            out.verified.append((idx.astype(np.int64).tobytes(), _bytes(values)))
            out.written.append(self.memory.written(index))
        total = sum(int(t.numel()) for t in self.outputs)
        out.coverage = 1.0 if self.settings.every_program else (estimated_writes / total if total else 1.0)
        self.seconds = time.process_time() - start
        out.full_run_s = self.seconds * total_ops / max(ops_run, 1)
        return out

    def _interpret(self, launch: _Launch, points: list[Any], full_axes: tuple[int, ...], initialized: set[int],
                   out: Profile) -> tuple[LaunchCounts, float, int, tuple[float, int]]:
        """The launch's counts, its extrapolated output writes, the programs run, and (memory ops of
        every program in full, memory ops interpreted) for the full-run estimate."""
        from triton.runtime import interpreter as interp

        fn, bound, grid = launch.fn, launch.bound, launch.grid
        warps = int(launch.options.get("num_warps", 4))
        stages = int(launch.options.get("num_stages", 3))
        rec = Recorder(self._buffers(launch), warps, self.filename, self.memory,
                       loop_full=self.settings.loop_full, initialized=initialized)
        labels: dict[int, Any] = {}
        if self.settings.every_program:
            samples = [(x, y, z) for z in range(grid[2]) for y in range(grid[1]) for x in range(grid[0])]
        else:
            # a program of every path the program id decides: work cannot hide in programs the sample skips
            tree = kernel_tree(fn.fn)
            labels = path_labels(tree, bound, grid) if tree is not None else {}
            samples = with_strata(sample_programs(grid, points, full_axes=full_axes), labels, self.rng)
        rewritten = fn.rewrite()
        patches = _install(rec, fn.fn.__globals__)
        scope = interp._patch_lang(fn.fn)  # our wrapper: language patched, then our range and bool
        records: list[tuple[Pid, ProgramCounts]] = []
        distances = [0] * len(rec.buffers)
        try:
            sig = inspect.signature(fn.fn)
            constexprs = {n for n, p in sig.parameters.items() if _is_constexpr(p.annotation)}
            call_args = {n: v if n in constexprs else interp._implicit_cvt(v) for n, v in bound.items()}
            interp.interpreter_builder.set_grid_dim(*grid)

            in_full = set(samples) if self.settings.every_program else set(
                self.rng.sample(samples, min(self.settings.full_programs, len(samples))))

            def run(pid: Pid, *, probing: bool = False) -> ProgramCounts:
                interp.interpreter_builder.set_grid_idx(*pid)
                rec.budget = self.settings.full_iterations if pid in in_full and not probing else None
                rec.begin_program(probing=probing, rng=None if probing else self.rng)
                rec.active = True
                try:
                    rewritten(**call_args)
                finally:
                    rec.active = False
                rec.end_program()
                return rec.program

            for pid in samples:
                records.append((pid, run(pid)))
            while records and not any(r.stored for _, r in records):  # work may hide in other programs
                extra = more_programs(grid, [p for p, _ in records], self.rng, len(records))
                if not extra:
                    break
                records += [(pid, run(pid)) for pid in extra]
            if records:
                base, base_counts = records[self.rng.randrange(len(records))]
                base_sectors = dict(base_counts.sectors)
                # probes only need addresses: nearest first, stopping once every buffer the base
                # program loads has found its nearest sharer
                for offset, pid in reuse_probes(base, grid, self.settings.max_resident(warps)):
                    if all(distances[b] or not sectors for b, sectors in base_sectors.items()):
                        break
                    probe = run(pid, probing=True).sectors
                    for b, seen in base_sectors.items():
                        mine = probe.get(b)
                        if not distances[b] and seen and mine and len(mine & seen) >= 0.5 * len(mine):
                            distances[b] = abs(offset)
        finally:
            if scope is not None and hasattr(scope, "restore"):
                scope.restore()
            patches.restore()
        out.notes |= rec.notes
        out.unmodelled |= rec.unmodelled
        scales = stratified(program_scales([p for p, _ in records], grid), labels)
        writes = sum(r.stored_outputs * scales[p] for p, r in records)
        ops = sum(r.ops * scales[p] for p, r in records)
        return (_extrapolate(fn.__name__, grid, warps, stages, rec.buffers, records, scales, distances),
                writes, len(records), (ops, rec.events))


def _bytes(t: Any) -> bytes:
    import torch

    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return bytes(t.contiguous().numpy().tobytes())


def _extrapolate(kernel: str, grid: Pid, warps: int, stages: int, buffers: list[Buffer],
                 records: list[tuple[Pid, ProgramCounts]], scales: dict[Pid, float],
                 distances: list[int]) -> LaunchCounts:
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
        hot_atomics=_hot_atomics(weighted),
        longest_rounds_dram=max((rounds(r, "dram") for r, _ in weighted), default=0.0),
        longest_rounds_reuse=max((rounds(r, "reuse") for r, _ in weighted), default=0.0),
        longest_rounds_pipelined=max((rounds(r, "pipelined") for r, _ in weighted), default=0.0),
        longest_reductions=max((float(r.reductions) for r, _ in weighted), default=0.0),
        longest_warp_instructions=max((float(r.warp_instructions) for r, _ in weighted), default=0.0),
        longest_l2_bytes=max((float(sum(b.requests + b.store_requests for b in r.buffers.values()))
                              for r, _ in weighted), default=0.0),
        sampled_programs=len(records),
    )


def _hot_atomics(weighted: list[tuple[ProgramCounts, float]]) -> float:
    """Atomic updates of the grid's most updated address, from the sampled programs: an address two or more
    of them update is taken as shared by the programs they stand for (a counter, a global sum); one only one
    of them updates as its own (a per-row partial), counted once."""
    totals: dict[int, float] = {}
    own: dict[int, float] = {}
    hits: dict[int, int] = {}
    for r, scale in weighted:
        for address, n in r.atomics.items():
            totals[address] = totals.get(address, 0.0) + n * scale
            own[address] = max(own.get(address, 0.0), n)
            hits[address] = hits.get(address, 0) + 1
    return max((totals[a] if hits[a] > 1 else own[a] for a in totals), default=0.0)
