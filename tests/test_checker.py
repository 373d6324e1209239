"""The checker is the security boundary: every cheat here must be rejected with a clear reason."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.special_values import SPECIAL_DISTS
from evo.contracts.verdict import Status
from fitness.evaluate import Evaluator
from fitness.sandbox.process import Worker, scrubbed_env

from .conftest import CANDIDATES, candidate

REJECTED = [
    ("half_written", Status.WRONG_OUTPUT, "never written"),
    ("skips_last_row", Status.WRONG_OUTPUT, "never written"),
    ("block_multiple_only", Status.WRONG_OUTPUT, "never written"),
    ("torch_softmax", Status.LINT_ERROR, "torch.softmax is not allowed"),
    ("torch_getattr", Status.LINT_ERROR, "getattr"),
    ("torch_module_alias", Status.LINT_ERROR, "may only be used as torch.<name>"),
    ("torch_methods", Status.LINT_ERROR, "attribute 'amax' (in x.amax) is not on the allowlist"),
    ("torch_builtin_sum", Status.LINT_ERROR, "name 'sum' is not allowed"),
    ("try_fallback", Status.LINT_ERROR, "try/except"),
    ("oob_store", Status.UNSAFE, "stores to y_ptr[17], which program (0, 0, 0)"),
    ("oob_load", Status.UNSAFE, "outside every tensor argument"),
    ("modifies_input", Status.UNSAFE, "input 0 was modified"),
    ("state_cache", Status.LINT_ERROR, "line 25: a dict in the module-level value of CACHE is not allowed"),
    ("fp16_compute", Status.WRONG_OUTPUT, "outside tolerance"),
    ("no_max_subtraction", Status.WRONG_OUTPUT, "(wide)"),
    ("dunder_import", Status.LINT_ERROR, "'__import__'"),
    ("os_exit", Status.LINT_ERROR, "import of 'os'"),
    ("getframe", Status.LINT_ERROR, "'_getframe'"),
    ("inspect_mod", Status.LINT_ERROR, "import of 'inspect'"),
    ("open_file", Status.LINT_ERROR, "'open'"),
    ("eval_call", Status.LINT_ERROR, "'eval'"),
    ("globals_call", Status.LINT_ERROR, "'globals'"),
    ("threads", Status.LINT_ERROR, "import of 'threading'"),
    ("subprocess_call", Status.LINT_ERROR, "import of 'subprocess'"),
    ("socket_conn", Status.LINT_ERROR, "import of 'socket'"),
    ("ctypes_poke", Status.LINT_ERROR, "import of 'ctypes'"),
    ("prints_verdict", Status.WRONG_OUTPUT, "outside tolerance"),
    ("syntax_error", Status.LINT_ERROR, "syntax error at line"),
    # right in the CPU interpreter where it is checked, another path on a GPU (more below: DEVICE_TESTS)
    ("host_buffer", Status.LINT_ERROR, "torch.empty(...) without device="),
    ("address_alignment", Status.LINT_ERROR, "the kernel converts a pointer to an integer"),
    ("forged_pointer", Status.LINT_ERROR, "the kernel converts an integer to a pointer"),
    # torch.empty scratch taken as zeros: fresh zeroed pages on the host, recycled memory on a GPU; the
    # sanitizer sees the read of memory nothing wrote before any poison shows in the output
    ("empty_scratch_as_zeros", Status.UNSAFE, "(scratch from torch.empty), which nothing in this call of launch "
                                              "has written yet"),
    # a row's last block combines what the others published with atomics, assuming they ran first (an atomic
    # that only reads may return the value from before another program's update: caught in any order now)
    ("last_block_combines", Status.WRONG_OUTPUT, "outside tolerance"),
    # a program reads back what it stored, with no barrier: another thread's store may not be visible yet
    ("readback_without_barrier", Status.UNSAFE, "reads y_ptr[0], which it stored earlier with no tl.debug_barrier()"),
    ("atomic_readback_without_barrier", Status.UNSAFE,
     "reads s_ptr[0], which it updated atomically earlier with no tl.debug_barrier()"),
    # two lanes of one store write different values to one element: the interpreter keeps the last
    ("last_lane_wins", Status.UNSAFE, "stores different values from several lanes to y_ptr[0] in one store"),
]


@pytest.mark.parametrize("name, status, words", REJECTED, ids=[r[0] for r in REJECTED])
def test_cheats_are_rejected_with_a_reason(softmax_evaluator, name, status, words):
    result = softmax_evaluator.evaluate(candidate(f"softmax/{name}"))
    assert result.status is status, result.reason
    assert words in result.reason
    assert result.error > 0


# the same cheats with the lint bypassed (an internal hook): the run-time guard stops torch computing
GUARDED = [
    ("torch_softmax", "launch called torch 'softmax'"),
    ("torch_getattr", "launch called torch 'softmax'"),
    ("torch_module_alias", "launch called torch 'softmax'"),
    ("torch_methods", "launch called torch 'amax'"),
    ("torch_builtin_sum", "launch called torch"),
]


@pytest.mark.parametrize("name, words", GUARDED, ids=[r[0] for r in GUARDED])
def test_torch_cheats_below_the_lint_are_stopped_by_the_guard(unlinted, name, words):
    result = unlinted.evaluate(candidate(f"softmax/{name}"))
    assert result.status is Status.LINT_ERROR and words in result.reason, result.reason


def test_a_result_cache_below_the_lint_is_still_refused(unlinted):
    """With the lint bypassed (it refuses the module-level dict), the cache is still refused: the run-time
    guard refuses the tensor kept from an earlier call, or the check finds the replayed results wrong."""
    result = unlinted.evaluate(candidate("softmax/state_cache"))
    assert (result.status is Status.LINT_ERROR and "outlives the call" in result.reason) or (
        result.status is Status.WRONG_OUTPUT and "outside tolerance" in result.reason), result.reason


# ways launch could tell the CPU interpreter (where a kernel is checked) from a GPU, each put in place of
# `x.is_cuda` in softmax/wrong_on_cuda.py, whose kernel is right on one path only: (code, the lint's
# words, the run-time guard's words with the lint bypassed, or None where only the lint sees it)
DEVICE_TESTS = {
    "is_cuda": ("x.is_cuda", "attribute 'is_cuda'", "launch asked torch 'is_cuda'"),
    "device_type": ('x.device.type == "cuda"', "x.device may only be passed as device=", None),
    "format": ('"cuda" in f"{x}"', "launch asked torch '__format__'", "launch asked torch '__format__'"),
    # a CUDA allocation is always 512-byte aligned, a CPU one about one time in eight
    "allocator": ("True\n    for _ in range(8):\n        if torch.empty(1, device=x.device).data_ptr() % 512 != 0:\n"
                  "            wrong = False", "attribute 'data_ptr'", "launch asked torch 'data_ptr'"),
}


def device_cheat(test: str) -> Candidate:
    source = (CANDIDATES / "softmax" / "wrong_on_cuda.py").read_text()
    assert "    wrong = x.is_cuda\n" in source
    return Candidate.from_source(source.replace("    wrong = x.is_cuda\n", f"    wrong = {DEVICE_TESTS[test][0]}\n"))


@pytest.mark.parametrize("test", DEVICE_TESTS)
def test_a_kernel_that_tells_the_interpreter_from_a_gpu_is_rejected(softmax_evaluator, unlinted, test):
    _, lint_words, guard_words = DEVICE_TESTS[test]
    result = softmax_evaluator.evaluate(device_cheat(test))
    assert result.status is Status.LINT_ERROR and lint_words in result.reason, result.reason
    assert result.error > 0
    if guard_words is not None:
        below = unlinted.evaluate(device_cheat(test))
        assert below.status is Status.LINT_ERROR and guard_words in below.reason, below.reason


@pytest.mark.parametrize("name", ["one_pass", "online_two_kernels"])
def test_correct_kernels_written_differently_from_the_seed_pass(softmax_evaluator, name):
    result = softmax_evaluator.evaluate(candidate(f"softmax/{name}"))
    assert result.status is Status.OK, result.reason
    # 10 cases at the check sizes, 5 special values at a small one, 7 distributions at the bench-shaped 2 x 4096
    assert result.error == 0.0 and result.cases_checked == 22


@pytest.fixture(scope="module")
def check_only(softmax_task):
    """The checker with the lint and without the latency model: the kernels below are written to show a
    check's verdict, not to be fast, and modelling them at the bench size in the interpreter takes minutes."""
    with Evaluator(softmax_task, EvaluationConfig(timeout_s=60.0, memory_mb=1024, latency=LatencyMode.OFF),
                   device="cpu") as ev:
        yield ev


