"""Ablation files: a base campaign config, variants that patch it, seeds, and a budget per run.

    name: mutators                 # the ablation directory is <output_dir>/<name>/
    base: ablation_base.yaml       # a campaign config (relative to this file)
    baseline: all-fixed            # the variant every other one is tested against
    seeds: [0, 1, 2]               # each variant runs once per seed (the campaign's `seed`)
    budget: {generations: 4}       # the budget of every run (replaces the base's `budget`)
    target_speedup: 2.0            # optional: the "reached target" column (default: 90% of the best found)
    parallel: null                 # optional cap on runs at once (default: as the cluster's resources allow)
    output_dir: ablations          # relative: to the working directory
    variants:
      llm:
        mutators: [{kind: llm, mode: replay, record_path: records/softmax.jsonl}]
      all-bandit:
        selection: {policy: ucb1}

A variant is a patch of the base config, merged like this: a mapping in the patch is merged key by
key into the base's mapping at the same place (recursively); anything else, lists included,
replaces the base's value (so a variant's `mutators:` is its whole mutator list); `null` sets the
key to null. An empty patch (`{}`) is the base itself. Top-level keys starting with `x-` are
ignored (a place for YAML anchors that variants reuse). `name`, `seed`, `budget` and `output_dir`
belong to the ablation, not to a variant. Every variant's merged config is validated in full (the
campaign schema, unknown keys forbidden) when the file is loaded, before anything runs; an error
names the variant and the key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from evo.app.run.setup import with_relative_paths, with_resolved_paths
from evo.contracts.config import BudgetConfig, Config, Strict
from evo.contracts.config_file import ConfigError, format_validation_error, parse_config, read_yaml, resolve_path

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
ABLATION_KEYS = ("name", "seed", "budget", "output_dir")  # set by the ablation for every run


class AblationConfig(Strict):
    """The top level of an ablation file (see the module docstring)."""

    name: str = Field(pattern=NAME_PATTERN)
    base: str
    baseline: str
    seeds: list[int] = Field(min_length=1)
    budget: BudgetConfig
    target_speedup: float | None = Field(default=None, gt=0)
    parallel: int | None = Field(default=None, ge=1)
    output_dir: str = "ablations"
    variants: dict[str, dict[str, Any]] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _drop_extensions(cls, data: Any) -> Any:
        # `x-...` keys hold YAML anchors for reuse (as in docker-compose files); they are not settings
        if isinstance(data, Mapping):
            return {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith("x-"))}
        return data

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError(f"seeds repeat: {v}")
        return v

    @field_validator("variants", mode="before")
    @classmethod
    def _patches(cls, v: Any) -> Any:
        if isinstance(v, Mapping):  # `llm-only:` with nothing under it is the base unchanged
            return {k: ({} if p is None else p) for k, p in v.items()}
        return v

    @model_validator(mode="after")
    def _names(self) -> AblationConfig:
        import re

        bad = [n for n in self.variants if not re.match(NAME_PATTERN, n)]
        if bad:
            raise ValueError(f"variant names must be letters, digits, '_', '.', '-' (got {bad})")
        if self.baseline not in self.variants:
            raise ValueError(f"baseline {self.baseline!r} is not a variant (variants: {', '.join(self.variants)})")
        return self


def deep_merge(base: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """`base` patched by `patch`: mappings merge recursively, anything else (lists too) replaces."""
    out = dict(base)
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


@dataclass(frozen=True)
class RunSpec:
    """One campaign of the ablation: a variant's config with one seed and the ablation's budget."""

    variant: str
    seed: int
    config: Config
    config_dir: Path  # where the config's relative paths resolve (the base config's folder)

    @property
    def key(self) -> str:
        return f"{self.variant}-s{self.seed}"

    def config_hash(self) -> str:
        """Identifies the config (to notice a variant changed under finished runs)."""
        return config_hash(self.config, self.config_dir)

    def portable_config(self) -> dict[str, Any]:
        """The config as written (keys it does not set left out), its paths relative to the config's
        folder: kept beside a run's figures, so a later schema can read it again (`hash_of_kept`)."""
        return with_relative_paths(self.config, self.config_dir).model_dump(mode="json", exclude_unset=True)


