"""The `optuna` mutator on a real PostgreSQL server (`storage: postgresql://...`): two drivers share
one study, a resumed mutator continues it, and the password comes from libpq's environment, never
from the URL in the config.

The server is started by this module on 127.0.0.1 (`tests.pg_server`); the tests skip only where no
PostgreSQL server binaries exist (scripts/test_services.sh installs them when run as root).
Evaluations are fakes (`tests.fakes.standin`): these tests are about the storage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import optuna
import pytest
import sqlalchemy
import yaml
from optuna.trial import TrialState

from evo.contracts.history import MsgpackLog
from evo.contracts.mutator_config import OptunaConfig
from evo.contracts.native_task import NativeTask
from evo.contracts.records import Proposal
from mutators.optuna.space import open_storage
from mutators.optuna.tuner import OptunaMutator
from tests.pg_server import PgServer, missing, postgres_server
from tests.test_optuna_tuner import loop, seed_of

ROOT = Path(__file__).resolve().parent.parent
SOFTMAX = ROOT / "evo" / "tasks" / "softmax"
_databases = count()


@pytest.fixture(scope="module")
def pg() -> Iterator[PgServer]:
    reason = missing()
    if reason:
        pytest.skip(reason)
    with postgres_server() as server:
        yield server


@pytest.fixture
def db(pg: PgServer) -> str:
    """A fresh database and role of its own; returns the database name (the role has the same name)."""
    name = f"evo{next(_databases)}"
    pg.create_database(name, user=name)
    return name


@pytest.fixture
def pg_env(pg: PgServer, db: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The storage URL without a password, and PGPASSWORD set the way a cluster's node would set it."""
    monkeypatch.setenv("PGPASSWORD", pg.password)
    return pg.url(db, user=db)


def ids(props: list[Proposal]) -> set[str]:
    return {p.candidate.id for p in props if p.candidate is not None}


def trials(url: str, task: NativeTask) -> list[optuna.trial.FrozenTrial]:
    (summary,) = optuna.get_all_study_summaries(storage=url)
    assert summary.study_name.startswith(f"evo:{task.key}:")
    return optuna.load_study(study_name=summary.study_name, storage=url).get_trials(deepcopy=False)


def driver(url: str, seed: int, rounds: int, ready: Path, go: Path) -> None:
    """One driver process: says it is ready, waits for `go`, then opens the storage (of a fresh
    database: both drivers create its schema at the same moment) and tunes."""
    task = NativeTask(SOFTMAX)
    ready.touch()
    deadline = time.monotonic() + 600
    while not go.exists():
        assert time.monotonic() < deadline, "no go"
        time.sleep(0.01)
    m = OptunaMutator(OptunaConfig(storage=url, trials_per_proposal=3), journal_path=ready.with_suffix(".j"), seed=seed)
    props = loop(m, task, rounds)
    print(json.dumps({"trials": [p.meta["trial"] for p in props], "ids": sorted(ids(props))}))