# (fixture, the line after which a barrier goes, whether the read-back is then synchronized)
BARRIERS = [("readback_without_barrier", "    total = tl.sum(s, axis=0)\n", True),  # after the stores
            ("readback_without_barrier", "    s = tl.zeros((BLOCK,), tl.float32)\n", False),  # before them
            # (a line at the loop's indentation after its last line: after the loop of atomics)
            ("atomic_readback_without_barrier", "        tl.atomic_add(s_ptr + row, tl.sum(e, axis=0))\n", True),
            ("atomic_readback_without_barrier", "    total = tl.load(s_ptr + row)\n", False)]  # after the read


@pytest.mark.parametrize("name, line, ok", BARRIERS, ids=[f"{b[0]}-{i}" for i, b in enumerate(BARRIERS)])
def test_a_read_back_after_a_barrier_passes(check_only, name, line, ok):
    source = (CANDIDATES / "softmax" / f"{name}.py").read_text()
    assert source.count(line) == 1
    result = check_only.evaluate(Candidate.from_source(source.replace(line, line + "    tl.debug_barrier()\n")))
    assert result.status is (Status.OK if ok else Status.UNSAFE), result.reason


def test_lanes_storing_the_same_value_to_one_element_pass(check_only):
    source = (CANDIDATES / "softmax" / "last_lane_wins.py").read_text()
    wins = "tl.where(lanes < BLOCK, e, e / total)"
    assert source.count(wins) == 1
    result = check_only.evaluate(Candidate.from_source(source.replace(wins, "tl.where(lanes < BLOCK, e / total, "
                                                                                   "e / total)")))
    assert result.status is Status.OK, result.reason


