"""Every parse of the project goes through `evo.contracts.syntax`: one lock per process, and one more try
after CPython 3.11's "AST constructor recursion depth mismatch" (threads parsing at once; a local campaign's
islands and evaluators are threads)."""

from __future__ import annotations

import ast
import re
import threading

import pytest

from evo.contracts import syntax

from .conftest import ROOT

PACKAGES = ("evo", "fitness", "mutators", "islands")


def test_no_module_of_the_project_parses_but_through_the_lock():
    direct = re.compile(r"\bast\.parse\(")
    found = [f"{path.relative_to(ROOT)}:{n}" for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
             if path != ROOT / "evo/contracts/syntax.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if direct.search(line)]
    assert not found, f"ast.parse outside evo.contracts.syntax: {found}"


def test_a_parse_holds_the_lock_and_gives_what_ast_parse_gives(monkeypatch):
    held: list[bool] = []
    real = ast.parse

    def watched(*args, **kwargs):
        held.append(syntax._LOCK.locked())
        return real(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", watched)
    assert ast.dump(syntax.parse_module("x = (1 + 2)\n")) == ast.dump(real("x = (1 + 2)\n"))
    assert isinstance(syntax.parse_expression("a * b").body, ast.BinOp)
    assert held == [True, True]
    with pytest.raises(SyntaxError) as e:
        syntax.parse_module("def f(:\n", "kernel.py")
    assert e.value.filename == "kernel.py"
    assert not syntax._LOCK.locked()  # released after an error too


def test_the_mismatch_is_tried_once_more_and_any_other_system_error_is_not(monkeypatch):
    real = ast.parse
    calls: list[int] = []

    def flaky(failures: int, message: str):
        def parse(*args, **kwargs):
            calls.append(1)
            if len(calls) <= failures:
                raise SystemError(message)
            return real(*args, **kwargs)
        return parse

    mismatch = "AST constructor recursion depth mismatch (before=159, after=178)"
    monkeypatch.setattr(ast, "parse", flaky(1, mismatch))
    assert isinstance(syntax.parse_module("y = 1\n"), ast.Module) and len(calls) == 2
    calls.clear()
    monkeypatch.setattr(ast, "parse", flaky(2, mismatch))
    with pytest.raises(SystemError, match="mismatch"):
        syntax.parse_module("y = 1\n")
    assert len(calls) == 2
    calls.clear()
    monkeypatch.setattr(ast, "parse", flaky(1, "something else"))
    with pytest.raises(SystemError, match="something else"):
        syntax.parse_module("y = 1\n")
    assert len(calls) == 1


def test_threads_parsing_at_once_all_get_their_tree():
    source = "\n".join(f"def f{i}(x):\n    return [(x + {i}) * y for y in range({i})]\n" for i in range(200))
    expected = ast.dump(ast.parse(source))
    results: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(5):
                results.append(ast.dump(syntax.parse_module(source)))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and results == [expected] * 20
