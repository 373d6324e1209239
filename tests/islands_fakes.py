"""Fakes for island and campaign tests: mutators, a deterministic latency, an evaluate function.

Importable by Ray workers (as `tests.islands_fakes`), so campaigns on a real Ray cluster can use
them through `CampaignHooks`. The latency is a made-up deterministic function of the kernel, so a
test can tell which candidate "is faster" without a GPU; it is labelled `model`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig
from evo.contracts.records import Individual, Proposal
from evo.contracts.task import Task
from evo.contracts.verdict import Evaluation, LatencySource, Status
from fitness.evaluate import Evaluator
from mutators.base import MutationContext, Mutator, choose

CANDIDATES = Path(__file__).resolve().parent / "candidates"
FASTER_SOFTMAX = (CANDIDATES / "softmax" / "one_pass.py").read_text()
WRONG_SOFTMAX = (CANDIDATES / "softmax" / "no_max_subtraction.py").read_text()


def fake_latency_ms(candidate: Candidate) -> float:
    """Three-pass kernels are 3x slower; bigger blocks help; 4 warps is best."""
    block = float(candidate.params.get("BLOCK", 4096))
    warps = float(candidate.params.get("num_warps", 4))
    passes = 3.0 if "three_pass" in candidate.source else 1.0
    return passes * (1.0 + 256.0 / block) * (1.0 + 0.1 * abs(math.log2(warps) - 2.0))


def with_fake_latency(candidate: Candidate, evaluation: Evaluation) -> Evaluation:
    if not evaluation.ok:
        return evaluation
    return evaluation.with_(latency_ms=fake_latency_ms(candidate), latency_source=LatencySource.MODEL)


class FakeEvaluate:
    """Evaluates without a worker: ok unless BLOCK is 'bad' (64 here), fake latency; counts calls."""

    def __init__(self, task_key: str = "fake-task", device: str = "cpu", *, timed: bool = True) -> None:
        self.task_key = task_key
        self.device = device
        self.timed = timed
        self.calls: list[tuple[str, str]] = []

    def __call__(self, candidate: Candidate, level: str) -> Evaluation:
        self.calls.append((candidate.id, level))
        bad = candidate.params.get("BLOCK") == 64
        status = Status.WRONG_OUTPUT if bad else Status.OK
        ev = Evaluation(candidate.id, self.task_key, self.device, status, level=level,
                        reason="fake: BLOCK 64 is wrong" if bad else "fake: ok", error=1.0 if bad else 0.0)
        return with_fake_latency(candidate, ev) if self.timed else ev


class FakeLatencyEvaluator:
    """A real `Evaluator` (lint + equivalence in a worker) whose correct verdicts get the fake latency."""

    def __init__(self, task: Task, settings: EvaluationConfig, device: str) -> None:
        self.inner = Evaluator(task, settings, device=device)
        self.device = self.inner.device

    def evaluate(self, candidate: Candidate, *, level: str = "full") -> Evaluation:
        return with_fake_latency(candidate, self.inner.evaluate(candidate, level=level))

    def isolation(self) -> tuple[str, list[str]]:
        return self.inner.isolation()

    def close(self) -> None:
        self.inner.close()


def fake_evaluator_factory(task: Task, settings: EvaluationConfig, device: str) -> FakeLatencyEvaluator:
    return FakeLatencyEvaluator(task, settings, device)


class ParamMutator(Mutator):
    """Moves one meta-parameter to another value of the candidate's SPACE."""

    kind = "params"
    name = "params"

    def __init__(self) -> None:
        self.observed = 0

    def propose(self, parent: Individual, ctx: MutationContext) -> list[Proposal]:
        space = {k: v for k, v in sorted(parent.candidate.space().items()) if k in parent.candidate.params}
        if not space:
            return []
        name = choose(ctx.rng, list(space))
        value = choose(ctx.rng, space[name])
        child = parent.candidate.with_params(**{name: value})
        return [Proposal(child, self.kind, (parent.candidate.id,), note=f"{name}={value}", cost_s=0.001)]

    def observe(self, proposal: Proposal, evaluation: Evaluation) -> None:
        self.observed += 1

    def state(self) -> dict[str, Any]:
        return {"observed": self.observed}

    def load_state(self, state: dict[str, Any]) -> None:
        self.observed = int(state["observed"])


