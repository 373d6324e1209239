"""Run directories written by hand, record by record, in the format of `evo.app.run.store`: for report and
statistics tests that need exact histories (a pause between sessions, no improvement, a rejected
seed, a run in progress) without running a campaign."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evo.contracts.candidate import Candidate
from evo.contracts.history import MsgpackLog
from evo.contracts.records import Individual, Proposal
from evo.contracts.verdict import Evaluation, LatencySource, Status

ROOT = Path(__file__).resolve().parents[2]
SEED = Candidate.from_source((ROOT / "evo" / "tasks" / "softmax" / "seed.py").read_text())
T0 = 1_000_000.0


@dataclass(frozen=True)
class Ev:
    """One evaluation: who proposed it, its verdict, latency (ms) and when (seconds after the start)."""

    mutator: str
    latency_ms: float | None = None
    at_s: float = 0.0
    status: Status = Status.OK
    level: str = "full"
    reason: str = "matches the reference"
    parent: int | None = None  # index in the list; default: the best correct one so far
    generation: int = 1
    note: str = ""
    same_as: int | None = None  # another evaluation of the candidate at this index (e.g. its verification)
    incidents: tuple[str, ...] = ()  # infrastructure failures its check met (and ran again after)
    detail: dict[str, Any] | None = None  # its latency_detail


@dataclass
class Built:
    path: Path
    candidates: list[Candidate] = field(default_factory=list)


def candidate(i: int) -> Candidate:
    """The seed (i = 0), else a distinct variant of it (a comment line and a BLOCK of its own)."""
    if i == 0:
        return SEED
    return Candidate.from_source(SEED.source + f"\n# synthetic variant {i}\n", {**SEED.params, "BLOCK": 64 * (i + 1)})


def make_run(root: Path, name: str, evs: list[Ev], *, kinds: tuple[str, ...] = ("stoke",),
             status: str | None = "finished", sessions: tuple[float, ...] = (0.0,),
             llm_usd_by_generation: dict[int, float] | None = None,
             extra_events: tuple[dict[str, Any], ...] = (), task: str = "softmax",
             pick: Callable[[int], Candidate] = candidate) -> Built:
    """A run directory; `sessions` are the start times (seconds) of the start and of each resume;
    evaluation i is of `pick(i)` (default: the softmax seed, then variants of it) on library `task`."""
    path = root / name
    path.mkdir(parents=True)
    (path / "checkpoints").mkdir()
    mutators = [{"kind": k} for k in kinds]
    (path / "config.yaml").write_text(yaml.safe_dump({"name": name, "task": {"name": task},
                                                      "mutators": mutators}))
    (path / "run.json").write_text(json.dumps({"config_dir": str(root), "created": "synthetic"}))
    history, events = MsgpackLog(path / "history.msgpack"), MsgpackLog(path / "events.msgpack")
    for i, s in enumerate(sessions):
        events.append({"kind": "start" if i == 0 else "resume", "time": T0 + s})
    built = Built(path)
    best: int | None = None
    for i, e in enumerate(evs):
        c = pick(i if e.same_as is None else e.same_as)
        built.candidates.append(c)
        parent = e.parent if e.parent is not None else best
        ev = Evaluation(c.id, "softmax-synthetic", "cpu", e.status, reason=e.reason, level=e.level,
                        error=0.0 if e.status is Status.OK else 1.0, latency_ms=e.latency_ms,
                        latency_source=LatencySource.MODEL if e.latency_ms is not None else None, latency_gpu="h100",
                        incidents=list(e.incidents), latency_detail=dict(e.detail or {}))
        proposal = Proposal(c, e.mutator, tuple([pick(parent).id]) if parent is not None and i else (), 0,
                            0 if i == 0 else e.generation, e.note)
        record = Individual(proposal, ev, seconds=0.5, evaluator="evaluator-0", time=T0 + e.at_s)
        history.append({"kind": "evaluation", **record.to_dict()})
        if e.status is Status.OK and e.level == "full" and e.latency_ms is not None and (
                best is None or e.latency_ms < (evs[best].latency_ms or 0.0)):
            best = i
    for g, usd in sorted((llm_usd_by_generation or {}).items()):
        at = max((e.at_s for e in evs if e.generation == g), default=0.0) + 0.1
        events.append({"kind": "generation", "generation": g, "time": T0 + at, "llm_usd": usd})
    for extra in extra_events:
        events.append(extra)
    if status is not None:
        last = max((e.at_s for e in evs), default=0.0)
        (path / "summary.json").write_text(json.dumps({
            "name": name, "status": status, "stop_reason": "synthetic", "task": task,
            "wall_time_s": last,
            "llm_usd": max((llm_usd_by_generation or {0: 0.0}).values()), "seed": {"id": pick(0).id}}))
    return built
