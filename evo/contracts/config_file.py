"""Reading configs: YAML from a file, validated against the schema (`evo.contracts.config`), with
errors that name the key, the valid choices and the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from evo.contracts.config import Config


class ConfigError(ValueError):
    """A config that cannot be used; the message names the key or path."""


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


def read_text(path: str | Path, what: str = "config file") -> str:
    """The UTF-8 text of a file named on the command line or in a config; a `ConfigError` naming the
    path and the problem when it is missing, a directory, unreadable, binary or not UTF-8."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{what} not found: {path}")
    if p.is_dir():
        raise ConfigError(f"{what} {path} is a directory, not a file")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ConfigError(f"{what} {path} cannot be read: {e.strerror or e}") from None
    if b"\0" in data:
        raise ConfigError(f"{what} {path} is a binary file, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{what} {path} is not UTF-8 text (byte {e.start})") from None


def read_yaml(path: str | Path, what: str = "config file", needs: str = "at least a `task:` section") -> Any:
    """The YAML document of a file; a one-line `ConfigError` when it cannot be read, is not YAML or is empty."""
    text = read_text(path, what)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{path}: not valid YAML{where}: {problem}") from None
    if data is None:
        raise ConfigError(f"{path} is empty: {what}s need {needs}")
    return data


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
