"""Which dimensions can change a condition (`fitness.check.feeds`): followed through assignments, the tests
they sit under, call and launch sites and `launch`'s shapes; every dimension wherever the code is not
followed. A wrong answer must only ever be too many dimensions: each case below that answers fewer than
every dimension is one a kernel could not use to hide a path from a size the check never moved."""

from __future__ import annotations

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from evo.contracts.syntax import parse_module
from fitness.check.crossings import compared
from fitness.check.feeds import Feeds
from fitness.check.thresholds import base_size

KERNEL = '''
import torch
import triton
import triton.language as tl

LIMIT = 40


@triton.jit
def _k(x_ptr, y_ptr, n_cols, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0)
    if n > LIMIT:
        x = x * 2.0
    tl.store(y_ptr + row * n_cols + offs, x, mask=mask)


PARAMS = {"BLOCK": 16}


def launch(x, y, *, BLOCK):
%s
'''


@pytest.fixture(scope="module")
def task() -> NativeTask:
    t = NativeTask(TASK_LIBRARY / "softmax")
    t.check_sizes = [{"rows": 1, "cols": 1}, {"rows": 3, "cols": 17}, {"rows": 2, "cols": 131}]
    t.bench_sizes = [{"rows": 4, "cols": 512}]
    return t


def dims(task: NativeTask, host: str, condition: str = "n > LIMIT") -> set[str]:
    """The dimensions feeding `condition` (a line's text) of KERNEL with `host` as the body of launch."""
    source = KERNEL % "\n".join("    " + line for line in host.strip("\n").splitlines())
    candidate = Candidate.from_source(source)
    base, free = base_size(task)
    feeds = Feeds(task, candidate, parse_module(source), base, free)
    lines = source.splitlines()
    found = [s.dims for s in compared(candidate, feeds) if condition in lines[s.line - 1]]
    assert found, f"no condition {condition!r}"
    return set().union(*[d if d is not None else {"any"} for d in found])


EVERY = {"rows", "cols"}


@pytest.mark.parametrize(("host", "expected"), [
    ("_k[(x.shape[0],)](x, y, x.shape[1], x.shape[1], BLOCK=BLOCK)", {"cols"}),
    ("rows, cols = x.shape\n_k[(rows,)](x, y, cols, rows, BLOCK=BLOCK)", {"rows"}),
    ("_k[(1,)](x, y, 1, 7 * LIMIT, BLOCK=BLOCK)", set()),  # a constant: no size changes it
    ("_k[(1,)](x, y, 1, x.numel(), BLOCK=BLOCK)", EVERY),
    ("_k[(1,)](x, y, 1, triton.next_power_of_2(x.shape[1]) // 2, BLOCK=BLOCK)", {"cols"}),
    ("_k[(1,)](x, y, 1, n=max(16, x.shape[1]), BLOCK=BLOCK)", {"cols"}),
])
def test_a_value_is_followed_to_the_shapes_it_comes_from(task, host, expected):
    assert dims(task, host) == expected


@pytest.mark.parametrize("host", [
    # arithmetic that adds the other dimension only past a size
    "_k[(1,)](x, y, 1, x.shape[1] + x.shape[0] // 41 * 41, BLOCK=BLOCK)",
    # a constant assigned under a test on rows
    "n = 5\nif x.shape[0] > 8:\n    n = 10000\n_k[(1,)](x, y, 1, n + x.shape[1], BLOCK=BLOCK)",
    # the launch that runs decided by rows, each with a constant
    "if x.shape[0] > 8:\n    _k[(1,)](x, y, 1, 10000 + x.shape[1], BLOCK=BLOCK)\n"
    "else:\n    _k[(1,)](x, y, 1, x.shape[1], BLOCK=BLOCK)",
    # a second launch of the same kernel, harmless at the check sizes, with the rows
    "s = torch.zeros((1,), device=x.device)\n_k[(1,)](s, s, 1, 10000, BLOCK=BLOCK)\n"
    "_k[(x.shape[0],)](x, y, x.shape[1], x.shape[0] + x.shape[1], BLOCK=BLOCK)",
    # a break under a test on rows decides whether the later assignment runs
    "n = x.shape[1]\nfor i in range(2):\n    if x.shape[0] > 8:\n        break\n    n = 10000\n"
    "_k[(1,)](x, y, 1, n, BLOCK=BLOCK)",
])
def test_a_dimension_that_reaches_the_value_by_any_route_is_kept(task, host):
    assert dims(task, host) == EVERY


