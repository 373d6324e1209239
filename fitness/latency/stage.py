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

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.gpus import get_profile, profile_for_device
from evo.contracts.task import Task
from evo.contracts.verdict import LatencySource
from fitness.latency.result import BenchCheck, LatencyBackend, LatencyResult
from fitness.sandbox.process import Worker


class LatencyStage:
    """Latency of passing candidates: measured on CUDA, modelled otherwise (see module docstring)."""

    def __init__(self, task: Task, settings: EvaluationConfig, *, device: str, worker: Worker, secret: int = 0,
                 bench_check: BenchCheck | None = None) -> None:
        """`secret` seeds the model's bench inputs and program samples; `bench_check` runs a candidate in
        full at a bench size (see `fitness.latency.model`)."""
        self.task = task
        self.settings = settings
        self.device = device
        self.worker = worker
        self.secret = secret
        self.bench_check = bench_check
        self._measured: LatencyBackend | None = None
        self._modelled: LatencyBackend | None = None
        if not task.bench_sizes:
            self.mode = LatencyMode.OFF
        else:
            self.mode = settings.latency
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

            # on CPU the model's full bench-size check runs in this evaluator's worker, on CUDA in its own
            on_cpu = self.device == "cpu"
            self._modelled = ModelLatency(self.task, self.settings, interp_worker=self.worker if on_cpu else None,
                                          secret=self.secret, bench_check=self.bench_check if on_cpu else None)
        return self._modelled

    def measure(self, candidate: Candidate, *, level: str = "full") -> LatencyResult:
        """The latency of a candidate that passed equivalence."""
        if self.source is LatencySource.CUDA:
            if self._measured is None:
                from fitness.latency.cuda import CudaLatency

                self._measured = CudaLatency(self.task, self.settings, worker=self.worker, secret=self.secret,
                                             bench_check=self.bench_check)
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


def target_hardware(settings: EvaluationConfig, device: str, gpu_name: str = "") -> str:
    """The GPU candidates are made fast for, in words (the mutators' "target hardware"): the device
    timed on when latency is measured there, else the modelled target."""
    if device == "cuda" and settings.latency is LatencyMode.AUTO:
        profile = profile_for_device(gpu_name)
        figures = profile.summary() if profile else "no profile of its figures"
        return f"{gpu_name or 'a CUDA GPU'} (latency measured on it): {figures}"
    return f"{get_profile(settings.target_gpu).summary()} (latency modelled for this GPU, not measured)"
