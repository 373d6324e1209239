"""Compile ahead: the work on a candidate that needs no GPU timing slot, done by a pool of CPU-side
workers while the GPU's evaluator checks and times other candidates.

`Preparer.prepare(candidate, level)`:

1. lints the candidate: a lint failure is its final verdict (the same verdict, word for word, as
   `fitness.evaluate.Evaluator` gives; the GPU never sees the candidate);
2. on a GPU node, compiles its kernels for every shape the evaluation will launch them at (the check
   sizes of `level`, one draw each, and the bench sizes) in its own sandboxed worker, with launches
   turned into compiles (`fitness.sandbox.jit_hooks.compile_only`). The compiled kernels land in the
   Triton cache this node's workers share, so the evaluator's first launch loads them.

Nothing but the lint is final here: a compile that fails in this mode is left for the evaluator to
find and judge, so preparing can make a campaign faster but never changes a verdict. On a CPU node
(the interpreter compiles nothing) preparing is the lint only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig
from evo.contracts.task import Task
from evo.contracts.verdict import QUICK, Evaluation
from fitness.evaluate import lint_verdict
from fitness.sandbox.process import Worker, WorkerDied, WorkerTimeout


@dataclass(frozen=True)
class Prepared:
    """What preparing found: a final `verdict` (the candidate needs no evaluator), or None and what was
    compiled ahead (`warmed`, with `note` saying why not when it was not)."""

    verdict: Evaluation | None
    warmed: bool = False
    seconds: float = 0.0
    note: str = ""


class Preparer:
    """Prepares candidates of one task for evaluators on `device` (see the module docstring)."""

    def __init__(self, task: Task, settings: EvaluationConfig, *, device: str) -> None:
        self.task, self.settings, self.device = task, settings, device
        self.worker: Worker | None = None
        if device == "cuda":
            self.worker = Worker.evaluating(settings, device)
            self.worker.start()

    def prepare(self, candidate: Candidate, level: str) -> Prepared:
        start = time.monotonic()
        verdict = lint_verdict(candidate, self.task.key, self.device, level)
        if verdict is not None:
            return Prepared(verdict, seconds=time.monotonic() - start)
        if self.worker is None:
            return Prepared(None, note="nothing to compile ahead on this device", seconds=time.monotonic() - start)
        warmed, note = self._warm(candidate, level)
        return Prepared(None, warmed, time.monotonic() - start, note)

    def _cases(self, level: str) -> list[dict[str, object]]:
        """Shapes and dtypes of every launch the evaluation at `level` makes: its check sizes and, beyond
        `quick`, the bench sizes."""
        sizes = self.task.check_sizes[: self.settings.quick_sizes] if level == QUICK else self.task.check_sizes
        out: list[dict[str, object]] = []
        for case in self.task.cases(list(sizes), draws=1, every_dist=False):
            data = self.task.case_data(case)
            out.append({"inputs": [{"dtype": t.dtype, "shape": list(t.shape)} for t in data.inputs],
                        "outputs": [{"dtype": d, "shape": list(s)}
                                    for d, s in zip(data.output_dtypes, data.output_shapes)]})
        if level != QUICK:
            for size in self.task.bench_sizes:
                bench = self.task.bench_case(size, data=False)
                out.append({"inputs": [{"dtype": t.dtype, "shape": list(s)}
                                       for t, s in zip(bench.inputs, bench.input_shapes)],
                            "outputs": [{"dtype": d, "shape": list(s)}
                                        for d, s in zip(bench.output_dtypes, bench.output_shapes)]})
        return out

    def _warm(self, candidate: Candidate, level: str) -> tuple[bool, str]:
        assert self.worker is not None
        timeout = self.settings.timeout_s
        try:
            reply = self.worker.request({"op": "load", "source": candidate.source, "params": candidate.params,
                                         "name": candidate.id}, timeout)
            if reply.get("ok"):
                reply = self.worker.request({"op": "warm", "cases": self._cases(level)}, timeout)
        except (WorkerTimeout, WorkerDied) as e:
            return False, f"not compiled ahead: {e}"
        if not reply.get("ok"):
            if reply.get("fatal"):
                self.worker.restart()
            return False, f"not compiled ahead: {reply.get('kind')}: {str(reply.get('message'))[:300]}"
        return True, f"compiled ahead in {float(reply.get('seconds', 0.0)):.2f} s"

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
