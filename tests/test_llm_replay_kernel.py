"""Replay by kernel: campaigns that show the model other prompts still share one record."""

from __future__ import annotations

import json
import random
from pathlib import Path

from evo.contracts.candidate import Candidate
from evo.contracts.mutator_config import LLMConfig
from evo.contracts.native_task import NativeTask
from evo.contracts.records import Individual, Proposal
from mutators.base import MutationContext
from mutators.factory import build_mutator
from mutators.llm.prompt import build_messages, current_kernel, source_with_params
from tests.fakes.standin import fake_evaluate

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "configs" / "llm_records" / "softmax_standin.jsonl"
TASK = NativeTask(ROOT / "evo" / "tasks" / "softmax")


def scored(c: Candidate) -> Individual:
    return Individual(Proposal(c, "seed"), fake_evaluate(TASK.key)(c, "full"))


def ctx(hardware: str = "") -> MutationContext:
    return MutationContext(task=TASK, rng=random.Random(0), evaluate=fake_evaluate(TASK.key), elites=[],
                           recent_failures=[], seed=None, hardware=hardware)


def replay(tmp_path: Path):
    return build_mutator(LLMConfig(model="standin-softmax", mode="replay", replay_match="kernel",
                                   record_path=str(RECORD), api_key_env="EVO_TEST_UNSET_KEY"), run_dir=tmp_path, seed=0)


def test_the_prompt_shows_the_kernel_replay_matches_on():
    seed = Candidate.from_source(TASK.seed_source or "")
    msgs = build_messages(TASK, scored(seed), failures=["- wrong_output: something"], inspirations=[], hardware="h100",
                          cfg=LLMConfig())
    assert current_kernel(msgs).strip("\n") == source_with_params(seed).strip("\n")


def test_a_recorded_kernel_gets_its_recorded_replies_in_order_whatever_else_the_prompt_says(tmp_path):
    seed = Candidate.from_source(TASK.seed_source or "")
    recorded = [json.loads(x) for x in RECORD.read_text().splitlines()]
    for_seed = [r["reply"] for r in recorded if current_kernel(r["request"]["messages"]).strip("\n")
                == source_with_params(seed).strip("\n")]
    assert for_seed, "the shipped record holds replies for the seed kernel"
    m = replay(tmp_path)
    for i, reply in enumerate([*for_seed, for_seed[0]]):  # then round again
        (p,) = m.propose(scored(seed), ctx(hardware=f"GPU number {i}"))  # another prompt, the same kernel
        assert p.meta["replay_match"] == "kernel" and p.cost_usd > 0
        assert " ".join(reply.split())[:100] in p.note


def test_an_unrecorded_kernel_gets_a_reply_recorded_for_another_one_deterministically(tmp_path):
    other = Candidate.from_source(TASK.seed_source or "", {"BLOCK": 256, "num_warps": 2})
    a = [replay(tmp_path).propose(scored(other), ctx()) for _ in range(3)]
    b = [replay(tmp_path).propose(scored(other), ctx()) for _ in range(3)]
    first = [(p.candidate.id if p.candidate else None, p.error) for ps in a for p in ps]
    assert first == [(p.candidate.id if p.candidate else None, p.error) for ps in b for p in ps]
    assert all(p.meta.get("replay_match") == "other kernel" and "[replayed from another kernel]" in p.note
               for ps in a for p in ps)
