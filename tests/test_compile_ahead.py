"""Compile ahead of the GPU's timing slot (`fitness.prepare`, the broker's preparers): with a fake
device whose evaluator compiles what nobody compiled before it (the node's shared Triton cache, as a
set) and then "times" for a fixed while, preparers keep the slot busy; without them the slot waits for
every compile. Plus the parts that run for real here: the lint verdict of a preparer, the JIT hooks of
a GPU worker (against a recording stand-in for Triton's launcher), and a local campaign's summary."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, TaskConfig
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from evo.contracts.records import Proposal
from evo.contracts.task import Task
from evo.contracts.task_files import TaskFiles
from evo.contracts.verdict import Evaluation, Status
from fitness.evaluate import Evaluator
from fitness.prepare import Prepared, Preparer
from islands.actors import start_broker
from islands.broker import BrokerSpec
from islands.evaluation import EvaluationStats
from islands.evaluator_actor import EvaluatorSpec
from islands.local_runtime import LocalRuntime

from .campaign_job import FAKE_HOOKS
from .conftest import ROOT
from .test_campaign_ray import write_config
from .test_local_executor import local_campaign

COMPILE_S, TIME_S = 0.3, 0.1
COMPILED: set[str] = set()  # the node's shared Triton cache (the local executor: one process)
LOCK = threading.Lock()


def compile_once(candidate_id: str) -> float:
    """Seconds spent compiling `candidate_id`: COMPILE_S the first time on this "node", then 0."""
    with LOCK:
        if candidate_id in COMPILED:
            return 0.0
        COMPILED.add(candidate_id)
    time.sleep(COMPILE_S)
    return COMPILE_S


class FakeDevice:
    """An evaluator on a device whose timing slot takes TIME_S per candidate, after compiling it
    when no preparer did."""

    def __init__(self, task: Task, settings: EvaluationConfig, device: str) -> None:
        self.task_key, self.device = task.key, device
        self.compiled_s = 0.0

    def evaluate(self, candidate: Candidate, *, level: str = "full") -> Evaluation:
        self.compiled_s += compile_once(candidate.id)
        time.sleep(TIME_S)
        return Evaluation(candidate.id, self.task_key, self.device, Status.OK, level=level, reason="fake: ok",
                          error=0.0, latency_ms=1.0)

    def compile_seconds(self) -> float:
        return self.compiled_s

    def close(self) -> None:
        pass


class FakePreparer:
    def __init__(self, task: Task, settings: EvaluationConfig, device: str) -> None:
        self.task_key, self.device = task.key, device

    def prepare(self, candidate: Candidate, level: str) -> Prepared:
        if "BROKEN_PREPARER" in candidate.source:
            raise RuntimeError("the preparer broke")
        if "NOT_ALLOWED" in candidate.source:
            return Prepared(Evaluation(candidate.id, self.task_key, self.device, Status.LINT_ERROR, level=level,
                                       reason="fake lint"))
        return Prepared(None, warmed=True, seconds=compile_once(candidate.id))

    def close(self) -> None:
        pass


def fake_device(task: Task, settings: EvaluationConfig, device: str) -> FakeDevice:
    return FakeDevice(task, settings, device)


def fake_preparer(task: Task, settings: EvaluationConfig, device: str) -> FakePreparer:
    return FakePreparer(task, settings, device)


def softmax_seed() -> Candidate:
    return Candidate.from_source((TASK_LIBRARY / "softmax" / "seed.py").read_text())


def proposals(tag: str, n: int, extra: str = "") -> list[Proposal]:
    seed = softmax_seed()
    return [Proposal(Candidate(f"{seed.source}\n# {tag} {i} {extra if i == 1 else ''}\n", dict(seed.params)), "test")
            for i in range(n)]


def run_broker(tmp_path: Path, ahead: int, props: list[Proposal]) -> tuple[list[Evaluation], EvaluationStats,
                                                                            list[dict[str, Any]]]:
    task_files = TaskFiles.collect(TaskConfig(name="softmax"), TASK_LIBRARY)
    settings = EvaluationConfig(device="cpu")
    spec = BrokerSpec(EvaluatorSpec(task_files, settings, fake_device, fake_preparer), 1, 1.0, 0.0,
                      task_files.build().key, str(tmp_path / f"history-{ahead}.msgpack"), actor_timeout_s=60,
                      compile_ahead=ahead)
    rt = LocalRuntime()
    broker = start_broker(spec, rt)
    try:
        rt.get(broker.start.remote(), timeout=120)
        infos, placement = rt.get(broker.wait_started.remote(120.0), timeout=180)
        assert len(infos) == 1 and placement["waiting"] == 0
        rt.get(broker.begin.remote(), timeout=120)
        answers = rt.get(broker.evaluate_many.remote(props, "full"), timeout=120)
        stats = rt.get(broker.get_stats.remote())
        events = rt.get(broker.drain_events.remote())
    finally:
        rt.get(broker.shutdown.remote(), timeout=60)
    return [a.individual.evaluation for a in answers], stats, events


def test_preparers_keep_the_timing_slot_busy_and_without_them_it_waits_for_every_compile(tmp_path):
    n = 12
    verdicts, ahead, _ = run_broker(tmp_path, 3, proposals("ahead", n))
    assert [v.status for v in verdicts] == [Status.OK] * n
    assert ahead.prepared == n and ahead.warmed == n
    assert ahead.slot_compile_s == 0.0  # every kernel was in the cache when the slot took it
    assert ahead.slot_s == pytest.approx(n * TIME_S, rel=0.5)
    verdicts, alone, _ = run_broker(tmp_path, 0, proposals("alone", n))
    assert [v.status for v in verdicts] == [Status.OK] * n
    assert alone.prepared == 0 and alone.slot_compile_s == pytest.approx(n * COMPILE_S, rel=0.2)
    assert alone.busy_fraction is not None and ahead.busy_fraction is not None
    # expected about 0.8 (12 timings after one compile) and 0.25 (each timing after its compile)
    assert ahead.busy_fraction > 0.6, ahead
    assert alone.busy_fraction < 0.4, alone
    assert ahead.queued_s < alone.queued_s


def test_a_preparer_that_fails_is_dropped_and_its_candidates_are_still_evaluated(tmp_path):
    props = proposals("broken", 5, extra="BROKEN_PREPARER")
    verdicts, stats, events = run_broker(tmp_path, 1, props)
    assert [v.status for v in verdicts] == [Status.OK] * 5  # the slot compiled what nobody had
    assert [e["kind"] for e in events] == ["preparer_dropped"] and "the preparer broke" in events[0]["why"]
    assert stats.slot_compile_s > 0


def test_a_lint_verdict_from_a_preparer_never_reaches_the_evaluator(tmp_path):
    props = proposals("lint", 3, extra="NOT_ALLOWED")
    verdicts, stats, _ = run_broker(tmp_path, 2, props)
    assert [v.status for v in verdicts] == [Status.OK, Status.LINT_ERROR, Status.OK]
    assert verdicts[1].reason == "fake lint"
    assert stats.slot_s == pytest.approx(2 * TIME_S, rel=0.5)


def test_the_real_preparer_gives_the_evaluators_lint_verdict_word_for_word(shared_workers):
    task = NativeTask(TASK_LIBRARY / "softmax")
    seed = softmax_seed()
    bad = Candidate(seed.source + "\nimport os\nos.system('true')\n", dict(seed.params))
    prepared = Preparer(task, EvaluationConfig(device="cpu"), device="cpu").prepare(bad, "full")
    assert prepared.verdict is not None and prepared.verdict.status is Status.LINT_ERROR
    settings = EvaluationConfig(device="cpu")
    with Evaluator(task, settings, device="cpu", **shared_workers(settings)) as ev:
        assert prepared.verdict.reason == ev.evaluate(bad).reason
    fine = Preparer(task, EvaluationConfig(device="cpu"), device="cpu").prepare(seed, "full")
    assert fine.verdict is None and not fine.warmed and "nothing to compile ahead" in fine.note


HOOKS_PROBE = textwrap.dedent("""
    import json, time
    import triton
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    seen = []
    def recording_run(self, *args, grid, warmup, **kwargs):  # stands in for the launcher (no GPU here)
        seen.append(warmup)
        self._do_compile("key")
    def slow_compile(self, *args, **kwargs):
        time.sleep(0.05)
    JITFunction.run = recording_run
    JITFunction._do_compile = slow_compile

    from fitness.sandbox import jit_hooks
    assert jit_hooks.install_clock()

    @triton.jit
    def kernel(x_ptr, n, BLOCK: tl.constexpr):
        pass

    kernel[(1,)](None, 1, BLOCK=16)
    with jit_hooks.compile_only():
        kernel[(1,)](None, 1, BLOCK=16)
        inside = jit_hooks.compiling_only()
    kernel[(1,)](None, 1, BLOCK=16)
    print(json.dumps({"seen": seen, "inside": inside, "after": jit_hooks.compiling_only(),
                      "compile_s": jit_hooks.compile_seconds()}))
