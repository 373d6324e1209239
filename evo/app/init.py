"""`evo init`: a folder to start from, for one's own computation or a KernelBench problem.

``evo init NAME --numpy`` writes ``NAME/task.py`` (a reference in numpy, its inputs, sizes, dtypes and
tolerance; the template is a row RMS norm), ``NAME/seed.py`` (a naive kernel, correct for the template) and
``NAME/campaign.yaml``. ``evo init NAME --kernelbench FILE`` writes ``NAME/campaign.yaml`` for the
problem file, with sizes for this machine (`evo.app.kernelbench_sizes`), and ``NAME/seed.py`` when a seed
ships for the problem (`evo.contracts.kernelbench_seeds`). Either refuses a folder that exists with
anything in it, then checks what it wrote as ``evo check`` does and prints the command that starts the
campaign.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import yaml

from evo.contracts.kernelbench_seeds import HEADER, shipped_seed

TEMPLATES = Path(__file__).resolve().parent / "init_templates"
LLM_HINT = """  # - kind: llm         # LLM rewrites from any OpenAI-compatible endpoint (its key in OPENAI_API_KEY)
  #   model: gpt-4o-mini
  #   base_url: https://api.openai.com/v1
"""
LLM_FIRST = """  - kind: llm           # no seed ships for this problem: the model writes the first kernel
    model: gpt-4o-mini    # any OpenAI-compatible endpoint; the key is read from OPENAI_API_KEY
    # base_url: http://127.0.0.1:8000/v1
"""


class InitError(ValueError):
    """What `evo init` cannot do, in words for the user."""


def run_command(config: Path) -> str:
    """The command that starts the campaign of `config`, as this program was called (``evo`` or
    ``python -m evo``)."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    start = "evo" if program == "evo" else f"{shlex.quote(sys.executable)} -m evo"
    return f"{start} run {shlex.quote(str(config))}"


def _folder(dest: Path) -> Path:
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise InitError(f"{dest} exists and is not an empty folder: evo init writes a new one (remove it or "
                        "choose another name)")
    if not dest.name.replace("_", "").replace("-", "").isalnum():
        raise InitError(f"{dest.name!r}: a name of letters, digits, _ and - (it names the campaign)")
    return dest


def _fill(template: str, **values: str) -> str:
    return (TEMPLATES / template).read_text().format(**values)


def write_numpy(dest: Path) -> Path:
    """Write the numpy template's task, seed and config into `dest`; the config's path."""
    dest = _folder(dest)
    dest.mkdir(parents=True, exist_ok=True)
    config = dest / "campaign.yaml"
    (dest / "task.py").write_text(_fill("task.py.tmpl", name=dest.name))
    (dest / "seed.py").write_text(_fill("seed.py.tmpl", name=dest.name))
    task = "  path: task.py        # the task module; its seed kernel is seed.py beside it"
    config.write_text(_fill("campaign.yaml.tmpl", name=dest.name, run=run_command(config), task=task, llm=LLM_HINT))
    return config


def write_kernelbench(dest: Path, problem: Path, device: str) -> tuple[Path, bool]:
    """Write a config (and the shipped seed, if any) for the KernelBench `problem` into `dest`: (the
    config's path, whether a seed shipped)."""
    from evo.app.kernelbench_sizes import kernelbench_sizes
    from evo.contracts.task import TaskError

    dest = _folder(dest)
    if not problem.is_file():
        raise InitError(f"--kernelbench {problem}: no such file")
    try:
        sizes = kernelbench_sizes(problem.resolve(), device)
    except TaskError as e:
        raise InitError(str(e)) from None
    seed = shipped_seed(problem)
    dest.mkdir(parents=True, exist_ok=True)
    config = dest / "campaign.yaml"
    where = "the problem's own size" if device == "cuda" else "scaled down so that the interpreter runs it in full"
    lines = [f"  kernelbench: {os.path.relpath(problem.resolve(), dest.resolve())}",
             "  sizes:               # its module-level constants; check: every kernel is compared with Model here",
             f"    check: {_flow(sizes['check'])}",
             f"    bench: {_flow(sizes['bench'])}   # {where}",
             "  dtype: float32"]
    if seed is not None:
        body = seed.read_text()
        kept = "\n".join(line for line in body.splitlines() if not line.startswith(HEADER)).lstrip("\n")
        (dest / "seed.py").write_text(kept + "\n")
        lines.append("  seed: seed.py         # shipped with evo for this problem: naive but correct")
    config.write_text(_fill("campaign.yaml.tmpl", name=dest.name, run=run_command(config), task="\n".join(lines),
                            llm=LLM_HINT if seed is not None else LLM_FIRST))
    return config, seed is not None


def _flow(value: object) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
