"""The documentation: the site builds with `mkdocs build --strict` (every page in the navigation, every
link and anchor found), its reference pages are what the code generates, and the README stays a page
whose links lead into the site."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from evo.app import reference_docs
from evo.app.cli import build_parser
from evo.contracts.config import Config

from .conftest import ROOT


def build(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of `project`'s mkdocs.yml into `site` (Material's end-of-life banner off)."""
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=project, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_the_site_builds_strictly(tmp_path):
    p = build(ROOT, tmp_path / "site")
    assert p.returncode == 0, p.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "config" / "index.html").is_file()


def test_a_broken_link_fails_the_strict_build(tmp_path):
    """The build above would catch a page's broken link (a copy of the site with one added)."""
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    (tmp_path / "mkdocs.yml").write_text((ROOT / "mkdocs.yml").read_text())
    with (docs / "index.md").open("a") as f:
        f.write("\n[gone](concepts/gone.md)\n")
    p = build(tmp_path, tmp_path / "site")
    assert p.returncode != 0 and "concepts/gone.md" in p.stderr


def test_the_reference_pages_are_what_the_code_generates():
    for name, make in reference_docs.PAGES.items():
        assert (ROOT / "docs" / "reference" / name).read_text() == make(), (
            f"docs/reference/{name} is out of date: run python -m evo.app.reference_docs")
    assert reference_docs.main(["--check"]) == 0


def test_every_config_key_and_every_command_option_is_in_the_reference():
    config = (ROOT / "docs" / "reference" / "config.md").read_text()
    for section in ("task", "evaluation", "islands", "evaluators", "budget", "stoke", "optuna", "llm"):
        assert f"{{#{section}}}" in config
    assert all(f"| `{key}` |" in config for key in Config.model_fields)
    cli = (ROOT / "docs" / "reference" / "cli.md").read_text()
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name, parser in sub.choices.items():  # type: ignore[union-attr]
        assert f"## evo {name}" in cli
        for action in parser._actions:
            for flag in action.option_strings:
                assert flag in ("-h", "--help") or f"`{flag}" in cli, (name, flag)


def test_the_readme_is_a_page_and_its_links_lead_into_the_site():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    # near the top: the two commands a new user runs
    head = "\n".join(text.splitlines()[:40])
    assert "bash scripts/main.sh" in head and "bash scripts/test.sh" in head
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", text)
    assert links
    assert [link for link in links if not (ROOT / link).is_file()] == []
