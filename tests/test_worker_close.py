"""`Worker.close` from another thread while a request is in flight (the local executor closes a hung
evaluator from outside its thread): the request sees a dead worker, the closed worker never starts again,
and its channel is not closed under the reader, so no other worker's pipe (which may get the same
descriptor numbers) is read or closed by the stale thread."""

from __future__ import annotations

import threading

import pytest

from fitness.sandbox.process import WorkerDied

from .standin_worker import SlowWorker, ready_worker


def test_closing_a_worker_under_a_hung_request_ends_it_and_it_never_starts_again():
    w = ready_worker("cuda")  # wall-second timeouts
    starts = w.starts
    seen: list[str] = []
    entered = threading.Event()

    def stale_owner() -> None:
        """Like an evaluator whose actor was killed: on a dead worker it restarts it and tries again."""
        for _ in range(3):
            try:
                entered.set()
                w.request({"op": "work", "wall_s": 3600}, 3000.0)
                seen.append("answered")
            except WorkerDied as e:
                seen.append(str(e))
                w.restart()

    owner = threading.Thread(target=stale_owner, daemon=True)
    owner.start()
    entered.wait(30)
    others: list[SlowWorker] = []

    def open_workers() -> None:  # new pipes while the closed worker's descriptors are released
        for _ in range(6):
            o = SlowWorker(device="cuda", memory_mb=1024, isolation=False)
            o.start()
            others.append(o)

    opener = threading.Thread(target=open_workers)
    opener.start()
    w.close()
    opener.join(120)
    owner.join(120)
    assert not owner.is_alive(), "the request in flight did not end when its worker was closed"
    assert len(seen) == 3 and "killed by signal SIGKILL" in seen[0], seen
    assert all("was closed" in s for s in seen[1:]), seen
    assert w.starts == starts and w.proc is None  # restart() after close() started nothing
    try:
        for o in others:
            assert o.request({"op": "ping"}, 60.0)["ok"]
    finally:
        for o in others:
            o.close()


def test_closing_an_idle_worker_ends_it_politely_and_a_later_request_says_it_was_closed():
    w = ready_worker("cuda")  # wall-second timeouts
    proc = w.proc
    assert proc is not None
    w.close()
    assert proc.returncode == 0  # it was asked to exit, not killed
    with pytest.raises(WorkerDied, match="was closed"):
        w.request({"op": "ping"}, 10.0)
