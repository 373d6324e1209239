"""The layers the design promises, checked on the imports themselves.

Contracts (``evo.contracts``) at the bottom import nothing else of the project; fitness, mutators and
islands import only downward (fitness below mutators below islands); the application (``evo.app``,
the CLI) sits on top and nothing imports it. No module imports another in a loop, lazy imports
inside functions included, and no private name (``_x``) is imported from another file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("evo", "fitness", "mutators", "islands")
# lower number = lower layer; a module may import its own layer and the ones below
LAYERS = {"evo.contracts": 0, "fitness.sandbox": 1, "fitness.check": 2, "fitness.latency": 3, "fitness": 4,
          "mutators": 5, "islands": 6, "evo": 7}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _project_modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def _imports(path: Path, known: set[str]) -> list[tuple[str, list[str], int]]:
    """(imported project module, names taken from it, line) for every import in the file."""
    out: list[tuple[str, list[str], int]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names if a.name.split(".")[0] in PACKAGES]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
            names = [a.name for a in node.names]
            # `from pkg import module` imports the module
            mods = [f"{node.module}.{n}" for n in names if f"{node.module}.{n}" in known]
            out += [(m, [], node.lineno) for m in mods]
            out.append((node.module, [n for n in names if f"{node.module}.{n}" not in known], node.lineno))
    return out


def _layer(module: str) -> int:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


@pytest.fixture(scope="module")
def graph() -> dict[str, list[tuple[str, list[str], int]]]:
    modules = _project_modules()
    return {m: _imports(p, set(modules)) for m, p in modules.items()}


def test_every_import_goes_down_the_layers(graph):
    upward = [f"{m}:{line} imports {dep}" for m, deps in graph.items() for dep, _, line in deps
              if _layer(dep) > _layer(m)]
    assert not upward, "imports into a higher layer:\n" + "\n".join(upward)


def test_the_contracts_import_nothing_else_of_the_project(graph):
    found = [f"{m} imports {dep}" for m, deps in graph.items() if m.startswith("evo.contracts")
             for dep, _, _ in deps if not dep.startswith("evo.contracts")]
    assert not found, "\n".join(found)


def test_no_module_imports_another_in_a_loop(graph):
    edges = {m: {d for d, _, _ in deps if d in graph and d != m} for m, deps in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(edges[m]):
            if state.get(d) == 1:
                cycles.append([*stack[stack.index(d):], d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_private_name_is_imported_from_another_file(graph):
    private = [f"{m}:{line} takes {n} from {dep}" for m, deps in graph.items() for dep, names, line in deps
               for n in names if n.startswith("_") and not n.startswith("__")]
    assert not private, "\n".join(private)


def test_the_checker_sees_an_upward_import_and_a_cycle(tmp_path):
    """The walk itself works: it reads lazy imports inside functions and resolves `from pkg import mod`."""
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from evo.app import cli\n    from fitness.latency.stage import LatencyStage\n")
    found = _imports(f, {"evo.app.cli"})
    assert ("evo.app.cli", [], 2) in found and ("fitness.latency.stage", ["LatencyStage"], 3) in found
    assert _layer("evo.app.cli") > _layer("islands.island") > _layer("mutators.stoke.mutator")
    assert _layer("mutators.stoke.mutator") > _layer("fitness.evaluate")
    assert _layer("fitness.evaluate") > _layer("fitness.latency.stage") > _layer("fitness.sandbox.process")
    assert _layer("fitness.sandbox.zones") > _layer("evo.contracts.task")
