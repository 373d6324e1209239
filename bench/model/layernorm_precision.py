"""How far a correct float32 layer norm can be from the float64 reference, in units of the task's
tolerance, under the reduction orders a GPU uses; and how far the kernels the task must reject are.

    PYTHONPATH=. python bench/model/layernorm_precision.py [--draws 200] [--offset 200]

The Triton interpreter reduces with numpy (pairwise sums in a fixed order), a GPU with per-thread
sequential sums, a butterfly across lanes and warps, fused multiply-adds and approximate
division and square root. This simulates those orders in numpy float32 on the task's own check
sizes and ``offset`` inputs, for:

- ``two-pass`` kernels (mean, then the mean of squared deviations), as the seed and the
  known-better kernel compute: chunked (a scalar accumulator across chunks of 128, 1024 or 4096
  columns), one block per row, and per-lane vector accumulators; with and without FMA.
- ``one-pass`` kernels (E[x^2] - E[x]^2 from the same sums): the task must reject them.
- ``fp16`` downgrades: the arithmetic in fp16, or only the stored output rounded through fp16.

For each it prints the worst element's error over the tolerance, per case (a check size and one
draw of inputs): the largest over all cases (correct kernels must stay well below 1) and the
smallest over whole check runs (a rejected kernel must exceed 1 in at least one case of every run).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from evo.contracts.task import Tolerance

F32 = np.float32
Sum = Callable[[np.ndarray], np.ndarray]


def _fold(v: np.ndarray) -> np.ndarray:
    """Butterfly (shuffle-xor) reduction over the last axis, padded to a power of two."""
    n = 1 << max(int(v.shape[-1]) - 1, 0).bit_length()
    if n != v.shape[-1]:
        v = np.concatenate([v, np.zeros((*v.shape[:-1], n - v.shape[-1]), F32)], axis=-1)
    while v.shape[-1] > 1:
        half = v.shape[-1] // 2
        v = (v[..., :half] + v[..., half:]).astype(F32)
    return v[..., 0]


def block_sum(v: np.ndarray, threads: int = 128, per_thread: int = 4) -> np.ndarray:
    """tl.sum of a (rows, B) block on a GPU: each thread adds its elements in order, then a butterfly."""
    rows, b = v.shape
    tile = threads * per_thread
    reps = -(-b // tile)
    padded = np.zeros((rows, reps * tile), F32)
    padded[:, :b] = v
    held = padded.reshape(rows, reps, threads, per_thread).transpose(0, 2, 1, 3).reshape(rows, threads, -1)
    acc = np.zeros((rows, threads), F32)
    for k in range(held.shape[-1]):
        acc = (acc + held[..., k]).astype(F32)
    return _fold(acc)


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a*b + c rounded once (the float64 product of two float32 values is exact)."""
    return (a.astype(np.float64) * b + c).astype(F32)