""")


def test_jit_hooks_turn_launches_into_compiles_only_inside_the_block_and_time_the_compiler(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}  # no TRITON_INTERPRET: the real JIT
    probe = tmp_path / "probe.py"  # Triton reads a kernel's source from its file
    probe.write_text(HOOKS_PROBE)
    done = subprocess.run([sys.executable, str(probe)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["seen"] == [False, True, False]
    assert out["inside"] is True and out["after"] is False
    assert out["compile_s"] >= 3 * 0.05


def test_a_local_campaign_with_compile_ahead_reports_how_busy_its_evaluators_were(tmp_path):
    config = write_config(tmp_path, evaluators={"count": 1, "compile_ahead": 1}, budget={"generations": 1})
    c, out = local_campaign(config, FAKE_HOOKS)
    summary = c.run()
    assert summary["status"] == "finished"
    assert "1 compile-ahead preparer(s) per evaluator node" in out.getvalue()
    busy = summary["evaluator_busy"]
    assert busy["prepared"] >= summary["evaluations"] - 1  # every fresh candidate but those cut short
    assert busy["compiled_ahead"] == 0  # the interpreter compiles nothing: preparing is the lint
    assert 0 < busy["busy_fraction"] <= 1 and busy["slot_compile_s"] == 0
    assert "evaluators busy" in out.getvalue()
    on_disk = json.loads((Path(summary["run_dir"]) / "summary.json").read_text())
    assert on_disk["evaluator_busy"] == busy