def config_hash(config: Config, config_dir: Path) -> str:
    """A short hash of a config as today's schema reads it (every key, defaults included), its paths
    relative to `config_dir`: the same config in another checkout (another clone, a worktree, a moved
    folder) hashes the same."""
    text = json.dumps(with_relative_paths(config, config_dir).model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def hash_of_kept(kept: Mapping[str, Any], config_dir: Path) -> str | None:
    """`config_hash` of a config kept by `RunSpec.portable_config`, read by today's schema (a key added
    since, at its default, changes nothing); None when today's schema refuses it."""
    try:
        return config_hash(parse_config(dict(kept), source="a kept config"), config_dir)
    except ConfigError:
        return None


@dataclass(frozen=True)
class Ablation:
    cfg: AblationConfig
    source: Path  # the ablation file
    base_dir: Path  # the base config's folder: relative paths in every variant resolve there
    variants: dict[str, Config]  # each variant's validated config (seed and name set per run)

    def runs(self) -> list[RunSpec]:
        """Every variant x seed, seeds inner (so a partial ablation covers every variant early)."""
        out = []
        for seed in self.cfg.seeds:
            for name, cfg in self.variants.items():
                run_name = f"{name}-s{seed}"
                out.append(RunSpec(name, seed, cfg.model_copy(update={"seed": seed, "name": run_name}), self.base_dir))
        return out

    def select(self, variants: Sequence[str] = (), seeds: Sequence[int] = ()) -> list[RunSpec]:
        """The runs of these variants and seeds (empty: all of them), in `runs()` order; a name or seed
        the file does not have is a `ConfigError` listing the ones it has."""
        unknown = [v for v in variants if v not in self.variants]
        if unknown:
            raise ConfigError(f"{self.source}: no variant {', '.join(map(repr, unknown))} (variants: "
                              f"{', '.join(self.variants)})")
        missing = [s for s in seeds if s not in self.cfg.seeds]
        if missing:
            raise ConfigError(f"{self.source}: no seed {', '.join(map(str, missing))} (seeds: "
                              f"{', '.join(map(str, self.cfg.seeds))})")
        return [r for r in self.runs() if (not variants or r.variant in variants) and (not seeds or r.seed in seeds)]

    def directory(self, output: str | Path | None = None) -> Path:
        """<output or output_dir>/<name> (a relative one: relative to the working directory, as for runs)."""
        return (Path(output or self.cfg.output_dir).expanduser() / self.cfg.name).resolve()


def load_ablation(path: str | Path) -> Ablation:
    """Read and validate an ablation file and every variant's config; a `ConfigError` names the key."""
    path = Path(path)
    data = read_yaml(path, "ablation file", "`base:` and `variants:`")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys")
    try:
        cfg = AblationConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, AblationConfig, str(path))) from None
    base_path = resolve_path(cfg.base, path.resolve().parent, f"{path}: base")
    base = read_yaml(base_path)
    if not isinstance(base, dict):
        raise ConfigError(f"{base_path}: the top level must be a mapping of keys")
    parse_config(base, source=str(base_path))  # a broken base is reported as such, not once per variant
    variants = {}
    for name, patch in cfg.variants.items():
        where = f"{path}: variants.{name}"
        if not isinstance(patch, Mapping):
            raise ConfigError(f"{where}: a variant is a mapping of keys to patch, got {type(patch).__name__}")
        owned = [k for k in ABLATION_KEYS if k in patch]
        if owned:
            raise ConfigError(f"{where}: {', '.join(owned)} is set by the ablation for every run, not by a variant "
                              "(top-level seeds:, budget:, output_dir:)")
        merged = deep_merge(base, patch)
        merged.update(budget=cfg.budget.model_dump(), seed=cfg.seeds[0])
        variants[name] = with_resolved_paths(parse_config(merged, source=where), base_path.parent)
    return Ablation(cfg, path.resolve(), base_path.parent, variants)
