"""A run directory is self-contained: it keeps every file the run reads (task module or KernelBench
file, seed, replayed LLM records, the config as given) and `--resume` reads only those."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from evo.app.run.setup import CampaignHooks, prepare
from evo.contracts.config_file import ConfigError
from evo.contracts.native_task import NativeTask

from .conftest import ROOT, SMALL_SOFTMAX
from .islands_fakes import fake_mutator_factory
from .test_cli import evo

HOOKS = CampaignHooks(mutator_factory=fake_mutator_factory)


def work_folder(tmp_path: Path) -> Path:
    """A user's folder: their own task module (a copy of the softmax task, renamed) and seed."""
    work = tmp_path / "work"
    (work / "mytask").mkdir(parents=True)
    shutil.copy(ROOT / "evo/tasks/softmax/task.py", work / "mytask/task.py")
    (work / "mytask/notes.txt").write_text("a file the task folder also holds\n")
    shutil.copy(ROOT / "evo/tasks/softmax/seed.py", work / "my_seed.py")
    shutil.copytree(ROOT / "tests/kernelbench", work / "kb")
    shutil.copy(ROOT / "evo/kernelbench_seeds/23_Softmax.py", work / "kb/softmax_seed.py")
    shutil.copy(ROOT / "configs/llm_records/softmax_standin.jsonl", work / "records.jsonl")
    return work


def write_config(work: Path, task: dict, **extra: object) -> Path:
    cfg = {"name": "inputs", "task": task, "mutators": [{"kind": "optuna"}], "budget": {"generations": 2},
           "output_dir": str(work.parent / "runs"), **extra}
    path = work / "campaign.yaml"
    path.write_text("# the config as the user wrote it\n" + yaml.safe_dump(cfg))
    return path


def moved_away(work: Path) -> None:
    work.rename(work.parent / "elsewhere")
    assert not work.exists()


def test_a_task_module_run_resumes_after_its_folder_is_gone(tmp_path):
    work = work_folder(tmp_path)
    task = {**SMALL_SOFTMAX, "name": None, "path": "mytask", "seed": "my_seed.py"}
    config = write_config(work, task)
    first = prepare(str(config), hooks=HOOKS)
    run = first.store.path
    inputs = run / "inputs"
    assert (inputs / "task/mytask/task.py").read_text() == (ROOT / "evo/tasks/softmax/task.py").read_text()
    assert (inputs / "task/mytask/notes.txt").is_file()  # the task folder's other files too
    assert (inputs / "seed.py").read_text() == (work / "my_seed.py").read_text()
    assert (inputs / "config.given.yaml").read_text() == config.read_text()  # verbatim, comments included
    assert isinstance(first.task, NativeTask) and first.task.path.is_relative_to(inputs)  # built from its copies

    moved_away(work)
    again = prepare(None, resume=str(run), hooks=HOOKS)
    assert again.task.key == first.task.key and again.seed.id == first.seed.id
    assert isinstance(again.task, NativeTask) and again.task.path.is_relative_to(inputs)
    assert again.task_files == first.task_files  # what islands and evaluators build from, by content


def test_a_kernelbench_run_and_its_replayed_llm_records_resume_from_the_run_alone(tmp_path):
    work = work_folder(tmp_path)
    kb = yaml.safe_load((ROOT / "tests/kernelbench/softmax.yaml").read_text())["task"]
    task = {**kb, "kernelbench": "kb/23_Softmax.py", "seed": "kb/softmax_seed.py"}
    llm = {"kind": "llm", "mode": "replay", "record_path": "records.jsonl", "model": "standin-softmax"}
    config = write_config(work, task, mutators=[{"kind": "optuna"}, llm])
    first = prepare(str(config), hooks=HOOKS)
    run = first.store.path
    kept = run / "inputs/kernelbench/23_Softmax.py"
    assert kept.read_bytes() == (ROOT / "tests/kernelbench/23_Softmax.py").read_bytes()
    [replayed] = [m for m in first.mutators if m.kind == "llm"]
    assert Path(str(replayed.record_path)).is_relative_to(run / "inputs")  # the copy, not the user's file

    moved_away(work)
    again = prepare(None, resume=str(run), hooks=HOOKS)
    assert again.task.key == first.task.key and again.seed.id == first.seed.id
    [replayed] = [m for m in again.mutators if m.kind == "llm"]
    record = (ROOT / "configs/llm_records/softmax_standin.jsonl").read_bytes()
    assert Path(str(replayed.record_path)).read_bytes() == record
    assert "llm" in (run / "config.yaml").read_text() and "records.jsonl" in (run / "config.yaml").read_text()


def test_a_run_made_before_runs_kept_their_inputs_gets_them_on_resume(tmp_path):
    work = work_folder(tmp_path)
    config = write_config(work, {**SMALL_SOFTMAX, "name": None, "path": "mytask", "seed": "my_seed.py"})
    run = prepare(str(config), hooks=HOOKS).store.path
    shutil.rmtree(run / "inputs")  # as an older version left it
    again = prepare(None, resume=str(run), hooks=HOOKS)
    assert json.loads((run / "inputs/task.json").read_text())["config"]["path"] == "task/mytask/task.py"
    moved_away(work)
    assert prepare(None, resume=str(run), hooks=HOOKS).task.key == again.task.key


def test_a_missing_input_of_an_old_run_is_named(tmp_path):
    work = work_folder(tmp_path)
    config = write_config(work, {**SMALL_SOFTMAX, "name": None, "path": "mytask", "seed": "my_seed.py"})
    run = prepare(str(config), hooks=HOOKS).store.path
    shutil.rmtree(run / "inputs")
    moved_away(work)
    with pytest.raises(ConfigError, match=r"task\.path: file not found: mytask"):
        prepare(None, resume=str(run), hooks=HOOKS)


@pytest.mark.parametrize("content,problem", [(b"\x00\x01binary", "is a binary file"),
                                             (b"caf\xe9 = 1\n", "is not UTF-8 text"),
                                             (None, "is a directory")])
def test_an_unreadable_kernelbench_or_task_file_is_one_line_and_exit_2(tmp_path, content, problem):
    work = work_folder(tmp_path)
    target = work / "kb/23_Softmax.py"
    target.unlink()
    if content is None:
        target.mkdir()
    else:
        target.write_bytes(content)
    kb = yaml.safe_load((ROOT / "tests/kernelbench/softmax.yaml").read_text())["task"]
    config = write_config(work, {**kb, "kernelbench": "kb/23_Softmax.py"})
    p = evo("run", str(config))
    assert p.returncode == 2, p.stderr
    assert problem in p.stderr and "23_Softmax.py" in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not list((tmp_path / "runs").glob("*"))  # nothing started


@pytest.mark.parametrize("command", ["run", "ablate"])
@pytest.mark.parametrize("kind,problem", [("binary", "is a binary file"), ("empty", "is empty"),
                                          ("folder", "is a directory"), ("latin1", "is not UTF-8 text"),
                                          ("bad yaml", "not valid YAML at line 2")])
def test_an_unreadable_config_or_ablation_file_is_one_line_and_exit_2(tmp_path, command, kind, problem):
    path = tmp_path / "given.yaml"
    if kind == "folder":
        path.mkdir()
    else:
        path.write_bytes({"binary": b"\x00\x01", "empty": b"", "latin1": b"name: caf\xe9\n",
                          "bad yaml": b"task: [1, 2\n"}[kind])
    p = evo(command, str(path))
    assert p.returncode == 2, p.stderr
    assert problem in p.stderr and str(path) in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
