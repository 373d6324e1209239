"""The workers' and zygote's folders (`fitness.sandbox.scratch`): a folder whose maker was killed is removed by
the next process that makes one; a live maker's, another user's or another pid namespace's are not."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fitness.sandbox import scratch

ROOT = Path(__file__).resolve().parents[1]
MAKE = "from fitness.sandbox import scratch; print(*(scratch.folder(k) for k in scratch.KINDS))"


def made_by_a_process_that_ended() -> list[Path]:
    """One folder of each kind, made by a process that has ended (as one killed would have left them)."""
    p = subprocess.run([sys.executable, "-c", MAKE], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr
    return [Path(w) for w in p.stdout.split()]


def test_the_folders_of_a_maker_that_is_gone_are_removed_and_no_others(monkeypatch):
    live = Path(scratch.folder("home"))  # this process's (its first folder sweeps: not again below until asked)
    gone = made_by_a_process_that_ended()
    (gone[0] / "left.txt").write_text("what a killed worker left")
    os.symlink("/etc", gone[0] / "link")  # removed as a link, never followed
    ns = scratch._namespace()
    elsewhere = Path(tempfile.mkdtemp(prefix=f"evo-home-{ns + 1}-{os.getpid() + 10**7}-"))  # another namespace
    unrelated = Path(tempfile.mkdtemp(prefix="evo-home-"))  # not named by a maker
    monkeypatch.setattr(scratch, "_swept", False)
    try:
        assert all(p.is_dir() for p in gone)
        scratch.sweep()
        assert not any(p.exists() for p in gone)
        assert live.is_dir() and elsewhere.is_dir() and unrelated.is_dir() and Path("/etc/hostname").exists()
    finally:
        for p in (live, elsewhere, unrelated):
            p.rmdir()


def test_a_folder_is_of_a_known_kind():
    with pytest.raises(ValueError, match="scratch folder"):
        scratch.folder("cache")
