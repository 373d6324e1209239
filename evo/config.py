"""Campaign configuration: YAML validated by pydantic models with ``extra="forbid"``.

A misspelled key or a wrong type is a clear error naming the key and the valid choices, never a
silent default. Relative paths are resolved against the config file's folder. Secrets are named
by environment variable (``api_key_env``), never stored in configs or run directories.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evo import dtypes


class ConfigError(ValueError):
    """A config that cannot be used; the message names the key or path."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SizesConfig(Strict):
    """Sizes that override a task's constants: `check` for correctness, `bench` for latency."""

    check: list[dict[str, Any]] = Field(min_length=1)
    bench: list[dict[str, Any]] = Field(default_factory=list)


class ToleranceConfig(Strict):
    """Pass when |out - ref| <= atol * rms(ref) + rtol * |ref| (atol in units of the output's RMS)."""

    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)


class TaskConfig(Strict):
    """Which computation to optimize: a library task (`name`), a native task module (`path`),
    or a KernelBench problem file (`kernelbench`, which needs `sizes`)."""

    name: str | None = None
    path: str | None = None
    kernelbench: str | None = None
    sizes: SizesConfig | None = None
    dtype: str | None = None
    seed: str | None = None
    tolerance: ToleranceConfig | None = None
    redraw_params: bool = True

    @model_validator(mode="after")
    def _one_source(self) -> TaskConfig:
        given = [k for k in ("name", "path", "kernelbench") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(f"give exactly one of name, path, kernelbench (got {given or 'none'})")
        if self.kernelbench and self.sizes is None:
            raise ValueError("a kernelbench task needs sizes: {check: [...], bench: [...]}")
        if self.dtype is not None and self.dtype not in dtypes.FLOAT_DTYPES:
            raise ValueError(f"dtype {self.dtype!r} is not one of {', '.join(dtypes.FLOAT_DTYPES)}")
        return self


class EvaluationConfig(Strict):
    """How candidates are checked and timed.

    latency: ``auto`` measures on CUDA and models a ``target_gpu`` elsewhere; ``model`` models
    even on CUDA; ``off`` skips the latency stage. ``baselines`` are timed in the same worker
    session as each candidate (on CUDA; the model has only the seed). ``timing_rep_ms`` is how
    long the timed repetitions of one candidate last, spread over ``timing_copies`` input copies.
    """

    device: Literal["auto", "cpu", "cuda"] = "auto"
    timeout_s: float = Field(default=60.0, gt=0)
    memory_mb: int = Field(default=4096, ge=256)
    draws: int = Field(default=2, ge=1, le=16)
    quick_sizes: int = Field(default=2, ge=1)
    latency: Literal["auto", "model", "off"] = "auto"
    target_gpu: str = "h100"
    baselines: list[Literal["seed", "torch", "torch_compile"]] = Field(default=["seed", "torch", "torch_compile"])
    timing_rep_ms: float = Field(default=100.0, gt=0)
    timing_copies: int = Field(default=4, ge=1, le=16)
    latency_timeout_s: float = Field(default=300.0, gt=0)

    @model_validator(mode="after")
    def _known_gpu(self) -> EvaluationConfig:
        from fitness.gpus import PROFILES

        if self.target_gpu.lower() not in PROFILES:
            raise ValueError(f"target_gpu {self.target_gpu!r} is not one of {', '.join(sorted(PROFILES))}")
        return self


class Config(Strict):
    """The top level of a config file."""

    name: str = "campaign"
    seed: int = 0
    task: TaskConfig
    evaluation: EvaluationConfig = EvaluationConfig()


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The pydantic model that owns the key at `loc` (for listing valid keys)."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return None
        ann = field.annotation
        args = getattr(ann, "__args__", ()) or (ann,)
        nxt = next((a for a in args if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if nxt is None:
            return None
        current = nxt
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def format_validation_error(err: ValidationError, model: type[BaseModel], source: str) -> str:
    lines = []
    for e in err.errors():
        loc = tuple(e["loc"])
        where = ".".join(str(p) for p in loc) or "(top level)"
        if e["type"] == "extra_forbidden":
            owner = _model_at(model, loc)
            valid = ", ".join(owner.model_fields) if owner else "?"
            lines.append(f"{source}: unknown key '{where}' (valid keys here: {valid})")
        elif e["type"] == "missing":
            lines.append(f"{source}: missing required key '{where}'")
        else:
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"{source}: {where}: {msg} (got {e.get('input')!r})" if e.get("input") is not None
                         and not isinstance(e.get("input"), dict) else f"{source}: {where}: {msg}")
    return "\n".join(lines)


def parse_config(data: Any, *, source: str = "config", model: type[Config] = Config) -> Config:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, model, source)) from None


def read_yaml(path: str | Path) -> Any:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        return yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None


def load_config(path: str | Path) -> Config:
    return parse_config(read_yaml(path), source=str(path))


def resolve_path(value: str, base_dir: Path, what: str) -> Path:
    """A path from a config: relative to the config's folder, else to the working directory."""
    p = Path(value).expanduser()
    if p.is_absolute():
        candidates = [p]
    else:
        candidates = [base_dir / p, Path.cwd() / p]
    for c in candidates:
        if c.exists():
            return c.resolve()
    tried = " or ".join(str(c) for c in candidates)
    raise ConfigError(f"{what}: file not found: {value} (looked for {tried})")
