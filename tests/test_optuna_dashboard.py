"""optuna-dashboard opens a run's Optuna journal and shows what each study and trial was.

The journal is written by the real `OptunaMutator` (propose, then observe with fixed verdicts: no
worker), the dashboard is the real `optuna-dashboard` command, and what it serves is read through
its JSON API, the one its web page reads.
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.mutator_config import OptunaConfig
from evo.contracts.native_task import NativeTask
from evo.contracts.records import Individual, Proposal
from evo.contracts.verdict import Evaluation, Status
from mutators.base import MutationContext
from mutators.optuna.tuner import OptunaMutator
from tests.fakes.standin import fake_evaluate

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = Path(sys.executable).parent / "optuna-dashboard"  # the dev extra's console script


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


def wait_until_up(proc: subprocess.Popen[bytes], base: str, log: Path, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"optuna-dashboard exited with {proc.returncode}:\n{log.read_text()}")
        try:
            get(f"{base}/api/meta")
            return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
    raise AssertionError(f"optuna-dashboard did not answer within {timeout_s} s:\n{log.read_text()}")


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[Callable[[Path], str]]:
    """Starts optuna-dashboard on a storage, as a person would, and gives its URL once it answers;
    every server started is stopped at the end of the test."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(storage: Path) -> str:
        port, log = free_port(), tmp_path / "dashboard.log"
        with log.open("wb") as out:
            procs.append(subprocess.Popen(
                [str(DASHBOARD), str(storage), "--host", "127.0.0.1", "--port", str(port)],
                stdout=out, stderr=subprocess.STDOUT))
        base = f"http://127.0.0.1:{port}"
        wait_until_up(procs[-1], base, log)
        return base

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(timeout=10)


def attrs(entry: dict[str, Any]) -> dict[str, str]:
    """The dashboard serves attrs as [{"key": k, "value": str(v)}]."""
    return {a["key"]: a["value"] for a in entry["user_attrs"]}


def tuned_run(journal: Path, task: NativeTask) -> tuple[OptunaMutator, dict[str, str]]:
    """Two islands share one study: each proposes, and its children are told ok or compile error.
    Returns the mutator and the status expected of each candidate the study saw."""
    m = OptunaMutator(OptunaConfig(trials_per_proposal=3), journal_path=journal, seed=0)
    seed = Candidate.from_source(task.seed_source or "")
    parent = Individual(Proposal(seed, "seed", island=0), fake_evaluate(task.key)(seed, "full"))
    ctx = MutationContext(task=task, rng=random.Random(0), evaluate=fake_evaluate(task.key))
    expected = {seed.id: Status.OK.value}
    for island in (0, 1):
        for i, p in enumerate(m.propose(parent, ctx)):
            assert p.candidate is not None
            cid = p.candidate.id
            if i == 1:
                e = Evaluation(cid, task.key, "cpu", Status.COMPILE_ERROR, reason="out of resources")
            else:
                e = Evaluation(cid, task.key, "cpu", Status.OK, error=0.0, max_error_ratio=0.1, latency_ms=1.0 + i)
            m.observe(replace(p, island=island, generation=1), e)  # stamped as the island stamps it
            expected[cid] = e.status.value
    return m, expected


def test_the_dashboard_shows_a_runs_study_with_its_task_and_each_trials_candidate(dashboard, tmp_path):
    task = NativeTask(ROOT / "evo" / "tasks" / "softmax")
    seed = Candidate.from_source(task.seed_source or "")
    journal = tmp_path / "tune-20250101-120000" / "optuna.journal"  # RUN_DIR/optuna.journal
    m, expected = tuned_run(journal, task)

    base = dashboard(journal)
    studies = get(f"{base}/api/studies")["study_summaries"]
    assert [s["study_name"] for s in studies] == [m.study_name(task.key, seed)]  # one study for both islands
    detail = get(f"{base}/api/studies/{studies[0]['study_id']}")

    assert attrs(detail) == {"task": "softmax", "task_key": task.key, "structure": seed.structure,
                             "run": "tune-20250101-120000", "seeded": "True"}
    told = [t for t in detail["trials"] if "candidate" in attrs(t)]
    assert {attrs(t)["candidate"]: attrs(t)["status"] for t in told} == expected
    assert {attrs(t)["island"] for t in told} == {"0", "1"}
    states = {attrs(t)["candidate"]: t["state"] for t in told}
    assert {states[c] for c, s in expected.items() if s == "ok"} == {"Complete"}
    assert {states[c] for c, s in expected.items() if s != "ok"} == {"Fail"}
