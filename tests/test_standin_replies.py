"""The hand-written stand-in answers: each does to the seed what it was written to do (the good ones pass
the real checker, each mistake is caught by the check it was written for), and the shipped records
hold them under the model name the ablations replay."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.record_standin_llm import RECORDS, Responder, model_name
from bench.standin_replies import REPLIES_BY_TASK
from bench.standin_replies import layernorm as ln
from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from evo.contracts.verdict import Status
from fitness.evaluate import Evaluator
from mutators.llm_parse import ReplyError, apply_reply
from mutators.llm_prompt import current_kernel

# what the real checker says of each layer norm answer applied to the seed, and the words that say why
LAYERNORM_OUTCOMES = {
    "ROW_IN_REGISTERS": (Status.OK, ""),
    "FUSED_STATISTICS": (Status.OK, ""),
    "RSQRT": (Status.OK, ""),
    "BIGGER_BLOCKS": (Status.OK, ""),
    "ONE_PASS_VARIANCE": (Status.WRONG_OUTPUT, "(offset)"),  # the rows that exist to catch it
    "BY_BLOCK": (Status.WRONG_OUTPUT, "outside tolerance"),
    "UNMASKED": (Status.UNSAFE, "stores to y_ptr"),
}
LAYERNORM_UNUSABLE = {"NO_CODE": "neither", "WRONG_EDIT": "does not match"}


@pytest.fixture(scope="module")
def evaluator() -> Iterator[Evaluator]:
    task = NativeTask(TASK_LIBRARY / "layernorm", dtype="float32")
    with Evaluator(task, EvaluationConfig(timeout_s=120, latency=LatencyMode.OFF), device="cpu") as ev:
        yield ev


def test_every_layernorm_answer_has_an_expected_outcome():
    named = {name for name in (*LAYERNORM_OUTCOMES, *LAYERNORM_UNUSABLE)}
    assert {getattr(ln, name) for name in named} == {text for _, text in ln.REPLIES}


@pytest.mark.parametrize("name", sorted(LAYERNORM_OUTCOMES))
def test_a_layernorm_answer_applied_to_the_seed_meets_the_checker_as_written(evaluator, name):
    status, why = LAYERNORM_OUTCOMES[name]
    source, _ = apply_reply(evaluator.task.seed_source or "", getattr(ln, name))
    result = evaluator.evaluate(Candidate.from_source(source))
    assert result.status is status, result.reason
    assert why in result.reason


@pytest.mark.parametrize("name", sorted(LAYERNORM_UNUSABLE))
def test_a_layernorm_answer_without_a_usable_kernel_is_refused_with_its_reason(name):
    seed = NativeTask(TASK_LIBRARY / "layernorm").seed_source or ""
    with pytest.raises(ReplyError, match=LAYERNORM_UNUSABLE[name]):
        apply_reply(seed, getattr(ln, name))


def test_the_responder_answers_from_its_task_deterministically_by_kernel_and_visit():
    def body(kernel: str) -> dict[str, object]:
        return {"messages": [{"role": "user", "content": f"## The current kernel\n```python\n{kernel}\n```"}]}

    assert current_kernel(body("k")["messages"]) == "k"  # type: ignore[arg-type]
    texts = {text for _, text in ln.REPLIES}
    a, b = Responder(ln.REPLIES), Responder(ln.REPLIES)
    first = [a(body(f"kernel {i}")).text for i in range(20)]
    assert first == [b(body(f"kernel {i}")).text for i in range(20)]
    assert set(first) <= texts and len(set(first)) > 3
    again = [a(body("kernel 0")).text for _ in range(12)]  # the same kernel shown again: further draws
    assert len(set(again)) > 1


@pytest.mark.parametrize("task", sorted(REPLIES_BY_TASK))
def test_the_shipped_record_holds_the_tasks_answers_under_its_model_name(task):
    lines = [json.loads(x) for x in (RECORDS / f"{task}_standin.jsonl").read_text().splitlines()]
    texts = {text for _, text in REPLIES_BY_TASK[task]}
    assert len(lines) >= 20
    assert all(r["request"]["model"] == model_name(task) for r in lines)
    assert all(r["reply"] in texts for r in lines)
    seed = (Path(TASK_LIBRARY) / task / "seed.py").read_text()
    shown = [current_kernel(r["request"]["messages"]) for r in lines]
    assert any("def launch" in k and k.split("PARAMS")[0].strip() == seed.split("PARAMS")[0].strip() for k in shown)
