"""A stand-in worker process for tests of the driver's `Worker`: it speaks the worker's protocol and answers
each request after the request's ``wall_s`` seconds (imports nothing heavy, starts in a fraction of a second)."""

from __future__ import annotations

import sys

from fitness.sandbox.process import Worker

ANSWERS_AFTER = r"""
import sys, time
from fitness.sandbox import protocol
fd_in, fd_out = int(sys.argv[1]), int(sys.argv[2])
protocol.send(fd_out, {"op": "ready"})
while True:
    msg = protocol.receive(fd_in)
    if msg.get("op") == "exit":
        break
    time.sleep(float(msg.get("wall_s", 0.0)))
    protocol.send(fd_out, {"seq": msg["seq"], "ok": True})
"""


class SlowWorker(Worker):
    """A `Worker` (started as any worker is) whose process answers each request after `wall_s` seconds."""

    def _command(self, fd_in: int, fd_out: int) -> list[str]:
        return [sys.executable, "-c", ANSWERS_AFTER, str(fd_in), str(fd_out)]


def ready_worker(device: str) -> SlowWorker:
    """A `SlowWorker` for `device`, started and ready before anything is timed."""
    w = SlowWorker(device=device, memory_mb=1024, isolation=False)
    w.request({"op": "warm"}, 60.0)
    return w
