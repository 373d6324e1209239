"""A kernel's performance in the words a kernel engineer would use: latency, speedups, the fraction of
the speed of light, and per launch what bounds it (from the roofline model's `latency_detail.launches`:
bound, waves, occupancy, registers and spills, DRAM vs L2 traffic). Pure text building, no I/O."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from evo.contracts.gpus import PROFILES, GpuProfile
from evo.contracts.task import Task
from evo.contracts.verdict import Evaluation

# figures of how the evaluator worked, not of the kernel: what the evaluation cost (wall-clock seconds of
# this machine), the model's secret sampling seed (drawn per run) and the model's version (a hash of its
# code). Different on every run or every change of the model, so a prompt holding them could never be
# replayed exactly; and the seed is not the LLM's business.
NOT_SEARCH_STATE = frozenset({"model_s", "full_run_s", "full_run_estimate_s", "sample_seed", "model_version"})
# scalar figures this module puts in words (or that only say how the latency was taken, e.g. CUDA repetitions)
_IN_WORDS = frozenset({"gpu", "size", "fitness", "dram_bytes", "flops", "sol_ms", "sol_bound_ms", "median_ms", "min_ms",
                       "max_ms", "reps", "copies", "spin_up", "bench_error_ratio"})
_MAX_LAUNCHES = 4

# what each roofline term means and what moves it
BOUND_WORDS: dict[str, str] = {
    "dram": "DRAM-bandwidth-bound: fewer bytes from DRAM (fewer passes over the data, reuse from registers or "
            "shared memory) is what helps",
    "l2": "L2-bandwidth-bound: too many load/store requests reach the L2 (re-reads, narrow accesses); "
          "reuse data inside a program",
    "sm_path": "bound by the L2-to-SM path of the busiest SM: fewer or wider requests per program, "
               "or the work spread over more SMs",
    "tensor": "tensor-core-bound: the dots are near the tensor-core peak; bigger tiles or fewer FLOPs help",
    "alu": "FP32-ALU-bound: fewer arithmetic operations per element (or tensor cores via tl.dot) help",
    "sfu": "bound by transcendentals (exp, log, sqrt) on the special-function units: fewer of them, "
           "or exp2 on pre-scaled inputs, help",
    "issue": "instruction-issue-bound: too many instructions per element (index arithmetic, masks, "
             "narrow loads); wider vectors per thread help",
    "latency": "latency-bound: each program waits on a chain of dependent memory round trips; more programs "
               "in flight, fewer sequential loop rounds or software pipelining (num_stages) help, "
               "fewer DRAM bytes alone will not",
}


def _mb(n: float) -> str:
    return f"{n / 1e6:.3g} MB"


def _programs(launch: Mapping[str, Any]) -> int:
    grid = launch.get("grid") or [1]
    return max(math.prod(int(g) for g in grid), 1)


def launch_sentence(launch: Mapping[str, Any], gpu: GpuProfile | None, total_us: float) -> str:
    """One launch's bottleneck in words (see the module docstring)."""
    us = float(launch.get("us", 0.0))
    reps = int(launch.get("repeats", 1))
    terms = {k: float(v) for k, v in dict(launch.get("terms_us", {})).items()}
    bound = str(launch.get("bound", max(terms, key=lambda k: terms[k]) if terms else "unknown"))
    share = f", {us * reps / total_us:.0%} of the total" if total_us > 0 and reps * us < total_us * 0.995 else ""
    times = f" x{reps}" if reps > 1 else ""
    head = f"- `{launch.get('kernel', '?')}`: {us:.4g} us{times}{share}; {BOUND_WORDS.get(bound, bound + '-bound')}."
    others = sorted(((v, k) for k, v in terms.items() if k != bound and v > 0), reverse=True)[:2]
    if terms:
        head += " Terms: " + ", ".join(f"{k} {v:.3g} us" for k, v in [(bound, terms.get(bound, 0.0)),
                                                                    *((k, v) for v, k in others)]) + "."
    programs = _programs(launch)
    per_sm = int(launch.get("programs_per_sm", 0))
    limit = launch.get("occupancy_limit", "")
    parts = [head]
    if gpu is not None and per_sm > 0:
        slots = gpu.sms * per_sm
        fill = programs / slots
        occupancy = f"{per_sm} programs resident per SM (limited by {limit})"
        if programs < gpu.sms:
            parts.append(f"  {programs} programs cannot fill the GPU's {gpu.sms} SMs ({gpu.sms - programs} SMs idle, "
                         f"{fill:.2g} of one wave of {slots}); {occupancy}: more, smaller programs (split the "
                         "work) would use the idle SMs.")
        else:
            tail = fill - math.floor(fill)
            ragged = f", the last one {tail:.0%} full" if fill > 1 and tail > 0 else ""
            parts.append(f"  {programs} programs over {gpu.sms} SMs x {per_sm} = {fill:.3g} waves{ragged}; "
                         f"{occupancy}.")
    regs = launch.get("registers")
    if regs is not None:
        spill = int(launch.get("spill_bytes", 0))
        spills = f"{spill} bytes spilled per thread (spills go through L2)" if spill else "no spills"
        parts.append(f"  {regs} registers per thread, {spills}, {int(launch.get('shared_bytes', 0))} bytes of "
                     f"shared memory per program, pipeline depth {launch.get('pipeline_depth', 1)}.")
    if "dram_bytes" in launch:
        parts.append(f"  Traffic: {_mb(float(launch['dram_bytes']))} from DRAM, "
                     f"{_mb(float(launch.get('l2_bytes', 0)))} through L2.")
    return "\n".join(parts)


