"""In the interpreter a worker's timeout is CPU seconds: a worker slowed by the machine's other work still
gets its time (so a verdict does not depend on how busy the machine is), one that spends its time is
killed as the candidate's own timeout, one that gets almost no CPU is stalled; on a GPU the timeout stays
wall seconds.

The worker is a stand-in process speaking the worker's protocol that answers after a given time; how much
of a CPU it got is a stand-in clock (`busy_machine`), so the tests do not depend on this machine's load."""

from __future__ import annotations

import time
from typing import Any

import pytest

from fitness.sandbox import process
from fitness.sandbox.process import Worker, WorkerTimeout

from .standin_worker import ready_worker


def busy_machine(monkeypatch: pytest.MonkeyPatch, share: float) -> None:
    """The worker's CPU clock as on a machine that gives it `share` of a CPU (whatever this one's load)."""
    t0 = time.monotonic()
    monkeypatch.setattr(process, "cpu_seconds", lambda pid: share * (time.monotonic() - t0))


def timed_request(w: Worker, wall_s: float, timeout: float) -> tuple[float, dict[str, Any] | WorkerTimeout]:
    start = time.monotonic()
    try:
        out: dict[str, Any] | WorkerTimeout = w.request({"op": "work", "wall_s": wall_s}, timeout)
    except WorkerTimeout as e:
        out = e
    return time.monotonic() - start, out


def test_a_worker_slowed_by_other_work_gets_its_cpu_seconds(monkeypatch):
    # 1.2 CPU seconds of work at half a CPU: 2.4 s of wall time, past the 1.6 s timeout, and still its answer
    w = ready_worker("cpu")
    try:
        busy_machine(monkeypatch, 0.5)
        waited, out = timed_request(w, 2.4, 1.6)
        assert isinstance(out, dict) and out["ok"], out
        assert waited > 2.3
    finally:
        w.close()


def test_a_worker_that_spends_its_cpu_seconds_times_out_as_its_own(monkeypatch):
    # at 40% of a CPU the 1 s timeout is spent after about 2.4 s of wall time: a timeout, the candidate's own
    w = ready_worker("cpu")
    busy_machine(monkeypatch, 0.4)
    waited, out = timed_request(w, 30.0, 1.0)
    assert isinstance(out, WorkerTimeout) and not out.stalled and "on a CPU" in str(out), out
    assert 2.0 < waited < 4.0, waited  # longer than the timeout, never past four times it
    assert w.pid is None  # killed; the next request starts a fresh one
    w.close()


def test_a_worker_with_almost_no_cpu_is_stalled(monkeypatch):
    w = ready_worker("cpu")
    busy_machine(monkeypatch, 0.05)
    waited, out = timed_request(w, 30.0, 1.0)
    assert isinstance(out, WorkerTimeout) and out.stalled and "stalled or overloaded machine" in str(out), out
    assert waited < 2.0, waited
    w.close()


def test_on_a_gpu_the_timeout_is_wall_seconds(monkeypatch):
    w = ready_worker("cuda")
    assert not w.cpu_budget
    busy_machine(monkeypatch, 0.5)
    waited, out = timed_request(w, 2.4, 1.6)
    assert isinstance(out, WorkerTimeout) and not out.stalled, out
    assert waited < 2.3, waited
    w.close()


def test_a_real_worker_process_is_measured_on_its_own_cpu_clock():
    # no stand-in clock: an idle worker (sleeping, as one blocked on the machine would be) is stalled
    w = ready_worker("cpu")
    _, out = timed_request(w, 30.0, 1.0)
    assert isinstance(out, WorkerTimeout) and out.stalled, out
    w.close()