@pytest.mark.slow
def test_two_driver_processes_share_one_study(pg_env, tmp_path):
    """Both start on a fresh database at once (PostgreSQL lets one of two concurrent schema creations
    fail: `open_storage` tries again), then share the study."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen(
        [sys.executable, "-m", "tests.test_optuna_postgres", pg_env, str(seed), "4", str(tmp_path / f"ready{seed}"),
         str(tmp_path / "go")], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for seed in (1, 2)]
    try:
        deadline = time.monotonic() + 300  # imports take long on a loaded machine
        while not all((tmp_path / f"ready{seed}").exists() for seed in (1, 2)):
            if time.monotonic() > deadline or not all(p.poll() is None for p in procs):
                for p in procs:
                    p.kill()
                pytest.fail(f"a driver died or never got ready: {[p.communicate()[1][-2000:] for p in procs]}")
            time.sleep(0.05)
        (tmp_path / "go").touch()  # both tune at once from here
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            p.kill()
            p.wait()
    mine = [set(o["trials"]) for o in outs]
    assert all(mine) and not mine[0] & mine[1]  # the server numbers the trials: none handed out twice
    by_number = {t.number: t for t in trials(pg_env, NativeTask(SOFTMAX))}
    assert mine[0] | mine[1] <= set(by_number)  # both drivers' trials are in the one study
    assert all(by_number[n].state in (TrialState.COMPLETE, TrialState.FAIL) for n in mine[0] | mine[1])


def test_a_resumed_mutator_continues_the_study(pg_env, tmp_path):
    task = NativeTask(SOFTMAX)
    cfg = OptunaConfig(storage=pg_env, trials_per_proposal=3)
    first = OptunaMutator(cfg, journal_path=tmp_path / "unused.journal", seed=0)
    before = loop(first, task, rounds=2)
    checkpoint = json.loads(json.dumps(first.state()))  # what the campaign checkpoint keeps
    known = {t.number for t in trials(pg_env, task)}

    resumed = OptunaMutator(cfg, journal_path=tmp_path / "unused.journal", seed=0)
    resumed.load_state(checkpoint)
    after = loop(resumed, task, rounds=1)

    assert not (tmp_path / "unused.journal").exists()  # the RDB, not the journal, holds the study
    assert {p.meta["study"] for p in after} == {p.meta["study"] for p in before}
    assert min(p.meta["trial"] for p in after) > max(known)  # numbering continues
    assert not ids(after) & ids(before)  # nothing re-proposed
    assert seed_of(task).candidate.id not in ids(after)
    assert resumed.stats()["proposals"] == len(before) + len(after)  # the counters come back too
    best = resumed.best(task.key, seed_of(task).candidate)
    assert best is not None and best["trials"] >= len(before) + len(after)


# `evo run` with the real optuna mutator and a fake latency (lint and equivalence are real, on the CPU);
# a softmax with tiny sizes so the interpreter's evaluations take little of the test's minutes
TINY_SOFTMAX = {"name": "softmax", "sizes": {"check": [{"rows": 1, "cols": 1}, {"rows": 3, "cols": 17}],
                                             "bench": [{"rows": 4, "cols": 64}]}}
EVO = ("import sys; from evo.app.cli import main; from evo.app.run.setup import CampaignHooks; "
       "from tests.islands_fakes import fake_evaluator_factory; "
       "sys.exit(main(hooks=CampaignHooks(evaluator_factory=fake_evaluator_factory)))")


def evo_run(tmp_path: Path, url: str, generations: int, *resume: str) -> Path:
    cfg = {"name": "pg", "seed": 3, "task": TINY_SOFTMAX, "evaluation": {"device": "cpu", "timeout_s": 60},
           "islands": {"count": 1, "population": 1, "offspring": 2}, "evaluators": {"count": 1},
           "mutators": [{"kind": "optuna", "trials_per_proposal": 2, "storage": url}],
           "budget": {"generations": generations}, "output_dir": str(tmp_path / "runs")}
    config = tmp_path / f"campaign-{generations}.yaml"
    config.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", EVO, "run", str(config), *resume], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=540)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    return run_dir


def optuna_trials_by_generation(run_dir: Path) -> dict[int, dict[int, str]]:
    """generation -> {optuna trial number: candidate id}, from the run's history (the proposals' notes)."""
    out: dict[int, dict[int, str]] = {}
    for r in MsgpackLog(run_dir / "history.msgpack").read():
        origin = r.get("origin", {})
        if r["kind"] == "evaluation" and origin.get("mutator") == "optuna" and r["evaluation"]["level"] == "full":
            number = int(origin["note"].split(" trial ")[1].split(":")[0])
            out.setdefault(int(origin["generation"]), {})[number] = r["candidate"]["id"]
    return out


@pytest.mark.slow
def test_evo_run_resume_continues_the_study_in_postgres(pg_env, pg, tmp_path):
    run_dir = evo_run(tmp_path, pg_env, 1)
    first = optuna_trials_by_generation(run_dir)
    evo_run(tmp_path, pg_env, 2, "--resume", str(run_dir))
    after = optuna_trials_by_generation(run_dir)
    assert set(first) == {1} and set(after) == {1, 2} and after[1] == first[1] and after[2]
    assert min(after[2]) > max(first[1])  # the resumed run continues the numbering of the one study
    assert not set(after[2].values()) & set(first[1].values())  # and proposes nothing tried before
    (summary,) = optuna.get_all_study_summaries(storage=pg_env)
    assert summary.n_trials > max(after[2])
    assert not (run_dir / "optuna.journal").exists()
    recorded = (run_dir / "config.yaml").read_text()
    assert pg_env in recorded and pg.password not in recorded  # the password came from PGPASSWORD


def test_the_password_comes_from_libpq_not_the_url(pg, db, tmp_path, monkeypatch):
    url = pg.url(db, user=db)  # as written in config.yaml: no password
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))
    with pytest.raises(sqlalchemy.exc.OperationalError, match="password"):  # the server does require one
        open_storage(url, tmp_path / "unused.journal")

    monkeypatch.setenv("PGPASSWORD", pg.password)
    assert optuna.get_all_study_summaries(storage=open_storage(url, tmp_path / "unused.journal")) == []

    monkeypatch.delenv("PGPASSWORD")
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"127.0.0.1:{pg.port}:{db}:{db}:{pg.password}\n")
    pgpass.chmod(0o600)  # libpq ignores a password file others can read
    monkeypatch.setenv("PGPASSFILE", str(pgpass))
    optuna.create_study(study_name="pgpass", storage=open_storage(url, tmp_path / "unused.journal"))

    monkeypatch.delenv("PGPASSFILE")
    (tmp_path / ".pgpass").write_text(pgpass.read_text())
    (tmp_path / ".pgpass").chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path))  # ~/.pgpass, the default file
    assert [s.study_name for s in optuna.get_all_study_summaries(storage=open_storage(url, tmp_path / "j"))] == [
        "pgpass"]


if __name__ == "__main__":
    driver(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]), Path(sys.argv[5]))
