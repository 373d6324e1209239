"""The hand-written stand-in answers: each does to the seed what it was written to do (the good ones pass
the real checker, each mistake is caught by the check it was written for), and the shipped records
hold them under the model name the ablations replay."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from bench.search.record_standin_llm import RECORDS, Responder, model_name
from bench.search.standin_replies import REPLIES_BY_TASK
from bench.search.standin_replies import attention as at
from bench.search.standin_replies import attention_causal as atc
from bench.search.standin_replies import layernorm as ln
from bench.search.standin_replies import matmul as mm
from bench.search.standin_replies import mla_decode as mla
from bench.search.standin_replies import reduction as red
from bench.search.standin_replies import vector_add as va
from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from evo.contracts.verdict import Status
from fitness.evaluate import Evaluator
from mutators.llm.parse import ReplyError, apply_reply
from mutators.llm.prompt import current_kernel

# what the real checker says of each answer applied to the task's seed, and the words that say why
OUTCOMES = {
    "layernorm": {
        "ROW_IN_REGISTERS": (Status.OK, ""),
        # the sum and the sum of squares in one pass: a +inf alone in a row comes out inf, torch gives NaN
        "FUSED_STATISTICS": (Status.WRONG_OUTPUT, "(inf_nan)"),
        "RSQRT": (Status.OK, ""),
        "BIGGER_BLOCKS": (Status.OK, ""),
        "ONE_PASS_VARIANCE": (Status.WRONG_OUTPUT, "(offset)"),  # the rows that exist to catch it
        "BY_BLOCK": (Status.WRONG_OUTPUT, "outside tolerance"),
        "UNMASKED": (Status.UNSAFE, "stores to y_ptr"),
    },
    # the structural answers (no scores buffer) pass, and each mistake of an online softmax is caught
    # where it shows (the max growing along a row; the wide rows that overflow exp)
    "attention": {
        "ONLINE_SOFTMAX": (Status.OK, ""),
        "TWO_PASS": (Status.OK, ""),
        "INTERIOR_UNMASKED": (Status.OK, ""),
        "BIGGER_TILES": (Status.OK, ""),
        "NO_RESCALE": (Status.WRONG_OUTPUT, "outside tolerance"),
        "NO_MAX": (Status.WRONG_OUTPUT, "(wide)"),
        "UNMASKED": (Status.UNSAFE, "stores to address"),
    },
    # both structures pass (a block of heads per program; the cache split with a log-sum-exp combine), and
    # each mistake is caught by the rows or the sequences written to catch it
    "mla_decode": {
        "HEAD_BLOCK": (Status.OK, ""),
        "SPLIT_KV": (Status.OK, ""),
        "BIGGER_TILES": (Status.OK, ""),
        "NO_RESCALE": (Status.WRONG_OUTPUT, "outside tolerance"),
        "STALE_ROWS": (Status.WRONG_OUTPUT, "outside tolerance"),
        "UNWEIGHTED_COMBINE": (Status.WRONG_OUTPUT, "outside tolerance"),
    },
    # both structures stop at the diagonal (one masks every block, one only the blocks the diagonal
    # crosses); masking the diagonal leaves row 0 with no key, and leaving the diagonal block unmasked
    # lets queries see later keys
    "attention_causal": {
        "CAUSAL_ONLINE": (Status.OK, ""),
        "DIAGONAL_SPLIT": (Status.OK, ""),
        "BIGGER_TILES": (Status.OK, ""),
        "NO_RESCALE": (Status.WRONG_OUTPUT, "outside tolerance"),
        "STRICT_MASK": (Status.WRONG_OUTPUT, "got nan"),
        "DIAGONAL_UNMASKED": (Status.WRONG_OUTPUT, "outside tolerance"),
    },
    # a sum split across programs (atomic adds into the zeroed output, or two stages); the split's
    # mistakes are caught by the poisoned output, the race between plain stores, and the unmasked loads
    # past the input
    "reduction": {
        "SPLIT_ATOMIC": (Status.OK, ""),
        "TWO_STAGE": (Status.OK, ""),
        "BIGGER_BLOCK": (Status.OK, ""),
        "NOT_ZEROED": (Status.UNSAFE, "which nothing in this call of launch has written yet"),  # added to unset
        "RACING_STORES": (Status.UNSAFE, "race in kernel _sum_split"),
        "UNMASKED": (Status.UNSAFE, "loads address"),
    },
    # grouped tiles pass; the unmasked K loads are caught by the bounds sanitizer. A float16 accumulator passes
    # the check sizes (at K <= 129 and 64-deep tiles, three additions per element do not outgrow the
    # tolerance) and is caught by the bench-shaped case. GROUP_COUNT's grouping is wrong only with more than
    # one row and column of tiles and a partial group: its `tl.cdiv(N, BN)` is 1 at every check size, and the
    # check crosses it at N 257, where the tiles it never writes show (it passed the check before, and only
    # the verification of a best caught it, at a size between the check and bench sizes: tests/test_odd_sizes.py)
    "matmul": {
        "GROUPED": (Status.OK, ""),
        "BIGGER_TILES": (Status.OK, ""),
        # float16 partial sums lose too much over the bench's K of 4096: its bench-shaped case (M 1, N 33, K 4096)
        "FP16_ACCUMULATOR": (Status.WRONG_OUTPUT, '"K":4096'),
        "K_UNMASKED": (Status.UNSAFE, "loads address"),
        "GROUP_COUNT": (Status.WRONG_OUTPUT, '"N":257'),
    },
    # the control task: every correct answer restructures a memory-bound add (none can beat the sweep);
    # a float32 add done in half precision loses bits beyond the tolerance, an unmasked tail leaves the
    # tensors at the check sizes that are not a multiple of the block
    "vector_add": {
        "GRID_STRIDE": (Status.OK, ""),
        "UNROLLED": (Status.OK, ""),
        "WIDE_BLOCKS": (Status.OK, ""),
        "HALF_PRECISION": (Status.WRONG_OUTPUT, "outside tolerance"),
        "UNMASKED": (Status.UNSAFE, "address"),
    },
}
UNUSABLE = {"NO_CODE": "neither", "WRONG_EDIT": "does not match"}
MODULES = {"layernorm": ln, "attention": at, "mla_decode": mla, "attention_causal": atc,
           "reduction": red, "matmul": mm, "vector_add": va}
DTYPES = {"layernorm": "float32", "attention": "float16", "mla_decode": "float16", "attention_causal": "float16",
          "reduction": "float32", "matmul": "float16", "vector_add": "float32"}
CASES = [(task, name) for task, outcomes in OUTCOMES.items() for name in sorted(outcomes)]


@pytest.fixture(scope="module")
def evaluators() -> Iterator[dict[str, Evaluator]]:
    config = EvaluationConfig(timeout_s=120, latency=LatencyMode.OFF)
    with ExitStack() as stack:
        yield {task: stack.enter_context(Evaluator(NativeTask(TASK_LIBRARY / task, dtype=dtype), config, device="cpu"))
               for task, dtype in DTYPES.items()}


@pytest.mark.parametrize("task", sorted(OUTCOMES))
def test_every_answer_has_an_expected_outcome(task):
    module = MODULES[task]
    assert {getattr(module, name) for name in (*OUTCOMES[task], *UNUSABLE)} == {text for _, text in module.REPLIES}


@pytest.mark.parametrize(("task", "name"), CASES)
def test_an_answer_applied_to_the_seed_meets_the_checker_as_written(evaluators, task, name):
    status, why = OUTCOMES[task][name]
    evaluator = evaluators[task]
    source, _ = apply_reply(evaluator.task.seed_source or "", getattr(MODULES[task], name))
    result = evaluator.evaluate(Candidate.from_source(source))
    assert result.status is status, result.reason
    assert why in result.reason
    if task.startswith("attention") and status is Status.OK and name != "BIGGER_TILES":
        assert "scores" not in source.split("def launch")[1]  # the structural answers drop the scores buffer


@pytest.mark.parametrize(("task", "name"), [(t, n) for t in sorted(OUTCOMES) for n in sorted(UNUSABLE)])
def test_an_answer_without_a_usable_kernel_is_refused_with_its_reason(task, name):
    seed = NativeTask(TASK_LIBRARY / task).seed_source or ""
    with pytest.raises(ReplyError, match=UNUSABLE[name]):
        apply_reply(seed, getattr(MODULES[task], name))


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
