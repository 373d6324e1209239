"""Conditions that hold together (`fitness.check.joint`): the conjunctions a kernel's paths sit under, and the
sizes the crossings try where no check size holds one (`fitness.check.crossings.joint_crossings`)."""

from __future__ import annotations

import ast

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from fitness.check.crossings import crossing_sizes
from fitness.check.joint import conjunctions, split

KERNEL = '''import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
{path}
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {{"num_warps": 8}}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
{host}
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols), num_warps=num_warps)
'''

# a path taken only where rows pass 600 and columns 1500 together, written nine ways
PATHS = {
    "joined": "    y = tl.where((row > 600) & (n_cols > 1500), y * 0.99, y)",
    "nested selects": "    y = tl.where(row > 600, tl.where(n_cols > 1500, y * 0.99, y), y)",
    "a select under an if": "    if row > 600:\n        y = tl.where(n_cols > 1500, y * 0.99, y)",
    "an or, false": "    y = tl.where((row < 601) | (n_cols < 1501), y, y * 0.99)",
    "a select of conditions": "    y = tl.where(tl.where(row > 600, n_cols > 1500, False), y * 0.99, y)",
    "a product of conditions": "    y = y * (1.0 - 0.01 * (row > 600).to(tl.float32) * (n_cols > 1500).to(tl.float32))",
    "a product compared": "    y = tl.where((row > 600).to(tl.int32) * (n_cols > 1500).to(tl.int32) == 1, y * 0.99, y)",
    "conditions named apart":
        "    tall = row > 600\n    wide = n_cols > 1500\n    y = tl.where(tall & wide, y * 0.99, y)",
    "a value that turns in a branch":
        "    y = y * (1.0 - 0.01 * tl.where(row > 600, tl.minimum(n_cols // 1501, 1), 0))",
}


def _candidate(path: str = "", host: str = "    pass") -> Candidate:
    return Candidate.from_source(KERNEL.format(path=path, host=host))


@pytest.fixture(scope="module")
def softmax() -> NativeTask:
    return NativeTask(TASK_LIBRARY / "softmax")


def test_a_condition_splits_into_the_parts_that_must_hold_together():
    def parts(text: str, outcome: bool) -> list[tuple[str, bool]]:
        return [(ast.unparse(c), o) for c, o in split(ast.parse(text, mode="eval").body, outcome)]

    assert parts("(a > 1) & (b < 2) & (c == 3)", True) == [("a > 1", True), ("b < 2", True), ("c == 3", True)]
    assert parts("(a > 1) | (b < 2)", False) == [("a > 1", False), ("b < 2", False)]
    assert parts("not (a > 1 or b < 2)", True) == [("a > 1", False), ("b < 2", False)]
    assert parts("(a > 1) | (b < 2)", True) == [("(a > 1) | (b < 2)", True)]  # either will do: one part
    assert parts("(a > 1) & (b < 2)", False) == [("(a > 1) & (b < 2)", False)]


def test_a_path_sits_under_the_ifs_and_selects_that_lead_to_it():
    source = KERNEL.format(path="    if row > 600:\n        y = tl.where(n_cols > 1500, tl.where(offs < 7, y, 0.5), y)",
                           host="    pass")
    kernel = next(f for f in ast.parse(source).body if isinstance(f, ast.FunctionDef) and f.name == "_softmax")
    found = {tuple((ast.unparse(c), o) for c, o in parts) for _, parts in conjunctions(kernel)}
    assert (("row > 600", True), ("n_cols > 1500", True)) in found
    assert (("row > 600", True), ("n_cols > 1500", False)) in found
    assert (("row > 600", True), ("n_cols > 1500", True), ("offs < 7", False)) in found
    assert not any(("offs < 7", True) in p and ("n_cols > 1500", False) in p for p in found)  # not its branch


@pytest.mark.parametrize("form", sorted(PATHS))
def test_a_path_that_needs_two_dimensions_at_once_is_crossed_where_both_hold(softmax, form):
    crossings = crossing_sizes(softmax, _candidate(PATHS[form]))
    joint = [c for c in crossings.sizes if c.joint]
    # rows 602 hold program 601; columns 1501 pass 1500; no check size has both (nor rows past 7)
    assert [c.size for c in joint] == [{"rows": 602, "cols": 1501}], form
    assert not crossings.beyond


def test_a_host_branch_on_two_dimensions_is_crossed_where_both_hold(softmax):
    host = "    if rows > 600 and cols > 1500:\n        y = y.view(y.shape)"
    crossings = crossing_sizes(softmax, _candidate(host=host))
    assert [c.size for c in crossings.sizes if c.joint] == [{"rows": 601, "cols": 1501}]


def test_a_path_past_every_size_the_check_affords_and_every_bench_size_is_beyond(softmax):
    # rows and columns past 5000 together: 25 million elements, and the bench size (4096 x 4096) holds neither
    crossings = crossing_sizes(softmax, _candidate(PATHS["joined"].replace("600", "5000").replace("1500", "5000")))
    assert [(c.size, c.joint) for c in crossings.beyond] == [({"rows": 5002, "cols": 5001}, True)]
    # past the check's reach but held by the bench size: its run (compared, in the model's sampled programs)
    bench = crossing_sizes(softmax, _candidate(PATHS["joined"].replace("600", "2000").replace("1500", "3000")))
    assert not bench.beyond and not any(c.joint for c in bench.sizes)


def test_conditions_a_check_size_already_holds_together_or_on_one_dimension_add_nothing(softmax):
    # the check has rows 2 and columns 2053 in one size: rows < 3 with columns past 2000 ran
    held = _candidate("    y = tl.where((tl.num_programs(0) < 3) & (n_cols > 2000), y * 0.99, y)")
    assert not any(c.joint for c in crossing_sizes(softmax, held).sizes)
    # one unknown: the single crossing's
    one = _candidate("    y = tl.where((n_cols > 2100) & (n_cols < 2200), y * 0.99, y)")
    assert not any(c.joint for c in crossing_sizes(softmax, one).sizes)
    data = _candidate("    y = tl.where((x > 0.5) & (n_cols > 2100), y * 0.99, y)")  # data: the special values' part
    assert not any(c.joint for c in crossing_sizes(softmax, data).sizes)
    never = _candidate("    y = tl.where((row > 600) & (row < 500) & (n_cols > 1500), y * 0.99, y)")  # no row is both
    assert not any(c.joint for c in crossing_sizes(softmax, never).sizes)
