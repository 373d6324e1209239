"""The float32 layer norm task: fair to correct float32 kernels, unfair to the ones it exists to catch.

On a GPU the seed and known-better kernels once failed the default float32 tolerance on the
``offset`` rows (the mean's float32 rounding error shifts whole rows); the task now carries its own
tolerance. The interpreter cannot reproduce a GPU's reduction order, so the margins under GPU
orders are checked with the numpy simulation of `bench/model/layernorm_precision.py`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.model.layernorm_precision import KERNELS, run
from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from evo.contracts.task import Tolerance
from evo.contracts.verdict import Status
from fitness.evaluate import Evaluator
from tests.conftest import candidate


@pytest.fixture(scope="module")
def task() -> NativeTask:
    return NativeTask(TASK_LIBRARY / "layernorm", dtype="float32")


@pytest.fixture(scope="module")
def evaluator(task: NativeTask) -> Iterator[Evaluator]:
    settings = EvaluationConfig(timeout_s=120, latency=LatencyMode.OFF)
    with Evaluator(task, settings, device="cpu") as ev:
        yield ev


@pytest.fixture(scope="module")
def strict_evaluator() -> Iterator[Evaluator]:
    """The task held to half its float32 tolerance."""
    strict = NativeTask(TASK_LIBRARY / "layernorm", dtype="float32")
    strict.tolerance_override = Tolerance(strict.tolerance.atol / 2, strict.tolerance.rtol / 2)
    settings = EvaluationConfig(timeout_s=120, latency=LatencyMode.OFF)
    with Evaluator(strict, settings, device="cpu") as ev:
        yield ev


@pytest.mark.parametrize("file", ["seed.py", "known_better.py"])
def test_library_kernels_pass_with_a_margin(strict_evaluator, file):
    result = strict_evaluator.evaluate(Candidate.from_file(TASK_LIBRARY / "layernorm" / file))
    assert result.status is Status.OK, result.reason


@pytest.mark.parametrize("name", ["layernorm_one_pass", "layernorm_fp16_compute", "layernorm_fp16_output"])
def test_precision_shortcuts_are_rejected(evaluator, name):
    result = evaluator.evaluate(candidate(name))
    assert result.status is Status.WRONG_OUTPUT, result.reason
    assert "outside tolerance" in result.reason


def test_the_one_pass_variance_fails_on_the_offset_rows(evaluator):
    result = evaluator.evaluate(candidate("layernorm_one_pass"))
    assert "(offset)" in result.reason  # caught by the distribution that exists to catch it


def test_under_gpu_reduction_orders_correct_kernels_pass_and_shortcuts_fail(task):
    """Every simulated check run: two-pass kernels below 1/2 the tolerance, shortcuts above 2x."""
    for kernel in KERNELS:
        worst, weakest = run(kernel, task, task.tolerance, draws=12)
        if kernel.one_pass or kernel.fp16 or kernel.fp16_out:
            assert weakest > 2.0, kernel.name
        else:
            assert worst < 0.5, kernel.name
