"""The ablation's scheduler, without Ray: runs that keep failing as soon as they start (Ray gone, a full
disk) stop it starting more; failures spread out, or broken by a run that finished, do not."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from evo.app.ablation import runner as ablation_module
from evo.app.ablation.config import RunSpec, load_ablation
from evo.app.ablation.runner import AblationRunner, RunStatus

from .test_ablation_config import write


def runner_with(tmp_path: Path, outcomes: dict[str, str], seeds: int = 3) -> tuple[AblationRunner, io.StringIO]:
    """A runner of 2 variants x `seeds` seeds whose runs end at once with `outcomes[key]` (default
    finished), one at a time; failed runs say the cluster is gone."""
    path = write(tmp_path, {"a": {}, "b": {"islands": {"count": 1}}}, seeds=list(range(seeds)), parallel=1)
    out = io.StringIO()
    runner = AblationRunner(load_ablation(path), load_ablation(path).directory(), stream=out)

    def start(spec: RunSpec) -> None:
        status = outcomes.get(spec.key, RunStatus.FINISHED.value)
        runner.events.put(("dir", spec.key, tmp_path / spec.key))
        runner.events.put(("end", spec.key, (status, "lost the Ray cluster" if status == "failed" else "")))

    runner._start = start  # type: ignore[method-assign]
    return runner, out


def statuses(runner: AblationRunner) -> dict[str, str]:
    return {k: v["status"] for k, v in json.loads((runner.directory / "ablation.json").read_text())["runs"].items()}


def test_three_runs_in_a_row_failing_as_they_start_stop_the_ablation_starting_more(tmp_path):
    runner, out = runner_with(tmp_path, {"a-s0": "failed", "b-s0": "failed", "a-s1": "failed"})
    runner._schedule(runner.todo(), {"CPU": 2.0})
    got = statuses(runner)
    assert [got[k] for k in ("a-s0", "b-s0", "a-s1")] == ["failed"] * 3
    assert [got[k] for k in ("b-s1", "a-s2", "b-s2")] == ["pending"] * 3, got  # not started to fail the same way
    text = out.getvalue()
    assert "3 runs in a row failed within 120 s of starting (the last, a-s1: lost the Ray cluster)" in text
    assert "no further run starts (3 runs left pending). Mend it and run the same command again" in text
    assert runner.halted


@pytest.mark.parametrize("outcomes", [
    {"a-s0": "failed", "b-s0": "failed", "b-s1": "failed", "a-s2": "failed"},  # a finished run in between
    {"a-s0": "failed", "b-s0": "failed"},
])
def test_failures_not_in_a_row_of_three_let_every_run_start(tmp_path, outcomes):
    runner, out = runner_with(tmp_path, outcomes)
    runner._schedule(runner.todo(), {"CPU": 2.0})
    got = statuses(runner)
    assert "pending" not in got.values() and not runner.halted, got
    assert [k for k, v in got.items() if v == "failed"] == list(outcomes)
    assert "in a row failed" not in out.getvalue()


def test_runs_that_fail_after_running_a_while_are_the_runs_own_failures(tmp_path, monkeypatch):
    monkeypatch.setattr(ablation_module, "FAST_FAIL_S", 0.0)  # every failure comes "late"
    runner, _ = runner_with(tmp_path, {k: "failed" for k in ("a-s0", "b-s0", "a-s1", "b-s1")})
    runner._schedule(runner.todo(), {"CPU": 2.0})
    assert "pending" not in statuses(runner).values() and not runner.halted
