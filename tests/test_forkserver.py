"""One process per candidate (`fitness.sandbox.forkserver`): what a candidate does to its process reaches no
other candidate, and what it prints is bounded."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.verdict import Status
from fitness.evaluate import Evaluator
from fitness.sandbox.forkserver import OUTPUT_CAP, _die_with

from .conftest import CANDIDATES, ROOT

FORK = CANDIDATES / "forkserver"
SEED = Candidate.from_file(ROOT / "evo" / "tasks" / "softmax" / "seed.py")


def forked(name: str) -> Candidate:
    return Candidate.from_file(FORK / f"{name}.py")


@pytest.fixture(scope="module")
def quick(softmax_task) -> Iterator[Evaluator]:
    settings = EvaluationConfig(timeout_s=60.0, memory_mb=1024, latency=LatencyMode.OFF)
    with Evaluator(softmax_task, settings, device="cpu") as ev:
        yield ev


def test_a_module_patched_by_one_candidate_is_not_patched_for_the_next(unlinted):
    # with the lint bypassed, the patch runs: the patcher itself computes 2^x and is wrong ...
    patched = unlinted.evaluate(forked("patches_tl_exp"))
    assert patched.status is Status.WRONG_OUTPUT, patched.reason
    # ... and the seed, evaluated next by the same evaluator (one worker), still calls the real tl.exp
    after = unlinted.evaluate(SEED)
    assert after.ok, after.reason
    pid = unlinted.worker.pid
    assert unlinted.evaluate(forked("patches_tl_exp")).status is Status.WRONG_OUTPUT
    assert unlinted.evaluate(SEED).ok and unlinted.worker.pid == pid  # no worker was replaced for it


def test_each_candidate_runs_in_a_process_of_its_own_forked_from_the_worker(quick):
    # the check of two candidates in turn: the worker process stays, each candidate's ran in a child
    assert quick.evaluate(SEED).ok
    pid, starts = quick.worker.pid, quick.worker.starts
    assert quick.evaluate(forked("prints_a_line")).ok
    assert quick.evaluate(SEED).ok
    assert (quick.worker.pid, quick.worker.starts) == (pid, starts)


def test_an_honest_kernel_may_print_a_little(quick):
    r = quick.evaluate(forked("prints_a_line"))
    assert r.ok, r.reason


def test_printing_more_than_the_cap_is_a_crash_that_says_so(quick):
    r = quick.evaluate(forked("prints_two_megabytes"))
    assert r.status is Status.CRASH, r.reason
    assert "printed" in r.reason and f"{OUTPUT_CAP} bytes" in r.reason, r.reason
    assert quick.evaluate(SEED).ok  # the next candidate prints into a fresh file


def test_printing_without_end_stops_at_the_file_limit_and_is_a_crash(quick):
    r = quick.evaluate(forked("prints_without_end"))
    assert r.status is Status.CRASH and "printed" in r.reason, r.reason
    # the worker's own log holds the tail of each candidate's output, not all of it
    assert quick.worker._log_path.stat().st_size < 8 * OUTPUT_CAP
    assert quick.evaluate(SEED).ok


def test_a_candidates_process_whose_worker_ended_before_it_asked_to_die_with_it_ends_itself():
    # the worker's pid is taken before the fork: a worker killed between the fork and the request leaves an
    # orphan whose parent is already another process, and that orphan must not go on to run the candidate
    worker = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            _die_with(worker + 1 if os.getppid() == worker else worker)  # as if the worker had been another
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 4
    pid = os.fork()
    if pid == 0:
        try:
            _die_with(worker)  # its worker lives: it goes on
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
