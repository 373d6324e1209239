"""The CUDA worker's bench ops, run on the CPU (`tests.bench_ops_probe`: torch.cuda faked, kernels in
the interpreter, in a subprocess): the seed kept after its timing and timed again alongside each
candidate on outputs of its own, baselines that do not exist reported, the GPU spun up first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from .conftest import ROOT


@pytest.fixture(scope="module")
def replies() -> dict[str, Any]:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tests.bench_ops_probe"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_the_seed_is_kept_and_timed_alongside_the_candidate(replies):
    assert replies["setup"]["ok"] and replies["setup"]["copies"] == 2
    seed, cand = replies["seed"], replies["candidate"]
    assert seed["ok"] and set(seed["baselines"]) == {"torch"} and seed["bench_error_ratio"] < 1.0
    assert cand["ok"] and set(cand["baselines"]) == {"seed", "torch"}
    assert cand["timing"]["recheck_failure"] is None and cand["bench_error_ratio"] < 1.0
    assert cand["baselines"]["seed"]["reps"] >= 2 and cand["baselines"]["seed"]["median_ms"] > 0
    assert "no baseline 'nonesuch'" in cand["baseline_errors"]["nonesuch"]
    torch_op = replies["torch"]
    assert torch_op["ok"] and set(torch_op["baselines"]) == {"seed"}


def test_a_candidate_idle_while_timed_is_caught_though_the_seed_runs_between_its_repetitions(replies):
    lazy = replies["lazy"]
    assert lazy["ok"] and set(lazy["baselines"]) == {"seed"}
    failure = lazy["timing"]["recheck_failure"]
    assert failure is not None and failure.startswith("copy 0: output 0 after timing differs")


def test_every_timing_op_spins_the_gpu_up_first_and_a_lost_setup_is_reported(replies):
    for name in ("seed", "candidate", "lazy", "torch"):
        spin = replies[name]["spin_up"]
        assert spin["chunks"] >= 1 and spin["ms"] >= 1.0  # the probe's min_ms
    assert replies["replaced"] == {"ok": False, "kind": "need_setup", "message": "bench inputs not set up"}


def test_a_kernelbench_forward_that_makes_a_tensor_is_verified_at_the_bench_size_in_float64(replies):
    """Its float64 reference made torch.eye in float32 and failed ('expected both float64'), so the bench
    size went unverified against torch."""
    kb = replies["kernelbench_eye"]
    assert kb["ok"] and kb["bench_error_ratio"] is not None and kb["bench_error_ratio"] < 1.0, kb
    assert "bench_reference_error" not in kb and "bench_reference_error" not in replies["seed"]
