"""The evaluation pipeline: lint, then equivalence, then latency, with a cache.

`Evaluator` owns one worker subprocess (and, for the latency model, a compile worker). Evaluations
are cached by candidate id + task key + device + level, so a kernel proposed twice (or found on
two islands) is evaluated once. Latency (`fitness.latency.stage`) is measured on CUDA and modelled
elsewhere, for quick evaluations too (the model is cached by candidate id).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from evo.contracts.candidate import Candidate
from evo.contracts.task import Case, Task
from evo.contracts.verdict import Evaluation, Status
from fitness.check.equivalence import check_equivalence
from fitness.check.lint import lint
from fitness.latency.stage import LatencySettings, LatencyStage
from fitness.sandbox.process import Worker


@dataclass(frozen=True)
class EvalSettings:
    """How candidates are checked. `quick` checks use the first `quick_sizes` sizes, one draw."""

    timeout_s: float = 60.0
    memory_mb: int = 4096
    draws: int = 2
    quick_sizes: int = 2
    latency: LatencySettings = field(default_factory=LatencySettings)


def detect_device() -> str:
    """'cuda' when torch sees a GPU here, else 'cpu' (the Triton interpreter)."""
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:
        return "cpu"


class Evaluator:
    """Checks candidates against one task on one device."""

    def __init__(self, task: Task, settings: EvalSettings | None = None, *, device: str | None = None,
                 worker: Worker | None = None) -> None:
        """`worker`: share an evaluation worker of `device` between evaluators (left open by `close`)."""
        self.task = task
        self.settings = settings or EvalSettings()
        self.device = device or detect_device()
        self._own_worker = worker is None
        self.worker = worker or Worker(device=self.device, memory_mb=self.settings.memory_mb)
        self.cache: dict[tuple[str, str, str, str], Evaluation] = {}
        self.worker.start()  # overlap the worker's imports with the caller's work
        self.latency = LatencyStage(task, self.settings.latency, device=self.device, worker=self.worker)

    def cases(self, level: str) -> list[Case]:
        if level == "quick":
            return self.task.cases(self.task.check_sizes[: self.settings.quick_sizes], draws=1, every_dist=False)
        return self.task.cases(draws=self.settings.draws)

    def evaluate(self, candidate: Candidate, *, level: str = "full") -> Evaluation:
        key = (candidate.id, self.task.key, self.device, level)
        if key not in self.cache:
            self.cache[key] = self._evaluate(candidate, level)
        return self.cache[key]

    def _evaluate(self, candidate: Candidate, level: str) -> Evaluation:
        base = Evaluation(candidate.id, self.task.key, self.device, Status.LINT_ERROR, level=level)
        found = lint(candidate.source)
        if not found.ok:
            return base.with_(reason=found.reason())
        eq = check_equivalence(
            self.worker, self.task, candidate, self.cases(level),
            timeout=self.settings.timeout_s, stop_on_failure=level != "quick",
        )
        if eq.recycle_worker:
            self.worker.kill()
            self.worker.start()
        ev = base.with_(
            status=eq.status,
            reason=eq.reason,
            error=eq.error,
            max_error_ratio=eq.max_error_ratio if eq.cases_checked else math.inf,
            max_abs_error=eq.max_abs_error,
            mismatch_fraction=eq.mismatch_fraction,
            worst_case=eq.worst_case,
            cases_checked=eq.cases_checked,
            check_seconds=eq.seconds,
        )
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
