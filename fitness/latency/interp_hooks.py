"""Instrumentation of the Triton interpreter: what one interpreted program moves, computes and writes.

Installed (by `fitness.latency.interp_profile`) only while the latency model profiles, and removed
after. Every ``create_*`` method of the interpreter's builder is wrapped (`fitness.latency.interp_wrap`);
so are reductions and scans (which the interpreter computes in numpy, not with the builder) and
``range`` in kernels.

Per program it accumulates, each figure weighted by the loop-sampling weight in force (1 unless a
loop is longer than the sampling plan runs in full, see `fitness.latency.sampling.loop_plan`):
- loads and stores: 32-byte sectors touched by the *active* lanes (masked-off lanes move
  nothing), per buffer; sectors seen for the first time in this program are "unique";
- FLOPs: ``tl.dot`` as 2*M*N*K by operand type, element-wise float work, transcendental ops;
- warp instructions: an op on n elements costs ``num_warps * ceil(n / (32 * num_warps * vec))``
  (vec: elements per vector load, 16 bytes, for contiguous loads and stores; 1 otherwise);
  integer and pointer arithmetic counts a quarter (the compiler hoists and strength-reduces most
  of the address arithmetic the interpreter recomputes);
- memory round trips: loads issued before any of their results is used form one round (a warp
  stalls at the first use); a round that brings new sectors waits on DRAM, one that only
  re-reads waits on L2; a round whose result feeds ``tl.dot`` is software-pipelined;
- where addresses, masks or control flow depend on loaded data (values are tainted on load).

Memory that holds real data is tracked across the launches of one call (`MemoryState`): task
inputs are real; outputs (poisoned) and scratch from ``torch.empty`` are not until a sampled
program stores to them; an atomic update leaves its sectors incomplete (other programs' updates
are missing). A program that reads memory without real data, or whose loops were sampled, computed
nothing the reference can judge: only the output elements stored by the other programs are
compared (`MemoryState.verifiable`).

Every active address is checked against the buffers of the launch before the load or store runs:
at bench sizes a candidate whose index arithmetic overflows is caught here, not by a segfault. (An
address computed from loaded data is reported, not held against the candidate.) Reuse probes run
with stores and atomics suppressed: they only need addresses, and must not touch the outputs.
"""

from __future__ import annotations

import builtins
import math
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fitness.latency.sampling import loop_plan
from fitness.sandbox.interp_compat import scalar_index

TAINT = "_evo_data"  # handle attribute: value derived from loaded data
_ROUND = "_evo_round"
_SECTOR_SHIFT = 5  # 32-byte sectors

_CASTS = {
    "create_fp_to_fp", "create_fp_ext", "create_fp_trunc", "create_si_to_fp", "create_ui_to_fp",
    "create_fp_to_si", "create_fp_to_ui", "create_int_cast",
}
_SFU = {
    "create_exp", "create_exp2", "create_log", "create_log2", "create_sqrt", "create_precise_sqrt",
    "create_rsqrt", "create_sin", "create_cos", "create_erf", "create_fdiv", "create_precise_divf",
    "create_approx_divf",
}

# libdevice functions the interpreter runs through `create_libdevice_elementwise` (those with a builder op
# of their own, exp/log/sqrt/sin/cos/erf/floor..., are counted as that op): per element, (special-function
# ops, other float ops) of one call, after the shape of libdevice's float implementations (a range
# reduction, a polynomial, one or two MUFU instructions, special-case fix-ups). Estimates, not
# measurements (no GPU calibrated them), but no longer one op for a tanh or a pow; anything not listed
# costs LIBDEVICE_DEFAULT.
LIBDEVICE_COSTS: dict[str, tuple[int, int]] = {
    **dict.fromkeys(("abs", "copysign", "trunc", "round", "rint", "nearbyint", "saturatef", "add_rn", "sub_rn",
                     "mul_rn", "isnan", "isinf", "signbit", "finitef", "isfinited"), (0, 1)),
    **dict.fromkeys(("fma", "fma_rn", "fdim"), (0, 2)), "nextafter": (0, 4),
    **dict.fromkeys(("fast_log2f", "fast_sinf", "fast_cosf", "fast_tanhf", "rsqrt_rn"), (1, 0)),
    **dict.fromkeys(("fast_expf", "fast_exp10f", "fast_logf", "fast_log10f", "fast_dividef"), (1, 1)),
    "fast_powf": (2, 1), "fast_tanf": (3, 0), "div_rn": (1, 8),
    **dict.fromkeys(("exp10", "log10"), (1, 4)), "expm1": (1, 10), "log1p": (1, 12),
    **dict.fromkeys(("sinpi", "cospi"), (1, 8)), "tan": (2, 20),
    **dict.fromkeys(("asin", "acos", "atan"), (1, 14)), "atan2": (1, 18),
    **dict.fromkeys(("sinh", "cosh"), (2, 8)), "tanh": (2, 10), **dict.fromkeys(("asinh", "acosh"), (2, 14)),
    "atanh": (1, 12), **dict.fromkeys(("cbrt", "rcbrt"), (2, 8)), "hypot": (1, 8), "pow": (2, 30),
    **dict.fromkeys(("fmod", "remainder"), (0, 24)), "erfc": (1, 14), "normcdf": (1, 16),
    **dict.fromkeys(("lgamma", "tgamma"), (3, 40)),
}
LIBDEVICE_DEFAULT = (2, 16)


