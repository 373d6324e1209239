"""How far causal attention kernels are from the float64 reference, in units of the task's tolerance,
at the check sizes and at the bench sizes; the figures behind ``evo/tasks/attention_causal``'s tolerance.

    PYTHONPATH=. python bench/model/attention_precision.py [--rows 128] [--kernels seed,known_better]

Kernels run in the Triton interpreter in this process (the library's kernels and edits of them:
trusted code). For each kernel it prints, per size, the worst element's error over the tolerance
(``ratio``: a kernel passes when it is at most 1) and ``need``, the smallest ``atol`` (in units of
the output's RMS, with the task's ``rtol``) under which every element passes.

At a bench size the whole output is too slow for the interpreter, but the worst elements are in the
first rows (see the task's docstring), and in a causal kernel row i reads keys 0..i only, so the
first ``--rows`` rows of the bench-size output are those of a sequence cut to ``--rows`` positions.
They are computed for every (batch, head) of the bench size, and measured against the RMS of the
whole bench-size output (the tolerance's unit), taken from the reference of ``--rms-heads`` heads.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from evo.contracts.task import Size, Tolerance

TASK = TASK_LIBRARY / "attention_causal"
_SCORES = "s = tl.dot(q, tl.trans(k)) * qk_scale  # in log2 units"
_UPDATE = "acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)"
_ACC = "acc = tl.zeros((BM, BLOCK_D), tl.float32)"

# name -> (library file, edits): correct kernels and the mistakes the tolerance must (or cannot) see
KERNELS: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "seed": ("seed.py", ()),
    "known_better": ("known_better.py", ()),
    # must be rejected
    "scores_fp16": ("known_better.py", (
        (_SCORES, "s = (tl.dot(q, tl.trans(k)) * qk_scale).to(tl.float16).to(tl.float32)"),)),
    "no_rescale": ("known_better.py", ((_UPDATE, "acc = acc + tl.dot(p.to(v.dtype), v)"),)),
    "diagonal_excluded": ("known_better.py", (
        ("cols[None, :] <= rows[:, None]", "cols[None, :] < rows[:, None]"),)),
    # not a target: at these sizes its error stays below that of P's fp16 rounding
    "acc_fp16": ("known_better.py", (
        (_UPDATE, "acc = (acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)).to(tl.float16)"),
        (_ACC, _ACC.replace("float32", "float16")))),
}
MUST_FAIL = ("scores_fp16", "no_rescale", "diagonal_excluded")


def kernel_source(name: str) -> str:
    """The source of a kernel of `KERNELS`; each edit must apply exactly once."""
    file, edits = KERNELS[name]
    source = (TASK / file).read_text()
    for old, new in edits:
        if source.count(old) != 1:
            raise ValueError(f"kernel {name}: {old!r} is not in {file} exactly once")
        source = source.replace(old, new)
    return source


@dataclass(frozen=True)
class Figures:
    ratio: float  # worst |out - ref| / (atol * rms + rtol * |ref|)
    need: float  # the smallest atol (rms units) that passes every element
    row: int  # the row (query position) of the worst element


def figures(out: np.ndarray, ref: np.ndarray, tol: Tolerance, rms: float) -> Figures:
    with np.errstate(invalid="ignore"):
        err = np.where(np.isnan(out), np.inf, np.abs(out - ref))
        ratio = err / (tol.atol * rms + tol.rtol * np.abs(ref))
        need = (err - tol.rtol * np.abs(ref)) / rms
    worst = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    return Figures(float(ratio.max()), float(need.max()), int(worst[-2]))


class Runner:
    """Loads kernels from source (Triton needs a file to read them from) and runs them on numpy inputs."""

    def __init__(self) -> None:
        if os.environ.get("TRITON_INTERPRET") != "1":
            raise RuntimeError("set TRITON_INTERPRET=1 before Python starts (see the module docstring)")
        self._dir = tempfile.TemporaryDirectory(prefix="evo-attn-")
        self._modules: dict[str, ModuleType] = {}

    def module(self, name: str) -> ModuleType:
        if name not in self._modules:
            path = Path(self._dir.name) / f"attn_{name}.py"
            path.write_text(kernel_source(name))
            spec = importlib.util.spec_from_file_location(f"attn_{name}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self._modules[name] = module
        return self._modules[name]

    def run(self, name: str, inputs: list[np.ndarray]) -> np.ndarray:
        import torch

        m = self.module(name)
        q, k, v = (torch.from_numpy(np.ascontiguousarray(x)) for x in inputs)
        o = torch.full_like(q, float("nan"))
        m.launch(q, k, v, o, **m.PARAMS)
        return o.numpy().astype(np.float64)

    def close(self) -> None:
        self._dir.cleanup()


def check_figures(runner: Runner, task: NativeTask, name: str) -> Figures:
    """The worst over every check case (every size, draw and distribution the checker uses)."""
    worst: Figures | None = None
    for case in task.cases(draws=2):
        data = task.case_data(case)
        ref = data.expected[0]
        f = figures(runner.run(name, [t.data for t in data.inputs]), ref, task.tolerance,
                    float(np.sqrt(np.mean(ref**2))) or 1.0)
        worst = f if worst is None or f.ratio > worst.ratio else worst
    assert worst is not None
    return worst


def bench_rms(task: NativeTask, size: Size, heads: int) -> float:
    """RMS of the bench-size output (first distribution), from the reference of `heads` (batch, head) pairs."""
    one = {**size, "batch": 1, "heads": heads}
    q, k, v = (t.data.astype(np.float64) for t in task._make_inputs(one, task._bench_seed(size), task.dists[0]))
    squares = [float(np.mean(task.module.reference(q[:, h:h + 1], k[:, h:h + 1], v[:, h:h + 1]) ** 2))
               for h in range(heads)]
    return float(np.sqrt(np.mean(squares)))


def bench_figures(runner: Runner, task: NativeTask, name: str, size: Size, rows: int, rms: float) -> Figures:
    """Figures of the first `rows` query positions of every (batch, head) of a bench size."""
    cut = {**size, "seq": min(rows, size["seq"])}
    inputs, expected = task._draw(cut, task._bench_seed(size), task.dists[0])
    return figures(runner.run(name, [t.data for t in inputs]), expected[0], task.tolerance, rms)


def report(kernels: list[str], rows: int, rms_heads: int, bench: bool = True) -> dict[str, Any]:
    """{"check": {kernel: figures}, "bench": {kernel: {size: figures}}, "tolerance": ...} as plain data."""
    task = NativeTask(TASK)
    runner = Runner()
    out: dict[str, Any] = {"tolerance": [task.tolerance.atol, task.tolerance.rtol], "check": {}, "bench": {}}
    try:
        for name in kernels:
            out["check"][name] = check_figures(runner, task, name).__dict__
        if bench:
            for size in task.bench_sizes:
                label = json.dumps(size, sort_keys=True)
                rms = bench_rms(task, size, rms_heads)
                out.setdefault("bench_rms", {})[label] = rms
                for name in kernels:
                    f = bench_figures(runner, task, name, size, rows, rms)
                    out["bench"].setdefault(name, {})[label] = f.__dict__
    finally:
        runner.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--bench-kernels", default="seed,known_better", help="kernels also run at the bench sizes")
    ap.add_argument("--rows", type=int, default=128, help="query positions computed at each bench size")
    ap.add_argument("--rms-heads", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args(argv)
    kernels = [k for k in args.kernels.split(",") if k]
    bench_kernels = [k for k in args.bench_kernels.split(",") if k]
    unknown = [k for k in kernels + bench_kernels if k not in KERNELS]
    if unknown:
        ap.error(f"unknown kernels {unknown}; valid: {', '.join(KERNELS)}")
    data = report(kernels, args.rows, args.rms_heads, bench=False)
    if bench_kernels:
        data_b = report(bench_kernels, args.rows, args.rms_heads)
        data["bench"], data["bench_rms"] = data_b["bench"], data_b.get("bench_rms", {})
    if args.json:
        print(json.dumps(data))
        return 0
    atol, rtol = data["tolerance"]
    print(f"attention_causal float16, tolerance atol {atol:g} x rms + rtol {rtol:g}")
    print(f"check sizes (every case): {'kernel':18s} {'ratio':>8s} {'need atol':>10s} {'row':>5s}")
    for name, f in data["check"].items():
        print(f"{'':26s}{name:18s} {f['ratio']:8.3g} {f['need']:10.3g} {f['row']:5d}")
    for label, rms in data.get("bench_rms", {}).items():
        print(f"bench size {label}, first {args.rows} rows, output rms {rms:.4g}:")
        for name, sizes in data["bench"].items():
            f = sizes[label]
            print(f"{'':26s}{name:18s} {f['ratio']:8.3g} {f['need']:10.3g} {f['row']:5d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
