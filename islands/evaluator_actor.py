"""The evaluator actor: a thin shell (a Ray actor, or a thread of `islands.local_runtime`) around one
`fitness.evaluate.Evaluator` (and so one worker subprocess). On a cluster it holds one GPU
(`num_gpus=1`); Ray sets CUDA_VISIBLE_DEVICES, which the worker inherits. The device is chosen by
what torch sees (`torch.cuda.is_available()`), never by Ray's GPU count, so a node that advertises
GPUs without CUDA still evaluates (in the interpreter).

Compiles and GPUs: an evaluator runs one evaluation at a time, its Triton compile included (Triton
compiles at first launch, in the worker). What keeps GPUs from waiting on each other: the broker
hands each candidate to whichever evaluator is idle (no lockstep between evaluators), no kernel is
compiled twice (the shared cache merges requests for one id, even in flight), and the workers of a
node share Triton's on-disk cache (TRITON_CACHE_DIR). Overlapping one GPU's compiles with its
timings would take two workers per GPU and a lock held around the timing stage only, a boundary
the evaluation pipeline does not expose yet.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig
from evo.contracts.task import Task
from evo.contracts.task_files import TaskFiles
from evo.contracts.verdict import Evaluation
from fitness.evaluate import Evaluator, device_for


class EvaluatorLike(Protocol):
    device: str

    def evaluate(self, candidate: Candidate, *, level: str = "full") -> Evaluation: ...

    def close(self) -> None: ...


EvaluatorFactory = Callable[[Task, EvaluationConfig, str], EvaluatorLike]


def cuda_device_name() -> str:
    try:
        import torch

        return str(torch.cuda.get_device_name(0))
    except Exception:
        return ""


def default_evaluator_factory(task: Task, settings: EvaluationConfig, device: str) -> EvaluatorLike:
    return Evaluator(task, settings, device=device)


@dataclass(frozen=True)
class EvaluatorSpec:
    task: TaskFiles  # built from its bytes on the actor's node
    settings: EvaluationConfig
    factory: EvaluatorFactory = default_evaluator_factory


@dataclass(frozen=True)
class EvaluatorInfo:
    name: str
    pid: int
    node_id: str
    device: str
    cuda_visible_devices: str | None
    gpu_ids: tuple[str, ...]
    task_key: str
    gpu_name: str = ""  # the CUDA device's name ("" without one)
    sandbox: str = ""  # the worker's OS isolation (`fitness.sandbox.isolation`; "" for an evaluator without one)
    sandbox_problems: tuple[str, ...] = ()


class EvaluatorActor:
    """Evaluates candidates one at a time with its own worker subprocess."""

    def __init__(self, spec: EvaluatorSpec, name: str) -> None:
        self.name = name
        self.task = spec.task.build()
        device = device_for(spec.settings.device)
        self.evaluator = spec.factory(self.task, spec.settings, device)

    def info(self) -> EvaluatorInfo:
        isolation = getattr(self.evaluator, "isolation", None)  # raises when required and missing
        sandbox, problems = isolation() if isolation is not None else ("", [])
        node, gpus = placement()
        return EvaluatorInfo(
            self.name, os.getpid(), node, self.evaluator.device,
            os.environ.get("CUDA_VISIBLE_DEVICES"), gpus, self.task.key,
            cuda_device_name() if self.evaluator.device == "cuda" else "", sandbox, tuple(problems),
        )

    def evaluate(self, candidate: Candidate, level: str) -> tuple[Evaluation, float]:
        start = time.monotonic()
        evaluation = self.evaluator.evaluate(candidate, level=level)
        return evaluation, time.monotonic() - start

    def close(self) -> None:
        self.evaluator.close()


def placement() -> tuple[str, tuple[str, ...]]:
    """(node id, GPU ids) as Ray assigned them; ("local", ()) outside a Ray worker."""
    try:
        import ray
    except ImportError:
        return "local", ()
    if not ray.is_initialized():
        return "local", ()
    return ray.get_runtime_context().get_node_id(), tuple(str(g) for g in ray.get_gpu_ids())
