"""The latency stage as callers see it: measured times judged against baselines and the speed of
light (with a scripted worker, no GPU), and every figure labelled with its source in verdicts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evo.candidate import Candidate
from evo.native_task import NativeTask
from fitness.cuda_latency import CudaLatency
from fitness.latency import LatencySettings, speed_of_light_violation
from fitness.status import Evaluation, LatencySource, Status

from .conftest import ROOT
from .test_cli import evo, last_json

MATMUL_SOL_MS = 2 * 4096**3 / 989.4e12 * 1e3  # 4096^3 fp16 on an H100 at peak: ~0.139 ms


class ScriptedCudaWorker:
    """Answers the CUDA worker's latency ops from a script: times per subject, failures on demand."""

    def __init__(self, times_ms: dict[str, float], **reply_extra: Any) -> None:
        self.times = times_ms
        self.extra = reply_extra
        self.starts = 1
        self.loaded = ""
        self.log: list[str] = []

    def request(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        op = msg["op"]
        self.log.append(op if op != "bench" else f"bench:{msg['which']}:{self.loaded}")
        if op == "bench_setup":
            return {"ok": True, "device_name": "NVIDIA H100 80GB HBM3", "copies": msg["copies"]}
        if op == "load":
            self.loaded = "seed" if "Naive matmul" in msg["source"] else "candidate"
            return {"ok": True}
        subject = self.loaded if msg["which"] == "module" else msg["which"]
        if subject == "candidate" and "crash" in self.extra:
            self.starts += 1  # the worker that saw the fault is replaced
            return {"ok": False, "kind": "crash", "message": "CUDA error: an illegal memory access was encountered",
                    "fatal": True}
        if subject not in self.times:
            return {"ok": False, "kind": "unavailable", "message": f"{subject} baseline failed"}
        t = self.times[subject]
        timing = {"median_ms": t, "min_ms": t * 0.98, "max_ms": t * 1.1, "reps": 100, "copies": 4,
                  "recheck_failure": self.extra.get("recheck") if subject == "candidate" else None}
        return {"ok": True, "timing": timing, "bench_error_ratio": self.extra.get("bench_error", 0.0)}


@pytest.fixture(scope="module")
def matmul() -> NativeTask:
    return NativeTask(ROOT / "tasks/matmul")


def measure(task: NativeTask, worker: ScriptedCudaWorker) -> Any:
    lat = CudaLatency(task, LatencySettings(), worker=worker)  # type: ignore[arg-type]
    return lat, lat.measure(Candidate.from_file(ROOT / "tasks/matmul/known_better.py"))


def test_a_measured_time_is_reported_as_cuda_with_speedups_over_every_baseline(matmul):
    w = ScriptedCudaWorker({"seed": 4.0, "torch": 0.25, "torch_compile": 0.22, "candidate": 0.2})
    _, r = measure(matmul, w)
    assert r.status is Status.OK and r.source is LatencySource.CUDA and r.latency_ms == 0.2
    assert r.speedups == pytest.approx({"seed": 20.0, "torch": 1.25, "torch_compile": 1.1})
    assert r.roofline_fraction == pytest.approx(MATMUL_SOL_MS / 0.2)
    assert r.detail["baselines_ms"] == {"seed": 4.0, "torch": 0.25, "torch_compile": 0.22}
    assert r.gpu == "NVIDIA H100 80GB HBM3"
    # the baselines were timed in the same worker session, before the candidate
    assert w.log == ["bench_setup", "load", "bench:module:seed", "bench:torch:seed", "bench:torch_compile:seed",
                     "load", "bench:module:candidate"]


def test_a_time_below_the_speed_of_light_is_rejected_as_unsafe(matmul):
    _, r = measure(matmul, ScriptedCudaWorker({"seed": 4.0, "torch": 0.25, "torch_compile": 0.22,
                                               "candidate": 0.05}))
    assert r.status is Status.UNSAFE
    assert "below the speed-of-light bound" in r.reason and "broken measurement" in r.reason
    assert r.latency_ms == 0.05 and r.source is LatencySource.CUDA  # the figure is kept, labelled
    assert speed_of_light_violation(0.2, MATMUL_SOL_MS) is None
    assert speed_of_light_violation(0.1, None) is None


def test_outputs_that_change_while_timed_or_are_wrong_at_bench_size_are_wrong_output(matmul):
    times = {"seed": 4.0, "candidate": 0.3}
    _, r = measure(matmul, ScriptedCudaWorker(times, recheck="copy 2: output 0 differs"))
    assert r.status is Status.WRONG_OUTPUT and "changed while timed: copy 2" in r.reason
    _, r = measure(matmul, ScriptedCudaWorker(times, bench_error=3.5))
    assert r.status is Status.WRONG_OUTPUT and "wrong at bench size" in r.reason and "3.5x" in r.reason


def test_an_illegal_memory_access_is_a_crash_and_the_next_session_retimes_baselines(matmul):
    w = ScriptedCudaWorker({"seed": 4.0, "torch": 0.25, "torch_compile": 0.22}, crash=True)
    lat, r = measure(matmul, w)
    assert r.status is Status.CRASH and "illegal memory access at bench size" in r.reason
    del w.extra["crash"]
    w.times["candidate"] = 0.2
    w.log.clear()
    r = lat.measure(Candidate.from_file(ROOT / "tasks/matmul/known_better.py"))
    assert r.status is Status.OK
    assert w.log[0] == "bench_setup" and w.log.count("bench:module:seed") == 1


def test_a_missing_baseline_is_noted_not_fatal(matmul):
    _, r = measure(matmul, ScriptedCudaWorker({"seed": 4.0, "torch": 0.25, "candidate": 0.2}))
    assert r.status is Status.OK and set(r.speedups) == {"seed", "torch"}
    assert "torch_compile baseline failed" in r.detail["baseline_errors"]["torch_compile"]


def test_latency_fields_survive_the_round_trip_through_json():
    e = Evaluation("c", "t", "cpu", Status.OK, latency_ms=0.1, latency_source=LatencySource.MODEL,
                   speedups={"seed": 2.0}, latency_detail={"dram_bytes": 3}, roofline_fraction=0.5, latency_gpu="h100")
    d = json.loads(json.dumps(e.to_dict()))
    assert d["latency_source"] == "model" and d["roofline_fraction"] == 0.5
    assert Evaluation.from_dict(d) == e


def test_evo_eval_on_cpu_reports_a_modelled_latency_and_the_speedup_over_the_seed():
    p = evo("eval", "configs/softmax.yaml", "--candidate", "tasks/softmax/known_better.py")
    assert p.returncode == 0, p.stderr
    v = last_json(p.stdout)
    assert v["status"] == "ok" and v["latency_source"] == "model" and v["latency_gpu"] == "h100"
    assert v["latency_ms"] > 0 and v["speedups"]["seed"] > 1.5 and 0 < v["roofline_fraction"] <= 1
    assert v["latency_detail"]["launches"][0]["kernel"] == "_softmax_one_pass"
    assert "latency" in p.stderr and "(model, h100)" in p.stderr


def test_latency_can_be_switched_off_and_the_target_gpu_is_validated(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("task:\n  name: softmax\nevaluation:\n  latency: 'off'\n")
    p = evo("eval", str(cfg), "--candidate", "tasks/softmax/seed.py", "--quick")
    assert p.returncode == 0, p.stderr
    v = last_json(p.stdout)
    assert v["latency_ms"] is None and v["latency_source"] is None and v["speedups"] == {}
    cfg.write_text("task:\n  name: softmax\nevaluation:\n  target_gpu: b200\n")
    p = evo("eval", str(cfg), "--candidate", "tasks/softmax/seed.py")
    assert p.returncode == 2 and "target_gpu 'b200' is not one of a100, h100, h200" in p.stderr