def test_the_same_scratch_allocated_with_zeros_passes(check_only):
    source = (CANDIDATES / "softmax" / "empty_scratch_as_zeros.py").read_text()
    assert source.count("s = torch.empty(") == 1
    result = check_only.evaluate(Candidate.from_source(source.replace("s = torch.empty(", "s = torch.zeros(")))
    assert result.status is Status.OK, result.reason  # so the fixture fails by its scratch alone


def test_the_seed_passes_and_the_worker_is_reused(softmax_task, softmax_evaluator):
    from evo.contracts.candidate import Candidate

    seed = Candidate.from_source(softmax_task.seed_source)
    first = softmax_evaluator.evaluate(seed)
    pid = softmax_evaluator.worker.pid
    second = softmax_evaluator.evaluate(seed.with_params(BLOCK=256))
    assert first.ok and second.ok
    assert softmax_evaluator.worker.pid == pid  # torch and triton imported once, not per candidate


def test_a_hang_times_out_and_the_worker_is_replaced(softmax_task):
    with Evaluator(softmax_task, EvaluationConfig(timeout_s=2.0), device="cpu") as ev:
        ev.evaluate(candidate("softmax/one_pass"))
        pid = ev.worker.pid
        result = ev.evaluate(candidate("softmax/hang"))
        assert result.status is Status.TIMEOUT and "killed and replaced" in result.reason
        # its own hang: the verdict's timeout is one in which the worker ran on a CPU all along; on a loaded
        # machine (the suite runs a worker more than the CPUs) an attempt the machine stalled comes first,
        # tried again and listed as an incident that says so (the reason adds it after the verdict's own words),
        # never the verdict
        own, _, note = result.reason.partition(" (after an infrastructure failure, not reproduced on a fresh worker")
        assert "stalled" not in own and "overloaded" not in own, result.reason
        assert bool(note) == bool(result.incidents), result.reason
        assert all("stalled or overloaded machine" in i for i in result.incidents), result.incidents
        assert ev.worker.pid != pid
        assert ev.evaluate(candidate("softmax/online_two_kernels")).ok  # the fresh worker works


