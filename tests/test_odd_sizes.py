"""Verification at sizes between the check and bench sizes: a kernel right at the small check sizes and
at a round bench size, and wrong where the grid has several programs along an axis and a partial last
one, is caught before it counts."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench.search.standin_replies import matmul as mm
from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from evo.contracts.odd_sizes import free_dimensions, odd_size
from evo.contracts.task import Case
from evo.contracts.verdict import FULL, VERIFIED, Status
from fitness.evaluate import Evaluator
from mutators.llm.parse import apply_reply

CHECK = [{"M": 1, "N": 1, "K": 1, "mode": 0}, {"M": 31, "N": 67, "K": 129, "mode": 0}]


def test_only_the_dimensions_a_task_lets_vary_move_and_each_lands_between_the_check_and_bench_sizes():
    bench = {"M": 4096, "N": 100, "K": 129, "mode": 0}
    assert free_dimensions([*CHECK, bench]) == {"M", "N", "K"}  # `mode` is the same everywhere
    sizes = [odd_size(CHECK, bench, random.Random(s)) for s in range(200)]
    assert all(s is not None for s in sizes)
    for s in sizes:
        assert s is not None and s["mode"] == 0
        assert 31 < s["M"] <= 4096  # past the largest check value, up to the bench value itself
        assert 67 < s["N"] <= 100
        assert 1 <= s["K"] <= 129  # K's bench value is no larger than a check's: drawn within their range
    assert len({s["M"] for s in sizes if s}) > 50 and all(s["M"] % 2 for s in sizes if s and s["M"] < 4096)
    assert max(s["M"] for s in sizes if s) > 1024 and len({s["N"] for s in sizes if s}) > 5  # nothing pinned
    assert len({s["K"] for s in sizes if s}) > 20
    assert odd_size(CHECK, {"M": 31, "N": 67, "K": 129, "mode": 0}, random.Random(0)) is None


def test_the_draw_is_the_secrets_the_same_for_one_secret_and_never_a_check_or_bench_size():
    task = NativeTask(TASK_LIBRARY / "matmul")
    task.use_workload("llama3-8b-prefill")
    a, b = task.odd_cases(1), task.odd_cases(2)
    assert a == task.odd_cases(1) and a != b
    assert len(a) == len(task.bench_sizes)
    known = [*task.check_sizes, *task.bench_sizes]
    assert all(c.size not in known for c in [*a, *b])


@pytest.fixture(scope="module")
def matmul() -> NativeTask:
    """Matmul benched at a round size with 8 rows of 128-row tiles: a grouping of 8 rows is exact there."""
    task = NativeTask(TASK_LIBRARY / "matmul")
    task.bench_sizes = [{"M": 1024, "N": 1024, "K": 256}]
    return task


def _reply(name: str) -> Candidate:
    seed = (Path(TASK_LIBRARY) / "matmul" / "seed.py").read_text()
    source, _ = apply_reply(seed, getattr(mm, name))
    return Candidate.from_source(source)


def test_a_grouping_wrong_only_past_one_tile_and_off_the_bench_size_fails_at_the_size_between(matmul, shared_workers):
    """GROUP_COUNT assumes every group of output rows is full: right when the grid has one row of
    tiles (every check size, with 128-row tiles) and when the rows divide into groups (1024 = 8 x 128),
    wrong at 129..1023 rows with more than one column of tiles, where tiles are never written. The check
    sizes alone cannot see it, nor can the bench size; the size between them does (and so, now, does the
    check's crossing of its ``tl.cdiv(N, BN)``, which no check size takes past 1)."""
    settings = EvaluationConfig(timeout_s=120, verify_timeout_s=300, latency=LatencyMode.OFF)
    with Evaluator(matmul, settings, device="cpu", secret=7, **shared_workers(settings)) as ev:
        wrong = _reply("GROUP_COUNT").with_params(BN=128)
        [bench] = matmul.bench_cases(7)
        assert ev._bench_check(wrong, bench).ok  # the bench size cannot see it
        [odd] = matmul.odd_cases(7)
        assert 128 < odd.size["M"] <= 1024 and 128 < odd.size["N"] <= 1024
        between = ev._bench_check(wrong, odd)
        assert between.status is Status.WRONG_OUTPUT and "never written" in between.reason, between.reason
        crossed = ev.evaluate(wrong, level=FULL)
        assert crossed.status is Status.WRONG_OUTPUT and "which the check chose to reach" in crossed.reason \
            and "never written" in crossed.reason, crossed.reason

        right = ev.evaluate(_reply("GROUPED").with_params(BN=128), level=VERIFIED)
        assert right.ok, right.reason
        assert "verified in full at 1 bench size(s) and 1 size(s) between the check and bench sizes" in right.reason


def test_a_size_the_tasks_reference_refuses_is_skipped_and_named_not_failed(matmul, monkeypatch, shared_workers):
    real = matmul.case_data
    odd = {c.size_json for c in matmul.odd_cases(3)}

    def reference_limited_to_known_sizes(case: Case):  # a task whose reference accepts only some sizes
        if case.size_json in odd:
            raise ValueError("unsupported size")
        return real(case)

    monkeypatch.setattr(matmul, "case_data", reference_limited_to_known_sizes)
    settings = EvaluationConfig(timeout_s=120, verify_timeout_s=300, latency=LatencyMode.OFF)
    with Evaluator(matmul, settings, device="cpu", secret=3, **shared_workers(settings)) as ev:
        verdict = ev.evaluate(_reply("GROUPED"), level=VERIFIED)
    assert verdict.ok, verdict.reason
    assert "the task's reference does not run at" in verdict.reason and next(iter(odd)) in verdict.reason
