"""The evaluator actor: a thin shell (a Ray actor, or a thread of `islands.local_runtime`) around one
`fitness.evaluate.Evaluator` (and so one worker subprocess). On a cluster it holds one GPU
(`num_gpus=1`); Ray sets CUDA_VISIBLE_DEVICES, which the worker inherits. The device is chosen by
what torch sees (`torch.cuda.is_available()`), never by Ray's GPU count, so a node that advertises
GPUs without CUDA still evaluates (in the interpreter).

Compiles and GPUs: an evaluator runs one evaluation at a time. Triton compiles at first launch, in
the worker; on a GPU node a pool of `PreparerActor`s (`fitness.prepare`, started by the broker when
`evaluators.compile_ahead` asks for it) compiles new candidates into the Triton cache the node's
workers share (`EvaluatorSpec.triton_cache`) before an evaluator takes them, so the GPU's timing slot
loads kernels instead of compiling them. The broker hands each candidate to whichever evaluator is
idle (no lockstep between evaluators), and no kernel is evaluated twice (the shared cache merges
requests for one id, even in flight). `EvaluatorActor.evaluate` reports the seconds its evaluation
spent in Triton's compiler, so the campaign can tell GPU-busy time from compile time.
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
from fitness.prepare import Prepared, Preparer
from fitness.sandbox.process import share_triton_cache


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


class PreparerLike(Protocol):
    def prepare(self, candidate: Candidate, level: str) -> Prepared: ...

    def close(self) -> None: ...


PreparerFactory = Callable[[Task, EvaluationConfig, str], PreparerLike]


def default_preparer_factory(task: Task, settings: EvaluationConfig, device: str) -> PreparerLike:
    return Preparer(task, settings, device=device)


@dataclass(frozen=True)
class EvaluatorSpec:
    task: TaskFiles  # built from its bytes on the actor's node
    settings: EvaluationConfig
    factory: EvaluatorFactory = default_evaluator_factory
    prepare_factory: PreparerFactory = default_preparer_factory
    triton_cache: str = ""  # the campaign's shared Triton cache on each node ("": each process its own)


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
        if spec.triton_cache:
            share_triton_cache(spec.triton_cache)
        self.task = spec.task.build(check_forward=False)  # the driver checked it
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

    def evaluate(self, candidate: Candidate, level: str) -> tuple[Evaluation, float, float]:
        """The verdict, the seconds it took, and how many of them Triton spent compiling."""
        clock = getattr(self.evaluator, "compile_seconds", None)
        before = clock() if clock is not None else 0.0
        start = time.monotonic()
        evaluation = self.evaluator.evaluate(candidate, level=level)
        seconds = time.monotonic() - start
        after = clock() if clock is not None else 0.0
        compiling = after - before if after >= before else after  # a restarted worker's clock starts at 0
        return evaluation, seconds, min(max(compiling, 0.0), seconds)

    def evaluate_batch(self, candidates: list[Candidate], level: str) -> list[tuple[Evaluation, float, float]]:
        """`evaluate` of each, in order: one call for several candidates when more wait than there are
        evaluators (a Ray call costs the broker about as much as recording the verdict)."""
        return [self.evaluate(c, level) for c in candidates]

    def close(self) -> None:
        self.evaluator.close()


class PreparerActor:
    """Compiles candidates ahead of the evaluators of its node (see the module docstring)."""

    def __init__(self, spec: EvaluatorSpec, name: str) -> None:
        if spec.triton_cache:
            share_triton_cache(spec.triton_cache)
        self.name = name
        self.task = spec.task.build(check_forward=False)  # the driver checked it
        self.preparer = spec.prepare_factory(self.task, spec.settings, device_for(spec.settings.device))

    def node(self) -> str:
        return placement()[0]

    def prepare(self, candidate: Candidate, level: str) -> Prepared:
        return self.preparer.prepare(candidate, level)

    def close(self) -> None:
        self.preparer.close()


def placement() -> tuple[str, tuple[str, ...]]:
    """(node id, GPU ids) as Ray assigned them; ("local", ()) outside a Ray worker."""
    try:
        import ray
    except ImportError:
        return "local", ()
    if not ray.is_initialized():
        return "local", ()
    return ray.get_runtime_context().get_node_id(), tuple(str(g) for g in ray.get_gpu_ids())
