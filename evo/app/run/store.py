"""The run directory of a campaign: everything needed to inspect it, report on it and resume it.

    RUN_DIR/
      config.yaml        the resolved config (names of secret variables only, never their values)
      run.json           where relative paths in the config resolved, when the run was created, the config used
      inputs/            copies of every file the run reads (`evo.app.run.inputs`); --resume reads only these
      history.msgpack    append-only: one record per evaluation run (candidate, lineage, verdict)
      events.msgpack     append-only: generations, migrations, restored actors, stops
      checkpoints/gen-NNNNNN/{driver,island-II}.msgpack   the last two complete checkpoints
      best_kernel.py     the best kernel as a standalone module (its params baked in)
      summary.json       the outcome so far (rewritten at each checkpoint and at the end)

Append-only logs are streams of msgpack maps (`evo.contracts.history`).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from evo.contracts.config import Config
from evo.contracts.config_file import ConfigError, parse_config
from evo.contracts.history import MsgpackLog, pack, unpack, write_atomic

CHECKPOINTS_KEPT = 2


class RunStoreError(ValueError):
    """A run directory that cannot be used (missing, incomplete); the message names the path."""


@dataclass(frozen=True)
class Checkpoint:
    generation: int
    driver: dict[str, Any]
    islands: dict[int, bytes]  # island index -> packed island state
    path: Path


# keys of a run's config that may change when it is resumed: the budget (to extend a finished run)
RESUMABLE_CHANGES = ("budget",)


class RunStore:
    """One campaign's run directory."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.history = MsgpackLog(self.path / "history.msgpack")
        self.events = MsgpackLog(self.path / "events.msgpack")
        self.checkpoints = self.path / "checkpoints"

    @classmethod
    def create(cls, output_dir: Path, config: Config, *, config_dir: Path) -> RunStore:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        output_dir.mkdir(parents=True, exist_ok=True)
        path = output_dir / f"{config.name}-{stamp}"
        n = 1
        while path.exists():
            n += 1
            path = output_dir / f"{config.name}-{stamp}-{n}"
        path.mkdir()
        store = cls(path)
        store.checkpoints.mkdir()
        store._update_info(config_dir=str(config_dir), created=_dt.datetime.now().isoformat(timespec="seconds"))
        store.write_config(config)
        return store

    @classmethod
    def open(cls, path: Path) -> RunStore:
        path = Path(path)
        for name in ("config.yaml", "run.json"):
            if not (path / name).is_file():
                raise RunStoreError(f"{path} is not a run directory (no {name})")
        store = cls(path)
        store.checkpoints.mkdir(exist_ok=True)
        return store

    def _update_info(self, **values: Any) -> None:
        path = self.path / "run.json"
        info = json.loads(path.read_text()) if path.is_file() else {}
        info.update(values)
        write_atomic(path, (json.dumps(info, indent=2) + "\n").encode())

    def write_config(self, config: Config) -> None:
        """The resolved config, as the run uses it (the only writer of config.yaml); run.json keeps a copy,
        so that an edit of config.yaml behind the run's back is found on resume."""
        data = config.model_dump(mode="json")
        write_atomic(self.path / "config.yaml", yaml.safe_dump(data, sort_keys=False).encode())
        self._update_info(config=data)

    def recorded_config(self) -> dict[str, Any]:
        """The config as the run last wrote it (run.json's copy; {} for runs made before it kept one)."""
        recorded = json.loads((self.path / "run.json").read_text()).get("config")
        return recorded if isinstance(recorded, dict) else {}

    def config(self) -> Config:
        """The run's config.yaml, validated by the schema (the only reader of config.yaml). A file edited
        since the run wrote it (other than its budget, which `--resume` may change) is an error naming the
        keys: islands, mutators or the task changed under a run would resume it with state that no longer
        fits."""
        path = self.path / "config.yaml"
        try:
            cfg = parse_config(yaml.safe_load(path.read_text()), source=str(path))
        except (OSError, yaml.YAMLError, ConfigError) as e:
            raise RunStoreError(f"{path} cannot be used: {e}") from None
        recorded = self.recorded_config()
        if recorded:  # runs made before run.json kept a copy are taken as they are
            try:  # both read by today's schema: a key added since, at its default, is no edit
                recorded = parse_config(recorded, source=str(self.path / "run.json")).model_dump(mode="json")
            except ConfigError:
                pass  # compared as recorded
            now = cfg.model_dump(mode="json")
            differ = sorted(k for k in set(now) | set(recorded)
                            if now.get(k) != recorded.get(k) and k not in RESUMABLE_CHANGES)
            if differ:
                raise RunStoreError(
                    f"{path} was edited after the run started: {', '.join(differ)} differ from the config the run "
                    f"used (kept in run.json); only {', '.join(RESUMABLE_CHANGES)} may change on --resume "
                    "(restore the file, or start a new run)")
        return cfg

    def config_dir(self) -> Path:
        return Path(json.loads((self.path / "run.json").read_text())["config_dir"])

    # -- checkpoints ---------------------------------------------------------------------------

    def write_checkpoint(self, generation: int, driver: dict[str, Any], islands: dict[int, bytes]) -> Path:
        """Write all states of one generation at once: a directory renamed into place when complete."""
        final = self.checkpoints / f"gen-{generation:06d}"
        tmp = self.checkpoints / f".tmp-gen-{generation:06d}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for index, data in islands.items():
            (tmp / f"island-{index:02d}.msgpack").write_bytes(data)
        (tmp / "driver.msgpack").write_bytes(pack(driver))
        if final.exists():
            shutil.rmtree(final)
        os.rename(tmp, final)
        for old in self._complete()[:-CHECKPOINTS_KEPT]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def _complete(self) -> list[Path]:
        if not self.checkpoints.is_dir():
            return []
        return sorted(p for p in self.checkpoints.glob("gen-*") if (p / "driver.msgpack").is_file())

    def latest_checkpoint(self) -> Checkpoint | None:
        found = self._complete()
        if not found:
            return None
        path = found[-1]
        islands = {int(p.stem.split("-")[1]): p.read_bytes() for p in path.glob("island-*.msgpack")}
        driver = unpack((path / "driver.msgpack").read_bytes())
        return Checkpoint(int(path.name.split("-")[1]), driver, islands, path)

    # -- results -------------------------------------------------------------------------------

    def write_best(self, text: str) -> Path:
        path = self.path / "best_kernel.py"
        write_atomic(path, text.encode())
        return path

    def write_summary(self, summary: dict[str, Any]) -> Path:
        path = self.path / "summary.json"
        write_atomic(path, (json.dumps(summary, indent=2, default=str) + "\n").encode())
        return path

    def summary(self) -> dict[str, Any] | None:
        path = self.path / "summary.json"
        return json.loads(path.read_text()) if path.is_file() else None
