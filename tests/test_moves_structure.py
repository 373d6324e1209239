"""Structural STOKE moves: what they write on the library seeds, that it meets the equivalence
contract (in a worker, Triton interpreter), and that they do nothing where they do not apply."""

from __future__ import annotations

import ast
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import NativeTask
from fitness.evaluate import Evaluator
from mutators.stoke.moves.catalog import DEFAULT_WEIGHTS, move_named
from mutators.stoke.moves.structure import ReuseValue, SingleBlock
from mutators.stoke.moves.value_numbering import redundant

ROOT = Path(__file__).resolve().parent.parent


def _seed(task: str, **params: int) -> Candidate:
    return Candidate.from_file(ROOT / "evo" / "tasks" / task / "seed.py").with_params(**params)


def _single_block(c: Candidate) -> Candidate:
    applied = SingleBlock().apply(c, random.Random(0))
    assert applied is not None
    return applied.candidate


def _loads_of(source: str, pointer: str) -> list[ast.Call]:
    return [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.load"
            and pointer in ast.unparse(n.args[0])]


def _branch(source: str) -> ast.If:
    return next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.If) and "BLOCK" in ast.unparse(n.test))


def test_structural_moves_are_in_the_move_set_with_weights():
    assert isinstance(move_named("single block"), SingleBlock) and isinstance(move_named("reuse value"), ReuseValue)
    assert DEFAULT_WEIGHTS["single block"] > 0 and DEFAULT_WEIGHTS["reuse value"] > 0


def test_single_block_turns_softmax_three_passes_into_one_when_the_row_fits():
    moved = _single_block(_seed("softmax"))
    branch = _branch(moved.source)
    assert ast.unparse(branch.test) == "(0 < n_cols) & (n_cols <= BLOCK)"
    straight = ast.Module(body=branch.body, type_ignores=[])
    assert not any(isinstance(n, ast.For) for n in ast.walk(straight))
    assert len(_loads_of(ast.unparse(straight), "x_row")) == 1, "the row is read once when it fits one block"
    assert len(_loads_of(moved.source, "x_row")) == 4  # the loops, unchanged, for rows longer than a block
    assert moved.params == _seed("softmax").params


def test_single_block_applies_once_and_not_where_there_is_no_loop():
    assert SingleBlock().apply(_single_block(_seed("softmax")), random.Random(0)) is None
    assert SingleBlock().apply(_seed("vector_add"), random.Random(0)) is None


def test_reuse_value_drops_a_load_read_again_but_not_across_a_store():
    src = '''import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, x, mask=mask)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, x + 1.0, mask=mask)


PARAMS = {"BLOCK": 256, "num_warps": 4}


def launch(x, y, *, BLOCK, num_warps):
    _k[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
'''
    applied = ReuseValue().apply(Candidate.from_source(src), random.Random(0))
    assert applied is not None and "dropped 1 " in applied.detail
    assert len(_loads_of(applied.candidate.source, "x_ptr")) == 2  # the one after the store stays
    assert ReuseValue().apply(applied.candidate, random.Random(0)) is None
    for task in ("softmax", "matmul", "vector_add"):
        assert ReuseValue().apply(_seed(task), random.Random(0)) is None


def test_value_numbering_sees_through_names_and_forgets_what_is_reassigned():
    body = ast.parse("a = p + 1\nb = (p + 1) * 2\np = p + 1\nd = (p + 1) * 2\nd = a * 2\n").body
    assert redundant(body) == []  # after `p = p + 1`, p + 1 is another value
    body = ast.parse("a = p + 1\nb = (p + 1) * 2\nc = a * 2\nb = c\nfor i in r:\n    c = i\nb = c\n").body
    assert redundant(body) == [3]  # b holds c's value; after the loop c is unknown
    body = ast.parse("a = tl.load(p, volatile=True)\na = tl.load(p, volatile=True)\n"
                     "b = tl.load(p)\nb = tl.load(p)\n").body
    assert redundant(body) == [3]  # a volatile load reads what other programs write: never reused


@pytest.fixture(scope="module")
def checker() -> Iterator[dict[str, Evaluator]]:
    """Equivalence at every check size (latency off: these tests are about meaning, not speed)."""
    settings = EvaluationConfig(timeout_s=300.0, memory_mb=2048, latency=LatencyMode.OFF)
    out = {name: Evaluator(NativeTask(ROOT / "evo" / "tasks" / name), settings, device="cpu")
           for name in ("softmax", "layernorm")}
    yield out
    for ev in out.values():
        ev.close()


@pytest.mark.parametrize("task", ["softmax", "layernorm"])
def test_single_block_passes_the_equivalence_check_on_both_sides_of_its_branch(task, checker):
    # BLOCK 1024: the check sizes include rows that fit one block and rows of 2053 and 3001 columns that do not
    moved = _single_block(_seed(task, BLOCK=1024))
    verdict = checker[task].evaluate(moved, level="full")
    assert verdict.ok, verdict.reason
