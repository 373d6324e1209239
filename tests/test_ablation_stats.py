"""Best-so-far traces of run directories and the ablation statistics built on them (synthetic runs
with exact histories; no campaign runs here)."""

from __future__ import annotations

import csv
import io
import math

import pytest

from evo.app.ablation.stats import Spread, analyse, markdown_tables, to_csv
from evo.app.report.data import load_run
from evo.app.report.trace import trace_of
from evo.contracts.verdict import Status

from .reports.synthetic import Ev, make_run


def run(tmp_path, name, evs, **kw):
    return trace_of(load_run(make_run(tmp_path, name, evs, **kw).path))


def test_a_trace_rises_only_on_full_correct_faster_kernels_and_credits_their_mutators(tmp_path):
    t = run(tmp_path, "r", [
        Ev("seed", 8.0, 1), Ev("seed", 4.0, 2),                      # a generation-0 draw: 2x
        Ev("stoke", 1.0, 3, level="quick"),                            # quick: proves nothing
        Ev("stoke", 0.5, 4, status=Status.WRONG_OUTPUT),               # wrong: never counts
        Ev("llm", 2.0, 5), Ev("optuna", 3.0, 6), Ev("optuna", 1.0, 7),
    ], kinds=("stoke", "llm", "optuna"))
    assert [(s.record.index, s.mutator, s.speedup) for s in t.steps] == [(2, "initial", 2.0), (5, "llm", 4.0),
                                                                        (7, "optuna", 8.0)]
    assert t.best_speedup == 8.0 and t.evaluations == 7
    assert t.shares() == pytest.approx({"initial": 1 / 3, "llm": 1 / 3, "optuna": 1 / 3})
    assert t.first_reaching(0.9 * 8.0).index == 7 and t.first_reaching(3.0).index == 5
    assert t.first_reaching(9.0) is None
    assert t.best_at([0, 1, 2, 4, 5, 6, 7, 100], by="evaluations") == [1, 1, 2, 2, 4, 4, 8, 8]


def test_a_kernel_that_failed_verification_never_counts_and_ties_go_to_the_earliest(tmp_path):
    t = run(tmp_path, "r", [
        Ev("seed", 8.0, 1), Ev("stoke", 4.0, 2),
        Ev("llm", 1.0, 3),                                                       # 8x in the full check...
        Ev("llm", 1.0, 4, level="verified", status=Status.WRONG_OUTPUT, same_as=2),  # ...wrong at bench size
        Ev("optuna", 2.0, 5), Ev("stoke", 2.0, 6),                               # a tie: the earlier one
    ], kinds=("stoke", "llm", "optuna"))
    assert [(s.record.index, s.speedup) for s in t.steps] == [(2, 2.0), (5, 4.0)]
    assert t.steps[-1].record.proposal.mutator == "optuna"


def test_the_campaign_clock_leaves_out_the_pause_before_a_resume(tmp_path):
    # the first session runs from 0 s to 10 s; the run resumes at 3600 s
    t = run(tmp_path, "r", [Ev("seed", 4.0, 1), Ev("stoke", 2.0, 10), Ev("stoke", 1.0, 3605)],
            sessions=(0.0, 3600.0), status="interrupted")
    assert [r.elapsed_s for r in t.run.records] == pytest.approx([1.0, 10.0, 15.0])


def test_dollars_come_from_the_generation_that_reached_a_level(tmp_path):
    t = run(tmp_path, "r", [Ev("seed", 4.0, 1, generation=0), Ev("llm", 2.0, 5, generation=1),
                            Ev("llm", 1.0, 9, generation=2)],
            kinds=("llm",), llm_usd_by_generation={0: 0.0, 1: 0.25, 2: 0.5})
    assert [r.usd for r in t.run.records] == [0.0, 0.25, 0.5]


def test_a_run_whose_seed_failed_has_no_speedups(tmp_path):
    t = run(tmp_path, "r", [Ev("seed", None, 1, status=Status.COMPILE_ERROR), Ev("stoke", 1.0, 2)])
    assert t.start is None and t.best_speedup is None and t.steps == ()
    assert all(math.isnan(x) for x in t.best_at([1, 2], by="evaluations"))


def test_quartiles_count_runs_that_never_got_there_as_infinitely_late():
    s = Spread.of([10.0, 20.0, math.inf])
    assert s.median == 20.0 and s.q1 == 15.0 and math.isinf(s.q3) and s.reached == 2
    assert s.text("{:.0f}") == "20 [15-never] (2/3 reached)"
    assert Spread.of([5.0, 5.0]).text("{:.0f}") == "5 [5-5]"
    assert math.isinf(Spread.of([math.inf, math.inf]).median)
    assert Spread.of([1.0, math.nan]).text() == "-"  # unknown stays unknown


def make_variant(tmp_path, name, finals):
    """Runs whose best ends at each of `finals` (x over the seed), reached halfway through."""
    out = []
    for seed, f in enumerate(finals):
        evs = [Ev("seed", 8.0, 1), Ev("stoke", 8.0 / f, 2 + seed), Ev("stoke", 9.0, 20)]
        out.append((seed, run(tmp_path, f"{name}-s{seed}", evs)))
    return out


def test_variants_are_compared_with_the_baseline_by_medians_effort_and_a_mann_whitney_test(tmp_path):
    traces = {"good": make_variant(tmp_path, "good", [4.0, 4.0, 3.8, 4.0]),
              "base": make_variant(tmp_path, "base", [2.0, 2.1, 1.9, 2.0]),
              "same": make_variant(tmp_path, "same", [2.0, 2.1, 1.9, 2.0])}
    res = analyse(traces, baseline="base", target_speedup=None)
    by = {v.variant: v for v in res.variants}
    assert res.overall_best == 4.0 and res.target == pytest.approx(3.6)
    assert by["good"].best.median == 4.0 and by["good"].reached_target == 4 and by["base"].reached_target == 0
    assert (by["good"].mwu_p or 1.0) < 0.05 and by["good"].superiority == 1.0  # every good run beats every base run
    assert by["same"].mwu_p == pytest.approx(1.0) and by["same"].superiority == 0.5
    assert by["base"].mwu_p is None
    assert by["good"].evals_to[1.0].median == 2.0 and math.isinf(by["base"].evals_to[0.9].median)
    assert by["good"].shares == {"stoke": 1.0}
    rows = {r["variant"]: r for r in csv.DictReader(io.StringIO(to_csv(res)))}
    assert rows["base"]["evals_to_90pct_median"] == "inf" and rows["good"]["share_stoke"] == "1"
    assert float(rows["good"]["mannwhitney_p"]) == pytest.approx(by["good"].mwu_p, rel=1e-5)
    _, rows1, _, rows2 = markdown_tables(res)
    assert rows1[1][5] == "baseline" and rows2[1][1] == "never (0/4)"
