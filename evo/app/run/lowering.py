"""Start from numpy: a task with a reference but no seed kernel gets its first kernel from the model
of the config's first `llm` mutator.

The model is shown the reference and the contract and asked for a module; each reply is checked in
full like any candidate (the same evaluator a campaign uses), and a rejected one goes back to the
model with the checker's verdict, up to the mutator's `lowering_attempts`. The first correct kernel
becomes the run's seed (kept as `RUN_DIR/inputs/seed.py`, so `--resume` never lowers again). The
exchanges go to the mutator's record file like its own, so a recorded run replays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo.contracts.candidate import Candidate, CandidateError
from evo.contracts.config import Config
from evo.contracts.config_file import ConfigError
from evo.contracts.mutator_config import LLMConfig
from evo.contracts.task import Task
from fitness.evaluate import device_for
from fitness.latency.stage import target_hardware
from islands.evaluator_actor import EvaluatorFactory, cuda_device_name
from mutators.llm.client import LLMClient, LLMError
from mutators.llm.lowering import lowering_messages, retry_messages
from mutators.llm.parse import extract_module
from mutators.llm.prompt import failure_text


class LoweringFailed(ConfigError):
    """No correct kernel came from the model within the attempts allowed."""


@dataclass(frozen=True)
class Attempt:
    number: int
    candidate: str | None  # its id, None when the reply held no usable module
    outcome: str  # "ok", a verdict status, "no module", "contract"
    reason: str


@dataclass(frozen=True)
class Lowered:
    seed: Candidate
    attempts: list[Attempt]
    usd: float

    def note(self) -> str:
        return (f"no seed kernel: the LLM wrote one from the reference ({len(self.attempts)} attempt"
                f"{'s' if len(self.attempts) != 1 else ''}, ${self.usd:.4f}); candidate {self.seed.id} is the seed")

    def event(self) -> dict[str, Any]:
        return {"kind": "lowering", "seed": self.seed.id, "usd": self.usd,
                "attempts": [vars(a) for a in self.attempts]}


def llm_entry(cfg: Config, task: Task) -> LLMConfig:
    """The `llm` mutator that lowers; a ConfigError naming the two ways out when there is none."""
    entry = next((m for m in cfg.mutators if isinstance(m, LLMConfig)), None)
    if entry is None:
        raise ConfigError(f"task {task.name} has no seed kernel: give one (`task.seed`, or a seed.py beside a "
                          "task module), or add an `llm` mutator, whose model then writes the first kernel "
                          "from the reference")
    return entry


def lower(task: Task, entry: LLMConfig, *, run_dir: Path, cfg: Config, factory: EvaluatorFactory,
          say: Callable[[str], None] = lambda _: None) -> Lowered:
    """The first correct kernel the model writes for `task`, checked by an evaluator from `factory`."""
    record = Path(entry.record_path) if entry.record_path else run_dir / "llm_record.jsonl"
    try:
        client = LLMClient(entry, record_path=record if entry.mode != "live" else None)
    except ValueError as e:
        raise ConfigError(f"the task has no seed kernel, and its llm mutator cannot write one: {e}") from None
    device = device_for(cfg.evaluation.device)
    hardware = target_hardware(cfg.evaluation, device, cuda_device_name() if device == "cuda" else "")
    messages = lowering_messages(task, hardware=hardware, cfg=entry)
    attempts: list[Attempt] = []
    evaluator = factory(task, cfg.evaluation, device)
    try:
        for n in range(1, entry.lowering_attempts + 1):
            try:
                reply = client.complete(messages)
            except LLMError as e:
                raise LoweringFailed(f"the task has no seed kernel and the LLM request for one failed "
                                     f"({client.endpoint}, model {entry.model}): {e}") from None
            source = extract_module(reply.text)
            if source is None:
                attempt = Attempt(n, None, "no module", "the reply held no ```python block defining launch")
            else:
                try:
                    candidate = Candidate.from_source(source)
                except CandidateError as e:
                    attempt = Attempt(n, None, "contract", str(e))
                else:
                    verdict = evaluator.evaluate(candidate, level="full")
                    if verdict.ok:
                        attempts.append(Attempt(n, candidate.id, "ok", verdict.reason))
                        say(f"lowering: attempt {n}: ok, candidate {candidate.id} is the seed")
                        return Lowered(candidate, attempts, client.spent_usd)
                    attempt = Attempt(n, candidate.id, verdict.status.value, failure_text(candidate, verdict, "",
                                                                                         entry))
            attempts.append(attempt)
            say(f"lowering: attempt {n}: {attempt.outcome}: {attempt.reason.splitlines()[0][:160]}")
            messages = retry_messages(messages, reply.text, attempt.reason)
    finally:
        evaluator.close()
    last = attempts[-1]
    raise LoweringFailed(f"the task has no seed kernel and the LLM wrote no correct one in {len(attempts)} "
                         f"attempts (llm lowering_attempts); the last: {last.outcome}: "
                         f"{last.reason.splitlines()[0][:300]}")
