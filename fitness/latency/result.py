"""What the latency stage produces, whichever source produced it, and the speed-of-light bound
both sources hold a latency to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from evo.contracts.candidate import Candidate
from evo.contracts.task import Case, Task
from evo.contracts.verdict import Evaluation, LatencySource, Status
from fitness.latency.roofline import speed_of_light

BenchCheck = Callable[[Candidate, Case], Evaluation]  # a candidate run in full on a bench case, judged


@dataclass(frozen=True)
class LatencyResult:
    """The outcome of the latency stage for one candidate."""

    status: Status = Status.OK
    reason: str = ""
    latency_ms: float | None = None
    source: LatencySource | None = None
    speedups: dict[str, float] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)
    roofline_fraction: float | None = None
    gpu: str = ""

    def apply(self, ev: Evaluation) -> Evaluation:
        """`ev` (a passing equivalence verdict) with this stage's figures and, if any, its rejection."""
        changes: dict[str, Any] = dict(
            latency_ms=self.latency_ms, latency_source=self.source, speedups=dict(self.speedups),
            latency_detail=dict(self.detail), roofline_fraction=self.roofline_fraction, latency_gpu=self.gpu,
        )
        if self.status is not Status.OK:
            changes.update(status=self.status, reason=self.reason)
        elif self.reason:
            changes.update(reason=f"{ev.reason}; {self.reason}")
        return ev.with_(**changes)

    def with_speedups(self, **speedups: float) -> LatencyResult:
        return replace(self, speedups={**self.speedups, **speedups})


def speed_of_light_violation(latency_ms: float, sol_ms: float | None, *, what: str = "measured") -> str | None:
    """The reason to reject a (`what`: measured or modelled) time below the speed-of-light bound, None
    when it is above."""
    if sol_ms is None or latency_ms >= sol_ms:
        return None
    return (f"{what} {latency_ms * 1e3:.2f} us, below the speed-of-light bound of {sol_ms * 1e3:.2f} us for "
            f"the task's FLOPs and bytes at the device's peak rates: "
            f"{'a broken measurement' if what == 'measured' else 'work the model cannot have counted'}, not a win")


class LatencyBackend(Protocol):
    """A way to obtain latency: `fitness.latency.cuda.CudaLatency` or `fitness.latency.model.ModelLatency`."""

    def measure(self, candidate: Candidate, level: str) -> LatencyResult: ...

    def close(self) -> None: ...


def sol_ms(task: Task, size: dict[str, Any], gpu: Any, *, bound: bool = False) -> float | None:
    """The speed-of-light time of the task at `size` on `gpu` (ms), None without FLOP or byte counts
    (`bound`: the lower bound for measurements, see `fitness.latency.roofline.speed_of_light`)."""
    try:
        s = speed_of_light(task.flops(size), task.bytes_moved(size), gpu, task.dtype, bound=bound)
    except Exception:
        return None
    return None if s is None else s * 1e3
