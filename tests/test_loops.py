"""Conditions that turn with a loop's iterations (`fitness.check.loops`): the loops a condition sits in, the
counters they step, and the end a loop must pass for a condition to turn."""

from __future__ import annotations

import ast

from fitness.check.loops import enclosing_loops, end_size, turning_ends

KERNEL = '''
def _k(x_ptr, n, BLOCK: tl.constexpr):
    it = 0
    seen = 0
    for start in range(0, n, BLOCK):
        it += 1
        if start > 5:
            seen += 1
        for j in tl.range(2, 40, 3):
            v = tl.where(j > 20, 1.0, 0.0)
        w = tl.where(start >= 3 * BLOCK, 1.0, 0.0)
    total = tl.where(it > 3, 1.0, 0.0)
'''


def _kernel() -> ast.FunctionDef:
    fn = ast.parse(KERNEL).body[0]
    assert isinstance(fn, ast.FunctionDef)
    return fn


def _node(fn: ast.FunctionDef, text: str) -> ast.expr:
    return next(n for n in ast.walk(fn) if isinstance(n, ast.Compare) and ast.unparse(n) == text)


def test_a_condition_knows_the_loops_it_sits_in_innermost_first_and_their_counters():
    fn = _kernel()
    loops = enclosing_loops(fn)
    assert [loop.target for loop in loops[id(_node(fn, "j > 20"))]] == ["j", "start"]
    assert [loop.target for loop in loops[id(_node(fn, "start >= 3 * BLOCK"))]] == ["start"]
    assert loops[id(_node(fn, "it > 3"))] == []  # after the loop: no iteration of it
    [outer] = loops[id(_node(fn, "start > 5"))]
    # `it` is stepped in the loop's own body; `seen` only under a condition, so its value is no count of iterations
    assert set(outer.counters) == {"it"} and ast.unparse(outer.end) == "n" and ast.unparse(outer.step) == "BLOCK"
    [inner, _] = loops[id(_node(fn, "j > 20"))]
    assert (ast.unparse(inner.start), ast.unparse(inner.end), ast.unparse(inner.step)) == ("2", "40", "3")


def _fixed(values: dict[str, int]):
    def fixed(e: ast.expr) -> int | None:
        try:
            return int(eval(ast.unparse(e), {}, dict(values)))  # the test's own code: literals and names
        except NameError:
            return None
    return fixed


def test_the_end_a_loop_must_pass_is_that_of_the_first_iteration_that_turns_the_condition():
    fn = _kernel()
    loops = enclosing_loops(fn)
    fixed = _fixed({"BLOCK": 8192})
    # start runs 0, 8192, 16384, 24576: true from the fourth iteration, so the end must pass 24576
    condition = _node(fn, "start >= 3 * BLOCK")
    assert turning_ends(condition, loops[id(condition)][0], fixed, {}) == [24577]
    # a counter stepped once an iteration: it is 4 in the fifth iteration at the latest (read before its step)
    it = ast.parse("it > 3", mode="eval").body
    assert turning_ends(it, loops[id(condition)][0], fixed, {}) == [4 * 8192 + 1]
    # j over 2, 5, ..., 38: true from 23, the eighth value, whatever the outer loop does
    inner = _node(fn, "j > 20")
    assert turning_ends(inner, loops[id(inner)][0], fixed, {}) == [24]
    # a step that is not fixed, or a condition on something else, gives nothing
    assert turning_ends(condition, loops[id(condition)][0], _fixed({}), {}) == []
    other = ast.parse("n > 3", mode="eval").body
    assert turning_ends(other, loops[id(condition)][0], fixed, {}) == []


def test_the_size_at_which_the_loop_s_end_passes_a_value():
    assert end_size(ast.parse("x.shape[1]", mode="eval").body, {}, 24577) == 24577
    assert end_size(ast.parse("x.shape[1] // 2", mode="eval").body, {}, 100) == 200
    assert end_size(ast.parse("40", mode="eval").body, {}, 100) is None  # a fixed end turns nothing


WHILE = '''
def _k(x_ptr, n, BLOCK: tl.constexpr):
    for start in tl.range(0, n, BLOCK, num_stages=2):
        a = tl.where(start >= 2 * BLOCK, 1.0, 0.0)
    start = 0
    while start < n:
        b = tl.where(start >= 3 * BLOCK, 1.0, 0.0)
        start += BLOCK
'''


def test_a_while_over_a_counter_and_a_range_with_keywords_are_loops_over_ranges():
    fn = ast.parse(WHILE).body[0]
    assert isinstance(fn, ast.FunctionDef)
    loops = enclosing_loops(fn)
    fixed = _fixed({"BLOCK": 128})
    first, second = _node(fn, "start >= 2 * BLOCK"), _node(fn, "start >= 3 * BLOCK")
    # `start` is the first loop's target and then the while's counter: its last binding before the while counts
    assert turning_ends(first, loops[id(first)][0], fixed, {}) == [257]
    [loop] = loops[id(second)]
    assert loop.target == "start" and ast.unparse(loop.end) == "n" and not loop.counters
    assert turning_ends(second, loop, fixed, {}) == [385]
