"""The HTML reports in a real headless browser (Debian's chromium): what a user would see."""

from __future__ import annotations

import re

import pytest
from PIL import Image

from evo.app.report.data import load_run
from evo.app.report.page import write_run_report
from evo.app.report.trace import trace_of
from evo.contracts.verdict import Status

from .browser import dom, screenshot
from .synthetic import Ev, make_run

pytestmark = pytest.mark.slow


def images(page: str) -> list[str]:
    return re.findall(r"<img [^>]*>", page)


def visible_text(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", re.sub(r"<(script|style)[^>]*>.*?</\1>", "", page,
                                                              flags=re.S)))


def assert_images_rendered(page: str, expected: int) -> None:
    imgs = images(page)
    assert len(imgs) == expected
    assert all('data-rendered="yes"' in i for i in imgs), imgs
    assert "figure failed to load" not in visible_text(page)


def test_the_run_report_shows_the_speedup_the_source_and_rendered_figures(ablation_run, chromium, tmp_path):
    assert ablation_run.report_rc == 0
    page_path = ablation_run.report_run / "report.html"
    page = dom(chromium, page_path)
    text = visible_text(page)
    best = trace_of(load_run(ablation_run.report_run)).best_speedup
    assert best is not None and best > 1.0
    assert f"{best:.2f}x" in text and "faster than the seed (model)" in text
    assert "Latency source: model" in text and "NOT measured" in text
    assert_images_rendered(page, 2)
    for heading in ("Best kernel", "Progress", "Migrations", "Mutators", "LLM cost", "Failures",
                    "Lineage of the best kernel"):
        assert f">{heading}<" in page, heading
    assert 'class="add"' in page  # the lineage's diff, its added lines highlighted
    assert "http://" not in page_path.read_text().replace("http://www.w3.org", "")  # nothing external
    shot = screenshot(chromium, page_path, tmp_path / "report.png", height=3000)
    colors = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20) or []
    assert len(colors) > 200  # plots, cards and tables drawn, not a blank page


def test_the_ablation_page_shows_its_tables_and_figures(ablation_run, chromium, tmp_path):
    page_path = ablation_run.directory / "ablation.html"
    page = dom(chromium, page_path)
    text = visible_text(page)
    assert "Outcome" in text and "Effort to reach the best" in text and "4/4 runs finished" in text
    assert "llm" in text and "stoke" in text and "baseline" in text
    assert_images_rendered(page, 3)
    screenshot(chromium, page_path, tmp_path / "ablation.png", height=2000)


@pytest.mark.parametrize("case", ["in progress, no improvement", "seed rejected"])
def test_reports_of_unfinished_and_failed_runs_say_so(case, chromium, tmp_path):
    if case == "seed rejected":
        run = make_run(tmp_path, "bad", [Ev("seed", None, 1.0, Status.WRONG_OUTPUT, reason="output 0 wrong at size 7"),
                                         Ev("stoke", None, 2.0, Status.COMPILE_ERROR, reason="does not compile")],
                       status="failed")
        expect = ["The seed kernel was rejected (wrong_output): output 0 wrong at size 7", "Failed:",
                  "No latency", "compile_error"]
    else:
        run = make_run(tmp_path, "slow", [Ev("seed", 1.0, 1.0), Ev("stoke", 2.0, 2.0), Ev("stoke", 1.5, 3.0)],
                       status=None)
        expect = ["In progress", "No kernel faster than the seed was found", "1.00x", "The best kernel is the seed"]
    html, md = write_run_report(run.path)
    page = dom(chromium, html)
    text = visible_text(page)
    for phrase in expect:
        assert phrase in text, phrase
    assert_images_rendered(page, len(images(page)))
    assert md.read_text().startswith("# evo report")
