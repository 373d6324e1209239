"""A campaign as users run it on a cluster, its head lost with its driver (both killed with SIGKILL), and
the run resumed on a new head. (`ray job submit --working-dir .` placing one evaluator per GPU is
tests/test_docs_cluster.py's job, on a head and two GPU nodes; `evo run` starting its own Ray where there is no
cluster is the README tour's, tests/test_init.py.)

This machine has no CUDA: heads advertise GPUs (`--num-gpus`), so evaluator actors are placed one per
GPU and, since torch sees no CUDA, evaluate in the Triton interpreter. Mutators and latency are the
fakes of `tests.campaign_job`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evo.contracts.history import MsgpackLog

from .conftest import ROOT, SMALL_SOFTMAX
from .ray_head import RayHead
from .test_campaign_ray import assert_nothing_evaluated_twice, events, history, write_config

pytestmark = pytest.mark.slow


def wait_for(predicate, timeout: float, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"the driver ended early: {log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out: {log.read_text()[-3000:]}"
        time.sleep(0.2)


def test_a_head_lost_with_its_driver_resumes_from_the_run_directory_on_a_new_head(tmp_path):
    """The head's machine is lost mid-run: its Ray (GCS, raylet, workers) and the driver killed together
    with SIGKILL. A new head is started and the run resumes from its run directory alone: the config,
    task module and seed lived in a working folder that is gone by then (as a job's temporary working
    directory is), so the run directory's copies are all it needs, and nothing of the old cluster is."""
    work = tmp_path / "work"
    shutil.copytree(ROOT / "evo/tasks/softmax", work / "mysoftmax")
    (work / "mysoftmax/seed.py").rename(work / "start.py")
    task = {**SMALL_SOFTMAX, "name": None, "path": "mysoftmax", "seed": "start.py"}
    config = write_config(work, task=task, budget={"generations": 5}, output_dir=str(tmp_path / "runs"))
    token = secrets.token_hex(16)
    lost = RayHead(num_cpus=2, num_gpus=2, dashboard=False, token=token).start()
    log = tmp_path / "driver.log"
    try:
        env = {**lost.env(), "RAY_ADDRESS": lost.address}
        with open(log, "wb") as f:
            driver = subprocess.Popen([sys.executable, "-m", "tests.campaign_job", "run", str(config)], cwd=ROOT,
                                      env=env, stdout=f, stderr=subprocess.STDOUT)
        try:
            runs = tmp_path / "runs"
            wait_for(lambda: any(runs.glob("*/checkpoints/gen-000002/driver.msgpack")), 300, driver, log)
        finally:
            os.kill(driver.pid, signal.SIGKILL)
            lost.kill()
            driver.wait()
    finally:
        lost.stop()
    [run_dir] = list(runs.iterdir())
    before = history(run_dir)
    assert before
    work.rename(tmp_path / "moved")
    with RayHead(num_cpus=2, num_gpus=2, dashboard=False, token=token) as head:
        p = subprocess.run([sys.executable, "-m", "tests.campaign_job", "run", "--resume", str(run_dir)], cwd=ROOT,
                           env={**head.env(), "RAY_ADDRESS": head.address}, capture_output=True, text=True,
                           timeout=600)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    assert "resuming from the checkpoint of generation" in out
    after = history(run_dir)
    assert after[: len(before)] == before  # append-only: every earlier evaluation kept as it was
    assert_nothing_evaluated_twice(after)  # and none repeated
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["generation"] == 5
    assert summary["evaluations"] == len(after)
    assert len(events(run_dir, "resume")) == 1
    assert [e["status"] for e in MsgpackLog(run_dir / "events.msgpack").read() if e["kind"] == "stop"] == ["finished"]
    started = {e["evaluators"][0]["node_id"] for e in MsgpackLog(run_dir / "events.msgpack").read()
               if e["kind"] in ("start", "resume")}
    assert len(started) == 2  # the evaluators of the resumed session ran on the new head's node
