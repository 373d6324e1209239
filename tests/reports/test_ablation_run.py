"""`evo ablate` end to end on a local Ray (see conftest): interrupted, resumed, not redone; the tables,
the CSV and the figures it writes."""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections import Counter

import pytest

from evo.app.report.data import load_run
from evo.app.report.trace import trace_of
from evo.contracts.history import MsgpackLog

pytestmark = pytest.mark.slow

RUNS = {"llm-s0", "stoke-s0", "llm-s1", "stoke-s1"}
PNG = b"\x89PNG\r\n\x1a\n"


def test_a_stopped_ablation_leaves_its_running_runs_interrupted_and_the_rest_pending(ablation_run):
    statuses = ablation_run.after_stop
    assert set(statuses) == RUNS
    assert "interrupted" in statuses.values(), statuses  # stopped after a generation, not finished
    assert set(statuses.values()) <= {"interrupted", "pending", "finished"}
    for run, status in statuses.items():
        assert bool(ablation_run.dirs_after_stop[run]) == (status != "pending")


def test_a_second_ctrl_c_quits_at_once_and_every_run_it_stopped_is_interrupted_not_failed(ablation_run):
    quit, quitted = ablation_run.quit, [k for k, v in ablation_run.after_stop.items() if v == "interrupted"]
    assert quit.raised, quit.out
    # every evaluation of the generation in progress takes two minutes: only a quit ends the runs this soon
    assert quit.seconds < 60, quit.out
    assert "quitting: every run drops the generation in progress" in quit.out
    assert quit.statuses == ablation_run.after_stop, quit.out  # the same runs interrupted, the others untouched
    assert quitted
    for run in quitted:
        summary = quit.summaries[run]
        assert summary["status"] == "interrupted", summary["stop_reason"]
        assert summary["stop_reason"].startswith("quit during generation"), summary["stop_reason"]
        assert quit.stops[run] == ["interrupted", "interrupted"], quit.stops  # stopped, then quit


def test_sigterm_quits_an_ablation_at_once_as_a_second_ctrl_c_does(ablation_run):
    """`ray job stop` and schedulers send SIGTERM; Ray's own handler (`sys.exit`) left runs `running` and
    `failed`. Now the same as a second Ctrl-C."""
    term = ablation_run.term
    assert term.raised and term.seconds < 60, term.out
    assert "terminated (SIGTERM): every run drops the generation in progress" in term.out
    assert term.statuses == ablation_run.after_stop, term.out
    for run, summary in term.summaries.items():
        assert summary["status"] == "interrupted" and summary["stop_reason"].startswith("quit during generation")
        assert term.stops[run] == ["interrupted"] * 3, term.stops


def test_a_selected_variant_and_seed_runs_alone_and_the_others_stay_as_they_were(ablation_run):
    assert ablation_run.after_stop["stoke-s1"] == "pending", ablation_run.after_stop  # what the selection starts
    assert ablation_run.partial_rc == 0, ablation_run.partial_out
    assert "1 selected run to go (0 finished already; 3 not selected)" in ablation_run.partial_out
    assert ablation_run.after_partial == {**ablation_run.after_stop, "stoke-s1": "finished"}


def test_running_it_again_resumes_interrupted_runs_in_their_directory_and_finishes_all(ablation_run):
    assert ablation_run.second_rc == 0, ablation_run.second_out
    state = json.loads((ablation_run.directory / "ablation.json").read_text())
    assert {k: v["status"] for k, v in state["runs"].items()} == dict.fromkeys(RUNS, "finished")
    for run, before in ablation_run.dirs_after_stop.items():
        if before:  # the interrupted run went on in the directory it had, not a new one
            assert state["runs"][run]["run_dir"] == before
    for run_dir in ablation_run.directory.glob("runs/*"):
        records = [r for r in MsgpackLog(run_dir / "history.msgpack").read() if r["kind"] == "evaluation"]
        twice = [k for k, n in Counter((r["candidate"]["id"], r["evaluation"]["level"]) for r in records).items()
                 if n > 1]
        assert not twice, f"{run_dir.name} evaluated again after the resume: {twice}"
        assert json.loads((run_dir / "summary.json").read_text())["generation"] == 2
    assert len(list(ablation_run.directory.glob("runs/*"))) == len(RUNS)


def test_finished_runs_are_not_redone(ablation_run):
    assert ablation_run.third_rc == 0
    assert "all 4 runs are finished; nothing to run" in ablation_run.third_out
    after = {p.parent.name: p.stat().st_size for p in ablation_run.directory.glob("runs/*/history.msgpack")}
    assert after == ablation_run.sizes_before_third


def test_the_results_table_has_a_row_per_variant_with_medians_shares_and_the_test_against_the_baseline(ablation_run):
    rows = {r["variant"]: r for r in csv.DictReader(io.StringIO((ablation_run.directory / "results.csv").read_text()))}
    assert list(rows) == ["llm", "stoke"]
    for variant, r in rows.items():
        bests = [trace_of(load_run(d)).best_speedup or 0.0 for d in ablation_run.directory.glob(f"runs/{variant}-s*")]
        assert r["runs"] == "2" and float(r["best_speedup_median"]) == pytest.approx(statistics.median(bests), 1e-5)
        assert float(r["best_speedup_q1"]) <= float(r["best_speedup_median"]) <= float(r["best_speedup_q3"])
        shares = [float(v) for k, v in r.items() if k.startswith("share_")]
        assert sum(shares) == pytest.approx(1.0 if max(bests) > 1 else 0.0, abs=1e-4)
        assert float(r["evals_to_90pct_median"]) >= 1
    assert rows["stoke"]["mannwhitney_p"] == "" and 0 < float(rows["llm"]["mannwhitney_p"]) <= 1
    md = (ablation_run.directory / "results.md").read_text()
    assert "| llm | 2 |" in md and "| stoke | 2 |" in md and "baseline" in md
    assert "REPLAYED from a record" in md and "![" in md  # the figures are linked


def test_the_figures_are_png_files_in_the_ablation_directory(ablation_run):
    for name in ("anytime_evaluations.png", "anytime_time.png", "contributions.png"):
        data = (ablation_run.directory / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 10_000, name
