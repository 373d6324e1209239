"""LLM rewrites: an OpenAI-compatible model sees the reference, the contract, the parent with its
performance and bottleneck, its own last attempts (diffs and outcomes), other mutators' recent
failures and kernels of other structures (`mutators.llm.prompt`), and answers with a new module or edits.

Each `propose` sends `samples_per_proposal` identical requests (concurrently, capped by the
client's semaphore) and returns one proposal per reply. A reply that cannot be applied (no code,
a SEARCH text not found, a module that does not parse) is a failed proposal,
``Proposal(candidate=None, error=...)``, and its reason goes into the next prompt, as does every
observed child's outcome (improved, slower, or which check failed) with its diff. Once the
dollar budget is spent, `exhausted()` is true and `propose` returns nothing.
"""

from __future__ import annotations

import re
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from evo.contracts.candidate import Candidate, CandidateError
from evo.contracts.mutator_config import LLMConfig
from evo.contracts.records import Individual, Proposal
from evo.contracts.verdict import VERIFIED, Evaluation
from mutators.base import MutationContext, Mutator
from mutators.llm.attempts import Attempt, Pending, attempt_of, clip
from mutators.llm.client import BudgetSpent, Completion, LLMClient, LLMError
from mutators.llm.parse import ReplyError, apply_reply
from mutators.llm.prompt import build_messages, failure_text, source_with_params

__all__ = ["LLMMutator"]

NO_REPLY = "llm: no reply"  # the note of a proposal whose LLM request failed
_CODE_START = re.compile(r"```|<<<<<<< SEARCH")
_MAX_PENDING = 256  # proposals awaiting a verdict (an island observes each one in the same generation)


def explanation(reply: str) -> str:
    """What the model said it changed: the reply's prose before its code, on one line."""
    prose = _CODE_START.split(reply, maxsplit=1)[0]
    return clip(" ".join(prose.split()), 240)


