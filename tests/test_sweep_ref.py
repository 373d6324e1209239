"""The campaign's last lines compare its best with a cached sweep of the seed's SPACE."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import ClassVar

from bench.search import space_sweep
from evo.app.run.sweep_ref import SWEEPS, as_of, load_sweeps, sweep_key, sweep_words, version_gap, with_earlier
from evo.contracts.candidate import Candidate
from evo.contracts.verdict import Evaluation, LatencySource, Status

from .conftest import ROOT


def write(tmp_path: Path, best: float) -> Path:
    path = tmp_path / "sweeps.json"
    path.write_text(json.dumps({sweep_key("softmax-abc", "model", "h100"): {
        "points": 35, "evaluations": 35, "seconds": 66.0, "best_speedup": best, "draws_to_95": 4.0}}))
    return path


def summary(speedup: float, task_key: str = "softmax-abc", gpu: str = "h100") -> dict[str, object]:
    return {"task_key": task_key, "latency_source": "model",
            "best": {"speedup_over_seed": speedup, "latency_gpu": gpu}}


def test_the_comparison_says_above_below_or_the_same_within_the_models_noise(tmp_path):
    path = write(tmp_path, 2.0)
    above = sweep_words(summary(2.5), path)
    assert "campaign 2.500x over the seed, sweep 2.000x: 25.0% above the sweep" in above
    assert "35 points" in above and "4.0 evaluations on average" in above
    assert ": 10.0% below the sweep;" in sweep_words(summary(1.8), path)
    assert "the same as the sweep (within 1%)" in sweep_words(summary(2.01), path)
    assert "known-better" not in above


def test_the_known_better_kernel_is_named_beside_the_sweep_or_alone_where_the_space_was_not_swept(tmp_path):
    path = write(tmp_path, 2.0)
    data = json.loads(path.read_text())
    key = next(iter(data))
    data[key]["known_better_speedup"] = 3.0
    path.write_text(json.dumps(data))
    assert sweep_words(summary(2.4), path).endswith(
        "; the task's known-better kernel: 3.000x, the campaign 20.0% below it")
    data[key] = {"points": 2000, "known_better_speedup": 3.0}  # too large to sweep
    path.write_text(json.dumps(data))
    assert sweep_words(summary(3.3), path) == (
        "campaign 3.300x over the seed; the task's known-better kernel: 3.000x, the campaign 10.0% above it")


def test_no_line_without_a_sweep_of_the_same_task_source_and_gpu(tmp_path):
    path = write(tmp_path, 2.0)
    assert sweep_words(summary(2.5, task_key="softmax-other"), path) == ""
    assert sweep_words(summary(2.5, gpu="h200"), path) == ""
    assert sweep_words({"task_key": "softmax-abc", "latency_source": "model", "best": None}, path) == ""
    assert sweep_words(summary(2.5), tmp_path / "missing.json") == ""


def test_modelled_figures_compare_only_within_one_version_of_the_latency_model(tmp_path):
    path = tmp_path / "sweeps.json"
    entry = {"task": "softmax", "latency_source": "model", "points": 35, "evaluations": 35, "seconds": 66.0,
             "best_speedup": 2.0, "draws_to_95": 4.0, "known_better_speedup": 3.0,
             "model_version": "aaa", "known_better_model_version": "bbb"}
    path.write_text(json.dumps({sweep_key("softmax-abc", "model", "h100"): entry}))

    def words(version: str | None) -> str:
        s = summary(2.5)
        s["best"] = {**s["best"], "model_version": version}  # type: ignore[dict-item]
        return sweep_words(s, path)

    same_sweep = words("aaa")
    assert "sweep 2.000x: 25.0% above the sweep" in same_sweep
    assert "known-better kernel: 3.000x, the campaign not compared: the cached figure was modelled by latency " \
           "model bbb, the run(s) by aaa (sweep again: python bench/search/space_sweep.py softmax)" in same_sweep
    same_known = words("bbb")
    assert "above the sweep" not in same_known and "sweep 2.000x: not compared" in same_known
    assert same_known.endswith("the campaign 16.7% below it")
    for other in ("ccc", None):  # another version, or a run from before versions were kept
        text = words(other)
        assert "above" not in text and "below" not in text and text.count("not compared") == 2
    del entry["model_version"]  # a sweep from before versions were kept compares with nothing modelled
    path.write_text(json.dumps({sweep_key("softmax-abc", "model", "h100"): entry}))
    assert "sweep 2.000x: not compared: the cached figure was modelled by latency model unrecorded" in words("aaa")
    assert "(sweep again: python bench/search/space_sweep.py softmax --workload serving)" in version_gap(
        {**entry, "workload": "serving"}, "model_version", {"aaa"})


def test_a_sweep_by_a_new_model_version_keeps_the_earlier_figures_for_the_runs_that_version_modelled(tmp_path):
    """A model edit comes with a new sweep; results the old version modelled (an ablation table's rows)
    still compare with the old version's sweep, and each version only with its own."""
    old = {"task": "softmax", "latency_source": "model", "points": 35, "evaluations": 35, "seconds": 66.0,
           "best_speedup": 2.0, "draws_to_95": 4.0, "known_better_speedup": 3.0,
           "model_version": "aaa", "known_better_model_version": "aaa"}
    new = {**old, "best_speedup": 2.2, "known_better_speedup": 3.3, "model_version": "ccc",
           "known_better_model_version": "ccc"}
    entry = with_earlier(old, new)
    assert entry["model_version"] == "ccc" and entry["earlier"] == {"aaa": old}
    newest = with_earlier(entry, {**new, "best_speedup": 2.4, "model_version": "eee"})
    assert set(newest["earlier"]) == {"aaa", "ccc"} and newest["earlier"]["ccc"]["best_speedup"] == 2.2
    assert "earlier" not in newest["earlier"]["ccc"]
    assert with_earlier(new, {**new, "seconds": 70.0}) == {**new, "seconds": 70.0}  # the same version: replaced
    path = tmp_path / "sweeps.json"
    path.write_text(json.dumps({sweep_key("softmax-abc", "model", "h100"): entry}))

    def words(version: str) -> str:
        s = summary(2.5)
        s["best"] = {**s["best"], "model_version": version}  # type: ignore[dict-item]
        return sweep_words(s, path)

    assert "sweep 2.000x: 25.0% above the sweep" in words("aaa") and words("aaa").endswith("16.7% below it")
    assert "sweep 2.200x: 13.6% above the sweep" in words("ccc") and words("ccc").endswith("24.2% below it")
    assert words("ddd").count("not compared") == 2
    assert as_of(entry, {"aaa", "ccc"}) is entry  # runs of two versions: no one version's figures


def test_the_committed_sweeps_name_their_task_keys_and_are_well_formed():
    assert SWEEPS == ROOT / "bench" / "data" / "space_sweeps.json"
    sweeps = load_sweeps()
    assert sweeps, "bench/search/space_sweep.py has not been run for any task"
    for key, ref in sweeps.items():
        assert key == sweep_key(ref["task_key"], ref["latency_source"], ref["gpu"], ref.get("bench_tag", ""))
        if ref.get("workload"):  # an entry at a workload is kept apart from the default bench's
            assert ref["bench_tag"] == f"workload-{ref['workload']}"
        assert "best_speedup" in ref or ref["known_better_speedup"] > 0, f"{key}: neither a sweep nor a known-better"
        if "best_speedup" in ref:
            assert 1 <= ref["correct"] <= ref["points"] == ref["evaluations"]
            assert ref["best_speedup"] > 0 and 1 <= ref["draws_to_95"] <= ref["points"]


def test_the_demos_cached_sweep_is_of_the_current_latency_model():
    """The README's demo (softmax, modelled without a GPU) ends by comparing its best with the cached sweep
    of the seed's SPACE, and a sweep another model version made is not compared: an edit of the latency
    model's files must come with a new sweep of the demo's task."""
    from evo.contracts.config import EvaluationConfig
    from evo.contracts.native_task import NativeTask
    from fitness.latency.model_version import model_version

    task = NativeTask(ROOT / "evo" / "tasks" / "softmax")
    entry = load_sweeps().get(sweep_key(task.key, "model", EvaluationConfig().target_gpu))
    again = "sweep again: PYTHONPATH=. python3 bench/search/space_sweep.py softmax"
    assert entry and entry.get("best_speedup"), f"no cached sweep of {task.key}: {again}"
    assert entry.get("model_version") == model_version(), (
        f"the cached sweep of softmax was modelled by {entry.get('model_version') or 'an unrecorded version'}, the "
        f"latency model is now {model_version()}: {again}")


class FakeEvaluator:
    """Stands in for fitness.evaluate.Evaluator: a speedup of BLOCK / 1000 (the known-better: 9x)."""

    evaluated: ClassVar[list[dict[str, object]]] = []

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __enter__(self) -> FakeEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def evaluate(self, candidate: Candidate) -> Evaluation:
        known = "BLOCK" not in candidate.params
        self.evaluated.append(dict(candidate.params))
        x = 9.0 if known else float(candidate.params["BLOCK"]) / 1000
        return Evaluation(candidate.id, "t", "cpu", Status.OK, latency_ms=1.0 / x, latency_source=LatencySource.MODEL,
                          latency_gpu="h100", speedups={"seed": x},
                          latency_detail={"model_version": "kb1" if known else "sw1"})


def test_the_sweep_records_the_known_better_kernel_and_skips_a_space_too_large(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(space_sweep, "Evaluator", FakeEvaluator)
    monkeypatch.setattr(Candidate, "from_file", classmethod(lambda cls, path: Candidate.from_source("x = 1\n")))
    out = tmp_path / "sweeps.json"
    argv = ["space_sweep.py", "softmax", "--output", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    assert space_sweep.main() == 0
    ref = next(iter(load_sweeps(out).values()))
    assert (ref["points"], ref["correct"], ref["best_speedup"], ref["known_better_speedup"]) == (35, 35, 4.096, 9.0)
    assert ref["best_params"]["BLOCK"] == 4096 and len(FakeEvaluator.evaluated) == 36
    assert (ref["model_version"], ref["known_better_model_version"]) == ("sw1", "kb1")  # which model made each
    monkeypatch.setattr(sys, "argv", [*argv, "--known-better-only"])  # the sweep stays, the figure is new
    FakeEvaluator.evaluated.clear()
    assert space_sweep.main() == 0
    assert load_sweeps(out) == {sweep_key(ref["task_key"], "model", "h100"): {**ref, "known_better_speedup": 9.0}}
    assert len(FakeEvaluator.evaluated) == 1
    monkeypatch.setattr(sys, "argv", [*argv, "--max-points", "20", "--output", str(tmp_path / "big.json")])
    assert space_sweep.main() == 0
    assert "not swept (35 points); known-better 9.000x" in capsys.readouterr().out
    big = next(iter(load_sweeps(tmp_path / "big.json").values()))
    assert "best_speedup" not in big and "model_version" not in big and big["known_better_model_version"] == "kb1"


def test_a_task_folder_outside_the_library_is_swept_by_its_path(tmp_path, monkeypatch):
    monkeypatch.setattr(space_sweep, "Evaluator", FakeEvaluator)
    FakeEvaluator.evaluated.clear()
    out = tmp_path / "sweeps.json"
    monkeypatch.setattr(sys, "argv", ["space_sweep.py", str(ROOT / "examples" / "row_moments"), "--output", str(out)])
    assert space_sweep.main() == 0
    ref = next(iter(load_sweeps(out).values()))
    assert ref["task"] == "row_moments" and ref["task_key"].startswith("row_moments-")
    assert (ref["points"], ref["best_speedup"], ref["known_better_speedup"]) == (35, 8.192, None)
    assert len(FakeEvaluator.evaluated) == 35  # no known-better kernel there
    folder = str(ROOT / "examples" / "row_moments")  # and a sweep by another model version is redone by its path
    assert ref["source"] == folder and version_gap(ref, "model_version", {"other"}).endswith(
        f"(sweep again: python bench/search/space_sweep.py {folder})")
