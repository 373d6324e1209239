"""Thin actor shells: the island actor, and helpers that start it and the evaluation broker on a
`Runtime` (Ray's, or this process's for the local executor).

Islands and the broker run on the driver's node (they are light: the heavy work is evaluation), so
the run directory, the Optuna journal and the LLM record are local files for them; evaluator
actors go wherever the cluster has a GPU (or a CPU).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from evo.contracts.candidate import Candidate
from evo.contracts.config import IslandsConfig
from evo.contracts.history import pack, unpack
from evo.contracts.mutator_config import AnyMutatorConfig, SelectionConfig, entry_names
from evo.contracts.records import Individual, Proposal
from evo.contracts.task_files import TaskFiles
from islands.broker import BrokerSpec, EvaluationBroker
from islands.evaluation import Answer
from islands.island import Island
from islands.report import GenerationReport
from islands.runtime import Runtime
from mutators.base import Mutator
from mutators.factory import build_selector
from mutators.selection import OperatorStats


class MutatorFactory(Protocol):
    """`mutators.factory.build_mutator`, or a test's stand-in."""

    def __call__(self, cfg: AnyMutatorConfig, *, run_dir: Path, seed: int) -> Mutator: ...


def mutator_seed(campaign_seed: int, island: int, position: int) -> int:
    """A distinct, reproducible seed per (campaign, island, mutator)."""
    return (campaign_seed * 1_000_003 + island * 1_009 + position) % (2**31)


@dataclass(frozen=True)
class IslandSpec:
    index: int
    islands: IslandsConfig
    hardware: str  # the target GPU in words, for the mutators
    task: TaskFiles
    mutators: tuple[AnyMutatorConfig, ...]
    selection: SelectionConfig
    seed: int
    run_dir: str
    mutator_factory: MutatorFactory


class BrokerService:
    """`EvaluationService` backed by the broker actor."""

    def __init__(self, broker: Any, runtime: Runtime) -> None:
        self.broker, self.rt = broker, runtime

    def evaluate_many(self, proposals: Sequence[Proposal], level: str) -> list[Answer]:
        return list(self.rt.get(self.broker.evaluate_many.remote(list(proposals), level)))


class IslandActor:
    """One `Island` in its own process; restored from `state` (a packed checkpoint) when given."""

    def __init__(self, spec: IslandSpec, broker: Any, runtime: Runtime, state: bytes | None = None) -> None:
        import optuna

        # one INFO line per trial would drown the campaign's own progress lines in `ray job logs`
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        task = spec.task.build(check_forward=False)  # the driver checked it
        i = spec.index
        mutators = [spec.mutator_factory(cfg, run_dir=Path(spec.run_dir), seed=mutator_seed(spec.seed, i, j))
                    for j, cfg in enumerate(spec.mutators)]
        weights = dict(zip(entry_names(mutators), (cfg.weight for cfg in spec.mutators)))
        selector = build_selector(spec.selection, weights)
        self.island = Island(i, spec.islands, task=task, mutators=mutators, selector=selector,
                             service=BrokerService(broker, runtime), seed=spec.seed, hardware=spec.hardware)
        if state is not None:
            self.island.load_state(unpack(state))

    def initialize(self, seed: Candidate) -> GenerationReport:
        return self.island.initialize(seed)

    def step(self) -> GenerationReport:
        return self.island.step()

    def generation(self) -> int:
        return self.island.generation

    def checkpoint(self) -> bytes:
        return pack(self.island.state())

    def emigrants(self, k: int) -> list[Individual]:
        return self.island.emigrants(k)

    def immigrate(self, migrants: list[Individual]) -> int:
        return self.island.immigrate(migrants)

    def best(self) -> Individual | None:
        return self.island.best()

    def operator_table(self) -> dict[str, OperatorStats]:
        """Per-mutator figures (pulls, proposals, valid, correct, improvements, cost)."""
        return dict(self.island.selector.table)

    def pid(self) -> int:
        return os.getpid()


def start_broker(spec: BrokerSpec, runtime: Runtime) -> Any:
    """The broker actor on this (the driver's) node; call its `start()` to start the evaluators."""
    return runtime.actor(EvaluationBroker, spec, runtime, name="broker", here=True)


def start_island(spec: IslandSpec, broker: Any, runtime: Runtime, state: bytes | None = None) -> Any:
    return runtime.actor(IslandActor, spec, broker, runtime, state, name=f"island-{spec.index}", here=True)
