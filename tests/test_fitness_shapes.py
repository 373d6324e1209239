"""Fitness over several bench sizes: weights from the task or the config, the weighted geometric mean
of per-size latencies, every size verified (a kernel wrong at one weighted size fails), per-size
figures in the verdict."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode, SizesConfig, TaskConfig
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from evo.contracts.task import TaskError
from evo.contracts.task_loader import build_task
from evo.contracts.verdict import Evaluation, LatencySource, Status
from fitness.evaluate import Evaluator
from fitness.latency.result import LatencyResult
from fitness.latency.shapes import combine, geomean

from .conftest import ROOT, SharedWorkers

A, B = {"rows": 64, "cols": 1024}, {"rows": 16, "cols": 4096}
ONE_PASS = (ROOT / "tests" / "candidates" / "softmax" / "one_pass.py").read_text()
# right while a row fits one block of at most 2048 columns; wider rows are left half unwritten
CAPPED = ONE_PASS.replace("BLOCK=triton.next_power_of_2(cols)", "BLOCK=min(triton.next_power_of_2(cols), 2048)")


def ok(ms: float, seed_x: float, fraction: float = 0.5) -> LatencyResult:
    return LatencyResult(latency_ms=ms, source=LatencySource.MODEL, speedups={"seed": seed_x},
                         roofline_fraction=fraction, detail={"launches": [{"bound": "dram"}]}, gpu="h100")


def test_combine_is_the_weighted_geometric_mean_of_latency_speedups_and_fraction():
    r = combine([(A, 3.0, ok(1.0, 2.0, 0.8)), (B, 1.0, ok(16.0, 0.5, 0.1))])
    assert r.status is Status.OK and r.source is LatencySource.MODEL
    assert r.latency_ms == pytest.approx(16.0 ** 0.25)  # (1^3 * 16)^(1/4) = 2
    assert r.speedups["seed"] == pytest.approx((2.0 ** 3 * 0.5) ** 0.25)
    assert r.roofline_fraction == pytest.approx((0.8 ** 3 * 0.1) ** 0.25)
    assert [s["size"] for s in r.detail["shapes"]] == [A, B]
    assert [s["latency_ms"] for s in r.detail["shapes"]] == [1.0, 16.0]
    assert r.detail["shapes"][1]["bound"] == "dram" and "weighted geometric mean" in r.detail["fitness"]
    # 2x faster at one size and 2x slower at another of equal weight: the same fitness
    assert geomean([0.5, 2.0], [1.0, 1.0]) == pytest.approx(1.0)
    single = ok(3.0, 1.0)
    assert combine([(A, 1.0, single)]) is single


def test_combine_takes_the_first_failure_naming_its_size_and_no_latency_when_one_size_has_none():
    wrong = LatencyResult(Status.WRONG_OUTPUT, "latency model: output 0 wrong", source=LatencySource.MODEL)
    r = combine([(A, 1.0, ok(1.0, 1.0)), (B, 1.0, wrong)])
    assert r.status is Status.WRONG_OUTPUT and str(B) in r.reason and "output 0 wrong" in r.reason
    missing = LatencyResult(reason="latency unavailable: no cuobjdump")
    r = combine([(A, 1.0, ok(1.0, 1.0)), (B, 1.0, missing)])
    assert r.status is Status.OK and r.latency_ms is None and str(B) in r.reason and not r.speedups


def test_weights_come_from_the_task_or_the_config_and_must_match_the_bench_sizes(tmp_path):
    task = NativeTask(TASK_LIBRARY / "softmax")
    assert task.fitness_sizes() == [(0, 1.0)]  # no weights: the first bench size alone
    task.bench_sizes = [A, B]
    task.set_bench_weights([3, 1])
    assert task.fitness_sizes() == [(0, 3.0), (1, 1.0)]
    task.bench_sizes = [B, {"rows": 2, "cols": 2}]  # sizes changed afterwards: only weighed ones count
    assert task.fitness_sizes() == [(0, 1.0)]
    with pytest.raises(TaskError, match="2 bench weights for 1"):
        NativeTask(TASK_LIBRARY / "softmax").set_bench_weights([1, 1])
    with pytest.raises(TaskError, match="positive"):
        task.set_bench_weights([1, 0])
    with pytest.raises(ValidationError, match="2 bench_weights for 1 bench sizes"):
        SizesConfig(check=[A], bench=[A], bench_weights=[1, 2])
    with pytest.raises(ValidationError, match="needs the bench sizes"):
        SizesConfig(check=[A], bench_weights=[1])
    cfg = TaskConfig(name="softmax", sizes=SizesConfig(check=[A], bench=[A, B], bench_weights=[1, 2]))
    assert build_task(cfg, tmp_path).fitness_sizes() == [(0, 1.0), (1, 2.0)]
    module = tmp_path / "weighted" / "task.py"  # a task module's own BENCH_WEIGHTS
    module.parent.mkdir()
    module.write_text((TASK_LIBRARY / "softmax" / "task.py").read_text()
                      + f"\nBENCH_SIZES = [{A!r}, {B!r}]\nBENCH_WEIGHTS = [1, 4]\n")
    assert NativeTask(module).fitness_sizes() == [(0, 1.0), (1, 4.0)]


def small(bench: list[dict[str, int]], weights: list[float] | None):
    task = NativeTask(TASK_LIBRARY / "softmax")
    task.check_sizes = [{"rows": 1, "cols": 1}, {"rows": 3, "cols": 17}, {"rows": 7, "cols": 131}]
    task.bench_sizes = bench
    task.set_bench_weights(weights)
    return task


def evaluate(task: NativeTask, source: str, workers: SharedWorkers) -> Evaluation:
    settings = EvaluationConfig(device="cpu", latency=LatencyMode.MODEL, timeout_s=120)
    with Evaluator(task, settings, device="cpu", secret=7, **workers(settings)) as ev:
        return ev.evaluate(Candidate.from_source(source))


def test_a_weighted_campaign_fitness_is_the_geomean_of_what_each_size_alone_models(shared_workers):
    both = evaluate(small([A, B], [3, 1]), ONE_PASS, shared_workers)
    alone_a = evaluate(small([A], None), ONE_PASS, shared_workers)
    alone_b = evaluate(small([B], None), ONE_PASS, shared_workers)
    assert both.ok and alone_a.ok and alone_b.ok, (both.reason, alone_a.reason, alone_b.reason)
    a, b = alone_a.latency_ms, alone_b.latency_ms
    assert a is not None and b is not None
    assert both.latency_ms == pytest.approx(math.exp((3 * math.log(a) + math.log(b)) / 4), rel=1e-6)
    shapes = both.latency_detail["shapes"]
    assert [(s["size"], s["weight"]) for s in shapes] == [(A, 3.0), (B, 1.0)]
    assert [s["latency_ms"] for s in shapes] == pytest.approx([a, b], rel=1e-6)
    assert both.speedups["seed"] == pytest.approx(
        math.exp((3 * math.log(alone_a.speedups["seed"]) + math.log(alone_b.speedups["seed"])) / 4), rel=1e-6)


def test_a_kernel_wrong_only_at_a_weighted_size_fails_though_the_first_size_alone_passes(shared_workers):
    first_only = evaluate(small([A, B], None), CAPPED, shared_workers)
    assert first_only.ok, first_only.reason  # fitness at A alone: right there (B is checked only when verified)
    weighted = evaluate(small([A, B], [1, 1]), CAPPED, shared_workers)
    assert weighted.status is Status.WRONG_OUTPUT, weighted.reason
    assert str(B) in weighted.reason or '"cols":4096' in weighted.reason.replace(" ", "")


def test_the_prompt_and_the_summary_show_each_weighted_size():
    from evo.app.run.results import individual_summary
    from evo.contracts.records import Individual, Proposal
    from mutators.llm.bottleneck import performance_lines

    r = combine([(A, 3.0, ok(1.0, 2.0, 0.8)), (B, 1.0, ok(16.0, 0.5, 0.1))])
    ev = r.apply(Evaluation("c", "t", "cpu", Status.OK, error=0.0))
    lines = performance_lines(ev)
    assert lines[0].startswith("latency: 2 ms (model), the weighted geometric mean over 2 bench sizes")
    assert lines[1] == f"- size {A} (weight 3.0): 1 ms, 2x over seed, 80% of the speed of light, dram-bound"
    assert lines[2].startswith(f"- size {B} (weight 1.0): 16 ms, 0.5x over seed")
    assert not any(line.startswith("fitness:") for line in lines)
    ind = Individual(Proposal(Candidate.from_source(ONE_PASS), "test"), ev)
    summary = individual_summary(ind, 4.0)
    assert summary is not None and [s["size"] for s in summary["shapes"]] == [A, B]


def test_the_report_tables_the_best_kernels_figures_per_weighted_size(tmp_path):
    from evo.app.report.page import write_run_report

    from .reports.synthetic import Ev, make_run

    r = combine([(A, 3.0, ok(1.0, 2.0, 0.8)), (B, 1.0, ok(16.0, 0.5, 0.1))])
    built = make_run(tmp_path, "r", [Ev("seed", 4.0, 1), Ev("stoke", 2.0, 10, detail=r.detail)])
    text = next(p for p in write_run_report(built.path) if p.suffix == ".md").read_text()
    assert "the latency above is the weighted geometric mean of these" in text
    assert f"| {A} | 3.0 | 1 | 2.000x | 80.0% | dram |" in text
    assert f"| {B} | 1.0 | 16 | 0.500x | 10.0% | dram |" in text
