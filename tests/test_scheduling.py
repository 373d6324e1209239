"""How the suite is spread over workers (`tests.scheduling`): units, their order, the durations read back."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from . import scheduling


def test_a_test_s_unit_is_its_file_or_the_shared_folder_it_is_in():
    assert scheduling.unit("tests/test_cli.py::test_x[a::b]") == "tests/test_cli.py"
    assert scheduling.unit("tests/reports/test_reports_html.py::test_y") == "tests/reports/"
    assert scheduling.unit("tests/reports/test_ablation_run.py::test_z") == "tests/reports/"


def test_units_start_longest_first_each_in_its_own_order(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(scheduling, "durations", lambda: {"tests/test_b.py": 50.0, "tests/reports/": 90.0})
    ids = ["tests/test_a.py::one", "tests/test_b.py::two", "tests/test_b.py::one", "tests/reports/test_r.py::x",
           "tests/test_c.py::one", "tests/reports/test_s.py::y"]
    ordered = [i.nodeid for i in scheduling.longest_first([SimpleNamespace(nodeid=n) for n in ids])]
    assert ordered == ["tests/reports/test_r.py::x", "tests/reports/test_s.py::y", "tests/test_b.py::two",
                       "tests/test_b.py::one", "tests/test_a.py::one", "tests/test_c.py::one"]


def test_durations_are_read_back_per_unit_from_a_junit_report(tmp_path: Path):
    report = tmp_path / "junit.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_cli" name="test_a" time="1.5"/>'
        '<testcase classname="tests.test_cli" name="test_b" time="2.0"/>'
        '<testcase classname="tests.reports.test_ablation_run" name="test_c" time="30"/>'
        '<testcase classname="tests.reports.test_reports_html" name="test_d" time="4"/>'
        '</testsuite></testsuites>')
    assert scheduling.from_junit(report) == {"tests/reports/": 34.0, "tests/test_cli.py": 3.5}
    known = scheduling.durations()  # the shipped figures name files that exist
    root = Path(scheduling.__file__).resolve().parent.parent
    assert known and all((root / unit).exists() for unit in known)
