"""The do_bench-style timer, driven by an injected fake clock (no GPU)."""

from __future__ import annotations

import itertools
import statistics

import pytest

from fitness.latency.timer import (
    Session,
    SpinUpConfig,
    Subject,
    TimerConfig,
    _schedule,
    measure,
    measure_interleaved,
    spin_up,
)


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


def run_timer(durations: list[float], settings: TimerConfig, *, wrong_after: int | None = None):
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
    s = TimerConfig(warmup_reps=1, rep_ms=10.0, min_reps=5, max_reps=5, copies=2)
    timing, _ = run_timer(durations, s)
    # the warm-up estimate consumed the first duration; the 5 timed ones follow in rotation
    timed = [durations[i % 5] for i in range(1, 6)]
    assert timing.reps == 5
    assert timing.median_ms == statistics.median(timed) == 3.0
    assert timing.min_ms == 1.0 and timing.max_ms == 100.0


def test_every_repetition_is_poisoned_and_flushed_then_timed_alone():
    s = TimerConfig(warmup_reps=2, rep_ms=10.0, min_reps=6, max_reps=6, copies=3)
    timing, log = run_timer([0.5], s)
    timed = timed_section(log, 3, 2)
    assert len(timed) == 5 * timing.reps
    for r in range(timing.reps):
        i = r % 3
        assert timed[5 * r: 5 * r + 5] == [f"poison{i}", "flush", "start", f"run{i}", "stop"]


def test_inputs_rotate_through_every_copy():
    s = TimerConfig(warmup_reps=1, rep_ms=10.0, min_reps=8, max_reps=8, copies=4)
    _, log = run_timer([0.5], s)
    runs = [e for e in timed_section(log, 4, 1) if e.startswith("run")]
    assert runs == [f"run{r % 4}" for r in range(8)]
    assert log[:8] == ["poison0", "run0", "poison1", "run1", "poison2", "run2", "poison3", "run3"]


def test_repetitions_fill_the_time_budget_within_bounds():
    s = TimerConfig(warmup_reps=3, rep_ms=100.0, min_reps=10, max_reps=500, copies=2)
    assert run_timer([2.0], s)[0].reps == 50
    assert run_timer([50.0], s)[0].reps == 10  # at least min_reps
    assert run_timer([0.001], s)[0].reps == 500  # at most max_reps


def test_outputs_that_change_while_timed_fail_the_recheck():
    s = TimerConfig(warmup_reps=1, rep_ms=10.0, min_reps=4, max_reps=4, copies=2)
    good, _ = run_timer([1.0], s)
    assert good.recheck_failure is None
    bad, _ = run_timer([1.0], s, wrong_after=3)  # right in the untimed runs, wrong later
    assert bad.recheck_failure is not None and bad.recheck_failure.startswith("copy 0")


class RampingGpu:
    """A fake GPU whose clocks ramp up with busy time: work runs `slow`x slower when idle, at full
    speed after `ramp_ms` of work. `run(name)` does a subject's work; the clock reads its time."""

    def __init__(self, base_ms: dict[str, float], *, slow: float = 3.0, ramp_ms: float = 300.0) -> None:
        self.base = base_ms
        self.slow = slow
        self.ramp_ms = ramp_ms
        self.busy_ms = 0.0
        self.last = 0.0
        self.log: list[str] = []

    def work(self, name: str, ms: float | None = None) -> None:
        factor = max(1.0, self.slow - (self.slow - 1.0) * self.busy_ms / self.ramp_ms)
        self.last = (self.base[name] if ms is None else ms) * factor
        self.busy_ms += self.last
        self.log.append(name)

    def start(self) -> None:
        pass

    def stop(self) -> float:
        return self.last

    def subject(self, name: str, **kw: object) -> Subject:
        return Subject(name, lambda i: self.work(name), **kw)  # type: ignore[arg-type]


SETTINGS = TimerConfig(warmup_reps=3, rep_ms=100.0, min_reps=10, max_reps=500, copies=2)


def ratio(session: Session, a: str, b: str) -> float:
    return session.timings[a].median_ms / session.timings[b].median_ms


