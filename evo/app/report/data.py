"""A run directory read back for reports and ablations: typed records with the campaign's clock.

Works on a finished run, one still in progress (no summary yet, an incomplete last record) and a run
whose seed was rejected. Nothing here writes to the run directory.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo.app.run.store import RunStore, RunStoreError
from evo.contracts.candidate import Candidate
from evo.contracts.config import Config
from evo.contracts.history import unpack
from evo.contracts.records import Individual, Proposal
from evo.contracts.verdict import Evaluation

SESSION_EVENTS = ("start", "resume")


@dataclass(frozen=True)
class Record:
    """One evaluation that ran (an `Individual` of the history) placed on the campaign's clock."""

    index: int  # 1-based position among the run's evaluations (full and quick)
    individual: Individual
    elapsed_s: float  # campaign wall time at that point, pauses between sessions excluded
    usd: float | None  # LLM dollars spent by the end of its generation (None: not recorded)

    @property
    def candidate(self) -> Candidate:
        return self.individual.candidate

    @property
    def evaluation(self) -> Evaluation:
        return self.individual.evaluation

    @property
    def proposal(self) -> Proposal:
        return self.individual.proposal

    @property
    def time(self) -> float:
        return self.individual.time

    @property
    def full(self) -> bool:
        return self.evaluation.level == "full"


@dataclass(frozen=True)
class RunData:
    path: Path
    config: Config
    summary: dict[str, Any] | None
    records: tuple[Record, ...]
    events: tuple[dict[str, Any], ...]
    islands: dict[int, dict[str, Any]]  # island index -> state at the latest checkpoint
    checkpoint_generation: int | None

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def status(self) -> str:
        """finished, interrupted, failed, or running (no summary, or one written mid-run)."""
        return str(self.summary.get("status", "running")) if self.summary else "running"

    @property
    def stop_reason(self) -> str:
        return str(self.summary.get("stop_reason", "")) if self.summary else ""

    @property
    def seed_id(self) -> str | None:
        if self.summary and (self.summary.get("seed") or {}).get("id"):
            return str(self.summary["seed"]["id"])
        # the seed is the first candidate every island evaluates
        first = next((r for r in self.records if r.full and r.proposal.mutator == "seed"), None)
        return first.candidate.id if first else None

    @property
    def seed_record(self) -> Record | None:
        sid = self.seed_id
        return next((r for r in self.records if r.full and r.candidate.id == sid), None)

    @property
    def mutator_kinds(self) -> list[str]:
        return [m.kind for m in self.config.mutators]

    @property
    def wall_time_s(self) -> float:
        if self.summary and self.status != "running":
            return float(self.summary.get("wall_time_s") or 0.0)
        return self.records[-1].elapsed_s if self.records else 0.0

    @property
    def llm_usd(self) -> float:
        gens = [e for e in self.events if e.get("kind") == "generation" and "llm_usd" in e]
        if self.summary and self.status != "running":
            return float(self.summary.get("llm_usd") or 0.0)
        return float(gens[-1]["llm_usd"]) if gens else float((self.summary or {}).get("llm_usd") or 0.0)

    def clock(self, times: list[float]) -> list[float]:
        """Campaign wall time (pauses between sessions excluded) at each of these epoch `times`."""
        return _session_clock(list(self.events), times)

    def by_id(self) -> dict[str, Record]:
        """The record of each candidate id, the full evaluation where there is one."""
        out: dict[str, Record] = {}
        for r in self.records:
            if r.candidate.id not in out or (r.full and not out[r.candidate.id].full):
                out[r.candidate.id] = r
        return out


def _session_clock(events: list[dict[str, Any]], times: list[float]) -> list[float]:
    """Campaign wall time at each of `times`: time since the session's start, plus the length of
    earlier sessions (from their start to the last thing they wrote), so pauses do not count."""
    starts = sorted(float(e["time"]) for e in events if e.get("kind") in SESSION_EVENTS and "time" in e)
    if not starts:
        starts = [min(times)] if times else [0.0]
    stamps = sorted([*times, *(float(e["time"]) for e in events if "time" in e)])
    before = [0.0]
    for a, b in itertools.pairwise(starts):
        last = [t for t in stamps if a <= t < b]
        before.append(before[-1] + ((max(last) - a) if last else 0.0))
    out = []
    for t in times:
        i = max(bisect.bisect_right(starts, t) - 1, 0)
        out.append(before[i] + max(t - starts[i], 0.0))
    return out


def _dollars(events: list[dict[str, Any]], times: list[float], has_llm: bool) -> list[float | None]:
    """LLM dollars spent by the end of the generation each time falls in."""
    if not has_llm:
        return [0.0 for _ in times]
    gens = [(float(e["time"]), float(e["llm_usd"])) for e in events
            if e.get("kind") == "generation" and "llm_usd" in e and "time" in e]
    if not gens:
        return [None for _ in times]
    ends = [t for t, _ in gens]
    out: list[float | None] = []
    for t in times:
        i = bisect.bisect_left(ends, t)
        out.append(gens[min(i, len(gens) - 1)][1])
    return out


def load_run(path: str | Path) -> RunData:
    """Read a run directory (see `evo.app.run.store`); raises `RunStoreError` when it is not one."""
    for name in ("config.yaml", "run.json"):
        if not (Path(path) / name).is_file():
            raise RunStoreError(f"{path} is not a run directory (no {name})")
    store = RunStore(Path(path))
    config = store.config()
    raw = [Individual.from_dict(r) for r in store.history.read() if r.get("kind") == "evaluation"]
    events = store.events.read()
    times = [r.time for r in raw]
    elapsed = _session_clock(events, times)
    usd = _dollars(events, times, any(m.kind == "llm" for m in config.mutators))
    records = tuple(Record(i + 1, r, e, d) for i, (r, e, d) in enumerate(zip(raw, elapsed, usd)))
    cp = store.latest_checkpoint()
    islands = {i: unpack(data) for i, data in cp.islands.items()} if cp else {}
    return RunData(store.path, config, store.summary(), records, tuple(events), islands,
                   cp.generation if cp else None)
