"""Island checkpoints: the whole state of an `Island` as msgpack-friendly data, and back.

The RNG state is part of it, so a restored island proposes what the lost one would have (and the
shared cache answers for what was already evaluated); mutator and selector states travel too.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any, Protocol

from deap import tools

from evo.contracts.records import Individual
from mutators.base import Mutator
from mutators.selection import Selector

STATE_VERSION = 3  # 2: recent failures are individuals; 3: verified and rejected bests


class CheckpointError(ValueError):
    """A checkpoint that does not fit this island (another index, other mutators, another version)."""


class IslandParts(Protocol):
    """What a checkpoint holds of an island (`islands.island.Island` has these)."""

    index: int
    rng: random.Random
    generation: int
    population: list[Individual]
    hof: tools.HallOfFame
    seed: Individual | None
    logbook: tools.Logbook
    recent_failures: deque[Individual]
    verified: set[str]
    rejected: set[str]
    names: list[str]
    mutators: list[Mutator]
    selector: Selector


def island_state(island: IslandParts) -> dict[str, Any]:
    """Everything needed to continue exactly where this island is (msgpack-friendly)."""
    version, internal, gauss = island.rng.getstate()
    return {
        "version": STATE_VERSION,
        "index": island.index,
        "generation": island.generation,
        "rng": [version, list(internal), gauss],
        "population": [i.to_dict() for i in island.population],
        "hall_of_fame": [i.to_dict() for i in island.hof],
        "seed": island.seed.to_dict() if island.seed else None,
        "logbook": [dict(row) for row in island.logbook],
        "recent_failures": [i.to_dict() for i in island.recent_failures],
        "verified": sorted(island.verified),
        "rejected": sorted(island.rejected),
        "mutators": {name: m.state() for name, m in zip(island.names, island.mutators)},
        "selector": island.selector.state(),
    }


def load_island_state(island: IslandParts, state: dict[str, Any]) -> None:
    """Continue from `state()` of an island with the same index and mutators."""
    if state.get("version") != STATE_VERSION:
        raise CheckpointError(f"checkpoint version {state.get('version')} is not {STATE_VERSION}")
    if state["index"] != island.index:
        raise CheckpointError(f"checkpoint of island {state['index']} given to island {island.index}")
    if set(state["mutators"]) != set(island.names):
        raise CheckpointError(f"checkpoint mutators {sorted(state['mutators'])} differ from {sorted(island.names)}")
    version, internal, gauss = state["rng"]
    island.rng.setstate((version, tuple(internal), gauss))
    island.generation = int(state["generation"])
    island.population = [Individual.from_dict(d) for d in state["population"]]
    island.seed = Individual.from_dict(state["seed"]) if state["seed"] else None
    island.hof.clear()
    island.hof.update([Individual.from_dict(d) for d in state["hall_of_fame"]])
    island.logbook = tools.Logbook()
    for row in state["logbook"]:
        island.logbook.record(**row)
    island.recent_failures.clear()
    island.recent_failures.extend(Individual.from_dict(d) for d in state["recent_failures"])
    island.verified = set(state["verified"])
    island.rejected = set(state["rejected"])
    for name, m in zip(island.names, island.mutators):
        m.load_state(state["mutators"][name])
    island.selector.load_state(state["selector"])