def _sol_line(e: Evaluation, task: Task | None) -> str:
    d = e.latency_detail
    if e.roofline_fraction is None or e.latency_ms is None:
        return ""
    sol = d.get("sol_ms")
    at = f"{float(sol):.3g} ms at the GPU's peak rates vs {e.latency_ms:.3g} ms" if sol is not None else ""
    line = f"speed of light: the kernel reaches {e.roofline_fraction:.1%} of it ({at})".replace(" ()", "")
    size = d.get("size")
    try:
        minimum = task.bytes_moved(size) if task is not None and isinstance(size, dict) else None
    except Exception:  # the task's own byte count failed: the prompt goes without this comparison
        minimum = None
    dram = d.get("dram_bytes")
    if minimum and dram:
        line += (f"; it moves {_mb(float(dram))} from DRAM, {float(dram) / minimum:.2f}x the "
                 f"{_mb(minimum)} the task must read and write")
    return line


def performance_lines(e: Evaluation, task: Task | None = None) -> list[str]:
    """Latency, speedups, the fraction of the speed of light and the bottleneck of each launch, as far as
    the evaluation has them (never how the evaluation itself went: `NOT_SEARCH_STATE`)."""
    if not e.ok:
        return [f"status: {e.status.value}: {e.reason}"]
    d = e.latency_detail
    out = []
    shapes = [s for s in d.get("shapes", []) or [] if isinstance(s, Mapping)]
    if e.latency_ms is not None:
        src = f" ({e.latency_source.value})" if e.latency_source else ""
        if shapes:
            out.append(f"latency: {e.latency_ms:.4g} ms{src}, the weighted geometric mean over {len(shapes)} "
                       "bench sizes (the bottleneck below is at the first):")
        else:
            size = f" at size {d['size']}" if isinstance(d.get("size"), dict) else ""
            out.append(f"latency: {e.latency_ms:.4g} ms{src}{size}")
    else:
        out.append("latency: not measured")
    out += [shape_line(s) for s in shapes]
    out += [f"speedup over {k}: {v:.3g}x" for k, v in sorted(e.speedups.items())]
    sol = _sol_line(e, task)
    if sol:
        out.append(sol)
    for k, v in sorted(d.items()):
        if isinstance(v, (int, float, str, bool)) and k not in NOT_SEARCH_STATE | _IN_WORDS:
            out.append(f"{k}: {v:.4g}" if isinstance(v, float) else f"{k}: {v}")
    for k in ("data_dependent", "unmodelled"):
        if d.get(k):
            out.append(f"{k.replace('_', ' ')}: " + "; ".join(str(x) for x in d[k]))
    return out


def shape_line(s: Mapping[str, Any]) -> str:
    """One bench size of a fitness over several (`fitness.latency.shapes`)."""
    ms = s.get("latency_ms")
    speed = ", ".join(f"{v:.3g}x over {k}" for k, v in sorted(dict(s.get("speedups") or {}).items()))
    frac = s.get("roofline_fraction")
    return (f"- size {s.get('size')} (weight {s.get('weight')}): " + (f"{ms:.4g} ms" if ms else "no latency")
            + (f", {speed}" if speed else "") + (f", {100 * frac:.0f}% of the speed of light" if frac else "")
            + (f", {s['bound']}-bound" if s.get("bound") else ""))


def bottleneck_text(e: Evaluation) -> str:
    """Per launch, what bounds it ("" when the latency has no launch breakdown, e.g. measured on CUDA)."""
    launches = [x for x in e.latency_detail.get("launches", []) if isinstance(x, Mapping)]
    if not e.ok or not launches:
        return ""
    gpu = PROFILES.get(str(e.latency_detail.get("gpu", e.latency_gpu)))
    total = sum(float(x.get("us", 0.0)) * int(x.get("repeats", 1)) for x in launches)
    lines = [launch_sentence(x, gpu, total) for x in launches[:_MAX_LAUNCHES]]
    if len(launches) > _MAX_LAUNCHES:
        lines.append(f"- and {len(launches) - _MAX_LAUNCHES} more launches")
    return "\n".join(lines)
