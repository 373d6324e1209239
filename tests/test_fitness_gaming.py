"""Fitness that cannot be gamed without a GPU: for each class of hole, a candidate the evaluator used
to accept with status ok (see tests/candidates/gaming), the verdict it gets now, and an honest twin
that is still accepted with a sensible latency.

Bench sizes are smaller than the library's (fewer rows, the same width), so that the candidates that
behave differently at the bench size still do (the check's widest rows have 2053 columns) and a full
interpreted run stays cheap."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig
from evo.contracts.native_task import NativeTask
from evo.contracts.verdict import Status
from fitness.check.equivalence import bench_check
from fitness.evaluate import Evaluator

from .conftest import CANDIDATES, ROOT

GAMING = CANDIDATES / "gaming"
SOFTMAX_BENCH = [{"rows": 256, "cols": 4096}]
SETTINGS = EvaluationConfig(timeout_s=60)  # the evaluators here share the session's workers (`SharedWorkers`)


def gaming(name: str, **params: object) -> Candidate:
    return Candidate.from_file(GAMING / f"{name}.py", dict(params) or None)  # type: ignore[arg-type]


def task_with(name: str, bench: list[dict[str, int]]) -> NativeTask:
    task = NativeTask(ROOT / "evo" / "tasks" / name)
    task.bench_sizes = bench
    return task


@pytest.fixture(scope="module")
def softmax(shared_workers) -> Iterator[Evaluator]:
    with Evaluator(task_with("softmax", SOFTMAX_BENCH), SETTINGS, device="cpu", secret=11,
                   **shared_workers(SETTINGS)) as ev:
        yield ev


@pytest.fixture(scope="module")
def reduction(shared_workers) -> Iterator[Evaluator]:
    with Evaluator(task_with("reduction", [{"n": 1 << 20}]), SETTINGS, device="cpu", secret=11,
                   **shared_workers(SETTINGS)) as ev:
        yield ev


@pytest.fixture(scope="module")
def matmul(shared_workers) -> Iterator[Evaluator]:
    with Evaluator(task_with("matmul", [{"M": 512, "N": 512, "K": 512}]), SETTINGS, device="cpu", secret=11,
                   **shared_workers(SETTINGS)) as ev:
        yield ev


@pytest.fixture(scope="module")
def honest(softmax: Evaluator) -> float:
    r = softmax.evaluate(gaming("one_pass"))
    assert r.ok and r.latency_ms is not None, r.reason
    return r.latency_ms


# -- 1. verified where timed --------------------------------------------------------------------

@pytest.mark.parametrize("name", ["skips_wide_rows", "launch_skips_at_bench"])
def test_a_kernel_that_does_nothing_at_the_bench_size_is_wrong_there(softmax: Evaluator, name: str):
    # the full check meets the bench width before any timing: its bench-shaped case is 2 x 4096
    r = softmax.evaluate(gaming(name))
    assert r.status is Status.WRONG_OUTPUT and '{"cols":4096,"rows":2}' in r.reason and "never written" in r.reason, (
        r.reason)
    assert r.latency_ms is None


def test_a_kernel_that_skips_zero_led_rows_meets_exact_zeros_in_the_check(softmax: Evaluator):
    # it did no work on the model's all-zero bench inputs once; it is now wrong where a row starts with an
    # exact 0.0 (the special values' zeros), before any timing
    r = softmax.evaluate(gaming("skips_zero_led_rows"))
    assert r.status is Status.WRONG_OUTPUT and "(zeros)" in r.reason and r.latency_ms is None, r.reason


def test_what_the_sample_stored_is_compared_and_one_wrong_row_fails_the_full_run(softmax: Evaluator):
    # the check refuses it first: `row == bad_row` is true in no lane of any size it runs (at most 7 rows)
    wrong = gaming("one_wrong_row_at_bench")
    r = softmax.evaluate(wrong, level="verified")
    assert r.status is Status.UNSAFE and "`row == bad_row` never true" in r.reason, r.reason
    # and the layer behind it, the full run at the bench size, is wrong at row 200
    case = softmax.task.bench_cases(softmax.secret)[0]
    full = bench_check(softmax.worker, softmax.task, wrong, case, softmax.settings, softmax.device)
    assert full.status is Status.WRONG_OUTPUT and "[200, " in full.reason, full.reason


def test_a_bench_size_is_verified_under_every_distribution_of_the_task(softmax: Evaluator):
    # zeroing one element is within tolerance under the peaked "wide" draw, and wrong under "normal": the bench
    # size is verified under both, whichever one the secret times
    wrong = gaming("one_small_element_at_bench")
    r = softmax.evaluate(wrong, level="verified")
    assert r.status is Status.WRONG_OUTPUT and '{"cols":2739,"rows":230}' in r.reason, r.reason  # the check first
    cases = softmax.task.every_dist(softmax.task.bench_cases(softmax.secret))
    assert sorted(c.dist for c in cases) == ["normal", "wide"] and len({c.size_json for c in cases}) == 1
    verdicts = {c.dist: bench_check(softmax.worker, softmax.task, wrong, c, softmax.settings, softmax.device)
                for c in cases}
    assert verdicts["wide"].ok, verdicts["wide"].reason
    assert verdicts["normal"].status is Status.WRONG_OUTPUT and "[229, 2738]" in verdicts["normal"].reason, \
        verdicts["normal"].reason


def test_a_timed_run_no_affordable_run_can_check_is_not_timed_and_says_why(shared_workers):
    # every loop of the seed (512 columns in 128-wide chunks) is longer than the sample runs in full,
    # so nothing the sampled programs stored can be compared, and profiling every program is over the
    # time allowed: the timed run would not be a checked run, so the candidate is not timed (a timeout)
    settings = EvaluationConfig(timeout_s=60, profile_full_loop=3, profile_full_iterations=1,
                                verify_timeout_s=0.001)
    with Evaluator(task_with("softmax", [{"rows": 64, "cols": 512}]), settings, device="cpu", secret=3,
                   **shared_workers(settings)) as ev:
        r = ev.evaluate(Candidate.from_file(ROOT / "evo/tasks/softmax/seed.py"))
        assert r.status is Status.TIMEOUT and r.latency_ms is None, r.reason
        assert "not verifiable at bench size" in r.reason and "verify_timeout_s" in r.reason
    # with the iterations to run one program's loops in full, its row is compared instead; `verified`
    # still needs the full run, which is estimated over the time allowed: not ok, and not started
    settings = EvaluationConfig(timeout_s=60, profile_full_loop=3, verify_timeout_s=0.001)
    with Evaluator(task_with("softmax", [{"rows": 64, "cols": 512}]), settings, device="cpu", secret=3,
                   **shared_workers(settings)) as ev:
        r = ev.evaluate(Candidate.from_file(ROOT / "evo/tasks/softmax/seed.py"))
        assert r.ok and r.latency_ms is not None, r.reason
        assert r.latency_detail["verification"]["elements_compared"] >= 512
        v = ev.evaluate(Candidate.from_file(ROOT / "evo/tasks/softmax/seed.py"), level="verified")
        assert v.status is Status.TIMEOUT and "not verified at bench size" in v.reason, v.reason


# -- 2. state across calls ----------------------------------------------------------------------

def test_module_state_carried_from_the_check_does_not_reach_the_timed_run(softmax: Evaluator, honest: float,
                                                                           shared_workers):
    r = softmax.evaluate(gaming("counts_its_calls"))
    assert r.status is Status.LINT_ERROR and "line 19: a list in the module-level value of CALLS" in r.reason, r.reason
    # below the lint (an internal hook bypasses it) it is never ok and fast: the check's calls find the
    # launches it skips, or the timed run has a fresh module and it does the work
    with Evaluator(task_with("softmax", SOFTMAX_BENCH), SETTINGS, device="cpu", secret=11,
                   static_lint=False, **shared_workers(SETTINGS)) as unlinted:
        below = unlinted.evaluate(gaming("counts_its_calls"))
    assert below.status is Status.WRONG_OUTPUT or (below.ok and below.latency_ms is not None
                                                   and below.latency_ms > 0.8 * honest), below.reason


# -- 3. unpredictable, representative sampling ----------------------------------------------------

def test_work_hidden_in_rare_programs_is_found_and_counted(softmax: Evaluator, honest: float):
    r = softmax.evaluate(gaming("work_in_rare_programs"))
    assert r.ok and r.latency_ms is not None and r.latency_ms > 0.9 * honest  # never "faster" than honest


def test_empty_leading_loop_iterations_buy_nothing(softmax: Evaluator):
    seed = softmax.evaluate(Candidate.from_file(ROOT / "evo/tasks/softmax/seed.py"))
    r = softmax.evaluate(gaming("empty_leading_iterations"))
    assert r.ok and r.latency_ms is not None and seed.latency_ms is not None
    assert r.latency_ms > 0.95 * seed.latency_ms


def test_every_distinct_launch_is_interpreted_and_contents_tell_launches_apart(reduction: Evaluator):
    honest = reduction.evaluate(Candidate.from_file(ROOT / "evo/tasks/reduction/known_better.py"))
    assert honest.ok and honest.latency_ms is not None
    input_bytes = 4 * (1 << 20)
    for name in ("sixteen_empty_launches", "flag_tensor"):
        r = reduction.evaluate(gaming(name))
        assert r.ok and r.latency_ms is not None, r.reason
        launches = r.latency_detail["launches"]
        assert all(x["repeats"] == 1 for x in launches)
        assert r.latency_detail["dram_bytes"] >= 0.9 * input_bytes  # the launch that works is counted
    sixteen = reduction.evaluate(gaming("sixteen_empty_launches"))
    assert sixteen.latency_ms is not None and sixteen.latency_ms > honest.latency_ms


def test_the_sample_follows_a_secret_recorded_in_the_verdict(shared_workers):
    task = task_with("softmax", SOFTMAX_BENCH)
    c = gaming("one_pass")
    runs = []
    for secret in (1, 2, 1):
        with Evaluator(task, SETTINGS, device="cpu", **shared_workers(SETTINGS), secret=secret) as ev:
            r = ev.evaluate(c)
        runs.append((r.latency_detail["sample_seed"], r.latency_ms))
    assert runs[0] == runs[2] and runs[0][0] != runs[1][0]  # reproducible from the secret, else different


# -- 4. compile what runs -------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["meta_small_tiles", "meta_raises"])
def test_the_compiler_sees_what_ran_not_what_launch_does_on_meta_tensors(softmax: Evaluator, name: str,
                                                                        shared_workers):
    # asking for the device's type is a lint error now; below the lint (an internal hook), the compile
    # still sees what ran
    assert "x.device may only be passed as device=" in softmax.evaluate(gaming(name)).reason
    twin = softmax.evaluate(gaming("one_pass_one_warp"))
    with Evaluator(task_with("softmax", SOFTMAX_BENCH), SETTINGS, device="cpu", secret=11,
                   static_lint=False, **shared_workers(SETTINGS)) as unlinted:
        r = unlinted.evaluate(gaming(name))
    if name == "meta_small_tiles":  # its small block is set on a line no check runs: refused for that first
        assert r.status is Status.UNSAFE and "block = 16" in r.reason and "never ran" in r.reason, r.reason
        return
    assert r.ok and r.latency_ms is not None and twin.latency_ms is not None, r.reason
    assert r.latency_ms == pytest.approx(twin.latency_ms, rel=0.02)
    assert r.latency_detail["launches"][0]["registers"] == twin.latency_detail["launches"][0]["registers"]


def test_a_kernel_that_cannot_launch_on_the_target_is_a_compile_error(matmul: Evaluator):
    r = matmul.evaluate(gaming("huge_shared_memory"))
    assert r.status is Status.COMPILE_ERROR and "shared memory" in r.reason


def test_a_compile_that_does_not_finish_is_a_compile_error_not_assumed_resources():
    from fitness.latency.model import ModelLatency
    from fitness.sandbox.process import WorkerTimeout

    class Stalled:
        starts = 1

        def start(self) -> None: ...

        def request(self, message: dict, timeout: float) -> dict:
            raise WorkerTimeout(f"no answer within {timeout:.1f} s")

        def close(self) -> None: ...

    task = task_with("softmax", SOFTMAX_BENCH)
    model = ModelLatency(task, EvaluationConfig(), interp_worker=None, compile_worker=Stalled())  # type: ignore[arg-type]
    try:
        r = model.measure(gaming("one_pass"))
    finally:
        model.close()
    assert r.status is Status.COMPILE_ERROR and "did not finish" in r.reason


# -- 5 and 6. races and bounds, as they happen ------------------------------------------------------

def test_a_plain_read_add_store_across_programs_is_a_race(reduction: Evaluator):
    r = reduction.evaluate(gaming("racy_sum"))
    assert r.status is Status.UNSAFE and "race" in r.reason
    assert "program (1, 0, 0)" in r.reason and "program (0, 0, 0)" in r.reason and "out_ptr[0]" in r.reason
    twin = reduction.evaluate(gaming("atomic_sum"))  # atomics may overlap
    assert twin.ok, twin.reason


def test_rows_that_spill_into_the_next_row_race(softmax: Evaluator):
    r = softmax.evaluate(gaming("row_overflow"))
    assert r.status is Status.UNSAFE and "race" in r.reason and "y_ptr[" in r.reason


@pytest.mark.parametrize("name", ["oob_store_writes_guard_back", "oob_load_ignored"])
def test_an_access_outside_every_tensor_is_unsafe_when_it_happens(softmax: Evaluator, name: str):
    r = softmax.evaluate(gaming(name))
    assert r.status is Status.UNSAFE and "out-of-bounds" in r.reason and "program (" in r.reason, r.reason


# -- 7. speed of light on the model path ----------------------------------------------------------

def test_a_modelled_time_below_the_speed_of_light_is_unsafe(tmp_path: Path, shared_workers):
    source = (ROOT / "evo/tasks/vector_add/task.py").read_text()
    (tmp_path / "task.py").write_text(source.replace("def bytes_moved(size, itemsize):\n    return ",
                                                     "def bytes_moved(size, itemsize):\n    return 1000 * "))
    (tmp_path / "seed.py").write_text((ROOT / "evo/tasks/vector_add/known_better.py").read_text())
    task = NativeTask(tmp_path)
    task.bench_sizes = [{"n": 1 << 20}]
    with Evaluator(task, SETTINGS, device="cpu", **shared_workers(SETTINGS), secret=3) as ev:
        r = ev.evaluate(Candidate.from_file(ROOT / "evo/tasks/vector_add/known_better.py"))
    assert r.status is Status.UNSAFE and "speed-of-light" in r.reason and "modelled" in r.reason
    honest = task_with("vector_add", [{"n": 1 << 20}])
    with Evaluator(honest, SETTINGS, device="cpu", **shared_workers(SETTINGS), secret=3) as ev:
        assert ev.evaluate(Candidate.from_file(ROOT / "evo/tasks/vector_add/known_better.py")).ok


# -- 8. the evaluator never dies ------------------------------------------------------------------

def evo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evo", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)


def test_the_cli_prints_a_verdict_and_never_a_traceback(tmp_path: Path):
    config = tmp_path / "softmax.yaml"
    config.write_text("task:\n  name: softmax\n  sizes:\n    check: [{rows: 3, cols: 17}, {rows: 2, cols: 2053}]\n"
                      "    bench: [{rows: 64, cols: 4096}]\nevaluation: {device: cpu}\n")
    p = evo("eval", str(config), "--candidate", str(GAMING / "launch_skips_at_bench.py"))
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    verdict = json.loads(p.stdout.strip().splitlines()[-1])
    assert verdict["status"] == "wrong_output" and verdict["secret"]
    minus = tmp_path / "minus.py"
    minus.write_text("x = " + "-" * 5000 + "1\n")
    p = evo("eval", str(config), "--candidate", str(minus))
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["status"] == "lint_error"
    for params, word in (('{"num_warps": 0}', "num_warps"), ('{"num_stages": 0}', "num_stages"),
                         ('{"BLOK": 128}', "BLOK"), ('{"num_warps": "8"}', "num_warps"),
                         ('{"num_warps": [8]}', "num_warps")):
        p = evo("eval", str(config), "--candidate", str(GAMING / "one_pass.py"), "--params", params)
        assert p.returncode == 2 and word in p.stderr and "Traceback" not in p.stderr, (params, p.stderr)


def test_the_model_survives_a_launch_that_does_nothing_and_zero_warps():
    from evo.contracts.gpus import get_profile
    from fitness.latency.counts import KernelResources, LaunchCounts
    from fitness.latency.roofline import DoesNotFit, estimate

    with pytest.raises(DoesNotFit, match="at least one warp"):
        estimate([LaunchCounts("k", (1, 1, 1), 0, 1)], [KernelResources("k", 0, 32, 0, 0, 1)], get_profile("h100"))
    assert estimate([], [], get_profile("h100")).seconds == 0.0


# -- 9. memory stays capped -----------------------------------------------------------------------

def test_an_allocation_past_the_bench_memory_ceiling_is_a_crash_saying_memory_limit(softmax: Evaluator):
    r = softmax.evaluate(gaming("big_alloc_at_bench"))
    assert r.status is Status.CRASH and "memory limit" in r.reason
    assert softmax.settings.profile_memory_mb < 6 * 1024  # the documented default ceiling


# -- 10. masked-off lanes read poison ----------------------------------------------------------------

def test_relying_on_zeros_in_masked_off_lanes_is_wrong_output(matmul: Evaluator):
    r = matmul.evaluate(gaming("matmul_b_without_other"))
    assert r.status is Status.WRONG_OUTPUT, r.reason
    assert matmul.evaluate(Candidate.from_file(ROOT / "evo/tasks/matmul/known_better.py")).ok


# -- 11. the model reads the compiled kernel --------------------------------------------------------

def test_pipelining_comes_from_the_compiled_loop_not_from_the_launch(matmul: Evaluator):
    asked_five = matmul.evaluate(gaming("matmul_loop_two_stages"))
    two = matmul.evaluate(gaming("matmul_two_stages"))
    assert asked_five.ok and two.ok and asked_five.latency_ms is not None and two.latency_ms is not None
    assert asked_five.latency_detail["launches"][0]["pipeline_depth"] == 2
    assert two.latency_detail["launches"][0]["pipeline_depth"] == 2
    assert asked_five.latency_ms == pytest.approx(two.latency_ms, rel=0.01)
    four = matmul.evaluate(Candidate.from_file(ROOT / "evo/tasks/matmul/known_better.py"))
    assert four.latency_detail["launches"][0]["pipeline_depth"] == 4


def test_what_the_model_cannot_represent_is_listed(softmax: Evaluator):
    r = softmax.evaluate(gaming("cache_modifier"))
    assert r.ok and any("cache modifier cg" in u for u in r.latency_detail["unmodelled"])
    assert "unmodelled" not in softmax.evaluate(gaming("one_pass")).latency_detail


def test_the_honest_twins_pass_with_finite_latencies(softmax: Evaluator, honest: float):
    assert math.isfinite(honest) and honest > 0
