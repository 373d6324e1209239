"""SIGTERM stops a run as a Ctrl-C does, at once.

`ray job stop`, a batch scheduler and `kill` send SIGTERM. Without a handler of ours the process died
where it stood, or, once `ray.init` had installed Ray's own handler (`sys.exit`), the Ray it had started
was shut down under the run threads, which then recorded themselves `failed` with a meaningless reason.
`terminate_as_interrupt` turns SIGTERM into `Terminated`, a `KeyboardInterrupt`: a campaign ends
`interrupted` (its summary written, resumable), an ablation quits at once (every run `interrupted`).
Signal handlers belong to the main thread; elsewhere the context does nothing.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (see the module docstring)."""


_received = threading.Event()


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    _received.set()
    raise Terminated()


def is_termination(e: BaseException) -> bool:
    """Whether `e` is the interrupt SIGTERM raised: a `Terminated`, or the plain `KeyboardInterrupt` that a
    library re-raised it as (Ray's `get` does) after SIGTERM arrived."""
    return isinstance(e, Terminated) or (isinstance(e, KeyboardInterrupt) and _received.is_set())


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises `Terminated` in the main thread while inside (install it after `ray.init`, which
    puts its own handler in place)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
