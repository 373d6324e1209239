"""Drives the CUDA worker's bench ops (`fitness.latency.cuda_bench.BenchOps`) on the CPU: torch.cuda is
faked (events read `time.perf_counter`), tensors stay on the CPU, kernels run in the interpreter,
at a small size of the softmax task. Prints one JSON line with every reply. Run as
``TRITON_INTERPRET=1 python -m tests.bench_ops_probe`` (`tests.test_bench_ops` does).
"""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace
from typing import Any

from tests.conftest import ROOT

SIZE = {"rows": 8, "cols": 100}
# right in the untimed run of each of the 2 copies, idle while timed: only its own outputs can tell
LAZY = """
_calls = [0]
_real_launch = launch


def launch(*args, **kwargs):
    _calls[0] += 1
    if _calls[0] <= 2:
        _real_launch(*args, **kwargs)
"""
TIMER = {"warmup_reps": 1, "rep_ms": 1.0, "min_reps": 2, "max_reps": 3}
SPIN = {"min_ms": 1.0, "max_ms": 50.0}


class _Event:
    def __init__(self, enable_timing: bool = False) -> None:
        self.t = 0.0

    def record(self) -> None:
        self.t = time.perf_counter()

    def elapsed_time(self, end: _Event) -> float:
        return (end.t - self.t) * 1e3


def fake_cuda(torch: Any) -> None:
    cuda = torch.cuda
    cuda.Event = _Event
    cuda.synchronize = lambda *a: None
    cuda.empty_cache = lambda: None
    cuda.mem_get_info = lambda *a: (8 << 30, 16 << 30)
    cuda.get_device_properties = lambda *a: SimpleNamespace(L2_cache_size=1 << 20, multi_processor_count=4)
    cuda.get_device_name = lambda *a: "Fake GPU"


def main() -> None:
    assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"
    import torch

    from evo.contracts.candidate import Candidate
    from evo.contracts.native_task import NativeTask
    from fitness.latency import cuda_bench
    from fitness.latency.bench_tensors import tensor_specs
    from fitness.latency.cuda import task_info
    from fitness.sandbox.interp_compat import install
    from fitness.sandbox.runner import Runner

    install()
    fake_cuda(torch)
    cuda_bench._SPIN_N = 64  # the spin-up's matmuls, small on a CPU
    task = NativeTask(ROOT / "evo" / "tasks" / "softmax")
    runner = Runner("cuda")
    ops = cuda_bench.BenchOps(runner)
    ops.device = "cpu"  # tensors on the CPU; the ops still see a CUDA worker
    ins, outs = tensor_specs(task.bench_case(SIZE, data=True))
    tol = task.tolerance_for(task.dtype)
    replies: dict[str, Any] = {"setup": ops.handle("bench_setup", {
        "key": "k", "inputs": ins, "outputs": outs, "copies": 2, "task": task_info(task, SIZE),
        "tolerance": [tol.atol, tol.rtol]})}

    def bench(name: str, candidate: Candidate | None, **msg: Any) -> None:
        if candidate is not None:
            runner.load({"name": candidate.id, "source": candidate.source, "params": candidate.params})
        replies[name] = ops.handle("bench", {"key": "k", "timer": TIMER, "spin_up": SPIN, **msg})

    assert task.seed_source is not None
    bench("seed", Candidate.from_source(task.seed_source), which="module", keep_as="seed", **{"with": ["torch"]})
    better = Candidate.from_file(ROOT / "evo" / "tasks" / "softmax" / "known_better.py")
    bench("candidate", better, which="module", **{"with": ["seed", "torch", "nonesuch"]})
    # as many repetitions as the seed, which runs after each of them: the last to touch every copy
    bench("lazy", Candidate.from_source(better.source + LAZY), which="module", **{"with": ["seed"]},
          timer={**TIMER, "max_reps": 2})
    bench("torch", None, which="torch", **{"with": ["seed"]})
    replies["replaced"] = ops.handle("bench", {"key": "other", "which": "module", "timer": TIMER})
    replies["kernelbench_eye"] = kernelbench_eye(ops, runner)
    print(json.dumps(replies, default=str))


def kernelbench_eye(ops: Any, runner: Any) -> dict[str, Any]:
    """A KernelBench softmax whose forward makes a tensor itself (torch.eye): the float64 reference the
    bench size is verified against makes it in float64, as the CPU's reference does."""
    import tempfile
    from pathlib import Path

    from evo.contracts.candidate import Candidate
    from evo.contracts.kernelbench import KernelBenchTask
    from fitness.latency.bench_tensors import tensor_specs
    from fitness.latency.cuda import task_info

    source = (ROOT / "tests" / "kernelbench" / "23_Softmax.py").read_text().replace(
        "torch.softmax(x, dim=1)", "torch.softmax(x @ torch.eye(x.shape[1], device=x.device), dim=1)")
    assert "torch.eye" in source
    size = {"batch_size": 8, "dim": 100}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "eye.py"
        path.write_text(source)
        task = KernelBenchTask(path, check_sizes=[size], bench_sizes=[size], dtype="float32", redraw_params=True)
        ins, outs = tensor_specs(task.bench_case(size, data=True))
        tol = task.tolerance_for(task.dtype)
        ops.handle("bench_setup", {"key": "kb", "inputs": ins, "outputs": outs, "copies": 2,
                                   "task": task_info(task, size), "tolerance": [tol.atol, tol.rtol]})
        seed = Candidate.from_file(ROOT / "evo" / "kernelbench_seeds" / "23_Softmax.py")
        runner.load({"name": seed.id, "source": seed.source, "params": seed.params})
        reply: dict[str, Any] = ops.handle("bench", {"key": "kb", "timer": TIMER, "spin_up": SPIN, "which": "module"})
    return reply


if __name__ == "__main__":
    main()
