"""Stage 3: latency, measured on a GPU or modelled without one, behind one interface.

`LatencyStage.measure(candidate, level=...)` runs after a passing equivalence check and returns a
`LatencyResult`; callers do not care which source produced it, but every figure carries it:

- ``cuda`` (`fitness.latency.cuda`): do_bench-style timing in the CUDA evaluation worker
  (`fitness.latency.timer`), always with baselines timed in the same worker session (the task's seed,
  torch eager, torch.compile), and a speed-of-light bound: a time below what the task's FLOPs
  and bytes need at the device's peak rates is a broken measurement, and the candidate is
  rejected (``unsafe``).
- ``model`` (`fitness.latency.model`): the roofline model of a target GPU (`fitness.latency.roofline`)
  from traffic counted in the interpreter and resources from a cross-compile; the speedup over
  the seed is modelled the same way. Model figures are never presented as measured.

The stage can change the verdict: ``unsafe`` (impossible time, out-of-bounds access at bench size),
``wrong_output`` (outputs differ after timing or are wrong at bench size), ``compile_error``
(the kernel does not fit the target GPU), ``crash`` / ``timeout``. When the model cannot run
for reasons of its own, the candidate keeps its status and the latency is absent (reason given).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Protocol

from evo.contracts.candidate import Candidate
from evo.contracts.gpus import DEFAULT_TARGET
from evo.contracts.task import Task
from evo.contracts.verdict import Evaluation, LatencySource, Status
from fitness.latency.timer import SpinUpSettings, TimerSettings
from fitness.sandbox.process import Worker

BASELINES = ("seed", "torch", "torch_compile")


class LatencyMode(str, Enum):
    AUTO = "auto"  # measured on CUDA, modelled elsewhere
    MODEL = "model"  # modelled even on a CUDA device
    OFF = "off"


@dataclass(frozen=True)
class LatencySettings:
    """How latency is obtained. `quick_timer` serves ``level="quick"`` evaluations on CUDA.
    `spin_up_first` keeps the GPU busy before the first timed subject of a worker session (an idle
    GPU is clocked down), `spin_up` before every later timing op (the GPU idles while candidates
    compile)."""

    mode: LatencyMode = LatencyMode.AUTO
    target_gpu: str = DEFAULT_TARGET
    baselines: tuple[str, ...] = BASELINES
    timer: TimerSettings = field(default_factory=TimerSettings)
    quick_timer: TimerSettings = field(
        default_factory=lambda: TimerSettings(warmup_reps=2, rep_ms=20.0, min_reps=5, max_reps=100))
    spin_up_first: SpinUpSettings = field(default_factory=SpinUpSettings)
    spin_up: SpinUpSettings = field(default_factory=lambda: SpinUpSettings(min_ms=20.0, max_ms=500.0))
    timeout_s: float = 300.0
    memory_mb: int = 4096


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


def speed_of_light_violation(latency_ms: float, sol_ms: float | None) -> str | None:
    """The reason to reject a measured time below the speed-of-light bound, None when it is above."""
    if sol_ms is None or latency_ms >= sol_ms:
        return None
    return (f"measured {latency_ms * 1e3:.2f} us, below the speed-of-light bound of {sol_ms * 1e3:.2f} us for "
            f"the task's FLOPs and bytes at the device's peak rates: a broken measurement, not a win")


class LatencyBackend(Protocol):
    """A way to obtain latency: `fitness.latency.cuda.CudaLatency` or `fitness.latency.model.ModelLatency`."""

    def measure(self, candidate: Candidate, level: str) -> LatencyResult: ...

    def close(self) -> None: ...


class LatencyStage:
    """Latency of passing candidates: measured on CUDA, modelled otherwise (see module docstring)."""

    def __init__(self, task: Task, settings: LatencySettings, *, device: str, worker: Worker) -> None:
        self.task = task
        self.settings = settings
        self.device = device
        self.worker = worker
        self._measured: LatencyBackend | None = None
        self._modelled: LatencyBackend | None = None
        if not task.bench_sizes:
            self.mode = LatencyMode.OFF
        else:
            self.mode = settings.mode
        if self.source is LatencySource.MODEL:
            self._model_source()  # starts the model's workers now, overlapping their imports

    @property
    def source(self) -> LatencySource | None:
        if self.mode is LatencyMode.OFF:
            return None
        if self.mode is LatencyMode.AUTO and self.device == "cuda":
            return LatencySource.CUDA
        return LatencySource.MODEL

    @property
    def enabled(self) -> bool:
        return self.source is not None

    def _model_source(self) -> LatencyBackend:
        if self._modelled is None:
            from fitness.latency.model import ModelLatency

            self._modelled = ModelLatency(self.task, self.settings,
                                          interp_worker=self.worker if self.device == "cpu" else None)
        return self._modelled

    def measure(self, candidate: Candidate, *, level: str = "full") -> LatencyResult:
        """The latency of a candidate that passed equivalence."""
        if self.source is LatencySource.CUDA:
            if self._measured is None:
                from fitness.latency.cuda import CudaLatency

                self._measured = CudaLatency(self.task, self.settings, worker=self.worker)
            return self._measured.measure(candidate, level)
        if self.source is LatencySource.MODEL:
            return self._model_source().measure(candidate, level)
        return LatencyResult()

    def model(self, candidate: Candidate) -> LatencyResult:
        """The modelled latency, whatever the device (for reports that show both)."""
        return self._model_source().measure(candidate, "full")

    def close(self) -> None:
        for s in (self._measured, self._modelled):
            if s is not None:
                s.close()
