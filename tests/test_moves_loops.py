"""STOKE's loop moves: `fuse loops` makes two independent passes over a row one pass that reads it once, and
`hoist invariant` moves what every iteration recomputes out of the loop; both pass the real checker (a
worker, Triton interpreter), and both find no site wherever the change could alter a result (an iteration
that sees another's values, memory one loop writes and the other touches, an early exit, a conditional
load, a name needed after the loop)."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from evo.contracts.verdict import Status
from fitness.evaluate import Evaluator
from mutators.stoke.moves.ast_edit import Move
from mutators.stoke.moves.catalog import DEFAULT_WEIGHTS, MOVE_NAMES
from mutators.stoke.moves.loops import FuseLoops, HoistInvariant
from tests.fakes.loop_kernels import ROW_MOMENTS, ROW_STATS, ROW_STATS_TASK, SCALE_ROWS, SCALE_ROWS_TASK


def _moved(move: Move, source: str, seed: int = 0) -> Candidate | None:
    applied = move.apply(Candidate.from_source(source), random.Random(seed))
    return None if applied is None else applied.candidate


def _all_hoisted(source: str) -> Candidate:
    """`hoist invariant` applied until it finds no site."""
    c = Candidate.from_source(source)
    for _ in range(20):
        applied = HoistInvariant().apply(c, random.Random(0))
        if applied is None:
            return c
        c = applied.candidate
    raise AssertionError("hoisting did not stop")


def _loop_body(source: str) -> str:
    loop = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.For))
    return "\n".join(ast.unparse(s) for s in loop.body)


def _loads(source: str) -> int:
    return ast.unparse(ast.parse(source)).count("tl.load(")


def _edited(source: str, *edits: tuple[str, str]) -> str:
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    ast.parse(source)  # a refusal must come from the move, not from a kernel that does not parse
    return source


def test_the_loop_moves_are_in_the_stoke_move_set():
    assert {"fuse loops", "hoist invariant"} <= set(MOVE_NAMES)
    assert DEFAULT_WEIGHTS["fuse loops"] > 0 and DEFAULT_WEIGHTS["hoist invariant"] > 0


def test_two_independent_passes_become_one_that_reads_the_row_once():
    fused = _moved(FuseLoops(), ROW_STATS)
    assert fused is not None
    tree = ast.parse(fused.source)
    assert sum(isinstance(n, ast.For) for n in ast.walk(tree)) == 1
    assert _loads(fused.source) == 1, "the second pass's load of the same offsets is dropped"
    body = _loop_body(fused.source)
    assert "begin = start" in body and "squares += tl.sum(x * x, axis=0)" in body
    assert fused.source.index("squares = 0.0") < fused.source.index("for start")  # its zero moved before
    assert FuseLoops().apply(fused, random.Random(0)) is None


# each edit of ROW_STATS makes a pair of loops whose fusion could change the result
SUM, SQUARES, ZERO = "total += tl.sum(x, axis=0)", "squares += tl.sum(x * x, axis=0)", "    squares = 0.0"
NOT_FUSED: dict[str, list[tuple[str, str]]] = {
    "second reads the first's sum": [(SQUARES, SQUARES + " * total")],
    "between them, a value of the first": [(ZERO, "    squares = total * 0.0")],
    "second reads the first's last offsets": [("        offs = begin + tl.arange(0, BLOCK)\n", "")],
    "first reads a name the second assigns": [(SUM, SUM + " + squares")],
    "other ranges": [("range(0, n_cols, BLOCK):\n        offs = begin",
                      "range(0, n_cols - 1, BLOCK):\n        offs = begin")],
    "first stores what the second loads": [(SUM, SUM + "\n        tl.store(x_row + offs, x * 2.0, mask=offs < 9)")],
    "second stores what the first loads": [(SQUARES, SQUARES + "\n        tl.store(x_ptr + offs, x)")],
    "a barrier in the first": [(SUM, SUM + "\n        tl.debug_barrier()")],
    "an early exit": [(SQUARES, SQUARES + "\n        if squares > 1.0:\n            break")],
    "a store between them": [(ZERO, ZERO + "\n    tl.store(out_ptr + row, 0.0)")],
    "the range changed by the first": [(SUM, SUM + "\n        n_cols = n_cols")],
    "the second range reads what the first assigns": [
        ("    total = 0.0", "    limit = n_cols\n    total = 0.0"), (SUM, SUM + "\n        limit = n_cols - 1"),
        ("for start in range(0, n_cols", "for start in range(0, limit"),
        ("for begin in range(0, n_cols", "for begin in range(0, limit")],
    "assigned in both, only sometimes in the second": [
        (SUM, SUM + "\n        last = x"), (SQUARES, SQUARES + "\n        if begin > 0:\n            last = x * 2.0")],
    "the second assigns the first's loop variable": [
        ("offs = begin + tl", "start = begin\n        offs = start + tl")],
    "the second grows the first's offsets": [("offs = begin + tl", "offs = offs * 0 + begin + tl")],
    "the second's output parameter made the first's input": [
        (ZERO, ZERO + "\n    out_ptr = x_ptr"), (SQUARES, SQUARES + "\n        tl.store(out_ptr + offs, x)")],
    "conditionally assigned in the second": [(SQUARES, "if begin > 0:\n            total = 0.0\n        " + SQUARES)],
}


@pytest.mark.parametrize("case", sorted(NOT_FUSED))
def test_no_fusion_where_it_could_change_the_result(case):
    assert _moved(FuseLoops(), _edited(ROW_STATS, *NOT_FUSED[case])) is None


def test_loops_over_the_same_values_fuse_whichever_range_function_walks_them():
    pipelined = _edited(ROW_STATS, ("for begin in range(0, n_cols, BLOCK)", "for begin in tl.range(0, n_cols, BLOCK, "
                                                                           "num_stages=2)"))
    fused = _moved(FuseLoops(), pipelined)
    assert fused is not None and "for start in range(0, n_cols, BLOCK):" in fused.source, "the first's range kept"
    other_step = _edited(ROW_STATS, ("for begin in range(0, n_cols, BLOCK)", "for begin in tl.range(0, n_cols, 2)"))
    assert _moved(FuseLoops(), other_step) is None


def test_a_store_to_other_memory_does_not_stop_the_fusion():
    source = _edited(ROW_STATS, (SQUARES, SQUARES + "\n        tl.store(out_ptr + row + offs * 0, x, mask=offs < 1)"))
    assert _moved(FuseLoops(), source) is not None


def test_the_invariant_mask_then_the_weights_leave_the_loop():
    hoisted = _all_hoisted(SCALE_ROWS).source
    body = _loop_body(hoisted)
    assert "col_ok" not in body.split("=")[0] and "w_ptr" not in body, body
    assert "x_ptr" in body and "(row < n_rows)" in body, "what depends on the row stays"
    assert "hoisted0 = tl.load(w_ptr + cols" in hoisted  # the load inside the store's value, named


# each edit of SCALE_ROWS makes the weights' load one that must stay in the loop
W, X = "w = tl.load(w_ptr + cols, mask=col_ok, other=0.0)", "        x = tl.load("
NOT_HOISTED: dict[str, list[tuple[str, str]]] = {
    "the loop stores into the weights": [(X, "        tl.store(w_ptr + cols, cols * 1.0, mask=col_ok)\n" + X)],
    "the pointer depends on the row": [("tl.load(w_ptr + cols", "tl.load(w_ptr + r * 0 + cols")],
    "a barrier in the loop": [(X, "        tl.debug_barrier()\n" + X)],
    "a volatile load": [("mask=col_ok, other=0.0)", "mask=col_ok, volatile=True)")],
    "under a branch": [(W, "w = cols * 0.0\n        if row < n_rows:\n            " + W),
                       (" + tl.load(w_ptr + cols, mask=col_ok, other=0.0)", " + w")],
    "in a conditional expression": [(" + tl.load(w_ptr + cols, mask=col_ok, other=0.0)",
                                     " + (tl.load(w_ptr + cols, mask=col_ok, other=0.0) if ROWS > 1 else 0.0)")],
    "the weights' parameter made the output's": [("    first = ", "    w_ptr = y_ptr\n    first = ")],
    "the weights' parameter moved onto the output": [("    first = ", "    w_ptr += y_ptr - w_ptr\n    first = ")],
    "the weights' pointer taken back onto the output's": [
        ("tl.load(w_ptr + cols", "tl.load(w_ptr + 0 - (w_ptr - y_ptr) + cols")],
    "the store's pointer is unknown": [("tl.store(y_ptr + row", "tl.store(y_ptr + w_ptr + row")],
}


@pytest.mark.parametrize("case", sorted(NOT_HOISTED))
def test_no_hoisting_of_a_load_that_could_read_another_value(case):
    body = _loop_body(_all_hoisted(_edited(SCALE_ROWS, *NOT_HOISTED[case])).source)
    assert "w_ptr + " in body, body


def test_a_name_read_after_the_loop_or_before_its_assignment_stays_assigned_in_it():
    read_after = ("\n\n\nPARAMS", "\n    tl.store(y_ptr + cols, col_ok * 1.0, mask=col_ok)\n\n\nPARAMS")
    after = _all_hoisted(_edited(SCALE_ROWS, ("    first = ", "    col_ok = cols < 0\n    first = "), read_after))
    # assigned before the loop too: a loop that runs zero times would leave the other value
    assert "col_ok = cols < n_cols" in _loop_body(after.source)
    reads_first = ("        row = first + r\n", "        row = first + r + tl.sum(col_ok * 0)\n")
    before = _all_hoisted(_edited(SCALE_ROWS, reads_first, ("    for r in", "    col_ok = cols < 0\n    for r in")))
    assert "col_ok = cols < n_cols" in _loop_body(before.source)  # the first iteration reads the value from before


@pytest.mark.parametrize("task", ["softmax", "layernorm", "attention", "attention_causal", "mla_decode", "matmul",
                                  "reduction", "vector_add"])
def test_the_library_seeds_offer_no_site(task):
    # softmax, layer norm and attention: each pass needs the one before (max, then sums of exp(x - max));
    # their loads depend on the loop variable, and MLA's and matmul's single loops carry their state
    source = NativeTask(TASK_LIBRARY / task).seed_source or ""
    assert _moved(FuseLoops(), source) is None and _moved(HoistInvariant(), source) is None


@pytest.mark.parametrize(("kernel", "task", "move"), [(ROW_STATS, ROW_STATS_TASK, "fuse"),
                                                      (SCALE_ROWS, SCALE_ROWS_TASK, "hoist")])
def test_the_moved_kernels_pass_the_checker(tmp_path: Path, kernel: str, task: str, move: str):
    moved = _moved(FuseLoops(), kernel) if move == "fuse" else _all_hoisted(kernel)
    assert moved is not None and moved.source != Candidate.from_source(kernel).source
    (tmp_path / "task.py").write_text(task)
    (tmp_path / "seed.py").write_text(kernel)
    with Evaluator(NativeTask(tmp_path), EvaluationConfig(timeout_s=120, latency=LatencyMode.OFF), device="cpu") as ev:
        result = ev.evaluate(moved)
        assert result.status is Status.OK, result.reason
        # the same kernel reading one row's values for every row of its program: the checker says so
        wrong = moved.source.replace("x_row + offs", "x_ptr + offs") if move == "fuse" else moved.source.replace(
            "x_ptr + row * stride", "x_ptr + first * stride")
        assert wrong != moved.source
        assert ev.evaluate(Candidate(wrong, dict(moved.params))).status is Status.WRONG_OUTPUT



def test_the_row_moments_example_reads_each_row_once_after_fusion():
    # the shipped example task (configs/ablation_search/row_moments.yaml): its seed passes the checker,
    # fusion leaves one loop with one load, and the fused kernel passes too while a wrong one does not
    task = NativeTask(ROW_MOMENTS)
    seed = Candidate.from_source(task.seed_source or "")
    fused = _moved(FuseLoops(), seed.source)
    assert fused is not None and _loads(seed.source) == 2 and _loads(fused.source) == 1
    assert sum(isinstance(n, ast.For) for n in ast.walk(ast.parse(fused.source))) == 1
    assert _moved(HoistInvariant(), seed.source) is None
    with Evaluator(task, EvaluationConfig(timeout_s=120, latency=LatencyMode.OFF), device="cpu") as ev:
        for c in (seed, fused):
            result = ev.evaluate(c)
            assert result.status is Status.OK, result.reason
        wrong = fused.source.replace("tl.sum(x * x, axis=0)", "tl.sum(x * tl.abs(x), axis=0)")
        assert wrong != fused.source
        assert ev.evaluate(Candidate(wrong, dict(fused.params))).status is Status.WRONG_OUTPUT
