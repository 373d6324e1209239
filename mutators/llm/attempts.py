"""What the LLM mutator remembers of its own attempts (what it changed, as a diff against the parent, and
what came of it), and which kernels it shows as inspirations (one per structure). Pure, no I/O."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from evo.contracts.candidate import Candidate
from evo.contracts.records import Individual
from evo.contracts.verdict import Evaluation

_SAME = 0.005  # latency ratios within this of 1 count as unchanged


def clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 20] + "\n... (truncated)"


def _fold_removals(lines: list[str]) -> list[str]:
    """Runs of more than 3 removed lines as one line saying how many: what was written matters more."""
    out: list[str] = []
    run: list[str] = []
    for line in [*lines, ""]:
        if line.startswith("-") and not line.startswith("---"):
            run.append(line)
            continue
        out += run if len(run) <= 3 else [run[0], f"-... ({len(run) - 1} more lines removed)"]
        run = []
        out.append(line)
    return out[:-1]


def unified_diff(before: str, after: str, max_chars: int, *, names: tuple[str, str] = ("parent", "child")) -> str:
    """A unified diff (2 lines of context) of two sources; past `max_chars`, long runs of removed lines are
    folded, then the diff is clipped."""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), *names, n=2, lineterm=""))
    text = "\n".join(lines)
    return clip(text if len(text) <= max_chars else "\n".join(_fold_removals(lines)), max_chars)


def outcome_text(parent_ms: float | None, e: Evaluation, reason_chars: int) -> str:
    """Improved / slower / unchanged with both latencies, or which check failed and where."""
    if not e.ok:
        parts = [f"failed, {e.status.value}: {clip(e.reason, reason_chars)}"]
        if e.worst_case:
            parts.append(f"worst case: {e.worst_case}")
        if math.isfinite(e.max_error_ratio) and e.max_error_ratio > 0:
            parts.append(f"max error / tolerance {e.max_error_ratio:.3g}, {e.mismatch_fraction:.1%} of elements wrong")
        return "; ".join(parts)
    if e.latency_ms is None:
        return "correct; latency not measured"
    if parent_ms is None or parent_ms <= 0 or e.latency_ms <= 0:
        return f"correct, {e.latency_ms:.4g} ms"
    speedup = parent_ms / e.latency_ms
    word = "improved" if speedup > 1 + _SAME else "slower" if speedup < 1 - _SAME else "no change"
    return f"{word}: {parent_ms:.4g} -> {e.latency_ms:.4g} ms ({speedup:.3g}x)"


@dataclass(frozen=True)
class Attempt:
    """One of the mutator's earlier proposals: what the model said, the outcome, the diff against its parent."""

    summary: str
    outcome: str
    diff: str = ""

    def text(self, n: int) -> str:
        head = f"{n}. {self.summary or '(no explanation)'}\n   outcome: {self.outcome}"
        return head + (f"\n```diff\n{self.diff}\n```" if self.diff else "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Attempt:
        return cls(str(d.get("summary", "")), str(d.get("outcome", "")), str(d.get("diff", "")))


@dataclass(frozen=True)
class Pending:
    """A proposal waiting for its verdict: what its attempt will say once observed."""

    parent_source: str
    parent_ms: float | None
    summary: str


def attempt_of(pending: Pending, child: Candidate, shown: str, e: Evaluation, *, diff_chars: int,
               reason_chars: int) -> Attempt:
    """The attempt record of an observed child (`shown`: its source as the prompt would show it); no diff
    when its parent is unknown (a second sample that wrote the same child)."""
    diff = unified_diff(pending.parent_source, shown, diff_chars) if pending.parent_source else ""
    return Attempt(pending.summary, outcome_text(pending.parent_ms, e, reason_chars), diff)


def diverse(parent: Individual, pools: Iterable[Iterable[Individual]], n: int) -> tuple[list[Individual],
                                                                                           list[Individual]]:
    """Up to `n` correct kernels, each of a structure (source) unlike the parent's and each other's, fastest
    first; and, apart, up to `n` of the parent's structure with other params (tuning evidence)."""
    seen: dict[str, Individual] = {}
    for pool in pools:
        for ind in pool:
            if ind.evaluation.ok and ind.id != parent.id:
                seen.setdefault(ind.id, ind)
    ranked = sorted(seen.values(), key=lambda i: (i.latency_ms is None, i.latency_ms or 0.0))
    others: dict[str, Individual] = {}
    same: list[Individual] = []
    for ind in ranked:
        if ind.candidate.structure == parent.candidate.structure:
            same.append(ind)
        else:
            others.setdefault(ind.candidate.structure, ind)
    return list(others.values())[:n], same[:n]


def params_line(ind: Individual, parent: Individual) -> str:
    """The params where `ind` differs from `parent`, and its latency."""
    changed = {k: v for k, v in ind.candidate.params.items() if parent.candidate.params.get(k) != v}
    lat = f"{ind.latency_ms:.4g} ms" if ind.latency_ms is not None else "latency not measured"
    return f"- {changed or ind.candidate.params}: {lat}"


def recent(attempts: Sequence[Attempt], n: int) -> list[Attempt]:
    return list(attempts)[max(len(attempts) - n, 0):] if n else []
