"""STOKE's `split reduction` move: where a loop's results leave the kernel only as sums it spreads the loop
over a new grid axis, and the split kernel passes the real checker and is faster in the model; everywhere
its meaning could change (a running maximum, a pointer advanced in the loop, a store in the loop, a
result that is not linear in the sums, a half-precision cast, a used grid axis, an output read or
written elsewhere) it finds no site."""

from __future__ import annotations

import random
import textwrap
from pathlib import Path

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from evo.contracts.verdict import Status
from fitness.evaluate import Evaluator
from mutators.stoke.moves.catalog import MOVE_NAMES
from mutators.stoke.moves.split import SPLIT_VALUES, SplitReduction

MOVE = SplitReduction()

# a row sum: one program per row walks the row's columns; the split adds a second grid axis
ROW_SUM = '''import triton
import triton.language as tl


@triton.jit
def _row_sum(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + offs, mask=offs < n_cols, other=0.0)
    total = tl.sum(acc, axis=0)
    tl.store(out_ptr + row, total * 0.5)


PARAMS = {"BLOCK": 32, "num_warps": 1}
SPACE = {"BLOCK": [32, 64]}


def launch(x, out, *, BLOCK, num_warps):
    grid = (x.shape[0],)
    _row_sum[grid](x, out, x.shape[1], x.stride(0), BLOCK=BLOCK, num_warps=num_warps)
'''
ROW_SUM_TASK = '''import numpy as np

DTYPES = ("float32",)
CHECK_SIZES = [{"rows": 1, "cols": 1}, {"rows": 3, "cols": 100}, {"rows": 5, "cols": 257}]
BENCH_SIZES = [{"rows": 2, "cols": 512}]


def inputs(size, dtype, rng, dist):
    return [rng.standard_normal((size["rows"], size["cols"]))]


def reference(x):
    return x.sum(axis=1) * 0.5
'''


def _split(source: str) -> Candidate | None:
    applied = MOVE.apply(Candidate.from_source(source), random.Random(0))
    return None if applied is None else applied.candidate


def test_the_move_is_in_the_stoke_move_set():
    assert "split reduction" in MOVE_NAMES


def test_the_reduction_seed_is_split_over_a_new_axis_and_launch_zeroes_the_output():
    seed = NativeTask(TASK_LIBRARY / "reduction").seed_source or ""
    split = _split(seed)
    assert split is not None
    assert "for start in range(tl.program_id(1) * BLOCK, n, BLOCK * SPLIT)" in split.source
    assert "tl.atomic_add(out_ptr, tl.sum(acc, axis=0))" in split.source and "tl.store" not in split.source
    assert "out.zero_()" in split.source and "[1, SPLIT](" in split.source
    assert split.params["SPLIT"] in SPLIT_VALUES and split.space()["SPLIT"] == SPLIT_VALUES
    assert MOVE.apply(split, random.Random(0)) is None  # no store left to split again


@pytest.mark.parametrize("task", ["softmax", "layernorm", "matmul", "attention", "attention_causal", "vector_add",
                                  "mla_decode"])
def test_no_other_library_seed_has_a_site(task):
    # softmax and layer norm use their sums nonlinearly, attention carries a running max, vector_add
    # has no loop, and the matmul seed rounds its accumulator to float16 before the store
    assert _split(NativeTask(TASK_LIBRARY / task).seed_source or "") is None