class SwapMutator(Mutator):
    """Swaps in a known kernel (the faster one-pass softmax by default), after a quick check."""

    kind = "swap"
    name = "swap"

    def __init__(self, source: str = FASTER_SOFTMAX, *, quick_check: bool = True) -> None:
        self.source = source
        self.quick_check = quick_check

    def propose(self, parent: Individual, ctx: MutationContext) -> list[Proposal]:
        child = Candidate.from_source(self.source)
        if self.quick_check:
            ctx.evaluate(child, "quick")
        return [Proposal(child, self.kind, (parent.candidate.id,), note="swap")]


class FailingMutator(Mutator):
    """Fails every way a mutator can: no candidate, or an exception."""

    kind = "failing"
    name = "failing"

    def __init__(self, *, raises: bool = False) -> None:
        self.raises = raises

    def propose(self, parent: Individual, ctx: MutationContext) -> list[Proposal]:
        if self.raises:
            raise RuntimeError("the fake mutator broke")
        return [Proposal(None, self.kind, (parent.candidate.id,), error="reply could not be applied", cost_usd=0.25)]


class EchoMutator(Mutator):
    """Proposes the parent itself: a duplicate every time."""

    kind = "echo"
    name = "echo"

    def propose(self, parent: Individual, ctx: MutationContext) -> list[Proposal]:
        return [Proposal(parent.candidate, self.kind, (parent.candidate.id,))]


def fake_mutator_factory(cfg: Any, *, run_dir: Path, seed: int) -> Mutator:
    """Config kinds to fakes: optuna -> ParamMutator, stoke -> SwapMutator, llm -> FailingMutator."""
    if cfg.kind == "optuna":
        return ParamMutator()
    if cfg.kind == "stoke":
        return SwapMutator()
    return FailingMutator()


HANG_SOFTMAX = (CANDIDATES / "softmax" / "hang.py").read_text()
SEGFAULT_SOFTMAX = (CANDIDATES / "softmax" / "segfault.py").read_text()
ACTOR_HANG_MARK = "# evo-test: the evaluator actor hangs on this candidate"
ACTOR_HANG_SOFTMAX = FASTER_SOFTMAX + "\n" + ACTOR_HANG_MARK + "\n"


class FaultSwapMutator(Mutator):
    """First call: proposes a kernel that hangs, one that segfaults, one that hangs the evaluator
    actor itself, and the faster kernel; afterwards behaves like `ParamMutator`."""

    kind = "faults"
    name = "faults"

    def __init__(self) -> None:
        self.fired = False
        self.params = ParamMutator()

    def propose(self, parent: Individual, ctx: MutationContext) -> list[Proposal]:
        if self.fired:
            return self.params.propose(parent, ctx)
        self.fired = True
        return [Proposal(Candidate.from_source(src), self.kind, (parent.candidate.id,), note=note)
                for note, src in (("hang", HANG_SOFTMAX), ("segfault", SEGFAULT_SOFTMAX),
                                  ("actor-hang", ACTOR_HANG_SOFTMAX), ("faster", FASTER_SOFTMAX))]

    def state(self) -> dict[str, Any]:
        return {"fired": self.fired}

    def load_state(self, state: dict[str, Any]) -> None:
        self.fired = bool(state["fired"])


class ActorHangEvaluator(FakeLatencyEvaluator):
    """Like `FakeLatencyEvaluator`, but the evaluator itself hangs on a marked candidate."""

    def evaluate(self, candidate: Candidate, *, level: str = "full") -> Evaluation:
        if ACTOR_HANG_MARK in candidate.source:
            import time

            time.sleep(3600)
        return super().evaluate(candidate, level=level)


class StallingEvaluator(FakeLatencyEvaluator):
    """Like `FakeLatencyEvaluator`, but every evaluation first waits two minutes: a generation that is
    in progress stays in progress."""

    def evaluate(self, candidate: Candidate, *, level: str = "full") -> Evaluation:
        import time

        time.sleep(120)
        return super().evaluate(candidate, level=level)


def stalling_evaluator_factory(task: Task, settings: EvaluationConfig, device: str) -> StallingEvaluator:
    return StallingEvaluator(task, settings, device)


def fault_evaluator_factory(task: Task, settings: EvaluationConfig, device: str) -> ActorHangEvaluator:
    return ActorHangEvaluator(task, settings, device)


def fault_mutator_factory(cfg: Any, *, run_dir: Path, seed: int) -> Mutator:
    return FaultSwapMutator() if cfg.kind == "stoke" else fake_mutator_factory(cfg, run_dir=run_dir, seed=seed)