class OutOfBounds(Exception):
    """A sampled program loaded or stored outside every buffer of its launch."""


class DataDependentAccess(Exception):
    """An out-of-bounds address computed from loaded data."""


@dataclass
class Buffer:
    """A storage a launch can address. `kind`: input (real data), output (poisoned until stored to)
    or scratch; `index` is its position among the task's outputs (outputs only)."""

    name: str
    start: int
    end: int
    kind: str = "scratch"
    index: int = -1
    itemsize: int = 1
    lo: int = 2**64
    hi: int = 0
    store_lo: int = 2**64
    store_hi: int = 0


@dataclass
class BufferCount:
    requests: float = 0.0
    unique: float = 0.0
    store_requests: float = 0.0
    store_unique: float = 0.0


@dataclass
class _Round:
    weight: float
    new: bool = False
    dot_fed: bool = False


@dataclass
class ProgramCounts:
    """What one interpreted program did (weighted by loop sampling)."""

    buffers: dict[int, BufferCount] = field(default_factory=dict)
    sectors: dict[int, set[int]] = field(default_factory=dict)
    store_sectors: dict[int, set[int]] = field(default_factory=dict)
    tensor_flops: dict[str, float] = field(default_factory=dict)
    fma_flops: float = 0.0
    alu_flops: float = 0.0
    sfu_ops: float = 0.0
    warp_instructions: float = 0.0
    reductions: float = 0.0
    rounds: list[_Round] = field(default_factory=list)
    dot_min_m: int = 0
    stored: int = 0  # lanes stored (or updated atomically), any buffer
    stored_outputs: float = 0.0  # of those, lanes stored to the task's outputs (weighted)
    ops: float = 0.0  # loads, stores and atomics (weighted): what a full run would interpret
    atomics: dict[int, float] = field(default_factory=dict)  # address -> atomic updates to it (weighted)

    def buffer(self, i: int) -> BufferCount:
        if i not in self.buffers:
            self.buffers[i] = BufferCount()
        return self.buffers[i]


