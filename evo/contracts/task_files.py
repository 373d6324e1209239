"""A task by content: the files it is built from, and its config section with paths into them.

A run keeps these files in its directory (`RUN_DIR/inputs/`), so that `--resume` needs nothing from
the folder the run was started from (under `ray job submit` that folder is a temporary copy that
goes away). Islands and evaluators, on whatever node, build the task from the same bytes instead of
paths that may differ there, or be gone.

What is kept: for a library task or a task module (`name`, `path`), the module and the other files
of its folder (not sub-folders); for a KernelBench problem (`kernelbench`), its file; always the seed
the run starts from, as `seed.py` (so the seed's SPACE is the one the run used).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from evo.contracts.config import TaskConfig
from evo.contracts.config_file import ConfigError, read_text, resolve_path
from evo.contracts.native_task import TASK_LIBRARY
from evo.contracts.task import Task

MANIFEST = "task.json"
FOLDER_LIMIT_BYTES = 8 * 1024 * 1024  # a task folder bigger than this is not a task folder


@dataclass(frozen=True)
class TaskFiles:
    config: TaskConfig  # its paths are relative to the root the files are written under
    files: tuple[tuple[str, bytes], ...]  # (relative path, content), sorted

    @classmethod
    def collect(cls, cfg: TaskConfig, base_dir: Path) -> TaskFiles:
        """The files `cfg` names (paths relative to `base_dir`, else the working directory); a
        `ConfigError` naming the file when one is missing or unreadable."""
        files: dict[str, bytes] = {}
        update: dict[str, object] = {"name": None, "path": None, "kernelbench": None}
        if cfg.kernelbench:
            path = resolve_path(cfg.kernelbench, base_dir, "task.kernelbench")
            files[f"kernelbench/{path.name}"] = read_text(path, "task.kernelbench file").encode()
            update["kernelbench"] = f"kernelbench/{path.name}"
        else:
            if cfg.name:
                folder = TASK_LIBRARY / cfg.name
                if not (folder / "task.py").is_file():
                    from evo.contracts.native_task import library_tasks

                    raise ConfigError(f"task.name: no task {cfg.name!r} in the library; valid: "
                                      f"{', '.join(library_tasks())}")
                module = folder / "task.py"
            else:
                assert cfg.path is not None
                module = resolve_path(cfg.path, base_dir, "task.path")
                if module.is_dir():
                    module = module / "task.py"
            folder = module.parent
            keep = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
            if cfg.path and Path(cfg.path).suffix == ".py":
                keep = [module, *(p for p in keep if p.name == "seed.py")]  # a module given as a file: not its folder
            if sum(p.stat().st_size for p in keep) > FOLDER_LIMIT_BYTES:
                raise ConfigError(f"task folder {folder} holds more than {FOLDER_LIMIT_BYTES >> 20} MiB; "
                                  "give the task module its own folder")
            for p in keep:
                files[f"task/{folder.name}/{p.name}"] = p.read_bytes() if p != module else \
                    read_text(p, "task module").encode()
            update["path"] = f"task/{folder.name}/{module.name}"
        if cfg.seed:
            files["seed.py"] = read_text(resolve_path(cfg.seed, base_dir, "task.seed"), "task.seed file").encode()
            update["seed"] = "seed.py"
        return cls(cfg.model_copy(update=update), tuple(sorted(files.items())))

    def with_seed(self, source: str) -> TaskFiles:
        """The same task starting from `source` (kept as `seed.py`): the seed the run actually used."""
        files = dict(self.files)
        files["seed.py"] = source.encode()
        return TaskFiles(self.config.model_copy(update={"seed": "seed.py"}), tuple(sorted(files.items())))

    @property
    def digest(self) -> str:
        h = hashlib.sha256(self.config.model_dump_json().encode())
        for name, data in self.files:
            h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
        return h.hexdigest()

    def write(self, root: Path) -> None:
        """The files and the manifest under `root` (which `read` reads back)."""
        for name, data in self.files:
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        manifest = {"config": self.config.model_dump(mode="json"), "files": [name for name, _ in self.files]}
        (root / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")

    @classmethod
    def read(cls, root: Path) -> TaskFiles:
        try:
            manifest = json.loads((root / MANIFEST).read_text())
            files = tuple((str(n), (root / n).read_bytes()) for n in manifest["files"])
            return cls(TaskConfig.model_validate(manifest["config"]), files)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"{root} does not hold a run's task files ({type(e).__name__}: {e})") from None

    def build(self, root: Path | None = None, *, check_forward: bool = True) -> Task:
        """The task, built from the files under `root` (written there if missing), else from a private
        folder of this process (made once per content, removed when the process exits). A process the
        driver hands the task to passes `check_forward=False` (see `build_task`)."""
        from evo.contracts.task_loader import build_task

        if root is None:
            digest = self.digest
            root = _BUILT.get(digest)
            if root is None:
                # private (0700, unpredictable name): another user of this machine cannot plant a task module
                root = Path(tempfile.mkdtemp(prefix="evo-task-"))
                atexit.register(shutil.rmtree, root, ignore_errors=True)
                self.write(root)
                _BUILT[digest] = root
        elif not (root / MANIFEST).is_file():
            self.write(root)
        return build_task(self.config, root, check_forward=check_forward)


_BUILT: dict[str, Path] = {}  # content digest -> where this process wrote those files