@dataclass(frozen=True)
class Kernel:
    """A layer norm computed in float32 with a given summation structure."""

    name: str
    chunk: int | None  # None: the whole row is one block
    vector_acc: bool = False  # per-lane accumulators across chunks, reduced at the end
    use_fma: bool = True
    one_pass: bool = False
    fp16: bool = False  # arithmetic in fp16
    fp16_out: bool = False  # fp32 arithmetic, output rounded through fp16

    def _row_sum(self, v: np.ndarray) -> np.ndarray:
        n = v.shape[1]
        width = self.chunk or n
        if self.vector_acc:
            acc = np.zeros((v.shape[0], width), F32)
            for s in range(0, n, width):
                part = np.zeros_like(acc)
                part[:, : min(width, n - s)] = v[:, s : s + width]
                acc = (acc + part).astype(F32)
            return block_sum(acc)
        total = np.zeros(v.shape[0], F32)
        for s in range(0, n, width):
            total = (total + block_sum(v[:, s : s + width])).astype(F32)
        return total

    def __call__(self, x: np.ndarray, w: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):  # fp16 sums of a few hundred thousand overflow
            return self._compute(x, w, b, rng)

    def _compute(self, x: np.ndarray, w: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        dt: Any = np.float16 if self.fp16 else F32
        x, w, b = x.astype(dt), w.astype(dt), b.astype(dt)
        n = np.asarray(x.shape[1], dtype=dt)
        mean = (self._row_sum(x).astype(dt) / n).astype(dt)[:, None]
        if self.one_pass:
            ex2 = (self._row_sum((x * x).astype(dt)).astype(dt) / n).astype(dt)[:, None]
            var = np.maximum((ex2 - mean * mean).astype(dt), dt(0))
        else:
            d = (x - mean).astype(dt)
            var = (self._row_sum((d * d).astype(dt)).astype(dt) / n).astype(dt)[:, None]
        rstd = (dt(1) / np.sqrt((var + dt(1e-5)).astype(dt))).astype(dt)
        # approximate division and square root on the GPU: a couple of ulps
        rstd = (rstd * (1 + rng.uniform(-2, 2, rstd.shape) * 2.0**-23)).astype(dt)
        t = ((x - mean).astype(dt) * rstd).astype(dt)
        y = fma(t, w, b) if self.use_fma and not self.fp16 else ((t * w).astype(dt) + b).astype(dt)
        if self.fp16_out:
            y = y.astype(np.float16)
        return y.astype(np.float64)


KERNELS = (
    Kernel("two-pass, chunks of 128 (seed)", 128),
    Kernel("two-pass, chunks of 128, no FMA", 128, use_fma=False),
    Kernel("two-pass, chunks of 1024", 1024),
    Kernel("two-pass, one block per row (known-better)", None),
    Kernel("two-pass, per-lane accumulators of 128", 128, vector_acc=True),
    Kernel("two-pass, per-lane accumulators of 4096", 4096, vector_acc=True),
    Kernel("one-pass E[x^2]-E[x]^2, chunks of 128", 128, one_pass=True),
    Kernel("one-pass E[x^2]-E[x]^2, one block per row", None, one_pass=True),
    Kernel("one-pass, per-lane accumulators of 128", 128, vector_acc=True, one_pass=True),
    Kernel("fp16 arithmetic, one block per row", None, fp16=True),
    Kernel("fp32 arithmetic, output rounded to fp16", None, fp16_out=True),
)


def worst_ratio(y: np.ndarray, ref: np.ndarray, tol: Tolerance) -> float:
    """The worst element's |y - ref| over the tolerance, as `fitness.check.compare` measures it."""
    rms = float(np.sqrt(np.mean(ref * ref))) or 1.0
    with np.errstate(invalid="ignore"):
        r = np.abs(y - ref) / (tol.atol * rms + tol.rtol * np.abs(ref))
    return float(np.nanmax(np.where(np.isnan(y), np.inf, r)))


def run(kernel: Kernel, task: NativeTask, tol: Tolerance, draws: int) -> tuple[float, float]:
    """(largest case ratio over all draws, smallest over runs of the largest case ratio in a run)."""
    rng = np.random.default_rng(0)
    worst, weakest_run = 0.0, np.inf
    for k in range(draws):
        run_worst = 0.0
        for size in task.check_sizes:
            digest = hashlib.sha256(f"sim|{size}|{k}".encode()).digest()
            inputs, expected = task._draw(size, int.from_bytes(digest[:4], "little"), "offset")
            x, w, b = (t.data for t in inputs)
            y = kernel(x, w, b, rng)
            run_worst = max(run_worst, worst_ratio(y, expected[0], tol))
        worst = max(worst, run_worst)
        weakest_run = min(weakest_run, run_worst)
    return worst, weakest_run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=100, help="check runs (each: every check size, one offset draw)")
    ap.add_argument("--atol", type=float, default=None, help="default: the task's float32 tolerance")
    ap.add_argument("--rtol", type=float, default=None)
    args = ap.parse_args(argv)
    task = NativeTask(TASK_LIBRARY / "layernorm", dtype="float32")
    tol = task.tolerance
    tol = Tolerance(args.atol if args.atol is not None else tol.atol, args.rtol if args.rtol is not None else tol.rtol)
    print(f"layernorm float32, tolerance atol {tol.atol:g} x rms + rtol {tol.rtol:g}; {args.draws} check runs; "
          f"check sizes {task.check_sizes}")
    print(f"{'kernel':48s} {'worst case':>11s} {'weakest run':>12s}")
    for kernel in KERNELS:
        worst, weakest = run(kernel, task, tol, args.draws)
        print(f"{kernel.name:48s} {worst:11.3g} {weakest:12.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
