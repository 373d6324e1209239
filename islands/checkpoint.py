"""Island checkpoints: the whole state of an `Island` as msgpack-friendly data, and back.

The RNG state is part of it, so a restored island proposes what the lost one would have (and the
shared cache answers for what was already evaluated); mutator and selector states travel too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deap import tools

from evo.contracts.candidate import Candidate
from evo.contracts.records import Individual
from evo.contracts.verdict import Evaluation
from mutators.base import Proposal

if TYPE_CHECKING:
    from islands.island import Island

STATE_VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that does not fit this island (another index, other mutators, another version)."""


def island_state(island: Island) -> dict[str, Any]:
    """Everything needed to continue exactly where this island is (msgpack-friendly)."""
    version, internal, gauss = island.rng.getstate()
    return {
        "version": STATE_VERSION,
        "index": island.settings.index,
        "generation": island.generation,
        "rng": [version, list(internal), gauss],
        "population": [i.to_dict() for i in island.population],
        "hall_of_fame": [i.to_dict() for i in island.hof],
        "seed": island.seed.to_dict() if island.seed else None,
        "logbook": [dict(row) for row in island.logbook],
        # proposals' mutator-private `meta` is not kept: it need not be serializable
        "recent_failures": [
            {"candidate": p.candidate.to_dict() if p.candidate else None, "mutator": p.mutator,
             "parents": list(p.parents), "note": p.note, "error": p.error, "evaluation": ev.to_dict()}
            for p, ev in island.recent_failures
        ],
        "mutators": {name: m.state() for name, m in zip(island.names, island.mutators)},
        "selector": island.selector.state(),
    }


def load_island_state(island: Island, state: dict[str, Any]) -> None:
    """Continue from `state()` of an island with the same index and mutators."""
    if state.get("version") != STATE_VERSION:
        raise CheckpointError(f"checkpoint version {state.get('version')} is not {STATE_VERSION}")
    if state["index"] != island.settings.index:
        raise CheckpointError(f"checkpoint of island {state['index']} given to island {island.settings.index}")
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
    for f in state["recent_failures"]:
        cand = Candidate.from_dict(f["candidate"]) if f["candidate"] else None
        p = Proposal(cand, f["mutator"], tuple(f["parents"]), note=f["note"], error=f["error"])
        island.recent_failures.append((p, Evaluation.from_dict(f["evaluation"])))
    for name, m in zip(island.names, island.mutators):
        m.load_state(state["mutators"][name])
    island.selector.load_state(state["selector"])