class MemoryState:
    """Which memory holds real data during one call of ``launch``, and which output elements were
    stored by programs that computed from real data only (see the module docstring)."""

    def __init__(self, outputs: list[tuple[int, int, int]]) -> None:
        """`outputs`: (start address, element count, element size) of each task output."""
        self.outputs = outputs
        self.out_state = [np.zeros(n, dtype=np.int8) for _, n, _ in outputs]  # 0 unwritten, 1 judged, 2 not
        self._real: dict[int, np.ndarray] = {}  # buffer start -> real flag per sector
        self._pending: list[tuple[int, np.ndarray, bool]] = []  # output index, elements stored, atomically
        self.program_real = True

    def sectors(self, buf: Buffer, addresses: np.ndarray) -> np.ndarray:
        return (addresses - np.uint64(buf.start)) >> np.uint64(_SECTOR_SHIFT)

    def _flags(self, buf: Buffer, initialized: bool) -> np.ndarray:
        if buf.start not in self._real:
            n = ((buf.end - buf.start) >> _SECTOR_SHIFT) + 1
            self._real[buf.start] = np.full(n, initialized, dtype=bool)
        return self._real[buf.start]

    def begin_program(self) -> None:
        self.program_real = True
        self._pending = []

    def loaded(self, buf: Buffer, addresses: np.ndarray, initialized: bool) -> None:
        if buf.kind == "input" or not addresses.size:
            return
        flags = self._flags(buf, initialized)
        if not flags[self.sectors(buf, addresses)].all():
            self.program_real = False

    def stored(self, buf: Buffer, addresses: np.ndarray, initialized: bool, *, atomic: bool) -> None:
        if not addresses.size:
            return
        self._flags(buf, initialized)[self.sectors(buf, addresses)] = not atomic
        if buf.kind == "output":
            elems = ((addresses - np.uint64(buf.start)) // np.uint64(buf.itemsize)).astype(np.int64)
            self._pending.append((buf.index, elems, atomic))

    def end_program(self, complete: bool) -> None:
        """Settle the output elements this program stored, in order: judged only if the program read
        real data and ran its loops in full, never after an atomic update (the other programs' updates
        are missing); the last store to an element decides."""
        mark = 1 if self.program_real and complete else 2
        for index, elems, atomic in self._pending:
            self.out_state[index][elems] = 2 if atomic else mark
        self._pending = []

    def verifiable(self, index: int) -> np.ndarray:
        return np.flatnonzero(self.out_state[index] == 1)

    def written(self, index: int) -> int:
        return int(np.count_nonzero(self.out_state[index]))


def _operand_type(dtype: Any, precision: Any) -> str:
    name = str(dtype)
    if name.startswith("fp8"):
        return "fp8"
    if name in ("fp16", "bf16"):
        return name
    p = str(precision).upper()
    if "IEEE" in p:
        return "fp32"
    return "tf32x3" if "X3" in p else "tf32"


class Recorder:
    """Counts what the interpreted programs of one launch do (see the module docstring)."""

    def __init__(self, buffers: list[Buffer], num_warps: int, filename: str, memory: MemoryState, *,
                 loop_full: int, initialized: set[int]) -> None:
        """`initialized`: starts of scratch buffers allocated with contents (``torch.zeros``, ...)."""
        self.buffers = sorted(buffers, key=lambda b: b.start)
        self._starts = np.array([b.start for b in self.buffers], dtype=np.uint64)
        self.warps = max(int(num_warps), 1)
        self.filename = filename
        self.memory = memory
        self.initialized = initialized
        self.loop_full = loop_full
        self.budget: int | None = None  # a program that runs its loops in full: iterations it may still run
        self.loop_rng: random.Random | None = None  # None: a reuse probe (first iterations only)
        self.probing = False
        self.poison_run = 0  # which poison masked-off lanes of loads without `other` read
        self.active = False
        self.depth = 0
        self.events = 0
        self.complete = True  # every loop of the current program ran in full
        self.program = ProgramCounts()
        self.notes: set[str] = set()
        self.unmodelled: set[str] = set()
        self._weights = [1.0]
        self._epoch = 0
        self._open: int | None = None

    # -- program and loop state ---------------------------------------------------------------
    def begin_program(self, *, probing: bool, rng: random.Random | None) -> None:
        self.program = ProgramCounts()
        self._weights = [1.0]
        self._epoch += 1
        self._open = None
        self.depth = 0
        self.probing = probing
        self.loop_rng = rng
        self.complete = True
        self.memory.begin_program()

    def end_program(self) -> None:
        if not self.probing:
            self.memory.end_program(self.complete)

    @property
    def weight(self) -> float:
        return self._weights[-1]

    def sampled_range(self, *args: Any, **kwargs: Any) -> Any:
        """`range` in kernels: every iteration, unless the loop is too long (see `loop_plan`)."""
        bounds = [scalar_index(a.handle.data) if hasattr(a, "handle") else a for a in args]
        if not self.active:
            return builtins.range(*bounds)
        if any(self.tainted_value(a) for a in args):
            self.note("loop bounds depend on loaded data")
        return self._iterate(builtins.range(*bounds))

    def tl_range(self, arg1: Any, arg2: Any = None, step: Any = None, **kwargs: Any) -> Any:
        """`tl.range` / `tl.static_range` with the interpreter's argument conventions."""
        start, end = (0, arg1) if arg2 is None else (arg1, arg2)
        return self.sampled_range(start, end, 1 if step is None else step)

    def _iterate(self, r: range) -> Iterator[int]:
        epoch = self._epoch
        if self.budget is not None and len(r) <= self.budget:
            self.budget -= len(r)
            plan = [(i, 1.0) for i in range(len(r))]
        else:
            plan = loop_plan(len(r), self.loop_full, None if self.probing else self.loop_rng)
        if len(plan) < len(r):
            self.complete = False
        for index, w in plan:
            self._weights.append(self._weights[-1] * w)
            try:
                yield r[index]
            finally:
                if self._epoch == epoch and len(self._weights) > 1:
                    self._weights.pop()

    # -- helpers ------------------------------------------------------------------------------
    def where(self) -> str:
        frame: Any = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.filename:
                return f"line {frame.f_lineno}"
            frame = frame.f_back
        return "kernel"

    def note(self, what: str) -> None:
        self.notes.add(f"{what} ({self.where()})")

    def cache_policy(self, cache_modifier: Any, eviction_policy: Any) -> None:
        """A load or store hint the model has no term for: listed, so a neutral model is not read as a
        neutral GPU."""
        for label, value in (("cache modifier", cache_modifier), ("eviction policy", eviction_policy)):
            text = str(getattr(value, "name", value) or "").lower()
            if text not in ("", "none", "normal", "evict_normal"):
                self.unmodelled.add(f"{label} {text} ({self.where()})")

    @staticmethod
    def tainted_value(v: Any) -> bool:
        h = getattr(v, "handle", None)
        return bool(getattr(h, "attr", {}).get(TAINT))

    def consume(self, handles: list[Any]) -> None:
        """Using a loaded value stalls until its round completes: the round closes."""
        if self._open is None:
            return
        for h in handles:
            if h.attr.get(_ROUND) == self._open:
                self._open = None
                return

    def _instructions(self, n: int, vec: int = 1) -> float:
        w = self.warps
        return float(w * math.ceil(n / (32 * w * vec))) if n else 0.0

    # -- memory ---------------------------------------------------------------------------------
    def _buffer_of(self, lo: int, hi: int, what: str) -> int:
        i = int(np.searchsorted(self._starts, np.uint64(lo), side="right")) - 1
        if i < 0 or hi > self.buffers[i].end:
            raise OutOfBounds(
                f"{what} at address {lo:#x}..{hi:#x} lies outside every tensor argument of the launch "
                f"({self.where()}); at bench sizes the index arithmetic goes out of bounds"
            )
        return i

    @staticmethod
    def _active(ptr: Any, mask: Any) -> tuple[np.ndarray, np.ndarray, int]:
        addr = np.asarray(ptr.data).astype(np.uint64, copy=False)
        if mask is not None:
            active = addr[np.broadcast_to(np.asarray(mask.data, dtype=bool), addr.shape)]
        else:
            active = addr.reshape(-1)
        return addr, active, max(ptr.get_element_ty().primitive_bitwidth // 8, 1)

    def _locate(self, kind: str, ptr: Any, lo: int, hi: int) -> int:
        try:
            return self._buffer_of(lo, hi, kind)
        except OutOfBounds as e:
            if ptr.attr.get(TAINT):
                raise DataDependentAccess(f"{e} (the address depends on loaded data)") from None
            raise

    def check_bounds(self, kind: str, ptr: Any, mask: Any) -> None:
        _, active, item = self._active(ptr, mask)
        if active.size:
            self._locate(kind, ptr, int(active.min()), int(active.max()) + item)

    def memory_op(self, kind: str, ptr: Any, mask: Any, *, atomic: bool = False) -> int | None:
        """Check and count one load or store; returns the buffer index (None if no lane is active)."""
        self.events += 1
        self.program.ops += self.weight
        if ptr.attr.get(TAINT) or (mask is not None and mask.attr.get(TAINT)):
            self.note(f"{kind} addresses or masks depend on loaded data")
        addr, active, item = self._active(ptr, mask)
        if active.size == 0:
            return None
        lo, hi = int(active.min()), int(active.max()) + item
        b = self._locate(kind, ptr, lo, hi)
        buf = self.buffers[b]
        initialized = buf.start in self.initialized
        # sectors from the buffer's start, as if it were allocated 256-byte aligned as on a GPU (a CPU
        # allocation's alignment varies from run to run, and with it the sector count)
        sectors = set(((active - np.uint64(buf.start)) >> np.uint64(_SECTOR_SHIFT)).tolist())
        w = self.weight
        counts = self.program.buffer(b)
        touched = len(sectors) * 32.0 * w
        vec = 1
        if addr.ndim and addr.shape[-1] > 1 and (np.diff(addr.astype(np.int64), axis=-1) == item).all():
            vec = max(1, min(16 // item, addr.shape[-1], max(addr.size // (32 * self.warps), 1)))
        self.program.warp_instructions += self._instructions(int(addr.size), vec) * w
        if kind == "store":
            if atomic and not self.probing:  # updates of one address serialize in L2 (`roofline`)
                where, times = np.unique(active, return_counts=True)
                for a, t in zip(where.tolist(), times.tolist()):
                    self.program.atomics[a] = self.program.atomics.get(a, 0.0) + t * w
            if not self.probing:
                self.memory.stored(buf, active, initialized, atomic=atomic)
                self.program.stored += int(active.size)
                self.program.stored_outputs += float(active.size) * w if buf.kind == "output" else 0.0
            seen = self.program.store_sectors.setdefault(b, set())
            counts.store_requests += touched
            counts.store_unique += len(sectors - seen) * 32.0 * w
            seen |= sectors
            buf.store_lo, buf.store_hi = min(buf.store_lo, lo), max(buf.store_hi, hi)
            return b
        if not self.probing:
            self.memory.loaded(buf, active, initialized)
        seen = self.program.sectors.setdefault(b, set())
        new = sectors - seen
        counts.requests += touched
        counts.unique += len(new) * 32.0 * w
        seen |= sectors
        buf.lo, buf.hi = min(buf.lo, lo), max(buf.hi, hi)
        if self._open is None:
            self.program.rounds.append(_Round(w))
            self._open = len(self.program.rounds) - 1
        if new:
            self.program.rounds[self._open].new = True
        return b

    def loaded(self, out: Any) -> None:
        out.attr[TAINT] = True
        if self._open is not None:
            out.attr[_ROUND] = self._open

    # -- compute --------------------------------------------------------------------------------
    def op(self, name: str, handles: list[Any], out: Any, libdevice: str = "") -> None:
        """One element-wise op (`libdevice`: the function a ``create_libdevice_elementwise`` computes)."""
        if any(h.attr.get(TAINT) for h in handles):
            out.attr[TAINT] = True
        if name in _CASTS and handles and _ROUND in handles[0].attr:
            out.attr[_ROUND] = handles[0].attr[_ROUND]
        n = int(np.asarray(out.data).size)
        w = self.weight
        if libdevice:  # its float arguments decide the work; a predicate's int32 result does not
            sfu, alu = LIBDEVICE_COSTS.get(libdevice, LIBDEVICE_DEFAULT)
            self.program.warp_instructions += self._instructions(n) * max(1, sfu + alu) * w
            self.program.alu_flops += n * alu * w
            self.program.sfu_ops += n * sfu * w
            return
        is_float = str(out.dtype).startswith(("fp", "bf"))
        self.program.warp_instructions += self._instructions(n) * (1.0 if is_float else 0.25) * w
        if is_float:
            self.program.alu_flops += n * (2.0 if name == "create_fma" else 1.0) * w
        if name in _SFU:
            self.program.sfu_ops += n * w

    def dot(self, a: Any, b: Any, precision: Any) -> None:
        for h in (a, b):
            r = h.attr.get(_ROUND)
            if r is not None and r < len(self.program.rounds):
                self.program.rounds[r].dot_fed = True
        sa, sb = np.asarray(a.data).shape, np.asarray(b.data).shape
        m, k, n = sa[-2], sa[-1], sb[-1]
        batch = int(np.prod(sa[:-2])) if len(sa) > 2 else 1
        flops = 2.0 * m * n * k * batch * self.weight
        kind = _operand_type(a.dtype, precision)
        if kind == "fp32":
            self.program.fma_flops += flops
        else:
            key, scale = ("tf32", 3.0) if kind == "tf32x3" else (kind, 1.0)
            self.program.tensor_flops[key] = self.program.tensor_flops.get(key, 0.0) + flops * scale
        self.program.warp_instructions += flops / 4096.0  # one mma.sync m16n8k16 per 4096 FLOPs
        self.program.dot_min_m = m if not self.program.dot_min_m else min(self.program.dot_min_m, m)

    def reduction(self, n: int) -> None:
        w = self.weight
        self.program.alu_flops += n * w
        extra = 10 + (6 if self.warps > 1 else 0)  # shuffle tree, then a shared-memory exchange
        self.program.warp_instructions += (self._instructions(n) + self.warps * extra) * w
        self.program.reductions += w
