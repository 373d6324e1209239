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

from evo.contracts import dtypes
from evo.contracts.mutator_config import MutatorConfig, SelectionConfig


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
        from evo.contracts.gpus import PROFILES

        if self.target_gpu.lower() not in PROFILES:
            raise ValueError(f"target_gpu {self.target_gpu!r} is not one of {', '.join(sorted(PROFILES))}")
        return self


class MigrationConfig(Strict):
    """Every `interval` generations each island sends copies of its `top_k` best to its neighbours
    under `topology` (ring: the next island; random: a random other island each time; full: all)."""

    interval: int = Field(default=2, ge=1)
    top_k: int = Field(default=1, ge=0)
    topology: Literal["ring", "random", "full"] = "ring"


class IslandsConfig(Strict):
    """The island populations. Each generation an island draws `offspring` parents by tournament,
    each parent goes to one mutator, and the best `population` of parents and children survive."""

    count: int = Field(default=2, ge=1)
    population: int = Field(default=8, ge=1)
    offspring: int = Field(default=4, ge=1)
    tournament_size: int = Field(default=3, ge=1)
    hall_of_fame: int = Field(default=5, ge=1)
    migration: MigrationConfig = MigrationConfig()


class EvaluatorsConfig(Strict):
    """Evaluator actors, each owning one evaluation worker. `placement: auto` gives one actor per GPU
    (`num_gpus=1`, so timings never share a GPU) when the cluster has GPUs, else CPU actors.
    `count` defaults to the number of GPUs (gpu) or CPUs (cpu) in the cluster."""

    placement: Literal["auto", "gpu", "cpu"] = "auto"
    count: int | None = Field(default=None, ge=1)
    cpus_per_evaluator: float = Field(default=1.0, gt=0)
    actor_timeout_s: float | None = Field(default=None, gt=0)  # default: from evaluation.timeout_s


class BudgetConfig(Strict):
    """The campaign stops at the first limit reached; a limit left out does not apply.
    `evaluations` counts every evaluation done (full and quick); `target_speedup` is over the seed."""

    generations: int | None = Field(default=10, ge=0)
    evaluations: int | None = Field(default=None, ge=1)
    wall_time_s: float | None = Field(default=None, gt=0)
    llm_usd: float | None = Field(default=None, ge=0)
    target_speedup: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _some_limit(self) -> BudgetConfig:
        if all(v is None for v in self.model_dump().values()):
            raise ValueError("give at least one limit (generations, evaluations, wall_time_s, llm_usd, target_speedup)")
        return self


class Config(Strict):
    """The top level of a config file. `evo eval` and `evo check` use `task` and `evaluation`;
    `evo run` uses everything."""

    name: str = Field(default="campaign", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    seed: int = 0
    task: TaskConfig
    evaluation: EvaluationConfig = EvaluationConfig()
    islands: IslandsConfig = IslandsConfig()
    evaluators: EvaluatorsConfig = EvaluatorsConfig()
    mutators: list[MutatorConfig] = Field(default_factory=list)
    selection: SelectionConfig = SelectionConfig()
    budget: BudgetConfig = BudgetConfig()
    checkpoint_interval: int = Field(default=1, ge=1)  # generations between checkpoints
    output_dir: str = "runs"  # run directories go here (relative: to the working directory)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation may hold (through lists, unions and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in getattr(annotation, "__args__", ()) or ():
        found.extend(_models_in(arg))
    origin = getattr(annotation, "__origin__", None)
    if origin is not None and not found:
        found.extend(_models_in(origin))
    return found


def _tag(model: type[BaseModel]) -> Any:
    field = model.model_fields.get("kind")
    return field.default if field is not None else None


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> tuple[type[BaseModel] | None, str]:
    """The pydantic model that owns the key at `loc` (for listing valid keys) and the key's path
    as the user wrote it (list indices kept, union tags dropped)."""
    options: list[type[BaseModel]] = [model]
    shown: list[str] = []
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(part, int):
            shown.append(str(part))
            continue
        tagged = [m for m in options if _tag(m) == part]
        if len(options) > 1 and tagged:
            options = tagged  # pydantic puts the discriminator's value in the location
            continue
        shown.append(part)
        if last:
            break
        field = next((m.model_fields[part] for m in options if part in m.model_fields), None)
        options = _models_in(field.annotation) if field is not None else []
    owner = options[0] if len(options) == 1 else None
    return owner, ".".join(shown)


def format_validation_error(err: ValidationError, model: type[BaseModel], source: str) -> str:
    lines = []
    for e in err.errors():
        loc = tuple(e["loc"])
        owner, where = _model_at(model, loc)
        where = where or "(top level)"
        if e["type"] == "extra_forbidden":
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
