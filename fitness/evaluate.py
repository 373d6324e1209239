"""The evaluation pipeline: lint, then equivalence, then latency, for one candidate at a time.

`Evaluator` owns one worker subprocess (and, for the latency model, a compile worker). It does not
cache: "evaluate each candidate once" is the job of the one ledger that records evaluations
(`islands.evaluation.EvaluationLedger`). Latency (`fitness.latency.stage`) is measured on CUDA and
modelled elsewhere, for quick evaluations too (the model caches its own figures by candidate id).
"""

from __future__ import annotations

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig
from evo.contracts.task import Case, Task
from evo.contracts.verdict import Evaluation, Status
from fitness.check.equivalence import check_equivalence
from fitness.check.lint import lint
from fitness.latency.stage import LatencyStage
from fitness.sandbox.process import Worker


def detect_device() -> str:
    """'cuda' when torch sees a GPU here, else 'cpu' (the Triton interpreter)."""
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:
        return "cpu"


class Evaluator:
    """Checks candidates against one task on one device, with the settings of a config's
    ``evaluation:`` section. `quick` checks use the first `quick_sizes` check sizes, one draw."""

    def __init__(self, task: Task, settings: EvaluationConfig, *, device: str | None = None,
                 worker: Worker | None = None) -> None:
        """`worker`: share an evaluation worker of `device` between evaluators (left open by `close`)."""
        self.task = task
        self.settings = settings
        wanted = device or settings.device
        self.device = detect_device() if wanted == "auto" else wanted
        self._own_worker = worker is None
        self.worker = worker or Worker(device=self.device, memory_mb=settings.memory_mb)
        self.worker.start()  # overlap the worker's imports with the caller's work
        self.latency = LatencyStage(task, settings, device=self.device, worker=self.worker)

    def cases(self, level: str) -> list[Case]:
        if level == "quick":
            return self.task.cases(self.task.check_sizes[: self.settings.quick_sizes], draws=1, every_dist=False)
        return self.task.cases(draws=self.settings.draws)

    def evaluate(self, candidate: Candidate, *, level: str = "full") -> Evaluation:
        base = Evaluation(candidate.id, self.task.key, self.device, Status.LINT_ERROR, level=level)
        found = lint(candidate.source)
        if not found.ok:
            return base.with_(reason=found.reason())
        ev = check_equivalence(self.worker, self.task, candidate, self.cases(level), base,
                               timeout=self.settings.timeout_s, stop_on_failure=level != "quick")
        if ev.ok and self.latency.enabled:
            ev = self.latency.measure(candidate, level=level).apply(ev)
        return ev

    def close(self) -> None:
        self.latency.close()
        if self._own_worker:
            self.worker.close()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
