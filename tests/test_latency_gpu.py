"""Measured latency on a real GPU (skipped without CUDA): the same path as `evo eval` on cuda."""

from __future__ import annotations

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig
from evo.contracts.native_task import NativeTask
from evo.contracts.verdict import LatencySource
from fitness.evaluate import Evaluator

from .conftest import ROOT, has_cuda

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_cuda(), reason="needs a CUDA device")]


def test_the_known_better_softmax_measures_faster_than_its_seed_on_cuda():
    task = NativeTask(ROOT / "evo/tasks/softmax")
    settings = EvaluationConfig(baselines=["seed", "torch"])
    with Evaluator(task, settings, device="cuda") as ev:
        r = ev.evaluate(Candidate.from_file(ROOT / "evo/tasks/softmax/known_better.py"))
    assert r.ok, r.reason
    assert r.latency_source is LatencySource.CUDA and r.latency_ms is not None and r.latency_ms > 0
    assert r.speedups["seed"] > 1.0 and "torch" in r.speedups
    assert r.roofline_fraction is not None and 0 < r.roofline_fraction <= 1
    assert r.latency_detail["reps"] >= 10 and r.latency_detail["baselines_ms"]["seed"] > r.latency_ms
    # the seed and torch were timed again alongside the candidate, after the GPU was spun up
    assert set(r.latency_detail["session_baselines_ms"]) == {"seed", "torch"}
    assert set(r.latency_detail["baselines_ms"]) == {"seed", "torch"}
    spin = r.latency_detail["spin_up"]
    assert spin["ms"] >= EvaluationConfig().spin_up.min_ms and spin["chunks"] >= 1
