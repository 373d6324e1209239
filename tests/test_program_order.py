"""The order in which the check's interpreter runs programs (`fitness.sandbox.program_order`): a kernel
whose result depends on it is wrong on a GPU, which runs programs in any order."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fitness.sandbox.program_order import program_order, shuffled

from .conftest import ROOT


@pytest.mark.parametrize("grid", [(1, 1, 1), (2, 1, 1), (3, 1, 1), (7, 2, 3), (1, 1, 1000)])
def test_a_shuffled_order_runs_every_program_once_the_last_first_and_the_first_last(grid):
    n = grid[0] * grid[1] * grid[2]
    order = shuffled(n, grid)
    assert sorted(order.tolist()) == list(range(n))
    if n >= 2:
        assert order[0] == n - 1 and order[-1] == 0
    if n >= 10:
        assert not np.array_equal(order[1:-1], np.arange(1, n - 1)[::-1])  # the middle is not just reversed
    assert np.array_equal(order, shuffled(n, grid))  # the same for a grid shape: a verdict repeats


def test_an_unknown_order_is_refused():
    with pytest.raises(ValueError, match="unknown program order 'backwards'"):
        with program_order("backwards"):
            pass


def test_in_the_interpreter_programs_take_the_shuffled_order_and_the_natural_one_after():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tests.program_order_probe"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    n = 3 * 4 * 5
    assert got["natural"] == list(range(n)) == got["after"]  # program p took ticket p: run in order
    ran = np.argsort(got["shuffled"])  # ran[t]: the program that took ticket t
    assert np.array_equal(ran, shuffled(n, (3, 4, 5)))
    assert got["again"] == got["shuffled"] and got["other_grid"] != got["shuffled"]