def test_interleaved_subjects_take_turns_each_poisoned_flushed_and_on_its_own_copies():
    log: list[str] = []
    clock = FakeClock([1.0], log)

    def subject(name: str) -> Subject:
        return Subject(name, lambda i: log.append(f"run {name}{i}"), prepare=lambda i: log.append(f"poison {name}{i}"))

    s = TimerConfig(warmup_reps=1, rep_ms=10.0, min_reps=4, max_reps=4, copies=2)
    session = measure_interleaved([subject("c"), subject("seed")], clock=clock, flush=lambda: log.append("flush"),
                                  settings=s)
    assert {n: t.reps for n, t in session.timings.items()} == {"c": 4, "seed": 4}
    timed = log[-5 * 8:]
    for r in range(8):
        name, copy = ("c", "seed")[r % 2], (r // 2) % 2
        assert timed[5 * r: 5 * r + 5] == [f"poison {name}{copy}", "flush", "start", f"run {name}{copy}", "stop"]


def test_each_subject_fills_the_time_budget_by_its_own_estimate_spread_among_the_others():
    gpu = RampingGpu({"fast": 1.0, "slow": 25.0}, slow=1.0)
    session = measure_interleaved([gpu.subject("fast"), gpu.subject("slow")], clock=gpu, flush=lambda: None,
                                  settings=SETTINGS)
    assert session.timings["fast"].reps == 100 and session.timings["slow"].reps == 10  # 100 ms each, min 10
    assert session.timings["fast"].median_ms == 1.0 and session.timings["slow"].median_ms == 25.0
    timed = gpu.log[-110:]
    slow_at = [i for i, n in enumerate(timed) if n == "slow"]
    assert max(b - a for a, b in itertools.pairwise(slow_at)) <= 12  # one slow run about every tenth
    assert _schedule({"a": 6, "b": 2}) == ["a", "a", "b", "a", "a", "a", "b", "a"]


def test_interleaving_keeps_the_ratio_while_clocks_ramp_where_timing_one_after_the_other_does_not():
    true_ratio = 2.0
    gpu = RampingGpu({"seed": 2.0, "candidate": 1.0})
    seed = measure(lambda i: gpu.work("seed"), clock=gpu, flush=lambda: None, settings=SETTINGS)
    cand = measure(lambda i: gpu.work("candidate"), clock=gpu, flush=lambda: None, settings=SETTINGS)
    assert seed.median_ms / cand.median_ms > 1.2 * true_ratio  # the seed paid for the low clocks

    gpu = RampingGpu({"seed": 2.0, "candidate": 1.0})
    session = measure_interleaved([gpu.subject("candidate"), gpu.subject("seed")], clock=gpu, flush=lambda: None,
                                  settings=SETTINGS)
    assert ratio(session, "seed", "candidate") == pytest.approx(true_ratio, rel=0.05)

    gpu = RampingGpu({"seed": 2.0, "candidate": 1.0})
    spun = spin_up(lambda: gpu.work("spin", 2.0), clock=gpu, settings=SpinUpConfig(min_ms=50.0, max_ms=2000.0))
    assert spun.settled and spun.first_ms == 6.0 and spun.last_ms == 2.0
    session = measure_interleaved([gpu.subject("candidate"), gpu.subject("seed")], clock=gpu, flush=lambda: None,
                                  settings=SETTINGS)
    assert session.timings["candidate"].median_ms == 1.0 and session.timings["seed"].median_ms == 2.0


def test_spin_up_runs_at_least_min_ms_and_stops_once_chunks_stop_getting_faster():
    log: list[str] = []
    chunks = [10.0, 8.0, 6.0, 4.0, 3.0, 3.0, 3.01, 2.99, 3.0, 3.0]
    spun = spin_up(lambda: None, clock=FakeClock(chunks, log), settings=SpinUpConfig(min_ms=10.0, settle_chunks=3))
    assert spun.settled and spun.chunks == 8 and spun.ms == sum(chunks[:8])  # 3.0 then three no faster
    spun = spin_up(lambda: None, clock=FakeClock([1.0], log), settings=SpinUpConfig(min_ms=50.0))
    assert spun.settled and spun.chunks == 50  # settled at once, but busy for min_ms
    falling = [100.0 / (i + 1) for i in range(1000)]  # never settles: stopped by max_ms
    spun = spin_up(lambda: None, clock=FakeClock(falling, log), settings=SpinUpConfig(min_ms=10.0, max_ms=300.0))
    assert not spun.settled and 300.0 <= spun.ms < 300.0 + 100.0


def test_an_optional_subject_that_fails_is_dropped_and_reported_and_a_required_one_raises():
    gpu = RampingGpu({"candidate": 1.0}, slow=1.0)
    calls = {"n": 0}

    def flaky(i: int) -> None:
        calls["n"] += 1
        if calls["n"] > 3:
            raise RuntimeError("torch.compile gave up")
        gpu.work("candidate")

    s = TimerConfig(warmup_reps=2, rep_ms=10.0, min_reps=4, max_reps=4, copies=2)
    session = measure_interleaved([gpu.subject("candidate"), Subject("torch_compile", flaky, optional=True)],
                                  clock=gpu, flush=lambda: None, settings=s)
    assert set(session.timings) == {"candidate"} and session.timings["candidate"].reps == 4
    assert session.errors == {"torch_compile": "RuntimeError: torch.compile gave up"}
    with pytest.raises(RuntimeError, match="gave up"):
        calls["n"] = 0
        measure_interleaved([Subject("candidate", flaky)], clock=gpu, flush=lambda: None, settings=s)
