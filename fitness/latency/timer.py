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

Two more steps make the figures comparable, since a GPU's clocks move under the measurement (an
idle H200 sits at a few hundred MHz and takes a while to boost):

- `spin_up` keeps the device busy before the first timed subject, in chunks of fixed work,
  until a chunk stops getting faster (the clocks have settled) and at least ``min_ms`` passed.
- `measure_interleaved` times a candidate and its baselines in one session, their repetitions
  spread evenly among each other (each keeps its own copies, poison and flush), so every ratio
  of their medians compares times taken under the same clocks and temperature.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evo.contracts.config import SpinUpConfig, TimerConfig


class Clock(Protocol):
    """Times one repetition: `start` just before it, `stop` after it (synchronizing the device)."""

    def start(self) -> None: ...

    def stop(self) -> float:
        """Milliseconds since `start`."""
        ...


class CudaEventClock:
    """CUDA events around one repetition; `stop` synchronizes the whole device (every stream).
    Used by `fitness.latency.cuda_bench`; torch comes in as an argument, so this module imports no GPU code."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self._start: Any = None
        self._end: Any = None

    def start(self) -> None:
        self._start = self.torch.cuda.Event(enable_timing=True)
        self._end = self.torch.cuda.Event(enable_timing=True)
        self._start.record()

    def stop(self) -> float:
        self._end.record()
        self.torch.cuda.synchronize()
        return float(self._start.elapsed_time(self._end))


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


def _noop(i: int) -> None:
    return None


def _clean(i: int) -> str | None:
    return None


@dataclass(frozen=True)
class Subject:
    """One thing to time. `run(copy)` runs it on input copy `copy`; `prepare`, `remember` and
    `recheck` as in `measure`. An `optional` subject (a baseline) that raises is dropped and its
    error reported, instead of failing the whole session."""

    name: str
    run: Callable[[int], None]
    prepare: Callable[[int], None] = _noop
    remember: Callable[[int], None] = _noop
    recheck: Callable[[int], str | None] = _clean
    optional: bool = False


@dataclass(frozen=True)
class Session:
    """What `measure_interleaved` timed: a Timing per subject, the error of each dropped one."""

    timings: dict[str, Timing] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def measure(
    run: Callable[[int], None],
    *,
    clock: Clock,
    flush: Callable[[], None],
    prepare: Callable[[int], None] = _noop,
    remember: Callable[[int], None] = _noop,
    recheck: Callable[[int], str | None] = _clean,
    settings: TimerConfig,
) -> Timing:
    """Time `run(copy)` as described in the module docstring.

    `remember(i)` stores the outputs of copy `i` after its untimed run; `recheck(i)` compares the
    outputs copy `i` holds now with them and returns a description of any difference.
    """
    subject = Subject("subject", run, prepare, remember, recheck)
    return measure_interleaved([subject], clock=clock, flush=flush, settings=settings).timings["subject"]


def _schedule(reps: dict[str, int]) -> list[str]:
    """Every subject's repetitions spread evenly among the others' (the next one to run is the one
    least far through its own), so a slow subject's few repetitions are not bunched together."""
    done = dict.fromkeys(reps, 0)
    order = []
    for _ in range(sum(reps.values())):
        name = min((n for n in reps if done[n] < reps[n]), key=lambda n: (done[n] + 0.5) / reps[n])
        done[name] += 1
        order.append(name)
    return order


def measure_interleaved(
    subjects: Sequence[Subject],
    *,
    clock: Clock,
    flush: Callable[[], None],
    settings: TimerConfig,
) -> Session:
    """Time every subject as `measure` would, their timed repetitions interleaved (module docstring).

    Each subject's number of repetitions fills ``rep_ms`` by its own estimate (within
    ``min_reps``..``max_reps``), so a fast candidate is not held to the repetitions of a slow seed.
    """
    names = [s.name for s in subjects]
    if len(set(names)) != len(names):
        raise ValueError(f"subjects need distinct names, got {names}")
    copies = max(settings.copies, 1)
    live = {s.name: s for s in subjects}
    errors: dict[str, str] = {}

    def attempt(s: Subject, step: Callable[[Subject], None]) -> None:
        try:
            step(s)
        except Exception as e:
            if not s.optional:
                raise
            errors[s.name] = f"{type(e).__name__}: {e}"
            live.pop(s.name, None)

    def timed(s: Subject, i: int) -> float:
        s.prepare(i)
        flush()
        clock.start()
        s.run(i)
        return clock.stop()

    def untimed(s: Subject) -> None:
        for i in range(copies):
            s.prepare(i)
            s.run(i)
            s.remember(i)

    estimates: dict[str, list[float]] = {n: [] for n in live}
    times: dict[str, list[float]] = {n: [] for n in live}

    def estimate(s: Subject) -> None:
        estimates[s.name].append(timed(s, len(estimates[s.name]) % copies))

    def repetition(s: Subject) -> None:
        times[s.name].append(timed(s, len(times[s.name]) % copies))

    # 1. untimed run of every copy: warm-up and the re-check's reference
    for subject in subjects:
        attempt(subject, untimed)
    # 2. estimate one repetition of each (flushed, like the real ones)
    for _ in range(max(settings.warmup_reps, 1)):
        for subject in list(live.values()):
            attempt(subject, estimate)
    reps = {n: max(1, int(min(max(settings.rep_ms / max(statistics.median(estimates[n]), 1e-6), settings.min_reps),
                              settings.max_reps))) for n in live}
    # 3-5. the timed repetitions, copies in rotation per subject, subjects interleaved
    for name in _schedule(reps):
        if name in live:
            attempt(live[name], repetition)
    # 7. every copy still holds what its untimed run produced
    timings = {}
    for name, subject in live.items():
        failure = None
        for i in range(min(copies, reps[name])):
            failure = subject.recheck(i)
            if failure:
                failure = f"copy {i}: {failure}"
                break
        t = times[name]
        timings[name] = Timing(statistics.median(t), min(t), max(t), reps[name], copies, failure)
    return Session(timings, errors)


@dataclass(frozen=True)
class SpinUp:
    """What `spin_up` did: busy milliseconds, chunks run, the first and the last chunk's time, and
    whether the chunk time settled before ``max_ms``."""

    ms: float
    chunks: int
    first_ms: float
    last_ms: float
    settled: bool

    def to_dict(self) -> dict[str, object]:
        return {"ms": self.ms, "chunks": self.chunks, "first_ms": self.first_ms, "last_ms": self.last_ms,
                "settled": self.settled}


def spin_up(busy: Callable[[], None], *, clock: Clock, settings: SpinUpConfig) -> SpinUp:
    """Run `busy` (a fixed amount of device work) until its time settles: the clocks have ramped."""
    total, best, since_best, chunks = 0.0, math.inf, 0, 0
    first = last = 0.0
    while True:
        clock.start()
        busy()
        last = clock.stop()
        first = first or last
        total += last
        chunks += 1
        if last < best * (1.0 - settings.tolerance):
            best, since_best = last, 0
        else:
            since_best += 1
        if total >= settings.min_ms and since_best >= settings.settle_chunks:
            return SpinUp(total, chunks, first, last, True)
        if total >= settings.max_ms or last <= 0:
            return SpinUp(total, chunks, first, last, False)
