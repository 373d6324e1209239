"""The zygote (`fitness.sandbox.zygote`): a worker forked from it starts as a subprocess would (its own
environment, folder, session and descriptors, statuses the driver can read), is confined as a started
worker is, and the zygote and its workers end with their driver."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fitness.sandbox import zygote
from fitness.sandbox.process import Worker, zygote_env

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def template() -> Iterator[zygote.Zygote]:
    z = zygote.Zygote(zygote_env())
    yield z
    z.close()


def probe(z: zygote.Zygote, folder: Path, *args: str) -> tuple[zygote.Forked, dict[str, Any], int, Path]:
    """Fork `tests.zygote_probe` from `z`; its process, its report, the descriptor number it was given, its log."""
    r, w = os.pipe()
    env = {"PATH": os.environ["PATH"], "HOME": str(folder), "PYTHONPATH": str(ROOT), "EVO_PROBE": "given"}
    log_path = folder / "probe.log"
    with open(log_path, "wb") as log:
        proc = z.spawn([sys.executable, "-m", "tests.zygote_probe", "--out", str(w), *args], env, str(folder),
                       log.fileno(), (w,))
    os.close(w)
    data = b""
    while select.select([r], [], [], 60.0)[0]:
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.close(r)
    return proc, {**json.loads(data), "given_env": env}, w, log_path


def test_a_forked_worker_starts_as_a_subprocess_would(template, tmp_path):
    proc, report, fd, log = probe(template, tmp_path)
    assert proc.wait(60) == 0 and proc.returncode == 0
    assert report["env"] == report["given_env"]  # exactly what it was given: nothing of the zygote's or the driver's
    assert report["cwd"] == report["path0"] == str(tmp_path)
    assert report["sid"] == report["pid"] == proc.pid  # a session of its own: the driver kills its group
    assert report["ppid"] == template.proc.pid
    assert report["stdin"] == "/dev/null" and report["fds"] == [0, 1, 2, fd]  # only what it was passed
    assert report["torch"] and not report["triton"]  # triton is the worker's to import, after its environment
    assert report["name"] == "__main__" and report["argv"][1:3] == ["--out", str(fd)]
    assert "probe printed this" in log.read_text()


def test_exit_statuses_reach_the_driver(template, tmp_path):
    proc, _, _, _ = probe(template, tmp_path, "--code", "3")
    assert proc.wait(60) == 3
    proc, _, _, log = probe(template, tmp_path, "--raise")
    assert proc.wait(60) == 1 and "RuntimeError: the probe's own error" in log.read_text()
    proc, _, _, _ = probe(template, tmp_path, "--hang")
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(0.2)
    assert proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(60) == -signal.SIGKILL


def test_forked_workers_are_confined_as_started_ones_are(monkeypatch):
    forked = [Worker(device="cpu", memory_mb=1024, isolation=True),
              Worker(compile_only=True, memory_mb=1024, isolation=True)]
    try:
        for w in forked:
            assert w.request({"op": "ping"}, 180.0)["ok"]
            assert isinstance(w.proc, zygote.Forked) and w.forks
        monkeypatch.setenv("EVO_WORKER_ZYGOTE", "0")
        started = Worker(device="cpu", memory_mb=1024, isolation=True)
        try:
            assert started.request({"op": "ping"}, 180.0)["ok"]
            assert isinstance(started.proc, subprocess.Popen)
            assert (started.sandbox, started.sandbox_problems) == (forked[0].sandbox, forked[0].sandbox_problems)
            assert (started.sandbox, started.sandbox_problems) == (forked[1].sandbox, forked[1].sandbox_problems)
        finally:
            started.close()
    finally:
        for w in forked:
            w.close()


DRIVER = r"""
import json, os, signal, sys, time
from fitness.sandbox import zygote
from fitness.sandbox.process import Worker, zygote_env
from tests.test_zygote import alive
first = Worker(device="cpu", memory_mb=1024, isolation=True)
assert first.request({"op": "ping"}, 180.0)["ok"]
gone = zygote.shared(zygote_env()).proc.pid
os.kill(gone, signal.SIGKILL)
code = first.proc.wait(60)
deadline = time.monotonic() + 60
while alive(first.pid):
    assert time.monotonic() < deadline, "the worker outlived its zygote"
    time.sleep(0.1)
second = Worker(device="cpu", memory_mb=1024, isolation=True)
assert second.request({"op": "ping"}, 180.0)["ok"]
print(json.dumps({"gone": gone, "code": code, "zygote": zygote.shared(zygote_env()).proc.pid, "worker": second.pid}),
      flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_workers_end_with_their_zygote_and_the_zygote_with_its_driver():
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert driver.stdout is not None
        line = driver.stdout.readline()
        assert line, f"the driver failed (exit {driver.wait()})"
        seen = json.loads(line)
        assert seen["code"] is None  # its status went with the zygote: the worker's death reason says so
        assert seen["zygote"] != seen["gone"] and alive(seen["zygote"]) and alive(seen["worker"])
    finally:
        driver.kill()
        driver.wait()
    deadline = time.monotonic() + 60
    while alive(seen["zygote"]) or alive(seen["worker"]):
        assert time.monotonic() < deadline, "the zygote or its worker outlived the driver"
        time.sleep(0.1)


def test_only_a_cpu_worker_run_as_a_module_of_this_python_is_forked(monkeypatch):
    module = [sys.executable, "-m", "fitness.worker"]
    assert zygote.forkable(module, "cpu")
    assert not zygote.forkable(module, "cuda")  # CUDA and fork do not mix
    assert not zygote.forkable([sys.executable, "-c", "pass"], "cpu")
    assert not zygote.forkable(["/usr/bin/python3", "-m", "fitness.worker"], "cpu")
    monkeypatch.setenv("EVO_WORKER_ZYGOTE", "0")
    assert not zygote.forkable(module, "cpu")


def test_a_process_forked_from_the_driver_gets_a_zygote_of_its_own():
    mine = zygote.shared(zygote_env())
    assert mine is not None
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the driver's zygote answers the driver; a fork of the driver must not read its replies
        try:
            own = zygote.shared(zygote_env())
            os.write(w, str(own.proc.pid if own is not None else 0).encode())
            if own is not None:
                own.close()
        finally:
            os._exit(0)
    os.close(w)
    theirs = int(os.read(r, 64) or b"0")
    os.close(r)
    os.waitpid(pid, 0)
    assert theirs and theirs != mine.proc.pid
    assert zygote.shared(zygote_env()) is mine and mine.alive()
