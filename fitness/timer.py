"""do_bench-style timing with an injected clock, so the sequence is tested without a GPU.

The steps, in order, and why (after ``triton.testing.do_bench``):

1. Run every input copy once untimed and remember its outputs: the reference for the re-check,
   and the warm-up that pays compilation and first-touch costs outside the measurement.
2. Estimate the time of one repetition from a few timed warm-up runs, and choose the number of
   repetitions to fill ``rep_ms`` (between ``min_reps`` and ``max_reps``).
3. Before each repetition: poison the outputs of the copy about to run (``prepare``), so every
   repetition must write them again, and flush the L2 cache (``flush`` writes a buffer well
   above the L2's size), so no repetition is served from a cache the previous one warmed.
4. Inputs rotate among several copies holding different values: a kernel cannot return a
   result remembered from an earlier call on the same data.
5. The clock measures one repetition and synchronizes the whole device before it reads the
   time, so work left running on any stream is counted.
6. The statistic is the median (robust to a stray slow repetition); min and max are kept.
7. After timing, the outputs each copy holds are checked against its untimed run (``recheck``):
   a kernel that is right once and wrong (or idle) while timed is caught.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class Clock(Protocol):
    """Times one repetition: `start` just before it, `stop` after it (synchronizing the device)."""

    def start(self) -> None: ...

    def stop(self) -> float:
        """Milliseconds since `start`."""
        ...


@dataclass(frozen=True)
class TimerSettings:
    warmup_reps: int = 3
    rep_ms: float = 100.0
    min_reps: int = 10
    max_reps: int = 500
    copies: int = 4


@dataclass(frozen=True)
class Timing:
    """One timed subject: the median and spread of its repetitions, and the re-check's verdict."""

    median_ms: float
    min_ms: float
    max_ms: float
    reps: int
    copies: int
    recheck_failure: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"median_ms": self.median_ms, "min_ms": self.min_ms, "max_ms": self.max_ms, "reps": self.reps,
                "copies": self.copies, "recheck_failure": self.recheck_failure}


def measure(
    run: Callable[[int], None],
    *,
    clock: Clock,
    flush: Callable[[], None],
    prepare: Callable[[int], None] = lambda i: None,
    remember: Callable[[int], None] = lambda i: None,
    recheck: Callable[[int], str | None] = lambda i: None,
    settings: TimerSettings = TimerSettings(),
) -> Timing:
    """Time `run(copy)` as described in the module docstring.

    `remember(i)` stores the outputs of copy `i` after its untimed run; `recheck(i)` compares the
    outputs copy `i` holds now with them and returns a description of any difference.
    """
    copies = max(settings.copies, 1)
    # 1. untimed run of every copy: warm-up and the re-check's reference
    for i in range(copies):
        prepare(i)
        run(i)
        remember(i)
    # 2. estimate one repetition (flushed, like the real ones)
    estimates = []
    for r in range(max(settings.warmup_reps, 1)):
        i = r % copies
        prepare(i)
        flush()
        clock.start()
        run(i)
        estimates.append(clock.stop())
    estimate = max(statistics.median(estimates), 1e-6)
    reps = int(min(max(settings.rep_ms / estimate, settings.min_reps), settings.max_reps))
    # 3-5. the timed repetitions, copies in rotation
    times = []
    for r in range(reps):
        i = r % copies
        prepare(i)
        flush()
        clock.start()
        run(i)
        times.append(clock.stop())
    # 7. every copy still holds what its untimed run produced
    failure = None
    for i in range(min(copies, reps)):
        failure = recheck(i)
        if failure:
            failure = f"copy {i}: {failure}"
            break
    return Timing(statistics.median(times), min(times), max(times), reps, copies, failure)