class LLMMutator(Mutator):
    """Rewrites by a language model through `LLMClient`."""

    kind = "llm"

    def __init__(self, cfg: LLMConfig, *, run_dir: Path) -> None:
        """`run_dir` holds the record file unless the config names one (`record_path`)."""
        record = Path(cfg.record_path) if cfg.record_path else run_dir / "llm_record.jsonl"
        self.client = LLMClient(cfg, record_path=record if cfg.mode != "live" else None)
        self.cfg = cfg
        self.samples = cfg.samples_per_proposal
        self.name = cfg.name or self.kind
        self._attempts: deque[Attempt] = deque(maxlen=max(cfg.max_attempts_in_prompt, 1))
        self._pending: dict[str, Pending] = {}  # child id -> what its attempt will say once observed
        self._mine: deque[str] = deque(maxlen=_MAX_PENDING)  # ids of this mutator's recent children
        self.counts = {"proposals": 0, "unusable_replies": 0, "request_errors": 0, "observed_ok": 0,
                       "observed_failed": 0}

    def exhausted(self) -> bool:
        """Spent its budget, or paused after repeated request failures (the island's other mutators go on)."""
        return self.client.budget_spent or self.client.paused

    def _failure_lines(self, ctx: MutationContext) -> list[str]:
        """The island's recent failures by whom, but for this mutator's own children failing their full check
        (those are attempts, with their diffs); one of them failing verification later is shown here."""
        mine = set(self._mine)
        lines = [failure_text(f.candidate, f.evaluation, "", self.cfg).replace("- ", f"- ({f.proposal.mutator}) ", 1)
                 for f in ctx.recent_failures if f.id not in mine or f.evaluation.level == VERIFIED]
        lines = list(dict.fromkeys(lines))
        return lines[len(lines) - self.cfg.max_failures_in_prompt:] if self.cfg.max_failures_in_prompt else []

    def propose(self, parent: Individual, ctx: MutationContext) -> list[Proposal]:
        if self.exhausted():
            return []
        messages = build_messages(ctx.task, parent, failures=self._failure_lines(ctx), inspirations=list(ctx.elites),
                                  hardware=ctx.hardware, cfg=self.cfg, attempts=list(self._attempts),
                                  population=list(ctx.population))
        tickets = [self.client.reserve(messages) for _ in range(self.samples)]  # fixes replay order
        with ThreadPoolExecutor(max_workers=self.samples) as pool:
            outcomes = list(pool.map(lambda t: self._ask(messages, t), tickets))
        shown = source_with_params(parent.candidate)
        out = [self._proposal(parent, shown, o) for o in outcomes if not isinstance(o, BudgetSpent)]
        self.counts["proposals"] += len(out)
        return out

    def _ask(self, messages: list[dict[str, str]], ticket: tuple[str, int]) -> Completion | LLMError:
        try:
            return self.client.complete(messages, ticket)
        except LLMError as e:
            return e

    def _proposal(self, parent: Individual, shown: str, outcome: Completion | LLMError) -> Proposal:
        if isinstance(outcome, LLMError):
            self.counts["request_errors"] += 1
            return Proposal(candidate=None, mutator=self.name, parents=(parent.candidate.id,),
                            error=f"LLM request failed: {outcome}", note=NO_REPLY)
        meta = {"request": outcome.request_hash[:16], "prompt_tokens": outcome.prompt_tokens,
                "completion_tokens": outcome.completion_tokens, "replayed": outcome.replayed,
                "replay_match": outcome.replay_match}
        summary = " ".join(outcome.text.strip().split())[:120]
        said = explanation(outcome.text)
        if outcome.replay_match == "other kernel":
            summary = f"[replayed from another kernel] {summary}"
        try:
            source, how = apply_reply(shown, outcome.text)
            made = Candidate.from_source(source)
            child: Candidate | None = made
            error, note = "", f"llm {self.client.model} ({how}): {summary}"
            self._pending[made.id] = Pending(shown, parent.latency_ms, said)
            self._mine.append(made.id)
            while len(self._pending) > _MAX_PENDING:
                self._pending.pop(next(iter(self._pending)))
        except (ReplyError, CandidateError) as e:
            self.counts["unusable_replies"] += 1
            self._attempts.append(Attempt(said, failure_text(None, None, str(e), self.cfg)[2:]))
            child, error, note = None, str(e), f"llm {self.client.model}: unusable reply: {summary}"
        return Proposal(candidate=child, mutator=self.name, parents=(parent.candidate.id,), note=note, error=error,
                        cost_s=outcome.seconds, cost_usd=outcome.cost_usd, meta=meta)

    def observe(self, proposal: Proposal, evaluation: Evaluation) -> None:
        if proposal.candidate is None:
            return
        if evaluation.ok:
            self.counts["observed_ok"] += 1
        else:
            self.counts["observed_failed"] += 1
        child = proposal.candidate
        pending = self._pending.pop(child.id, None) or Pending("", None, proposal.note)
        self._attempts.append(attempt_of(pending, child, source_with_params(child), evaluation,
                                         diff_chars=self.cfg.diff_chars, reason_chars=self.cfg.reason_chars))

    def stats(self) -> dict[str, Any]:
        return {**self.counts, **self.client.stats()}

    def state(self) -> dict[str, Any]:
        # Occurrence counters too: after a resume, replay must answer the next identical prompt with
        # the next recorded reply, not the first one again.
        c = self.client
        return {"counts": dict(self.counts), "attempts": [a.to_dict() for a in self._attempts],
                "mine": list(self._mine), "spent_usd": c.spent_usd,
                "tokens": [c.prompt_tokens, c.completion_tokens], "requests": [c.requests, c.retried, c.failed],
                "occurrences": dict(c.occurrences), "replay_misses": c.replay_misses, "pauses": c.paused_total}

    def load_state(self, state: dict[str, Any]) -> None:
        self.counts.update({k: int(v) for k, v in dict(state.get("counts", {})).items() if k in self.counts})
        self._attempts.extend(Attempt.from_dict(dict(x)) for x in state.get("attempts", []))
        self._mine.extend(str(x) for x in state.get("mine", []))
        c = self.client
        c.spent_usd = float(state.get("spent_usd", 0.0))
        c.prompt_tokens, c.completion_tokens = (int(x) for x in state.get("tokens", [0, 0]))
        c.requests, c.retried, c.failed = (int(x) for x in state.get("requests", [0, 0, 0]))
        c.occurrences.update({str(k): int(v) for k, v in dict(state.get("occurrences", {})).items()})
        c.replay_misses, c.paused_total = int(state.get("replay_misses", 0)), int(state.get("pauses", 0))
