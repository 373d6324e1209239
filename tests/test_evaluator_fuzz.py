"""The evaluator never dies: random mutations of real candidates (token and AST edits, huge literals,
deep nesting, odd params and SPACE values of every JSON type) go through lint and the full
evaluation path, and every case ends in a verdict, within its timeout."""

from __future__ import annotations

import ast
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evo.contracts.candidate import Candidate, CandidateError
from evo.contracts.config import EvaluationConfig
from evo.contracts.native_task import NativeTask
from evo.contracts.verdict import Status
from fitness.evaluate import Evaluator

from .conftest import CANDIDATES, ROOT

BASES = [(ROOT / "evo/tasks/softmax/known_better.py").read_text(), (ROOT / "evo/tasks/softmax/seed.py").read_text(),
         (CANDIDATES / "gaming/one_pass.py").read_text()]
TIMEOUT_S = 20.0

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


def _lines_edit(source: str, data: st.DataObject) -> str:
    lines = source.split("\n")
    i = data.draw(st.integers(0, len(lines) - 1))
    kind = data.draw(st.sampled_from(["delete", "duplicate", "swap", "garbage", "indent"]))
    if kind == "delete":
        del lines[i]
    elif kind == "duplicate":
        lines.insert(i, lines[i])
    elif kind == "swap":
        j = data.draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == "garbage":
        lines[i] = lines[i][: len(lines[i]) // 2] + data.draw(st.text(max_size=6))
    else:
        lines[i] = "    " + lines[i]
    return "\n".join(lines)


def _ast_edit(source: str, data: st.DataObject) -> str:
    tree = ast.parse(source)
    numbers = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, (int, float))
               and not isinstance(n.value, bool)]
    ops = [n for n in ast.walk(tree) if isinstance(n, ast.BinOp)]
    kind = data.draw(st.sampled_from(["huge", "negate", "op", "nest"]))
    if kind in ("huge", "negate") and numbers:
        node = data.draw(st.sampled_from(numbers))
        value = node.value
        assert isinstance(value, (int, float))
        node.value = 10**40 if kind == "huge" else -value - 1
    elif kind == "op" and ops:
        node_op = data.draw(st.sampled_from(ops))
        node_op.op = data.draw(st.sampled_from([ast.Add(), ast.Sub(), ast.Mult(), ast.FloorDiv(), ast.Mod(),
                                                ast.Pow(), ast.LShift(), ast.BitXor()]))
    else:
        depth = data.draw(st.integers(50, 3000))
        return source + "\nDEEP = " + "(" * depth + "1" + ")" * depth + "\n"
    return ast.unparse(tree)


def _params_edit(source: str, data: st.DataObject) -> tuple[str, dict[str, object] | None]:
    key = data.draw(st.sampled_from(["MAX_BLOCK", "num_warps", "BLOCK", "num_stages", "junk"]))
    value = data.draw(json_values)
    if data.draw(st.booleans()):
        return source, {key: value}  # what a mutator or --params may hand over
    return source + f"\nSPACE = {{{key!r}: {value!r}}}\n", None


@pytest.fixture(scope="module")
def evaluator() -> Iterator[Evaluator]:
    task = NativeTask(ROOT / "evo" / "tasks" / "softmax")
    task.check_sizes = [{"rows": 3, "cols": 17}, {"rows": 2, "cols": 131}]
    task.bench_sizes = [{"rows": 16, "cols": 1024}]
    with Evaluator(task, EvaluationConfig(timeout_s=TIMEOUT_S, latency_timeout_s=TIMEOUT_S,
                                          verify_timeout_s=TIMEOUT_S), device="cpu", secret=5) as ev:
        yield ev


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_mutated_candidate_gets_a_verdict_in_time(evaluator: Evaluator, data: st.DataObject):
    source = data.draw(st.sampled_from(BASES))
    how = data.draw(st.sampled_from(["lines", "ast", "params"]))
    params = None
    if how == "lines":
        source = _lines_edit(source, data)
    elif how == "ast":
        source = _ast_edit(source, data)
    else:
        source, params = _params_edit(source, data)
    try:
        candidate = Candidate.from_source(source, params)  # type: ignore[arg-type]
    except CandidateError:
        return  # an unreadable PARAMS: refused before any evaluation, with a message
    start = time.monotonic()
    verdict = evaluator.evaluate(candidate)
    took = time.monotonic() - start
    assert isinstance(verdict.status, Status)
    assert verdict.ok or verdict.reason, "a rejection says why"
    # each stage has its own timeout; a verdict never takes longer than all of them together
    assert took < 6 * TIMEOUT_S + 60, (took, verdict.status, verdict.reason)
