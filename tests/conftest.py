"""Shared fixtures: tasks and evaluators are expensive (a worker imports torch and triton once)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import NativeTask
from fitness.evaluate import Evaluator
from fitness.sandbox.process import Worker

from .scheduling import longest_first, make_scheduler

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = Path(__file__).resolve().parent / "candidates"

# The library's softmax at sizes for tests: campaigns here evaluate many candidates, and the cost of each is
# the interpreter running its full check (22 cases, every rule on; the bench-shaped ones at 8 x the bench
# columns) and, for an island's best, a full run at the bench size. Rows wider than the seed's BLOCK of 128
# (two and five blocks) keep its loop's later iterations checked. A new candidate's full check takes about a
# quarter of what it did at columns up to 2053 and a bench size of 32 x 1024 (1.3-1.9 s against 4.3-5.3 s
# under load), and `evo eval` of the seed at the library's 4096 x 4096 takes minutes.
SMALL_SOFTMAX = {
    "name": "softmax",
    "sizes": {"check": [{"rows": 1, "cols": 1}, {"rows": 3, "cols": 17}, {"rows": 7, "cols": 131},
                        {"rows": 5, "cols": 260}, {"rows": 2, "cols": 517}],
              "bench": [{"rows": 32, "cols": 256}]},
}


def bash_block(text: str) -> list[str]:
    """The lines of the first bash block of `text` (a README or a docs page), continuation lines joined,
    blank lines dropped: the commands the tests run as the page shows them."""
    block = text.split("```bash\n", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    return [line for line in block.splitlines() if line.strip()]


def candidate(name: str, **params: object) -> Candidate:
    """A test candidate from tests/candidates/<name>.py."""
    return Candidate.from_file(CANDIDATES / f"{name}.py", dict(params) if params else None)  # type: ignore[arg-type]


def has_cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


class WorkerPair(TypedDict):
    worker: Worker
    compiler: Worker


class SharedWorkers:
    """The evaluation and compile workers of a test session, one pair per memory setting, for evaluators
    whose test is about their verdicts, not their workers: a worker's start (importing torch and Triton, about
    2 CPU seconds) is paid once per session instead of twice per evaluator (the suite made ~400 of them).
    Each candidate still runs in a process of its own forked from the worker (`fitness.sandbox.forkserver`),
    as in a campaign, where an evaluator's workers serve every candidate of its run. Tests that kill,
    restart, cap or count workers make their own."""

    def __init__(self) -> None:
        self._pairs: dict[tuple[int, int, bool], tuple[Worker, Worker]] = {}

    def __call__(self, settings: EvaluationConfig) -> WorkerPair:
        """`Evaluator(..., **shared_workers(settings))`: the interpreter worker and compile worker for `settings`."""
        key = (settings.memory_mb, settings.profile_memory_mb, settings.isolation)
        if key not in self._pairs:
            self._pairs[key] = (Worker.evaluating(settings, "cpu"), Worker.compiling(settings))
        worker, compiler = self._pairs[key]
        return WorkerPair(worker=worker, compiler=compiler)

    def close(self) -> None:
        for pair in self._pairs.values():
            for w in pair:
                w.close()


@pytest.fixture(scope="session")
def shared_workers() -> Iterator[SharedWorkers]:
    workers = SharedWorkers()
    yield workers
    workers.close()


@pytest.fixture(scope="session")
def softmax_task() -> NativeTask:
    return NativeTask(ROOT / "evo" / "tasks" / "softmax")


@pytest.fixture(scope="session")
def softmax_evaluator(softmax_task: NativeTask, shared_workers: SharedWorkers) -> Iterator[Evaluator]:
    settings = EvaluationConfig(timeout_s=60.0, memory_mb=1024)
    ev = Evaluator(softmax_task, settings, device="cpu", **shared_workers(settings))
    yield ev
    ev.close()


@pytest.fixture(scope="session")
def unlinted(softmax_task: NativeTask) -> Iterator[Evaluator]:
    """An evaluator with the lint bypassed (an internal hook), so that tests prove the layers below it: the
    run-time torch guard and the worker's OS isolation."""
    settings = EvaluationConfig(timeout_s=60.0, memory_mb=1024, latency=LatencyMode.OFF)
    with Evaluator(softmax_task, settings, device="cpu", static_lint=False) as ev:
        yield ev


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = longest_first(items)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    return make_scheduler(config, log) if config.getoption("dist", None) == "loadfile" else None
