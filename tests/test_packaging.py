"""What a user's site-packages gets: the design's four top-level packages and nothing else (no `tasks` beside a
user's own), with the task library and the shipped seeds inside `evo`."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

from .conftest import ROOT


def test_the_wheel_installs_four_top_level_packages_with_the_task_library_inside_evo(tmp_path):
    # built from a copy of what the project's files name (a checkout's own build/ may hold an older tree)
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("evo", "fitness", "islands", "mutators"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                        "--wheel-dir", str(tmp_path / "wheel"), str(src)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"evo", "fitness", "islands", "mutators"}
    for task in ("softmax", "matmul", "attention"):
        assert f"evo/tasks/{task}/task.py" in names and f"evo/tasks/{task}/seed.py" in names
    assert "evo/tasks/matmul/workloads.yaml" in names
    assert any(n.startswith("evo/kernelbench_seeds/") for n in names)
    assert "mutators/llm/__init__.py" in names and "evo/app/run/campaign.py" in names
