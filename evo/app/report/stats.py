"""Figures a run report shows, computed from a `RunData`: operator and STOKE move tables, LLM usage,
failures with examples, migrations, per-island best so far, elite shares and the best's lineage."""

from __future__ import annotations

import ast
import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evo.app.report.data import SESSION_EVENTS, Record, RunData
from evo.app.report.trace import Trace, credit
from evo.contracts.mutator_config import entry_names
from evo.contracts.syntax import parse_module
from mutators.llm.prompt import source_with_params
from mutators.selection import OperatorStats, elite_share
from mutators.stoke.stats import MoveStats

EXAMPLES = 3


def mutator_kinds(run: RunData) -> dict[str, str]:
    """Mutator name (as islands label it: `name`, else the kind, numbered when repeated) -> kind."""
    return {name: m.kind for name, m in zip(entry_names(run.config.mutators), run.config.mutators)}


def operator_totals(run: RunData) -> dict[str, OperatorStats]:
    """The operator-selection table of every island (latest checkpoint), summed."""
    total: dict[str, OperatorStats] = {}
    for state in run.islands.values():
        for name, d in (state.get("selector", {}).get("table", {}) or {}).items():
            s = OperatorStats.from_dict(d)
            t = total.setdefault(name, OperatorStats())
            for f in ("pulls", "proposals", "valid", "correct", "improvements", "cost_s", "cost_usd"):
                setattr(t, f, getattr(t, f) + getattr(s, f))
    return total


def _states(run: RunData, kind: str) -> list[dict[str, Any]]:
    names = [n for n, k in mutator_kinds(run).items() if k == kind]
    return [state["mutators"][n] for state in run.islands.values() for n in names
            if n in state.get("mutators", {})]


def stoke_moves(run: RunData) -> dict[str, MoveStats]:
    table: dict[str, MoveStats] = {}
    for st in _states(run, "stoke"):
        for move, row in dict(st.get("moves", {})).items():
            t = table.setdefault(move, MoveStats())
            r = MoveStats.from_dict(row)
            for f in ("proposed", "valid", "correct", "accepted", "improved"):
                setattr(t, f, getattr(t, f) + getattr(r, f))
    return table


@dataclass(frozen=True)
class LLMUsage:
    requests: int
    failed_requests: int
    prompt_tokens: int
    completion_tokens: int
    spent_usd: float
    unusable_replies: int
    proposals: int
    replay_misses: int  # replayed requests the record had no reply for (0: the replay was exact)
    pauses: int  # pauses after requests failed in a row


def llm_usage(run: RunData) -> LLMUsage | None:
    states = _states(run, "llm")
    if not states:
        return None

    def total(key: str, i: int | None = None) -> int:
        return sum(int((s.get(key) or [0, 0, 0])[i] if i is not None else s.get(key, 0)) for s in states)

    counts = [dict(s.get("counts", {})) for s in states]
    return LLMUsage(total("requests", 0), total("requests", 2), total("tokens", 0), total("tokens", 1),
                    sum(float(s.get("spent_usd", 0.0)) for s in states),
                    sum(int(c.get("unusable_replies", 0)) for c in counts),
                    sum(int(c.get("proposals", 0)) for c in counts), total("replay_misses"), total("pauses"))


@dataclass(frozen=True)
class FailureGroup:
    status: str
    full: int
    quick: int
    examples: tuple[Record, ...]


def failures(run: RunData) -> list[FailureGroup]:
    """Evaluations that failed, by status (most frequent first), with a few examples of each."""
    groups: dict[str, list[Record]] = {}
    for r in run.records:
        if not r.evaluation.ok:
            groups.setdefault(r.evaluation.status.value, []).append(r)
    out = []
    for status, rs in groups.items():
        full = [r for r in rs if r.full]
        picks: list[Record] = []
        for r in full + [r for r in rs if not r.full]:  # distinct reasons first
            if len(picks) < EXAMPLES and all(p.evaluation.reason != r.evaluation.reason for p in picks):
                picks.append(r)
        out.append(FailureGroup(status, len(full), len(rs) - len(full), tuple(picks)))
    return sorted(out, key=lambda g: -(g.full + g.quick))


