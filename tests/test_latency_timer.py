"""The do_bench-style timer, driven by an injected fake clock (no GPU)."""

from __future__ import annotations

import statistics

from fitness.timer import TimerSettings, measure


class FakeClock:
    """Each repetition 'takes' the next scripted duration; every call is logged."""

    def __init__(self, durations: list[float], log: list[str]) -> None:
        self.durations = list(durations)
        self.log = log
        self.i = 0

    def start(self) -> None:
        self.log.append("start")

    def stop(self) -> float:
        self.log.append("stop")
        d = self.durations[self.i % len(self.durations)]
        self.i += 1
        return d


def run_timer(durations: list[float], settings: TimerSettings, *, wrong_after: int | None = None):
    log: list[str] = []
    outputs: dict[int, float] = {}
    remembered: dict[int, float] = {}
    calls = {"n": 0}

    def run(i: int) -> None:
        log.append(f"run{i}")
        calls["n"] += 1
        outputs[i] = 0.0 if wrong_after is not None and calls["n"] > wrong_after else float(i + 1)

    def prepare(i: int) -> None:
        log.append(f"poison{i}")
        outputs[i] = float("nan")

    def remember(i: int) -> None:
        remembered[i] = outputs[i]

    def recheck(i: int) -> str | None:
        return None if outputs[i] == remembered[i] else f"got {outputs[i]}, expected {remembered[i]}"

    timing = measure(run, clock=FakeClock(durations, log), flush=lambda: log.append("flush"), prepare=prepare,
                     remember=remember, recheck=recheck, settings=settings)
    return timing, log


def timed_section(log: list[str], copies: int, warmup: int) -> list[str]:
    """The log after the untimed runs (poison + run per copy) and the warm-up estimates."""
    return log[2 * copies + 5 * warmup:]


def test_the_median_of_the_timed_repetitions_is_reported():
    durations = [1.0, 9.0, 2.0, 3.0, 100.0]  # one stray slow repetition
    s = TimerSettings(warmup_reps=1, rep_ms=10.0, min_reps=5, max_reps=5, copies=2)
    timing, _ = run_timer(durations, s)
    # the warm-up estimate consumed the first duration; the 5 timed ones follow in rotation
    timed = [durations[i % 5] for i in range(1, 6)]
    assert timing.reps == 5
    assert timing.median_ms == statistics.median(timed) == 3.0
    assert timing.min_ms == 1.0 and timing.max_ms == 100.0


def test_every_repetition_is_poisoned_and_flushed_then_timed_alone():
    s = TimerSettings(warmup_reps=2, rep_ms=10.0, min_reps=6, max_reps=6, copies=3)
    timing, log = run_timer([0.5], s)
    timed = timed_section(log, 3, 2)
    assert len(timed) == 5 * timing.reps
    for r in range(timing.reps):
        i = r % 3
        assert timed[5 * r: 5 * r + 5] == [f"poison{i}", "flush", "start", f"run{i}", "stop"]


def test_inputs_rotate_through_every_copy():
    s = TimerSettings(warmup_reps=1, rep_ms=10.0, min_reps=8, max_reps=8, copies=4)
    _, log = run_timer([0.5], s)
    runs = [e for e in timed_section(log, 4, 1) if e.startswith("run")]
    assert runs == [f"run{r % 4}" for r in range(8)]
    assert log[:8] == ["poison0", "run0", "poison1", "run1", "poison2", "run2", "poison3", "run3"]


def test_repetitions_fill_the_time_budget_within_bounds():
    s = TimerSettings(warmup_reps=3, rep_ms=100.0, min_reps=10, max_reps=500, copies=2)
    assert run_timer([2.0], s)[0].reps == 50
    assert run_timer([50.0], s)[0].reps == 10  # at least min_reps
    assert run_timer([0.001], s)[0].reps == 500  # at most max_reps


def test_outputs_that_change_while_timed_fail_the_recheck():
    s = TimerSettings(warmup_reps=1, rep_ms=10.0, min_reps=4, max_reps=4, copies=2)
    good, _ = run_timer([1.0], s)
    assert good.recheck_failure is None
    bad, _ = run_timer([1.0], s, wrong_after=3)  # right in the untimed runs, wrong later
    assert bad.recheck_failure is not None and bad.recheck_failure.startswith("copy 0")
