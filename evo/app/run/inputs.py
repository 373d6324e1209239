"""The files a run reads, kept in its directory so that `--resume` needs nothing else.

    RUN_DIR/inputs/
      task.json, task/... or kernelbench/..., seed.py   the task by content (`TaskFiles`)
      llm/N-NAME                                         the record file of mutator N in replay mode
      config.given.yaml                                  the config file as it was given (verbatim)

A run made before runs kept their inputs gets them on its first resume, from the folder it was
started from (if that folder is gone, the resume says which file is missing).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from evo.app.run.store import RunStore
from evo.contracts.candidate import Candidate
from evo.contracts.config import Config
from evo.contracts.config_file import ConfigError
from evo.contracts.mutator_config import AnyMutatorConfig, LLMConfig
from evo.contracts.task import Task
from evo.contracts.task_files import MANIFEST, TaskFiles

INPUTS = "inputs"


def task_root(run_dir: Path) -> Path:
    return run_dir / INPUTS


def record_copy(run_dir: Path, index: int, source: str) -> Path:
    """Where a run keeps the replay record of its mutator `index` (read from `source` at its start)."""
    return run_dir / INPUTS / "llm" / f"{index}-{Path(source).name}"


def keep(run_dir: Path, files: TaskFiles, cfg: Config, given_text: str | None) -> None:
    """Copy the run's inputs into `run_dir` (at its start)."""
    root = task_root(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    files.write(root)
    if given_text is not None:
        (root / "config.given.yaml").write_text(given_text)
    for i, m in enumerate(cfg.mutators):
        if isinstance(m, LLMConfig) and m.mode == "replay" and m.record_path:
            source = Path(m.record_path).expanduser()
            if not source.is_file():
                raise ConfigError(f"mutators.{i} (kind llm): replay record file not found: {source}")
            target = record_copy(run_dir, i, m.record_path)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)


def task_files(store: RunStore, cfg: Config) -> TaskFiles:
    """The run's task by content: its kept copy (made now, from where the run started and `cfg`, the
    run's config, for a run made before runs kept one)."""
    root = task_root(store.path)
    if (root / MANIFEST).is_file():
        return TaskFiles.read(root)
    files = TaskFiles.collect(cfg.task, store.config_dir())
    files = files.with_seed(seed_of(files.build()).source)
    files.write(root)
    return files


def seed_of(task: Task) -> Candidate:
    """The candidate a run of `task` starts from."""
    if not task.seed_source:
        raise ConfigError(f"task {task.name} has no seed candidate to start from (task.seed)")
    return Candidate.from_source(task.seed_source)


def mutators(cfg: Config, run_dir: Path) -> tuple[AnyMutatorConfig, ...]:
    """`cfg.mutators` with each replayed LLM record read from the run's copy (where it has one)."""
    out: list[AnyMutatorConfig] = []
    for i, m in enumerate(cfg.mutators):
        if isinstance(m, LLMConfig) and m.mode == "replay" and m.record_path:
            copy = record_copy(run_dir, i, m.record_path)
            if copy.is_file():
                m = m.model_copy(update={"record_path": str(copy)})
        out.append(m)
    return tuple(out)
