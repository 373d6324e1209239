"""The campaign's last lines compare its best with a cached sweep of the seed's SPACE."""

from __future__ import annotations

import json
from pathlib import Path

from evo.app.sweep_ref import SWEEPS, load_sweeps, sweep_key, sweep_words

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
    assert "10.0% below the sweep" in sweep_words(summary(1.8), path)
    assert "the same as the sweep (within 1%)" in sweep_words(summary(2.01), path)


def test_no_line_without_a_sweep_of_the_same_task_source_and_gpu(tmp_path):
    path = write(tmp_path, 2.0)
    assert sweep_words(summary(2.5, task_key="softmax-other"), path) == ""
    assert sweep_words(summary(2.5, gpu="h200"), path) == ""
    assert sweep_words({"task_key": "softmax-abc", "latency_source": "model", "best": None}, path) == ""
    assert sweep_words(summary(2.5), tmp_path / "missing.json") == ""


def test_the_committed_sweeps_name_their_task_keys_and_are_well_formed():
    assert SWEEPS == ROOT / "bench" / "data" / "space_sweeps.json"
    sweeps = load_sweeps()
    assert sweeps, "bench/space_sweep.py has not been run for any task"
    for key, ref in sweeps.items():
        assert key == sweep_key(ref["task_key"], ref["latency_source"], ref["gpu"])
        assert 1 <= ref["correct"] <= ref["points"] == ref["evaluations"]
        assert ref["best_speedup"] > 0 and 1 <= ref["draws_to_95"] <= ref["points"]
