"""The documentation site's reference pages, generated from the code that defines what they describe:
every config key from the pydantic schema (`evo.contracts.config.Config`, its mutator entries and the
ablation file's keys) and every command and option from the CLI's argparse parser.

    python -m evo.app.reference_docs           # writes docs/reference/config.md and docs/reference/cli.md
    python -m evo.app.reference_docs --check   # exit 1 naming the pages that differ from what it would write

`tests/test_docs.py` holds the committed pages to this output, so a key or an option added without
regenerating them fails the tests.
"""

from __future__ import annotations

import argparse
import enum
import inspect
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from evo.app.ablation.config import AblationConfig
from evo.app.cli import build_parser
from evo.contracts.config import Config

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reference"
WIDTH = 100  # the usage lines' width
BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"), ("min_length", "at least"),
          ("max_length", "at most"), ("pattern", "matches"))


def _type(t: Any) -> str:
    """A field's annotation in words a config writer reads."""
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [a for a in args if a is not type(None)]
        text = " or ".join(_type(a) for a in parts)
        return f"{text} or null" if len(parts) < len(args) else text
    if origin is typing.Annotated:
        return _type(args[0])
    if origin in (list, tuple):
        return f"list of {_type(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {_type(args[0])} to {_type(args[1])}" if args else "mapping"
    if inspect.isclass(t) and issubclass(t, enum.Enum):
        return " \\| ".join(f"`{m.value}`" for m in t)
    if inspect.isclass(t) and issubclass(t, BaseModel):
        return f"[{_section_name(t)}](#{_section_name(t)})"
    if t is Any:
        return "any"
    return getattr(t, "__name__", str(t))


def _section_name(model: type[BaseModel]) -> str:
    """A model's section in the page: its title and its anchor."""
    return model.__name__.removesuffix("Config").lower() or model.__name__.lower()


def _default(f: FieldInfo) -> str:
    if f.is_required():
        return "required"
    if f.default_factory is not None:
        value = f.default_factory()  # type: ignore[call-arg]
    else:
        value = f.default
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return "(section defaults)"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, list):
        value = [v.value if isinstance(v, enum.Enum) else v for v in value]
    if isinstance(value, float):
        value = round(value, 6)
    return f"`{value}`" if value is not None else "null"


def _bounds(f: FieldInfo) -> str:
    out = []
    for meta in f.metadata:
        for attr, word in BOUNDS:
            v = getattr(meta, attr, None)
            if v is not None:
                out.append(f"{word} `{v}`")
    return ", ".join(out)


def _nested(t: Any) -> Iterator[type[BaseModel]]:
    if inspect.isclass(t) and issubclass(t, BaseModel):
        yield t
    for a in typing.get_args(t):
        yield from _nested(a)


def _doc(model: type[BaseModel]) -> str:
    text = inspect.getdoc(model) or ""
    return " ".join(text.split()) if text and not text.startswith(("Usage docs", "!!! abstract")) else ""


def _sections(root: type[BaseModel], title: str, done: set[type[BaseModel]]) -> list[str]:
    """One table per model reachable from `root` and not in `done` (which gains them), the root first, in the
    order the keys name them."""
    seen: list[type[BaseModel]] = []

    def walk(m: type[BaseModel]) -> None:
        if m in seen or m in done:
            return
        seen.append(m)
        for f in m.model_fields.values():
            for n in _nested(f.annotation):
                walk(n)

    walk(root)
    done.update(seen)
    lines: list[str] = []
    for i, m in enumerate(seen):
        lines += [f"## {title if i == 0 else _section_name(m)} {{#{_section_name(m)}}}", ""]
        if doc := _doc(m):
            lines += [doc, ""]
        lines += ["| key | type | default | bounds |", "| --- | --- | --- | --- |"]
        for name, f in m.model_fields.items():
            key = f.alias or name
            lines.append(f"| `{key}` | {_type(f.annotation)} | {_default(f)} | {_bounds(f)} |")
        lines.append("")
    return lines


def config_page() -> str:
    lines = ["# Config keys", "",
             "Generated from the pydantic schema (`python -m evo.app.reference_docs`); every key, its type, its "
             "default and its bounds. A key not listed is an error naming the valid ones; a section left out takes "
             "its defaults. Each entry of `mutators:` is one of the sections stoke, optuna, llm or sweep, chosen by "
             "its `kind`.", ""]
    done: set[type[BaseModel]] = set()
    lines += _sections(Config, "Campaign config (top level)", done)
    lines += ["# Ablation files", "", "The file `evo ablate` reads.", ""]
    lines += _sections(AblationConfig, "Ablation (top level)", done)
    return "\n".join(lines).rstrip() + "\n"


def _actions(p: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for a in p._actions:  # argparse keeps no public list of a parser's arguments
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
            yield a


def cli_page() -> str:
    parser = build_parser()
    lines = ["# Command line", "",
             "Generated from the CLI's parser (`python -m evo.app.reference_docs`). Run as `evo COMMAND` when "
             "installed, or `.venv/bin/python -m evo COMMAND` in a checkout. Exit status: 0 done (or accepted), "
             "1 a rejected candidate or a failed run, 2 a usage or config error.", ""]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in sub._choices_actions}
    for name, p in sub.choices.items():
        usage = argparse.HelpFormatter(p.prog, width=WIDTH)  # not the terminal's width: the page is the same anywhere
        usage.add_usage(p.usage, p._actions, p._mutually_exclusive_groups)
        lines += [f"## evo {name}", "", helps.get(name) or "", "", "```text", usage.format_help().strip(), "```", ""]
        rows = []
        for a in _actions(p):
            flag = ", ".join(a.option_strings) or a.dest
            extra = []
            if a.choices:
                extra.append("one of " + ", ".join(f"`{c}`" for c in a.choices))
            if a.required and a.option_strings:
                extra.append("required")
            if a.default not in (None, False, argparse.SUPPRESS) and a.option_strings:
                extra.append(f"default `{a.default}`")
            text = " ".join((a.help or "").split())
            rows.append(f"| `{flag}` | {text}{'; ' if text and extra else ''}{'; '.join(extra)} |")
        if rows:
            lines += ["| argument | meaning |", "| --- | --- |", *rows, ""]
    return "\n".join(lines).rstrip() + "\n"


PAGES = {"config.md": config_page, "cli.md": cli_page}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="write (or --check) the documentation's generated reference pages")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page differs")
    args = ap.parse_args(argv)
    stale = []
    for name, make in PAGES.items():
        path, text = DOCS / name, make()
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print("out of date (run python -m evo.app.reference_docs): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