@pytest.mark.parametrize("host", [
    "d = {}\nd['n'] = x.shape[0]\n_k[(1,)](x, y, 1, d['n'], BLOCK=BLOCK)",  # a container changed in place
    "k = _k\nk[(1,)](x, y, 1, x.shape[1], BLOCK=BLOCK)",  # the kernel used other than by launching it
    "n = [x.shape[1]][0]\n_k[(1,)](x, y, 1, n, BLOCK=BLOCK)",  # a list display
    "try:\n    n = x.shape[1]\nexcept Exception:\n    n = 0\n_k[(1,)](x, y, 1, n, BLOCK=BLOCK)",
    "x = x.view(-1, 2)\n_k[(1,)](x, y, 1, x.shape[1], BLOCK=BLOCK)",  # the tensor rebound
    "x.resize_(x.shape[1], x.shape[0])\n_k[(1,)](x, y, 1, x.shape[1], BLOCK=BLOCK)",  # changed in place
    "n = int(x[0, 0].item())\n_k[(1,)](x, y, 1, n, BLOCK=BLOCK)",  # data
    "n = (lambda: x.shape[1])()\n_k[(1,)](x, y, 1, n, BLOCK=BLOCK)",
    "global LIMIT\nLIMIT = x.shape[0]\n_k[(1,)](x, y, 1, x.shape[1], BLOCK=BLOCK)",  # the constant is not one
    "z = x\nz.resize_(x.shape[1], x.shape[0])\n_k[(1,)](x, y, 1, x.shape[1], BLOCK=BLOCK)",  # reshaped by an alias
    "torch.Tensor.resize_(x, (x.shape[1], x.shape[0]))\n_k[(1,)](x, y, 1, x.shape[1], BLOCK=BLOCK)",
    "f = [torch.Tensor.resize_]\nf[0](x, (x.shape[1], x.shape[0]))\n_k[(1,)](x, y, 1, x.shape[1], BLOCK=BLOCK)",
    "_k[(1,)](*(x, y, x.shape[0]), BLOCK=BLOCK)",  # which argument is which is not followed
])
def test_code_it_does_not_follow_is_fed_by_every_dimension(task, host):
    assert dims(task, host) in (EVERY, {"any"})


def test_a_program_id_is_fed_by_the_grid_and_a_load_by_everything(task):
    host = "_k[(x.shape[0],)](x, y, x.shape[1], x.shape[1], BLOCK=BLOCK)"
    source = KERNEL.replace("    if n > LIMIT:", "    if row > LIMIT:")
    candidate = Candidate.from_source(source % ("    " + host))
    base, free = base_size(task)
    feeds = Feeds(task, candidate, parse_module(candidate.source), base, free)
    [split] = [s for s in compared(candidate, feeds) if s.line == source.splitlines().index("    if row > LIMIT:") + 1]
    assert split.dims == {"rows"}
    grid_lambda = source % "    _k[lambda meta: (x.shape[0],)](x, y, x.shape[1], x.shape[1], BLOCK=BLOCK)"
    feeds = Feeds(task, Candidate.from_source(grid_lambda), parse_module(grid_lambda), base, free)
    assert all(s.dims == EVERY for s in compared(Candidate.from_source(grid_lambda), feeds)
               if "row > LIMIT" in grid_lambda.splitlines()[s.line - 1])
    loaded = KERNEL.replace("    if n > LIMIT:", "    if tl.sum(x, 0) > LIMIT:")
    candidate = Candidate.from_source(loaded % ("    " + host))
    feeds = Feeds(task, candidate, parse_module(candidate.source), base, free)
    assert all(s.dims == EVERY for s in compared(candidate, feeds)
               if "tl.sum(x, 0) > LIMIT" in candidate.source.splitlines()[s.line - 1])