def failed_proposals(run: RunData) -> dict[str, list[str]]:
    """Proposals that produced no kernel (an LLM reply that could not be applied...), by mutator."""
    out: dict[str, list[str]] = {}
    for e in run.events:
        if e.get("kind") == "proposal_failed":
            out.setdefault(str(e.get("mutator", "?")), []).append(str(e.get("error", "")))
    return out


def migrations(run: RunData) -> list[dict[str, Any]]:
    return [e for e in run.events if e.get("kind") == "migration"]


def island_curves(run: RunData, trace: Trace) -> dict[int, list[tuple[int, float]]]:
    """Best speedup so far of each island by generation: from the islands' logbooks (population
    minimum, migrants included) when a checkpoint exists, else from the island's own evaluations."""
    seed = trace.seed_latency_ms
    if seed is None:
        return {}
    curves: dict[int, list[tuple[int, float]]] = {}
    if run.islands:
        for i, state in run.islands.items():
            best, pts = 0.0, []
            for row in state.get("logbook", []):
                if row.get("min") and row["min"] > 0:
                    best = max(best, seed / float(row["min"]))
                    pts.append((int(row["gen"]), best))
            curves[i] = pts
        return curves
    for r in run.records:
        s = trace.speedup(r)
        if s is not None:
            pts = curves.setdefault(r.proposal.island, [])
            if not pts or s > pts[-1][1]:
                pts.append((r.proposal.generation, max(s, pts[-1][1] if pts else 0.0)))
    return curves


def elite_shares(run: RunData) -> dict[str, float]:
    """Who created the members of the islands' final populations (`initial`: the seed and its draws)."""
    return elite_share(credit(str(ind.get("origin", {}).get("mutator", ""))) for state in run.islands.values()
                       for ind in state.get("population", []))


def lineage(run: RunData, best: Record) -> list[Record]:
    """The best kernel's ancestors, from the seed (or the oldest one found) to it."""
    by_id = run.by_id()
    chain, seen = [best], {best.candidate.id}
    while chain[-1].proposal.parents:
        parent = by_id.get(chain[-1].proposal.parents[0])
        if parent is None or parent.candidate.id in seen:
            break
        chain.append(parent)
        seen.add(parent.candidate.id)
    return chain[::-1]


def _normalized(source: str) -> str:
    try:
        return ast.unparse(parse_module(source))
    except SyntaxError:
        return source


def diff(parent: Record, child: Record) -> tuple[str, bool]:
    """Unified diff of the two kernels as modules, each with its own params in PARAMS, and whether
    it compares normalized code: AST moves print the module anew (comments dropped, quotes changed),
    so when that diff is shorter it is the one shown."""
    a, b = source_with_params(parent.candidate), source_with_params(child.candidate)

    def udiff(x: str, y: str) -> list[str]:
        return list(difflib.unified_diff(x.splitlines(), y.splitlines(), fromfile=f"{parent.candidate.id} (parent)",
                                         tofile=child.candidate.id, lineterm="", n=2))

    raw, norm = udiff(a, b), udiff(_normalized(a), _normalized(b))
    def changed(lines: list[str]) -> int:
        return sum(1 for ln in lines if ln[:1] in "+-" and ln[:3] not in ("+++", "---"))

    if norm and changed(norm) < changed(raw):
        return "\n".join(norm), True
    return "\n".join(raw), False


@dataclass(frozen=True)
class Moment:
    """One entry of a run's timeline: a session starting or ending, or an infrastructure failure."""

    time: float  # epoch seconds
    elapsed_s: float  # on the campaign's clock
    what: str
    detail: str


