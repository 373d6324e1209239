"""The latency model's version: derived from its code, recorded in every modelled verdict, and what
keeps figures of two models apart (a run's speedups, a resume, an ablation's rows)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evo.app.ablation.stats import analyse, version_words
from evo.app.cli import main
from evo.app.report.data import load_run
from evo.app.report.trace import trace_of
from evo.app.run import setup as campaign_setup
from evo.contracts.config_file import ConfigError
from fitness.latency import model_version as mv
from mutators.llm.bottleneck import NOT_SEARCH_STATE

from .reports.synthetic import Ev, make_run

NOW = mv.model_version()


def v(version: str) -> dict[str, str]:
    return {mv.KEY: version}


def test_the_version_names_the_model_files_and_changes_with_any_of_them(tmp_path, monkeypatch):
    assert len(NOW) == 12 and int(NOW, 16) >= 0
    for name in mv.MODEL_FILES:
        shutil.copytree(mv.ROOT / Path(name).parent, tmp_path / Path(name).parent, dirs_exist_ok=True)
    monkeypatch.setattr(mv, "ROOT", tmp_path)
    mv.model_version.cache_clear()
    try:
        assert mv.model_version() == NOW  # the same bytes elsewhere: the same version
        for name in ("fitness/latency/roofline.py", "evo/contracts/gpus.py"):
            mv.model_version.cache_clear()
            (tmp_path / name).write_text((tmp_path / name).read_text() + "\n# an edit\n")
            changed = mv.model_version()
            assert changed != NOW, name
    finally:
        mv.model_version.cache_clear()
    monkeypatch.undo()
    assert mv.model_version() == NOW


def test_the_version_is_not_search_state_so_prompts_replay_across_model_changes():
    assert mv.KEY in NOT_SEARCH_STATE


def test_a_run_compares_only_figures_of_its_seeds_model_version(tmp_path):
    path = make_run(tmp_path, "r", [
        Ev("seed", 8.0, 1, detail=v("aaaa")), Ev("stoke", 4.0, 2, detail=v("aaaa")),
        Ev("stoke", 1.0, 3, detail=v("bbbb")),   # 8x, but another model's figure
        Ev("optuna", 2.0, 4),                    # no version recorded: not the seed's either
    ]).path
    t = trace_of(load_run(path))
    assert t.model_version == "aaaa"
    assert [(s.record.index, s.speedup) for s in t.steps] == [(2, 2.0)]


def test_a_run_from_before_versions_were_recorded_compares_as_it_did(tmp_path):
    path = make_run(tmp_path, "r", [Ev("seed", 8.0, 1), Ev("stoke", 4.0, 2), Ev("stoke", 1.0, 3, detail=v(NOW))]).path
    t = trace_of(load_run(path))
    assert t.model_version == "" and t.best_speedup == 8.0


def test_resuming_a_run_that_another_model_version_timed_is_refused_naming_both(tmp_path, capsys):
    old = make_run(tmp_path, "old", [Ev("seed", 8.0, 1, detail=v("0123456789ab")), Ev("stoke", 4.0, 2)],
                   status="interrupted").path
    with pytest.raises(ConfigError, match=f"version 0123456789ab, and this code models with version {NOW}"):
        campaign_setup.check_model_version(old)
    capsys.readouterr()
    assert main(["run", "--resume", str(old)]) == 2
    err = capsys.readouterr().err
    assert "0123456789ab" in err and "start a new run" in err and "Traceback" not in err
    for same in (v(NOW), {}):  # the same version, or none recorded: resumable
        ok = make_run(tmp_path, f"ok{len(same)}", [Ev("seed", 8.0, 1, detail=same)], status="interrupted").path
        campaign_setup.check_model_version(ok)


def test_an_ablation_says_when_its_runs_come_from_more_than_one_model(tmp_path):
    def trace(name: str, version: str, best: float):
        return trace_of(load_run(make_run(tmp_path, name, [Ev("seed", 8.0, 1, detail=v(version)),
                                                           Ev("stoke", 8.0 / best, 2, detail=v(version))]).path))

    one = analyse({"a": [(0, trace("a0", "aaaa", 2.0))], "b": [(0, trace("b0", "aaaa", 3.0))]},
                  baseline="a", target_speedup=None)
    assert one.model_versions == ("aaaa",) and not one.mixed_models
    mixed = analyse({"a": [(0, trace("a1", "aaaa", 2.0))], "b": [(0, trace("b1", "bbbb", 3.0))]},
                    baseline="a", target_speedup=None)
    assert mixed.model_versions == ("aaaa", "bbbb") and mixed.mixed_models
    assert version_words(mixed.model_versions) == "versions aaaa, bbbb"
    assert version_words(("",)) == "version unrecorded"


def test_a_run_report_names_the_model_version_of_its_figures(tmp_path):
    from evo.app.report.page import source_banner

    t = trace_of(load_run(make_run(tmp_path, "r", [Ev("seed", 8.0, 1, detail=v("aaaa")),
                                                   Ev("stoke", 4.0, 2, detail=v("aaaa"))]).path))
    assert "model version aaaa" in source_banner(t, t.steps[-1].record).text
    old = trace_of(load_run(make_run(tmp_path, "old", [Ev("seed", 8.0, 1)]).path))
    assert "model version" not in source_banner(old, None).text


def test_every_latency_module_the_model_reaches_is_part_of_the_version():
    """A module added to the model's path (imported from the model or the worker's latency ops, in the latency
    package or not) that the version does not hash would let a model change pass unnoticed."""
    import ast

    measured = {"fitness/latency/cuda_bench.py", "fitness/latency/timer.py"}  # the CUDA timer's path, not the model's
    measured.add("fitness/check/compare.py")  # compares what the sample stored: a verdict, not a figure
    analysis = ("fitness.latency.", "fitness.check.")  # the sandbox runs the model; it decides no figure
    seen: set[str] = set()
    todo = ["fitness/latency/model.py", "fitness/latency/ops.py"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in ast.walk(ast.parse((mv.ROOT / name).read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(analysis):
                todo.append(node.module.replace(".", "/") + ".py")
    reached = seen - measured - {"fitness/latency/model_version.py"}
    assert reached <= set(mv.MODEL_FILES), sorted(reached - set(mv.MODEL_FILES))
    assert len(reached) >= 8  # the walk found the model's modules


def test_a_calibration_row_keeps_the_model_version_of_its_modelled_figure():
    from bench.model.calibration_sweep import model_summary
    from fitness.latency.result import LatencyResult

    row = model_summary(LatencyResult(latency_ms=1.5, detail={mv.KEY: "aaaa", "launches": []}, gpu="h200"))
    assert row["model_version"] == "aaaa" and row["modelled_ms"] == 1.5
    assert model_summary(LatencyResult(latency_ms=1.5))["model_version"] == ""