def test_a_wild_store_is_caught_before_it_can_crash_the_worker(softmax_task):
    with Evaluator(softmax_task, EvaluationConfig(timeout_s=20.0), device="cpu") as ev:
        result = ev.evaluate(candidate("softmax/segfault"))
        assert result.status is Status.UNSAFE and "outside every tensor argument" in result.reason
        assert ev.evaluate(candidate("softmax/one_pass")).ok


def test_a_worker_killed_from_outside_is_not_the_candidates_crash(softmax_task):
    # an operator's kill, the OOM killer: the check runs again on a fresh worker, and the verdict is what the
    # candidate does there (here: it hangs, so a timeout), with the death named in the reason
    with Evaluator(softmax_task, EvaluationConfig(timeout_s=10.0), device="cpu") as ev:
        assert ev.evaluate(candidate("softmax/one_pass")).ok
        pid = ev.worker.pid
        assert pid is not None
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(ev.evaluate, candidate("softmax/hang"))
            time.sleep(2.0)
            os.kill(pid, signal.SIGSEGV)
            result = pending.result(timeout=90)
        assert result.status is Status.TIMEOUT, result.reason
        assert "not reproduced on a fresh worker" in result.reason and "SIGSEGV" in result.reason
        assert len(result.incidents) == 1 and "SIGSEGV" in result.incidents[0]
        assert ev.worker.pid != pid
        assert ev.evaluate(candidate("softmax/online_two_kernels")).ok


def test_a_worker_stalled_by_its_machine_is_not_the_candidates_timeout(softmax_task):
    # a stopped process (as on an overloaded or suspended machine) gets no CPU time: its timeout is the
    # machine's, so the check runs again on a fresh worker and the verdict is the candidate's own
    with Evaluator(softmax_task, EvaluationConfig(timeout_s=3.0), device="cpu") as ev:
        assert ev.evaluate(candidate("softmax/one_pass")).ok
        pid = ev.worker.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        result = ev.evaluate(candidate("softmax/online_two_kernels"))
        assert result.ok, result.reason
        assert len(result.incidents) == 1 and "stalled or overloaded machine" in result.incidents[0]
        assert "not reproduced on a fresh worker" in result.reason and ev.worker.pid != pid


def test_a_runaway_allocation_hits_the_memory_limit(softmax_task):
    with Evaluator(softmax_task, EvaluationConfig(timeout_s=20.0, memory_mb=512), device="cpu") as ev:
        result = ev.evaluate(candidate("softmax/runaway_alloc"))
        assert result.status is Status.CRASH and "memory limit" in result.reason
        assert ev.evaluate(candidate("softmax/one_pass")).ok


def test_the_worker_environment_holds_no_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    env = scrubbed_env("cpu")
    assert "OPENAI_API_KEY" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert env["TRITON_INTERPRET"] == "1"
    worker = Worker(device="cpu", memory_mb=1024, isolation=True)  # started with the secrets in this environment
    try:
        assert worker.request({"op": "ping"}, 180.0).get("ok")
        with open(f"/proc/{worker.pid}/environ", "rb") as f:
            names = {kv.split(b"=", 1)[0].decode() for kv in f.read().split(b"\0") if kv}
    finally:
        worker.close()
    assert not {n for n in names if "KEY" in n or "SECRET" in n or "TOKEN" in n}
    assert os.environ["OPENAI_API_KEY"] == "sk-secret"


def test_quick_level_checks_fewer_cases_and_grades_without_stopping(softmax_evaluator):
    result = softmax_evaluator.evaluate(candidate("softmax/half_written"), level="quick")
    assert result.status is Status.WRONG_OUTPUT and result.cases_checked == 2
    assert 0 < result.error < 33


def test_one_draw_still_checks_every_value_distribution(softmax_task, shared_workers):
    # the 'wide' logits are what a softmax without the max subtraction fails on
    settings = EvaluationConfig(timeout_s=60.0, draws=1)
    with Evaluator(softmax_task, settings, device="cpu", **shared_workers(settings)) as ev:
        assert {c.dist for c in ev.cases("full")} == {*softmax_task.dists, *SPECIAL_DISTS}  # special values too
        result = ev.evaluate(candidate("softmax/no_max_subtraction"))
    assert result.status is Status.WRONG_OUTPUT and "(wide)" in result.reason
