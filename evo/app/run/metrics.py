"""The campaign's progress as Ray metrics, for Ray's dashboard and its Prometheus endpoint.

Ray prefixes every name with `ray_` and a counter's with `_total` too, so Prometheus sees
`ray_evo_campaign_best_speedup`, `ray_evo_campaign_evaluations_per_second`,
`ray_evo_campaign_evaluations_total`, `ray_evo_campaign_failures_total` (tag `status`) and
`ray_evo_campaign_evaluator_busy_fraction` (the evaluators' device: see `islands.broker`), each tagged
with the campaign's name and its run (the run directory's name). Metrics are a view of the run, never
a reason to stop it: when Ray cannot create or record them, the campaign says so once and goes on.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from evo.app.run.progress import Totals

RATE_WINDOW_S = 60.0  # evaluations per second over about the last minute of the run
TAG_KEYS = ("campaign", "run")


class Gauge(Protocol):
    def set(self, value: float, tags: dict[str, str]) -> None: ...


class Counter(Protocol):
    def inc(self, value: float, tags: dict[str, str]) -> None: ...


@dataclass(frozen=True)
class Instruments:
    best_speedup: Gauge
    evaluations_per_second: Gauge
    evaluations: Counter
    failures: Counter
    busy_fraction: Gauge | None = None


def ray_instruments() -> Instruments:
    """The metrics registered with Ray (in a process joined to a cluster: `ray.init` first)."""
    from ray.util.metrics import Counter as RayCounter
    from ray.util.metrics import Gauge as RayGauge

    return Instruments(
        best_speedup=RayGauge("evo_campaign_best_speedup", tag_keys=TAG_KEYS,
                              description="Best speedup over the seed kernel so far (latency of the seed / best)"),
        evaluations_per_second=RayGauge(
            "evo_campaign_evaluations_per_second", tag_keys=TAG_KEYS,
            description=f"Evaluations run per second over the last {RATE_WINDOW_S:.0f} s"),
        evaluations=RayCounter("evo_campaign_evaluations", tag_keys=TAG_KEYS,
                               description="Evaluations run (every level; cache hits not counted)"),
        failures=RayCounter(
            "evo_campaign_failures", tag_keys=(*TAG_KEYS, "status"),
            description="Failed full evaluations by verdict status, and proposals that gave no candidate by cause"),
        busy_fraction=RayGauge(
            "evo_campaign_evaluator_busy_fraction", tag_keys=TAG_KEYS,
            description="Seconds evaluators spent checking and timing (compiles not counted) over wall seconds "
                        "while they had work, per evaluator"),
    )


class CampaignMetrics:
    """Records a campaign's `Totals` (as the progress lines show them) into `Instruments`; `warn` is
    told once why metrics stopped, if they do."""

    def __init__(self, campaign: str, run: str, *, warn: Callable[[str], None],
                 make: Callable[[], Instruments] = ray_instruments, window_s: float = RATE_WINDOW_S) -> None:
        self.tags = {"campaign": campaign, "run": run}
        self.warn, self.window_s = warn, window_s
        self.samples: deque[tuple[float, int]] = deque()  # (elapsed s, evaluations), oldest first
        self.evaluations = 0  # as far as the counters have counted
        self.failures: dict[str, int] = {}
        self.instruments: Instruments | None = None
        try:
            self.instruments = make()
        except Exception as e:
            self._off("could not be created", e)

    def record(self, totals: Totals) -> None:
        if self.instruments is None:
            return
        try:
            self._record(self.instruments, totals)
        except Exception as e:
            self._off("could not be recorded", e)

    def rate(self, elapsed_s: float, evaluations: int) -> float:
        """Evaluations per second since the last sample at least `window_s` old (or the first one)."""
        self.samples.append((elapsed_s, evaluations))
        while len(self.samples) > 1 and self.samples[1][0] <= elapsed_s - self.window_s:
            self.samples.popleft()
        t0, n0 = self.samples[0]
        return (evaluations - n0) / (elapsed_s - t0) if elapsed_s > t0 else 0.0

    def _record(self, m: Instruments, t: Totals) -> None:
        if t.best_speedup is not None:
            m.best_speedup.set(t.best_speedup, self.tags)
        m.evaluations_per_second.set(self.rate(t.elapsed_s, t.evaluations), self.tags)
        if m.busy_fraction is not None and t.busy_fraction is not None:
            m.busy_fraction.set(t.busy_fraction, self.tags)
        # the counters count what the totals added since the last record (a resumed run starts with
        # the evaluations of its earlier sessions, as summary.json counts them)
        if t.evaluations > self.evaluations:
            m.evaluations.inc(t.evaluations - self.evaluations, self.tags)
            self.evaluations = t.evaluations
        for status, n in sorted(t.failures.items()):
            if n > self.failures.get(status, 0):
                m.failures.inc(n - self.failures.get(status, 0), {**self.tags, "status": status})
                self.failures[status] = n

    def _off(self, what: str, e: Exception) -> None:
        self.instruments = None
        self.warn(f"Ray metrics {what} ({type(e).__name__}: {e}); the run goes on without them")
