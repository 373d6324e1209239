"""The report's timeline: kills, resumes and infrastructure failures, on the campaign's clock."""

from __future__ import annotations

from evo.app.report import stats as rs
from evo.app.report.data import load_run
from evo.app.report.page import write_run_report

from .reports.synthetic import T0, Ev, make_run


def test_kills_resumes_and_infrastructure_failures_are_on_the_timeline(tmp_path):
    killed = "worker killed by signal SIGKILL"
    built = make_run(tmp_path, "r", [
        Ev("seed", 4.0, 1), Ev("stoke", 2.0, 10),
        Ev("stoke", 1.0, 3605, incidents=(killed,)),  # ran again on a fresh worker: ok
    ], sessions=(0.0, 3600.0), extra_events=(
        {"kind": "evaluator_replaced", "dead": "evaluator-1", "pid": 7, "why": "actor died", "time": T0 + 5.0},
        {"kind": "stop", "status": "finished", "reason": "generation budget reached", "time": T0 + 3610.0},
    ))
    moments = rs.timeline(load_run(built.path))
    assert [m.what for m in moments] == ["started", "evaluator replaced", "ended without stopping", "resumed",
                                         "infrastructure failure in an evaluation", "stopped (finished)"]
    assert [round(m.elapsed_s) for m in moments] == [0, 5, 10, 10, 15, 20]  # the hour between sessions left out
    assert killed in moments[4].detail and "verdict ok" in moments[4].detail
    md = next(p for p in write_run_report(built.path) if p.suffix == ".md")
    text = md.read_text()
    assert "## Timeline" in text and "ended without stopping" in text and "evaluator replaced" in text
    assert killed in text


def test_a_single_clean_session_says_so(tmp_path):
    built = make_run(tmp_path, "r", [Ev("seed", 4.0, 1), Ev("stoke", 2.0, 10)], extra_events=(
        {"kind": "stop", "status": "finished", "reason": "generation budget reached", "time": T0 + 11.0},))
    assert [m.what for m in rs.timeline(load_run(built.path))] == ["started", "stopped (finished)"]
    md = next(p for p in write_run_report(built.path) if p.suffix == ".md")
    assert "One session, no infrastructure failures." in md.read_text()
