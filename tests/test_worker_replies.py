"""A worker's replies at bench sizes: the buffers go back without copies that a capped address space
cannot hold, a reply that still does not fit is a verdict that says so (not a worker dying with a
MemoryError), and a worker that dies is explained by its error, not by the report of leaked objects
that Triton's bindings print at exit."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from evo.contracts.verdict import Evaluation, Status
from fitness import worker as worker_main
from fitness.check.equivalence import check_equivalence
from fitness.sandbox import protocol
from fitness.sandbox.process import Worker, WorkerDied


def vm_peak_mb(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmPeak:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no VmPeak")


def test_a_bench_size_check_fits_a_worker_capped_a_little_above_its_buffers():
    """vector_add at 2^25 elements (three 128 MB storages) in a worker capped 950 MB above what it uses
    at small sizes: measured here, the check needs between 500 and 800 MB above. The reply used to copy
    every storage three times (to bytes, into the packed frame, into the frame joined to its header) and
    the request's input bytes stayed alive through the run: it needed between 1100 and 1400 MB above, and
    below that the worker died of a MemoryError, a correct kernel's ``crash``."""
    task = NativeTask(TASK_LIBRARY / "vector_add", dtype="float32")
    cand = Candidate.from_source(task.seed_source or "", {"BLOCK": 4096, "num_warps": 4})
    base = Evaluation(cand.id, task.key, "cpu", Status.CRASH)
    small = task.cases(task.check_sizes[:2], draws=1, every_dist=False)
    probe = Worker(device="cpu", memory_mb=8192, isolation=True)
    try:
        assert check_equivalence(probe, task, cand, small, base, timeout=120, sanitize=True).ok
        assert probe.pid is not None
        floor = vm_peak_mb(probe.pid)
    finally:
        probe.close()
    cap = floor + 950
    capped = Worker(device="cpu", memory_mb=cap, bench_memory_mb=cap, isolation=True)
    try:
        [case] = task.cases([{"n": 1 << 25}], draws=1, every_dist=False)[:1]
        ev = check_equivalence(capped, task, cand, [case], base, timeout=600, bench=True, sanitize=True)
    finally:
        capped.close()
    assert ev.status is Status.OK, ev.reason


def test_a_reply_that_does_not_fit_is_a_fatal_crash_that_says_so(monkeypatch):
    real_send = protocol.send

    def send(fd: int, message: dict[str, Any]) -> None:
        if "outputs" in message:
            raise MemoryError
        real_send(fd, message)

    monkeypatch.setattr(protocol, "send", send)
    r, w = os.pipe()
    try:
        reply = {"ok": True, "inputs": [b"\0" * (3 << 20)], "outputs": [b"\0" * (1 << 20)]}
        sent = worker_main._send_reply(w, reply, {"op": "run", "bench": True, "seq": "abc"})
        got = protocol.receive(r, 10)
    finally:
        os.close(r)
        os.close(w)
    assert got == {**sent, "seq": "abc"}
    assert got["ok"] is False and got["kind"] == "crash" and got["fatal"] is True
    assert "ran out of memory packing its reply (4 MB of buffers)" in got["message"]
    assert "profile_memory_mb" in got["message"]


DIES_NOISILY = r"""
import sys
from fitness.sandbox import protocol
fd_in, fd_out = int(sys.argv[1]), int(sys.argv[2])
protocol.send(fd_out, {"op": "ready"})
protocol.receive(fd_in)
print("Traceback (most recent call last):")
print('  File "fitness/worker.py", line 137, in main')
print("MemoryError: the error that ended the worker")
print("nanobind: leaked 4 instances!")
for i in range(400):
    print(f' - leaked instance 0x7f{i:04x} of type "triton._C.libtriton.ir.attribute"')
print(" - ... skipped remainder")
print("nanobind: this is likely caused by a reference counting issue in the binding code.")
print("See https://nanobind.readthedocs.io/en/latest/refleaks.html")
sys.stdout.flush()
sys.exit(1)
"""


class NoisyWorker(Worker):
    def _command(self, fd_in: int, fd_out: int) -> list[str]:
        return [sys.executable, "-c", DIES_NOISILY, str(fd_in), str(fd_out)]


def test_a_worker_that_dies_is_explained_by_its_error_not_by_the_leak_report_at_exit():
    w = NoisyWorker(device="cuda", memory_mb=1024, isolation=False)
    try:
        with pytest.raises(WorkerDied) as died:
            w.request({"op": "run"}, 60.0)
    finally:
        w.close()
    reason = str(died.value)
    assert "exited with code 1" in reason and "MemoryError: the error that ended the worker" in reason
    assert "nanobind" not in reason and "leaked" not in reason