def timeline(run: RunData) -> list[Moment]:
    """Sessions (started, resumed, stopped, or ended without a stop: killed), the cluster's changes (nodes
    lost, evaluators that joined) and infrastructure failures (evaluators replaced, islands restored,
    evaluations that met a worker killed from outside, a stalled machine or a lost node and ran again on
    a fresh one), in time order."""
    raw: list[tuple[float, str, str]] = []
    sessions = sorted(float(e["time"]) for e in run.events if e.get("kind") in SESSION_EVENTS and "time" in e)
    stops = [float(e["time"]) for e in run.events if e.get("kind") == "stop" and "time" in e]
    for e in run.events:
        kind, t = e.get("kind"), e.get("time")
        if t is None:
            continue
        if kind == "start":
            raw.append((t, "started", f"{len(e.get('evaluators') or [])} evaluator(s)"))
        elif kind == "resume":
            raw.append((t, "resumed", "; ".join(e.get("notes") or []) or "from its last checkpoint"))
        elif kind == "stop":
            raw.append((t, f"stopped ({e.get('status')})", short(str(e.get("reason", "")), 160)))
        elif kind == "evaluator_replaced":
            raw.append((t, "evaluator replaced", short(f"{e.get('dead')}: {e.get('why')}", 160)))
        elif kind == "node_lost":
            had = ", ".join(e.get("evaluators") or []) or "no evaluator"
            raw.append((t, "node lost", f"{str(e.get('node'))[:8]} (it had {had}); its work ran again elsewhere"))
        elif kind == "evaluator_joined":
            raw.append((t, "evaluator joined", f"{e.get('name')} on node {str(e.get('node'))[:8]} "
                                              f"({e.get('evaluators')} evaluator(s) now)"))
        elif kind == "evaluator_unavailable":
            raw.append((t, "evaluator unavailable", short(f"{e.get('name')}: {e.get('why')}", 160)))
        elif kind == "island_restored":
            origin = e.get("from_generation")
            where = f"from the checkpoint of generation {origin}" if origin is not None else "from scratch"
            raw.append((t, f"island {e.get('island')} restored", short(f"{where}: {e.get('error')}", 160)))
    stamps = sorted([r.time for r in run.records] + [float(e["time"]) for e in run.events if "time" in e])
    for a, b in zip(sessions, [*sessions[1:], None]):
        if b is None or any(a <= t < b for t in stops):
            continue
        last = max((t for t in stamps if a <= t < b), default=a)
        raw.append((last, "ended without stopping", "the driver was killed (or lost); the next session resumed "
                                                   "from the last checkpoint"))
    for r in run.records:
        for incident in r.evaluation.incidents:
            raw.append((r.time, "infrastructure failure in an evaluation",
                        short(f"{r.candidate.id[:12]}: {incident}; verdict {r.evaluation.status.value}", 160)))
    raw.sort(key=lambda m: m[0])
    clock = run.clock([t for t, _, _ in raw])
    return [Moment(t, c, what, detail) for (t, what, detail), c in zip(raw, clock)]


def best_record(trace: Trace) -> Record | None:
    return trace.steps[-1].record if trace.steps else trace.start


def per_mutator(run: RunData, trace: Trace) -> dict[str, dict[str, float]]:
    """From the history: full evaluations, correct ones and best-so-far gains of each mutator."""
    out: dict[str, dict[str, float]] = {}
    for r in run.records:
        if r.full:
            row = out.setdefault(credit(r.proposal.mutator), {"evaluations": 0, "correct": 0, "steps": 0, "gain": 0.0})
            row["evaluations"] += 1
            row["correct"] += int(r.evaluation.ok)
    total = sum(s.gain for s in trace.steps)
    for s in trace.steps:
        row = out.setdefault(s.mutator, {"evaluations": 0, "correct": 0, "steps": 0, "gain": 0.0})
        row["steps"] += 1
        row["gain"] += s.gain / total if total > 0 else 0.0
    return out


def short(text: str, n: int = 220) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def rows_of(records: Sequence[Record]) -> list[list[str]]:
    return [[r.candidate.id, credit(r.proposal.mutator), r.evaluation.level, short(r.evaluation.reason)]
            for r in records]
