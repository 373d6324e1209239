"""Stand-ins for `bench/infra/broker_throughput.py`, importable by Ray workers (as `bench.infra.broker_fakes`): an
evaluator that answers at once, and two small actors that time a bare Ray actor call.

The instant evaluator's verdict is shaped like a real one (an `ok` verdict of the latency model with
its `latency_detail`, taken from a demo run's history), so what the broker pickles and the history
stores per evaluation weighs what it weighs in a campaign (about 2.9 KB a record there).
"""

from __future__ import annotations

import asyncio
import copy
import resource
import time
from typing import Any

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig
from evo.contracts.task import Task
from evo.contracts.verdict import Evaluation, LatencySource, Status

# a modelled softmax verdict's figures, as the demo run recorded them (runs/demo-*/history.msgpack)
LATENCY_DETAIL: dict[str, Any] = {
    "gpu": "h100", "model_version": "0a752b248a35", "size": {"rows": 4096, "cols": 4096}, "model_s": 0.908,
    "dram_bytes": 134217728, "flops": 117465088, "sample_seed": "4520902163045173381",
    "verification": {"elements_compared": 36864, "programs_run": 9, "output_coverage": 1.0, "full_run": False,
                     "full_run_estimate_s": 88.6},
    "launches": [{
        "kernel": "_softmax_three_pass", "us": 52.123, "repeats": 1, "bound": "dram",
        "terms_us": {"dram": 44.724, "l2": 22.37, "sm_path": 16.549, "tensor": 0.0, "alu": 1.811, "sfu": 8.277,
                     "issue": 13.495, "latency": 24.092, "atomics": 0.0},
        "programs_per_sm": 4, "occupancy_limit": "warps", "waves": 8, "dram_bytes": 134217728,
        "l2_bytes": 268435456, "tensor_flops": 0, "other_flops": 117465088, "registers": 26, "spill_bytes": 0,
        "shared_bytes": 1024, "pipeline_depth": 1, "grid": [4096, 1, 1], "sampled_programs": 9}],
    "unmodelled": ["eviction policy evict_first (line 35)"], "sol_ms": 0.040064993432835816,
}


def instant_verdict(candidate_id: str, task_key: str, device: str, level: str) -> Evaluation:
    return Evaluation(
        candidate_id, task_key, device, Status.OK, level=level,
        reason="ok: 36 check cases within tolerance (3 seeds x 4 distributions x 3 sizes); latency modelled",
        error=0.0, max_error_ratio=0.01, max_abs_error=1e-7, mismatch_fraction=0.0, cases_checked=36,
        check_seconds=1.7, latency_ms=0.0521, latency_source=LatencySource.MODEL,
        speedups={"seed": 1.0, "torch": 1.31}, latency_detail=copy.deepcopy(LATENCY_DETAIL),
        roofline_fraction=0.77, latency_gpu="h100", sandbox="landlock+seccomp")


class InstantEvaluator:
    """An `EvaluatorLike` that does no kernel work: every candidate is `ok` at once."""

    def __init__(self, task: Task, settings: EvaluationConfig, device: str) -> None:
        self.task_key, self.device = task.key, device

    def evaluate(self, candidate: Candidate, *, level: str = "full") -> Evaluation:
        return instant_verdict(candidate.id, self.task_key, self.device, level)

    def close(self) -> None:
        pass


def instant_evaluator(task: Task, settings: EvaluationConfig, device: str) -> InstantEvaluator:
    return InstantEvaluator(task, settings, device)


def cpu_seconds() -> float:
    """This process's CPU seconds (user + system, all threads)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Echo:
    """The far end of a bare actor call: answers what an evaluator actor answers, or nothing."""

    def nothing(self) -> None:
        return None

    def verdict(self, candidate: Candidate, level: str) -> tuple[Evaluation, float, float]:
        return instant_verdict(candidate.id, "softmax", "cpu", level), 0.001, 0.0

    def verdicts(self, candidates: list[Candidate], level: str) -> list[tuple[Evaluation, float, float]]:
        return [self.verdict(c, level) for c in candidates]


class Caller:
    """An async actor (as the broker is) that makes `n` calls to `Echo` actors, `concurrency` at a time,
    and says how many CPU seconds of its own process they took."""

    def __init__(self, echoes: list[Any]) -> None:
        self.echoes = echoes

    async def calls(self, n: int, concurrency: int, payload: Candidate | list[Candidate] | None
                    ) -> tuple[float, float]:
        """(wall seconds, this process's CPU seconds) for `n` calls: no arguments (`payload` None), an
        evaluator's call (a candidate), or a batched one (a list of candidates, a list of verdicts back)."""
        done = 0

        async def one_lane(lane: int) -> None:
            nonlocal done
            echo = self.echoes[lane % len(self.echoes)]
            while done < n:
                done += 1
                if payload is None:
                    await echo.nothing.remote()
                elif isinstance(payload, list):
                    await echo.verdicts.remote(payload, "full")
                else:
                    await echo.verdict.remote(payload, "full")

        cpu, wall = cpu_seconds(), time.perf_counter()
        await asyncio.gather(*(one_lane(i) for i in range(concurrency)))
        return time.perf_counter() - wall, cpu_seconds() - cpu
