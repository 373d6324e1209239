"""Where a condition on one unknown changes outcome (`fitness.check.change_points`), against the outcome
computed value by value, and which conditions the crossings take (`fitness.check.crossings`)."""

from __future__ import annotations

import ast

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from evo.contracts.candidate import Candidate
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from fitness.check.change_points import change_points, first_break, outcomes, values
from fitness.check.crossings import compared, crossing_sizes
from fitness.check.thresholds import base_size


def solved(text: str, names: dict[str, int] | None = None) -> tuple[list[int], str] | None:
    out = outcomes(ast.parse(text, mode="eval").body, names or {})
    return None if out is None else ([int(p) for p in change_points(out[0])], out[1])


def test_the_values_where_a_condition_turns_are_solved_for_its_one_unknown():
    assert solved("n_cols // 100 > 21") == ([2200], "n_cols")
    assert solved("row // 8 == 25") == ([200, 208], "row")
    assert solved("(n > 100) & (n < 200)") == ([101, 200], "n")
    assert solved("x.shape[1] > LIMIT", {"LIMIT": 4100}) == ([4101], "x.shape[1]")
    assert solved("triton.cdiv(n, BLOCK) > 4", {"BLOCK": 128}) == ([513], "n")
    assert solved("not (n <= 7 or n == 9)") == ([8, 9, 10], "n")
    assert solved("tl.program_id(0) * 2 + 1 >= 41") == ([20], "tl.program_id(0)")


def test_a_condition_with_no_unknown_two_or_arithmetic_not_followed_is_not_solved():
    assert solved("BLOCK > 64", {"BLOCK": 128}) is None  # fixed: dead code, not a split
    assert solved("a > b") is None
    assert solved("n * m > 4096") is None
    assert solved("n // ZERO > 1", {"ZERO": 0}) is None
    assert solved("n ** 8 > 1") is None  # past the cube, int64 overflows over the domain


@settings(max_examples=60, deadline=None, derandomize=True)
@given(div=st.integers(1, 300), mul=st.integers(1, 9), add=st.integers(-500, 500), t=st.integers(0, 20000),
       op=st.sampled_from([">", ">=", "<", "<=", "==", "!="]), mod=st.integers(0, 700))
def test_solved_change_points_are_those_of_the_condition_evaluated_value_by_value(div, mul, add, t, op, mod):
    text = f"(n // {div} * {mul} + {add}) % {mod} {op} {t}" if mod else f"n // {div} * {mul} + {add} {op} {t}"
    got = solved(text)
    assert got is not None and got[1] == "n"
    window = 25000
    code = compile(text, "<condition>", "eval")
    truth = np.array([eval(code, {}, {"n": n}) for n in range(window)])
    expected = [int(p) for p in np.flatnonzero(truth[1:] != truth[:-1]) + 1]
    assert [p for p in got[0] if p < window] == expected


def turns(text: str, last: int) -> int | None:
    found = values(ast.parse(text, mode="eval").body, {})
    assert found is not None and found[1] == "n", text
    return first_break(found[0], last)


def test_a_value_turns_where_it_leaves_the_law_it_followed_up_to_the_largest_size_seen():
    assert turns("min(n // 5000, 1)", 7) == 5000  # constant, then a step
    assert turns("min(n, 5000)", 2053) == 5001  # a line, then a clip
    assert turns("max(min(n, 100), n - 4900)", 2053) == 5001  # a clip the check saw, then another
    assert turns("max(n % 128, n - 5000)", 2053) == 5120  # a staircase, then a line over it
    assert turns("(n >> 13) & 1", 7) == 8192
    assert turns("(n / 5000.0).to(tl.int32)", 7) == 5000  # a cast truncates
    assert turns("tl.maximum(n * 1.0 - 5000.0, 0.0)", 7) == 5001
    assert turns("min(n * n, 25000000)", 100) == 5001  # a square, then a clip
    assert turns("tl.where(n > 300, 1, 0)", 17) == 301
    assert turns("tl.sigmoid((n - 5000.0) * 100.0)", 7) == 5000  # smooth, and a step all the same
    assert turns("tl.exp(n - 5000.0)", 7) == 4980  # leaves 0 where it passes 1e-9
    assert turns("divmod(n, 5000)[0]", 7) == 5000 and turns("round(n / 10000)", 7) == 5001  # half to even
    assert turns("math.isqrt(n) // 70", 7) == 4900  # Python's math, value by value


