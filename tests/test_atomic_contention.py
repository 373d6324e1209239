"""The latency model charges atomics on one address as they serialize (`fitness.latency.roofline`: at most one
update per clock to one address): half a million atomic adds into one float were modelled at a few
microseconds."""

from __future__ import annotations

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig
from evo.contracts.gpus import get_profile
from evo.contracts.native_task import NativeTask
from fitness.evaluate import Evaluator
from fitness.latency.counts import KernelResources, LaunchCounts
from fitness.latency.roofline import estimate_launch

from .conftest import CANDIDATES, ROOT


def test_updates_of_one_address_take_a_clock_each():
    gpu = get_profile("h100")
    res = KernelResources("k", 4, 32, 0, 0, 1)
    quiet = LaunchCounts("k", (512, 1, 1), 4, 1)
    hot = LaunchCounts("k", (512, 1, 1), 4, 1, hot_atomics=5e5)
    assert estimate_launch(hot, res, gpu).terms["atomics"] == pytest.approx(5e5 / gpu.clock_hz)
    assert estimate_launch(hot, res, gpu).seconds > 5e5 / gpu.clock_hz > 100 * estimate_launch(quiet, res, gpu).seconds


def test_a_global_atomic_sum_is_charged_for_every_program_that_adds(shared_workers):
    task = NativeTask(ROOT / "evo" / "tasks" / "reduction")
    task.check_sizes = [{"n": 1}, {"n": 1000}]
    task.bench_sizes = [{"n": 1 << 14}]
    atomic = Candidate.from_file(CANDIDATES / "gaming" / "atomic_sum.py")
    settings = EvaluationConfig(timeout_s=120.0)
    with Evaluator(task, settings, device="cpu", secret=7, **shared_workers(settings)) as ev:
        many = ev.evaluate(atomic.with_params(BLOCK=16))  # 1024 programs add into one float
        few = ev.evaluate(atomic.with_params(BLOCK=1024))  # 16 programs
    assert many.ok and few.ok, (many.reason, few.reason)
    terms = {r: next(x for x in v.latency_detail["launches"] if x["kernel"] == "_sum")["terms_us"]["atomics"]
             for r, v in (("many", many), ("few", few))}
    assert terms["many"] == pytest.approx(1024 / get_profile("h100").clock_hz * 1e6, rel=0.01)
    assert terms["few"] == pytest.approx(16 / get_profile("h100").clock_hz * 1e6, rel=0.01)
    assert many.latency_ms is not None and many.latency_ms * 1e3 > terms["many"]
