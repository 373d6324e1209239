"""The run that is timed is a run that was checked, and no run can tell the check from a user's call:
layouts (a view inside a guarded storage, or a tensor of its own at offset 0), poison (NaN, an odd value,
zero), the profiled run checked in full where its sample compares too little, and every kernel
specialization the check ran compiled for the GPU."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig
from evo.contracts.native_task import NativeTask
from evo.contracts.verdict import Status
from fitness.evaluate import Evaluator

from .conftest import CANDIDATES, ROOT


def cand(path: str) -> Candidate:
    return Candidate.from_file(CANDIDATES / f"{path}.py")


@pytest.fixture(scope="module")
def softmax(shared_workers) -> Iterator[Evaluator]:
    task = NativeTask(ROOT / "evo" / "tasks" / "softmax")
    task.check_sizes = [{"rows": 1, "cols": 1}, {"rows": 3, "cols": 17}, {"rows": 2, "cols": 2053}]
    task.bench_sizes = [{"rows": 32, "cols": 1024}]
    settings = EvaluationConfig(timeout_s=120.0, memory_mb=1024)
    with Evaluator(task, settings, device="cpu", secret=7, **shared_workers(settings)) as ev:
        yield ev


def test_a_kernel_that_tells_the_checks_layout_from_a_users_is_wrong_in_the_check(softmax):
    # it used to pass every check (views at an offset) and be modelled on three rows in four, and verified
    r = softmax.evaluate(cand("layout/offset_tells_the_check"), level="verified")
    assert r.status is Status.WRONG_OUTPUT and "never written" in r.reason, r.reason


def test_a_kernel_that_reads_its_output_for_the_users_zeros_is_refused(softmax):
    r = softmax.evaluate(cand("layout/output_zero_tells_the_user"))
    assert r.status in (Status.UNSAFE, Status.WRONG_OUTPUT), r.reason


def test_the_honest_kernel_passes_in_every_layout_and_is_timed(softmax):
    r = softmax.evaluate(cand("softmax/one_pass"), level="verified")
    assert r.ok and r.latency_ms is not None, r.reason


def test_a_path_the_gpu_compiler_refuses_at_check_sizes_only_is_a_compile_error_naming_the_size(softmax):
    r = softmax.evaluate(cand("compile/dot_below_sixteen"), level="verified")
    assert r.status is Status.COMPILE_ERROR, r.reason
    assert "does not compile for sm_90" in r.reason and '{"cols":1,"rows":1}' in r.reason, r.reason
    twin = softmax.evaluate(cand("compile/sum_below_sixteen"), level="verified")
    assert twin.ok and "kernel specializations the check ran compile for the GPU" in twin.reason, twin.reason


def test_a_sample_that_compares_too_little_is_profiled_again_in_full_not_replaced_by_another_run(shared_workers):
    # every loop of the seed (512 columns in 128-wide chunks) is longer than the sample runs in full, so the
    # sampled programs compare nothing: the same profiled run is redone with every program, and every
    # element of its output compared; its counts are the latency's
    settings = EvaluationConfig(timeout_s=60, profile_full_loop=3, profile_full_iterations=1)
    task = NativeTask(ROOT / "evo" / "tasks" / "softmax")
    task.bench_sizes = [{"rows": 16, "cols": 512}]
    with Evaluator(task, settings, device="cpu", secret=3, **shared_workers(settings)) as ev:
        r = ev.evaluate(Candidate.from_file(ROOT / "evo/tasks/softmax/seed.py"))
    assert r.ok and r.latency_ms is not None, r.reason
    verification = r.latency_detail["verification"]
    assert verification["full_run"] and verification["elements_compared"] == 16 * 512
    assert verification["programs_run"] >= 16