# each edit of ROW_SUM below (pairs of old, new text) makes a kernel the split would change the meaning
# of, or lose accuracy on
LOAD = "acc += tl.load(x_ptr + row * stride + offs, mask=offs < n_cols, other=0.0)"
REFUSED: dict[str, list[tuple[str, str]]] = {
    "running maximum": [("acc += tl.load(", "acc = tl.maximum(acc, 0.0) + tl.load(")],
    "accumulator read in the loop": [(LOAD, LOAD + "\n        acc = acc * 0.5 + acc * 0.5")],
    "pointer advanced in the loop": [(LOAD, "acc += tl.load(ptrs, mask=offs < n_cols, other=0.0)\n"
                                            "        ptrs += BLOCK"),
                                     ("    for start", "    ptrs = x_ptr + row * stride + tl.arange(0, BLOCK)\n"
                                                     "    for start")],
    "argument advanced in the loop": [(LOAD, LOAD + "\n        x_ptr += 0")],
    "store inside the loop": [("acc += tl.load(", "tl.store(out_ptr + row, 0.0)\n        acc += tl.load(")],
    "store before the loop": [("    for start", "    tl.store(out_ptr + row, 0.0)\n    for start")],
    "nonzero start": [("acc = tl.zeros((BLOCK,), dtype=tl.float32)", "acc = tl.full((BLOCK,), 1.0, tl.float32)")],
    "not linear": [("total * 0.5)", "tl.sqrt(total))")],
    "constant term": [("total * 0.5)", "total + 1.0)")],
    "half-precision partial sums": [("total * 0.5)", "total.to(tl.float16))")],
    "value from the last iteration": [("total * 0.5)", "total + tl.sum(offs, axis=0))")],
    "grid axis already used": [("row = tl.program_id(0)", "row = tl.program_id(0) + tl.program_id(1)")],
    "output read by the kernel": [("    acc = tl.zeros(", "    old = tl.load(out_ptr + row)\n    acc = tl.zeros(")],
    "output written in launch": [("    grid = (x.shape[0],)", "    out.fill_(0.0)\n    grid = (x.shape[0],)")],
    "output stored twice": [("    tl.store(out_ptr + row, total * 0.5)",
                             "    tl.store(out_ptr + row, total * 0.5)\n    tl.store(out_ptr + row, total * 0.5)")],
    "loop exits early": [("acc += tl.load(", "if start > 64:\n            break\n        acc += tl.load(")],
    "three grid axes": [("    grid = (x.shape[0],)", "    grid = (x.shape[0], 1, 1)")],
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_no_site_where_the_split_could_change_the_result(case):
    source = ROW_SUM
    for old, new in REFUSED[case]:
        assert old in source
        source = source.replace(old, new)
    assert _split(source) is None


def test_a_row_sum_kernel_gets_a_second_axis_and_passes_the_checker(tmp_path: Path, shared_workers):
    split = _split(ROW_SUM)
    assert split is not None
    assert "grid = (x.shape[0], SPLIT)" in split.source
    assert "tl.atomic_add(out_ptr + row, total * 0.5)" in split.source
    assert "range(tl.program_id(1) * BLOCK, n_cols, BLOCK * SPLIT)" in split.source
    (tmp_path / "task.py").write_text(ROW_SUM_TASK)
    (tmp_path / "seed.py").write_text(ROW_SUM)
    task = NativeTask(tmp_path)
    settings = EvaluationConfig(timeout_s=120, latency=LatencyMode.OFF)
    with Evaluator(task, settings, device="cpu", **shared_workers(settings)) as ev:
        for split_count in (4, 64):  # 64: most programs find no iteration (9 at most) and add zero
            result = ev.evaluate(split.with_params(SPLIT=split_count))
            assert result.status is Status.OK, result.reason
        # without the zeroing, the output is added to before anything wrote it: the checker says so
        unzeroed = Candidate(split.source.replace("    out.zero_()\n", ""), dict(split.params))
        refused = ev.evaluate(unzeroed)
        assert refused.status is Status.UNSAFE and "nothing in this call of launch has written" in refused.reason


def test_the_split_reduction_seed_is_right_and_faster_in_the_model(shared_workers):
    task = NativeTask(TASK_LIBRARY / "reduction")
    task.bench_sizes = [{"n": 1 << 16}]  # one program over 2^26 elements is too slow for the interpreter
    seed = Candidate.from_source(task.seed_source or "")
    split = _split(task.seed_source or "")
    assert split is not None
    settings = EvaluationConfig(timeout_s=300, latency=LatencyMode.MODEL)
    with Evaluator(task, settings, device="cpu", **shared_workers(settings)) as ev:
        before, after = ev.evaluate(seed), ev.evaluate(split.with_params(SPLIT=64))
    assert before.status is Status.OK and after.status is Status.OK, after.reason
    assert before.latency_ms is not None and after.latency_ms is not None
    assert after.latency_ms < before.latency_ms / 4  # 64 programs walk the vector, not one
    assert after.latency_detail["host_fills"]["count"] == 1  # out.zero_() is charged as a memset launch


def test_a_kernel_with_defaulted_parameters_stays_valid_python():
    source = ROW_SUM.replace("def _row_sum(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):",
                             "def _row_sum(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr = 32):")
    split = _split(source)
    assert split is not None
    compile(split.source, "split", "exec")
    assert "BLOCK: tl.constexpr=32, SPLIT: tl.constexpr=" in split.source.replace(" = ", "=")


def test_the_detail_names_the_loop_the_axis_and_the_zeroed_output():
    applied = MOVE.apply(Candidate.from_source(ROW_SUM), random.Random(0))
    assert applied is not None
    assert "_row_sum" in applied.detail and "axis 1" in applied.detail and "into out (zeroed)" in applied.detail
    assert textwrap.dedent(applied.candidate.source).count("SPLIT: tl.constexpr") == 1
