"""Shared, expensive set-ups of the report tests, made once per session: chromium, and a small real
ablation on a local Ray head (2 variants x 2 seeds, real mutators with the LLM replayed from the
shipped record, real lint and equivalence, the fake latency of `tests.islands_fakes`), interrupted
once, resumed, and run a third time with nothing left to do; and the report of one of its runs."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from evo.app.ablation.config import load_ablation
from evo.app.ablation.runner import AblationRunner
from evo.app.cli import main
from evo.app.report.data import load_run
from evo.app.report.trace import trace_of
from evo.app.run.setup import CampaignHooks
from evo.contracts.history import MsgpackLog

from ..conftest import ROOT, SMALL_SOFTMAX
from ..islands_fakes import fake_evaluator_factory, stalling_evaluator_factory
from ..ray_head import joined_head
from .browser import BrowserMissing, find_or_install

HOOKS = CampaignHooks(evaluator_factory=fake_evaluator_factory)  # real mutators, fake (fast) latency
STALLING = CampaignHooks(evaluator_factory=stalling_evaluator_factory)  # every evaluation takes two minutes
RECORD = ROOT / "configs" / "llm_records" / "softmax_standin.jsonl"


@pytest.fixture(scope="session")
def chromium() -> str:
    try:
        return find_or_install()
    except BrowserMissing as e:
        pytest.fail(str(e))


@dataclass(frozen=True)
class Quit:
    raised: bool  # run() ended with the KeyboardInterrupt
    seconds: float  # from the second Ctrl-C to the end of run()
    statuses: dict[str, str]  # run -> status in ablation.json afterwards
    summaries: dict[str, dict[str, Any]]  # run -> its summary.json afterwards
    stops: dict[str, list[str]]  # run -> the statuses of its stop events afterwards
    out: str


@dataclass(frozen=True)
class AblationRun:
    file: Path
    directory: Path
    after_stop: dict[str, str]  # run -> status after the interrupted first invocation
    dirs_after_stop: dict[str, str]
    quit: Quit  # the interrupted runs resumed, then a second Ctrl-C in their generation in progress
    term: Quit  # and again, then SIGTERM (`ray job stop`, a scheduler)
    partial_rc: int  # `--variant stoke --seed 1` after the stop
    partial_out: str
    after_partial: dict[str, str]  # run -> status after it
    second_out: str
    second_rc: int
    third_out: str
    third_rc: int
    sizes_before_third: dict[str, int]  # run -> bytes of its history before the third invocation
    report_rc: int
    report_run: Path  # the run whose report was written (the one with the best kernel)


def _write_ablation(tmp: Path) -> Path:
    base = {
        "name": "base", "task": SMALL_SOFTMAX,
        "evaluation": {"device": "cpu", "timeout_s": 60},  # 2 draws: both value distributions
        "islands": {"count": 1, "population": 1, "offspring": 2, "tournament_size": 1},
        "evaluators": {"count": 1},
        "mutators": [{"kind": "stoke"}],
        "budget": {"generations": 1},
    }
    (tmp / "base.yaml").write_text(yaml.safe_dump(base))
    llm = {"kind": "llm", "model": "standin-softmax", "mode": "replay", "replay_match": "kernel",
           "record_path": str(RECORD)}
    # STOKE with only its `param x2` move: under the fake latency a larger BLOCK is faster, and half its steps
    # take one, so a run improves on the seed in its few steps whatever the other moves' weights and draws
    # (with every move, a 2-step chain finds a faster state about one time in ten, and the report below
    # needs a run that improved)
    stoke = {"kind": "stoke", "chain_length": 2, "move_weights": {"param x2": 1.0}}
    ablation = {
        "name": "tiny", "base": "base.yaml", "baseline": "stoke", "seeds": [0, 1],
        "budget": {"generations": 2}, "output_dir": str(tmp / "out"),
        # the llm variant keeps a STOKE chain beside the replayed LLM: the record holds replies for the seed
        # only, so once they are used up an llm-only island evaluates nothing, and a run resumed in such a
        # generation has nothing for the quits below to interrupt (how far the first stop lets a run get
        # depends on how long its evaluations take)
        "variants": {"llm": {"mutators": [llm, stoke]}, "stoke": {"mutators": [stoke]}},
    }
    path = tmp / "tiny.yaml"
    path.write_text(yaml.safe_dump(ablation, sort_keys=False))
    return path


def _generation_written(directory: Path) -> bool:
    for log in directory.glob("runs/*/events.msgpack"):
        if any(e.get("kind") == "generation" for e in MsgpackLog(log).read()):
            return True
    return False


def _quit_mid_generation(ablation: Any, directory: Path, runs: list[str], signals: tuple[int, ...]) -> Quit:
    """Resume `runs` with evaluations that take minutes, and send `signals` to this process (real ones,
    a second apart: SIGINT twice is Ctrl-C twice) once every run is in its generation."""
    out = io.StringIO()
    runner = AblationRunner(ablation, directory, hooks=STALLING, stream=out,
                            only=[s for s in ablation.runs() if s.key in runs])
    second: list[float] = []
    # once run() is over a signal would reach pytest itself (a SIGTERM would end it without a word): so none is
    # sent after it, even when the runs end before every campaign has its actors (the wait below runs out later)
    returned = threading.Event()

    def press() -> None:
        deadline = time.monotonic() + 300
        while not returned.is_set() and time.monotonic() < deadline and not (
                len(runner.campaigns) == len(runs) and all(c.actors for c in list(runner.campaigns.values()))):
            time.sleep(0.2)
        returned.wait(3)  # the islands are waiting for their first evaluation
        for i, sig in enumerate(signals):
            if i:
                returned.wait(1)
            if returned.is_set():
                return
            second.append(time.monotonic())  # the last one is what ends it
            os.kill(os.getpid(), sig)

    presser = threading.Thread(target=press, daemon=True)
    presser.start()
    raised = False
    try:
        try:
            runner.run()
        finally:
            returned.set()
    except KeyboardInterrupt:
        raised = True
    ended = time.monotonic()
    presser.join(timeout=10)
    state = json.loads((directory / "ablation.json").read_text())["runs"]
    dirs = {k: Path(state[k]["run_dir"]) for k in runs}
    summaries = {k: json.loads((d / "summary.json").read_text()) for k, d in dirs.items()}
    stops = {k: [e["status"] for e in MsgpackLog(d / "events.msgpack").read() if e["kind"] == "stop"]
             for k, d in dirs.items()}
    return Quit(raised, ended - second[-1] if second else float("inf"), {k: v["status"] for k, v in state.items()},
                summaries, stops, out.getvalue())


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(list(argv), hooks=HOOKS)
    return rc, out.getvalue()


@pytest.fixture(scope="session")
def ablation_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AblationRun]:
    tmp = tmp_path_factory.mktemp("ablation")
    file = _write_ablation(tmp)
    # Ctrl-C as a terminal delivers it, however pytest was started: a shell starts a background job (`... &`)
    # with SIGINT ignored, and Python then installs no handler, so the presses below would go unheard
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield from _ablation_run(file)
    finally:
        signal.signal(signal.SIGINT, previous)


def _ablation_run(file: Path) -> Iterator[AblationRun]:
    with joined_head():
        ablation = load_ablation(file)
        directory = ablation.directory()
        # 1: stopped (as by Ctrl-C) once a generation is written: running runs end "interrupted"
        runner = AblationRunner(ablation, directory, hooks=HOOKS, stream=io.StringIO())
        worker = threading.Thread(target=runner.run, daemon=True)
        worker.start()
        deadline = time.monotonic() + 600
        while worker.is_alive() and not _generation_written(directory) and time.monotonic() < deadline:
            time.sleep(0.2)
        runner.stop()
        worker.join(timeout=600)
        after_stop = {k: e.status.value for k, e in runner.state.runs.items()}
        dirs_after_stop = {k: e.run_dir for k, e in runner.state.runs.items()}
        # 1b: the interrupted runs again, quit at once (a second Ctrl-C) in the generation they are in
        stopped = [k for k, v in after_stop.items() if v == "interrupted"]
        quit = _quit_mid_generation(ablation, directory, stopped, (signal.SIGINT, signal.SIGINT))
        # 1c: and once more, ended by one SIGTERM
        term = _quit_mid_generation(ablation, directory, stopped, (signal.SIGTERM,))
        # 2a: one variant's one seed (a pending run: the first invocation ran seed 0's runs first)
        partial_rc, partial_out = _cli("ablate", str(file), "--variant", "stoke", "--seed", "1")
        state = json.loads((directory / "ablation.json").read_text())
        after_partial = {k: v["status"] for k, v in state["runs"].items()}
        # 2: the same command again finishes the ablation; 3: and once more, nothing left to run
        second_rc, second_out = _cli("ablate", str(file))
        sizes = {p.parent.name: p.stat().st_size for p in directory.glob("runs/*/history.msgpack")}
        third_rc, third_out = _cli("ablate", str(file))
        # the run with the best kernel, so the report has a lineage to show
        report_run = max(sorted(directory.glob("runs/*")), key=lambda d: trace_of(load_run(d)).best_speedup or 0.0)
        report_rc, _ = _cli("report", str(report_run))
    yield AblationRun(file, directory, after_stop, dirs_after_stop, quit, term, partial_rc, partial_out, after_partial,
                      second_out, second_rc, third_out, third_rc, sizes, report_rc, report_run)
