"""`evo init`: a newcomer's folder for a numpy computation or a KernelBench problem, checked, and the
command it prints runs the campaign to its end; the README's tour, run as written."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from .conftest import ROOT, bash_block
from .test_cli import last_json

KB = ROOT / "tests" / "kernelbench" / "level1"


def clean_env() -> dict[str, str]:
    """This environment without Ray's settings (the printed command starts its own Ray), this checkout first."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("RAY_")}, "PYTHONPATH": str(ROOT)}


def evo(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evo", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=clean_env())


def started_by(p: subprocess.CompletedProcess[str]) -> str:
    """The command `evo init` printed last, the one that starts the campaign."""
    lines = p.stderr.strip().splitlines()
    assert "start the campaign with:" in lines[-2], p.stderr[-2000:]
    return lines[-1]


def shell(command: str, cwd: Path, timeout: float = 900, **env: str) -> subprocess.CompletedProcess[str]:
    """`command` run as a shell runs it, with `env` added to the clean environment; it must succeed."""
    p = subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                       env={**clean_env(), **env})
    assert p.returncode == 0, p.stderr[-3000:]
    return p


def run_printed(command: str, cwd: Path) -> dict:
    """The JSON line a printed command prints last."""
    return last_json(shell(command, cwd).stdout)


def readme_tour() -> list[str]:
    """The README's five-minute tour, one command per line, comments dropped."""
    section = (ROOT / "README.md").read_text().split("## A five-minute tour", 1)[1]
    return [c for c in (line.split("  #", 1)[0].strip() for line in bash_block(section)) if c]


def as_here(command: str, run_dir: str = "") -> str:
    """A README command with this interpreter for the checkout's venv and `run_dir` for RUN_DIR."""
    assert command.startswith(".venv/bin/python -m evo "), command
    return command.replace(".venv/bin/python", shlex.quote(sys.executable), 1).replace("RUN_DIR", run_dir)


def test_the_readme_tour_runs_as_written_from_init_to_export(tmp_path):
    """`evo init --numpy` writes a task that passes its check and prints the command that runs the campaign,
    which is the tour's next line; the campaign finishes, and its report and export run as the tour shows."""
    tour = readme_tour()
    assert [c.split()[3] for c in tour] == ["init", "run", "report", "export"], tour
    p = shell(as_here(tour[0]), tmp_path, timeout=600)
    folder = tmp_path / "my_norm"
    assert sorted(f.name for f in folder.iterdir()) == ["campaign.yaml", "seed.py", "task.py"]
    check = last_json(p.stdout)
    assert check["ok"] and check["task"] == "my_norm"  # the folder names the task
    cfg = yaml.safe_load((folder / "campaign.yaml").read_text())
    assert cfg["name"] == "my_norm" and cfg["task"] == {"path": "task.py"}
    command = started_by(p)
    assert command.endswith("-m evo run my_norm/campaign.yaml")
    assert tour[1].endswith(command.split(" -m ", 1)[1])  # the tour's next line is what init printed
    assert command in (folder / "campaign.yaml").read_text()  # the config says how it is started, too
    # outside any cluster `evo run` starts its own Ray, quietly, its token in its environment only
    p = shell(command, tmp_path, HOME=str(tmp_path / "home"))
    summary, said = last_json(p.stdout), p.stdout + p.stderr
    assert summary["status"] == "finished" and summary["evaluations"] > 0
    assert summary["best_speedup"] > 1.0  # the naive seed's tiles leave room the first generations find
    assert "WARNING" not in said and "Token authentication" not in said, said[-3000:]
    assert not (tmp_path / "home" / ".ray").exists() and "2 CPU evaluator(s)" in said
    run_dir = summary["run_dir"]
    report = run_printed(as_here(tour[2], run_dir), tmp_path)
    assert Path(report["html"]).is_file() and Path(report["markdown"]).is_file()
    assert "my_norm" in Path(report["markdown"]).read_text()
    export = run_printed(as_here(tour[3], run_dir), tmp_path)
    files = [Path(f) for f in export["files"]]
    assert files and all(f.is_file() and f.parent == Path(run_dir) / "export" for f in files)
    assert "mylib::rms_norm" in files[0].read_text()
    # a second init of the same name writes nothing
    before = {f.name: f.read_bytes() for f in folder.iterdir() if f.is_file()}
    again = evo("init", "my_norm", "--numpy", cwd=tmp_path)
    assert again.returncode == 2 and "exists and is not an empty folder" in again.stderr, again.stderr
    assert "Traceback" not in again.stderr
    assert {f.name: f.read_bytes() for f in folder.iterdir() if f.is_file()} == before


def test_init_kernelbench_finds_the_shipped_seed_by_content_and_the_campaign_runs(tmp_path):
    problems = tmp_path / "problems"
    problems.mkdir()
    shutil.copy(KB / "23_Softmax.py", problems / "row_softmax.py")  # the seed is found whatever the name
    p = evo("init", "kb_softmax", "--kernelbench", "problems/row_softmax.py", "--device", "cpu", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    folder = tmp_path / "kb_softmax"
    assert (folder / "seed.py").is_file() and "kernelbench problem:" not in (folder / "seed.py").read_text()
    task = yaml.safe_load((folder / "campaign.yaml").read_text())["task"]
    assert task["kernelbench"] == "../problems/row_softmax.py" and task["seed"] == "seed.py"
    [bench] = task["sizes"]["bench"]
    assert bench["batch_size"] * bench["dim"] <= 1 << 16  # the interpreter runs it in full
    assert {"batch_size": 1, "dim": 3} in task["sizes"]["check"]
    # the printed command, on the config with one island and its first population only, for the test's time
    # (the numpy test runs the config as written)
    config = folder / "campaign.yaml"
    written = config.read_text()
    assert "islands:\n  count: 2\n" in written and "  generations: 4\n" in written
    config.write_text(written.replace("islands:\n  count: 2\n", "islands:\n  count: 1\n")
                      .replace("  generations: 4\n", "  generations: 0\n"))
    summary = run_printed(started_by(p), tmp_path)
    assert summary["status"] == "finished" and summary["evaluations"] > 0


def test_init_kernelbench_without_a_shipped_seed_says_how_to_get_a_first_kernel(tmp_path):
    problem = tmp_path / "log_softmax.py"
    problem.write_text((KB / "23_Softmax.py").read_text().replace("torch.softmax(", "torch.log_softmax("))
    p = evo("init", "kb_log_softmax", "--kernelbench", str(problem), cwd=tmp_path)
    assert p.returncode == 1, p.stderr[-3000:]
    assert "no seed kernel ships for this problem" in p.stderr and "seed: seed.py" in p.stderr
    assert "Traceback" not in p.stderr
    folder = tmp_path / "kb_log_softmax"
    assert not (folder / "seed.py").exists()
    cfg = yaml.safe_load((folder / "campaign.yaml").read_text())
    assert [m["kind"] for m in cfg["mutators"]] == ["optuna", "stoke", "llm"]  # the model writes the first one
    check = last_json(p.stdout)
    assert not check["ok"] and [f["name"] for f in check["findings"] if not f["ok"]] == ["seed candidate passes"]


def test_init_refuses_a_missing_problem_file_in_one_line(tmp_path):
    p = evo("init", "x", "--kernelbench", "nowhere.py", cwd=tmp_path)
    assert p.returncode == 2 and "nowhere.py: no such file" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "x").exists()
