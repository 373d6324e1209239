"""The tests' Ray starter (`tests/ray_head.py`): a start whose port was taken before Ray bound it is
started again on fresh ports; any other failure is raised with Ray's output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .ray_head import start_ray

# the first start fails as a raylet does when another process took its port; the second comes up
SCRIPT = """import pathlib, sys, time
marker = pathlib.Path(sys.argv[1])
if sys.argv[2] == "taken" and not marker.exists():
    marker.write_text("1"); print("bind: Address already in use", flush=True); sys.exit(1)
if sys.argv[2] == "broken":
    print("raylet: something else", flush=True); sys.exit(1)
print("Ray runtime started", flush=True); time.sleep(60)
"""


class FakeRay:
    def __init__(self, tmp: Path, how: str) -> None:
        self.tmp = str(tmp)
        self.log = tmp / "out.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.options = [sys.executable, "-c", SCRIPT, str(tmp / "marker"), how]
        self.ports = {"port": 1}  # (the fake takes them as its last argument and ignores them)
        self.kills = 0
        self.stopped = False

    def up(self) -> bool:
        return "Ray runtime started" in self.log.read_text()

    def kill(self) -> None:
        self.kills += 1
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        self.stopped = True
        self.kill()


def test_a_taken_port_starts_again_on_fresh_ports_and_another_failure_is_raised(tmp_path):
    (tmp_path / "a").mkdir()
    taken = FakeRay(tmp_path / "a", "taken")
    proc = start_ray(taken, {}, taken.up, "fake start", timeout=60)
    assert taken.kills == 1 and taken.ports != {"port": 1} and proc.poll() is None and not taken.stopped
    taken.stop()
    (tmp_path / "b").mkdir()
    broken = FakeRay(tmp_path / "b", "broken")
    with pytest.raises(RuntimeError, match="fake start failed: raylet: something else"):
        start_ray(broken, {}, broken.up, "fake start", timeout=60)
    assert broken.ports == {"port": 1} and broken.stopped
