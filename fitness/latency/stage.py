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

from collections.abc import Callable

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.gpus import get_profile, profile_for_device
from evo.contracts.task import Task
from evo.contracts.verdict import LatencySource, Status
from fitness.latency.result import BenchCheck, LatencyBackend, LatencyResult
from fitness.latency.shapes import combine
from fitness.sandbox.process import Worker


class LatencyStage:
    """Latency of passing candidates: measured on CUDA, modelled otherwise (see module docstring); at
    every bench size the task weighs, combined (`fitness.latency.shapes`), else at its first."""

    def __init__(self, task: Task, settings: EvaluationConfig, *, device: str, worker: Worker,
                 compiler: Worker | None = None, secret: int = 0, bench_check: BenchCheck | None = None) -> None:
        """`compiler`: a shared compile worker for the model (else the model starts its own); `secret` seeds
        the model's bench inputs and program samples; `bench_check` runs a candidate in full at a bench
        size (see `fitness.latency.model`)."""
        self.task = task
        self.settings = settings
        self.device = device
        self.worker = worker
        self.compiler = compiler
        self.secret = secret
        self.bench_check = bench_check
        self.sizes = task.fitness_sizes()  # (bench size index, weight)
        self._measured: dict[int, LatencyBackend] = {}
        self._modelled: dict[int, LatencyBackend] = {}
        if not task.bench_sizes:
            self.mode = LatencyMode.OFF
        else:
            self.mode = settings.latency
        if self.source is LatencySource.MODEL:
            self._model_source(self.sizes[0][0])  # starts the model's workers now, overlapping their imports

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

    def _model_source(self, index: int) -> LatencyBackend:
        if index not in self._modelled:
            from fitness.latency.model import ModelLatency

            # on CPU the model profiles in this evaluator's worker, on CUDA in its own; the models of further
            # sizes share the first one's workers
            on_cpu = self.device == "cpu"
            first = next(iter(self._modelled.values()), None)
            interp = self.worker if on_cpu else getattr(first, "interp", None)
            self._modelled[index] = ModelLatency(
                self.task, self.settings, interp_worker=interp,
                compile_worker=getattr(first, "compiler", None) or self.compiler,
                secret=self.secret, index=index)
        return self._modelled[index]

    def _cuda_source(self, index: int) -> LatencyBackend:
        if index not in self._measured:
            from fitness.latency.cuda import CudaLatency

            self._measured[index] = CudaLatency(self.task, self.settings, worker=self.worker, secret=self.secret,
                                                bench_check=self.bench_check, index=index)
        return self._measured[index]

    def measure(self, candidate: Candidate, *, level: str = "full") -> LatencyResult:
        """The latency of a candidate that passed equivalence."""
        if self.source is LatencySource.CUDA:
            return self._over_sizes(candidate, level, self._cuda_source)
        if self.source is LatencySource.MODEL:
            return self._over_sizes(candidate, level, self._model_source)
        return LatencyResult()

    def model(self, candidate: Candidate) -> LatencyResult:
        """The modelled latency, whatever the device (for reports that show both)."""
        return self._over_sizes(candidate, "full", self._model_source)

    def _over_sizes(self, candidate: Candidate, level: str,
                    backend: Callable[[int], LatencyBackend]) -> LatencyResult:
        """The result at each fitness size in order, stopping at the first that fails, combined."""
        parts = []
        for index, weight in self.sizes:
            r = backend(index).measure(candidate, level)
            parts.append((self.task.bench_sizes[index], weight, r))
            if r.status is not Status.OK:
                break
        return combine(parts)

    def compile_worker(self) -> Worker | None:
        """The compile worker of the latency model (no interpreter, no GPU), else the shared one given, if any."""
        if self.source is not LatencySource.MODEL:
            return self.compiler
        return getattr(self._model_source(self.sizes[0][0]), "compiler", None)

    def close(self) -> None:
        # the first model of each kind owns the workers the others share: close it last
        for backends in (self._measured, self._modelled):
            for b in reversed(list(backends.values())):
                b.close()


def target_hardware(settings: EvaluationConfig, device: str, gpu_name: str = "") -> str:
    """The GPU candidates are made fast for, in words (the mutators' "target hardware"): the device
    timed on when latency is measured there, else the modelled target."""
    if device == "cuda" and settings.latency is LatencyMode.AUTO:
        profile = profile_for_device(gpu_name)
        figures = profile.summary() if profile else "no profile of its figures"
        return f"{gpu_name or 'a CUDA GPU'} (latency measured on it): {figures}"
    return f"{get_profile(settings.target_gpu).summary()} (latency modelled for this GPU, not measured)"