def test_a_staircase_the_check_climbed_or_a_plain_curve_does_not_turn():
    assert turns("triton.cdiv(n, 128)", 2053) is None
    assert turns("n % 100", 2053) is None
    assert turns("n & 3", 2053) is None
    assert turns("n * n * 3 + 7", 100) is None
    assert turns("min(n, 1500)", 2053) is None  # turned at 1501, inside the sizes the check ran
    assert turns("tl.sqrt(n * 1.0)", 2053) is None and turns("tl.exp(-n * 1.0)", 7) is None
    assert turns("min(n, 5000)", 2) is None  # too few values seen to know a line (two differences at least)
    assert turns("min(n // 5000, 1)", 2) == 5000  # but enough for a constant (programs 0 .. 2 of rows 1 .. 3)
    assert turns("min(n, 5000)", 3) == 5001


@settings(max_examples=40, deadline=None, derandomize=True)
@given(t=st.integers(20, 1 << 20), last=st.integers(5, 19), form=st.sampled_from([
    ("min(n // {t}, 1)", 0), ("n // {t} % 2", 0), ("n - min(n, {t})", 1), ("max(n, {t}) - {t}", 1),
    ("min(max(n - {t}, 0), 1)", 1), ("int(n / ({t} + 0.5))", 1), ("abs(n - {t}) + n", 1)]))
def test_a_value_that_turns_past_the_sizes_seen_turns_where_its_first_different_value_is(t, last, form):
    text, shift = form
    assert turns(text.format(t=t), last) == t + shift


def test_the_crossings_know_an_index_from_a_count():
    source = '''
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = pid
    tl.store(x_ptr + row, tl.where(row // 8 == 25, 1.0, 0.0), mask=n // 100 > 21)


def launch(x):
    _k[(x.shape[0],)](x, x.shape[0], BLOCK=16)
'''
    found = [s for s in compared(Candidate.from_source(source)) if s.turn is None]
    index = [s for s in found if s.index]
    count = [s for s in found if not s.index]
    assert index and index[0].outcome is not None and list(change_points(index[0].outcome)) == [200, 208]
    assert count and any(s.outcome is not None and list(change_points(s.outcome)) == [2200] for s in count)


SPLITS = '''
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * scale, mask=offs < n)


def launch(x, y):
    rows, cols = x.shape
    scale = 1.0
    if cols > 4100:
        scale = 2.0
    _k[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), scale * (1.0 - 0.5 * (cols > 6000)), BLOCK=128)
'''


def test_a_condition_is_crossed_along_the_dimensions_that_feed_it():
    # each free dimension that can change a condition (`fitness.check.feeds`) is moved to where it turns: `cols`
    # comes from x.shape alone, so rows are never moved for it; a combination of tests on both is crossed along both
    task = NativeTask(TASK_LIBRARY / "softmax")
    task.check_sizes = [{"rows": 1, "cols": 1}, {"rows": 3, "cols": 17}, {"rows": 2, "cols": 131}]
    task.bench_sizes = [{"rows": 4, "cols": 512}]
    assert base_size(task) == ({"rows": 3, "cols": 17}, ["cols", "rows"])
    lines = SPLITS.splitlines()
    first = next(i for i, t in enumerate(lines) if "if cols > 4100" in t) + 1
    last = next(i for i, t in enumerate(lines) if "cols > 6000" in t) + 1

    def crossed(candidate: Candidate) -> set[tuple[int, str]]:
        base = {"rows": 3, "cols": 17}
        return {(c.line, next(d for d in ("rows", "cols") if c.size[d] != base[d]))
                for c in crossing_sizes(task, candidate).sizes}

    assert crossed(Candidate.from_source(SPLITS)) == {(first, "cols"), (last, "cols")}
    two = Candidate.from_source(SPLITS.replace("if cols > 4100:", "if (rows > 3000) & (cols < 9000):"))
    assert crossed(two) == {(first, "rows"), (first, "cols"), (last, "cols")}  # rows 3001, cols 9000, cols 6001
    mixed = Candidate.from_source(SPLITS.replace("cols > 6000", "cols + rows // 7000 * 7000 > 6000"))
    assert crossed(mixed) == {(first, "cols"), (last, "cols"), (last, "rows")}  # fed by both: rows are moved too
