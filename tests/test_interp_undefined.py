"""What a GPU leaves undefined is `unsafe` in the check, and what it defines differently from numpy is computed its
way (`fitness.sandbox.interp_undefined`): integer division and remainder by zero and shifts by the operand's
width or more are refused; a float cast to an integer type that cannot hold it saturates (NaN to 0) as a GPU's
conversion does, where numpy gave the smallest integer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import NativeTask
from evo.contracts.verdict import Status
from fitness.evaluate import Evaluator

from .conftest import ROOT

# the library-shaped one-pass softmax with `%s` a line of its own between its result and the store
SOFTMAX = (ROOT / "tests" / "candidates" / "cases" / "one_pass.py").read_text().replace(
    "    tl.store(y_ptr + row * stride_y + offs, (e / tl.sum(e, axis=0)).to(",
    "    y = e / tl.sum(e, axis=0)\n    %s\n    tl.store(y_ptr + row * stride_y + offs, y.to(")
assert SOFTMAX.count("%s") == 1 and "%" not in SOFTMAX.replace("%s", "")


@pytest.fixture(scope="module")
def softmax(shared_workers) -> Iterator[Evaluator]:
    task = NativeTask(ROOT / "evo" / "tasks" / "softmax")
    task.check_sizes = [{"rows": 1, "cols": 1}, {"rows": 3, "cols": 17}]
    task.bench_sizes = [{"rows": 4, "cols": 256}]
    settings = EvaluationConfig(timeout_s=60.0, latency=LatencyMode.OFF)
    with Evaluator(task, settings, device="cpu", secret=5, **shared_workers(settings)) as ev:
        yield ev


@pytest.mark.parametrize("line, words", [
    # zero in the interpreter (y unchanged), all ones or anything on a GPU (y zeroed)
    ("y = y * (1 + n_cols // (n_cols * 0)).to(tl.float32)", "integer division by zero"),
    ("y = y * (1 + (offs + 5) % (offs * 0)).to(tl.float32)", "integer remainder by zero"),
    ("y = y * (1 + (row << (n_cols * 0 + 32))).to(tl.float32)", "shifts a 32-bit integer"),
    ("y = y * (1 + (row >> (n_cols - n_cols - 1))).to(tl.float32)", "shifts a 32-bit integer"),
])
def test_an_operation_a_gpu_leaves_undefined_is_unsafe(softmax, line, words):
    r = softmax.evaluate(Candidate.from_source(SOFTMAX % line))
    assert r.status is Status.UNSAFE and words in r.reason, r.reason


@pytest.mark.parametrize("line", [
    "y = y * (1 + n_cols // (n_cols * 0 + 7) * 0).to(tl.float32)",
    "y = y * (1 + (row << 31) * 0).to(tl.float32)",
    "y = y + ((offs.to(tl.float32) * 0.5).to(tl.int32) * 0).to(tl.float32)",  # what an int32 holds
    "y = y + (x * 0.0).to(tl.int32).to(tl.float32)",  # NaN (the masked lanes' -inf times 0) is 0, as on a GPU
])
def test_its_defined_twin_passes(softmax, line):
    r = softmax.evaluate(Candidate.from_source(SOFTMAX % line))
    assert r.ok, r.reason


BIG = "(n_cols * 0.0 + 1e20).to(tl.int32) // 2147483647"  # 1 on a GPU (saturated); numpy's smallest int gave -1


@pytest.mark.parametrize(("line", "right_on_a_gpu"), [(f"y = y * ({BIG}).to(tl.float32)", True),
                                                      (f"y = y * (-({BIG})).to(tl.float32)", False)])
def test_a_float_cast_out_of_range_saturates_as_on_a_gpu(softmax, line, right_on_a_gpu):
    r = softmax.evaluate(Candidate.from_source(SOFTMAX % line))
    assert r.ok is right_on_a_gpu, r.reason
