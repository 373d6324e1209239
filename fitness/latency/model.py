"""The modelled latency source: counts from the interpreter, resources from a cross-compile, and the
roofline model of the target GPU (`fitness.latency.roofline`), cached by candidate id.

Two subprocesses take part: the interpreter worker (on a machine without CUDA, the evaluation
worker itself) runs ``profile`` at the first bench size, and a compile worker (no interpreter, no
GPU) runs ``compile`` for the target's architecture at the same time. The speedup over the seed is
the seed's modelled latency over the candidate's.
"""

from __future__ import annotations

import time
from typing import Any

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig
from evo.contracts.gpus import get_profile
from evo.contracts.task import BenchCase, Task
from evo.contracts.verdict import LatencySource, Status
from fitness.latency.bench_tensors import tensor_specs
from fitness.latency.counts import KernelResources, LaunchCounts
from fitness.latency.result import LatencyResult, sol_ms
from fitness.latency.roofline import DoesNotFit, estimate
from fitness.sandbox.process import Worker, WorkerDied, WorkerTimeout

_KINDS = {"unsafe": Status.UNSAFE, "crash": Status.CRASH, "lint_error": Status.LINT_ERROR,
          "compile_error": Status.COMPILE_ERROR, "timeout": Status.TIMEOUT}
_MAX_LAUNCHES_IN_DETAIL = 8


class ModelLatency:
    """Modelled latency of candidates for one task (see the module docstring)."""

    def __init__(self, task: Task, settings: EvaluationConfig, *, interp_worker: Worker | None,
                 compile_worker: Worker | None = None) -> None:
        """Workers passed in are shared (and left open by `close`); missing ones are started here."""
        self.task = task
        self.settings = settings
        self.gpu = get_profile(settings.target_gpu)
        self.size = dict(task.bench_sizes[0])
        self._own = [w is None for w in (interp_worker, compile_worker)]
        self.interp = interp_worker or Worker(device="cpu", memory_mb=settings.memory_mb)
        self.compiler = compile_worker or Worker(compile_only=True, memory_mb=settings.memory_mb)
        self.compiler.start()
        self.interp.start()
        self._case: BenchCase | None = None
        self.cache: dict[str, LatencyResult] = {}
        self._seed_ms: float | None = None
        self._seed_done = False

    def case(self) -> BenchCase:
        if self._case is None:
            self._case = self.task.bench_case(self.size, data=False)
        return self._case

    def measure(self, candidate: Candidate, level: str = "full") -> LatencyResult:
        """The modelled latency (the level does not matter: the model is cheap and cached)."""
        result = self._cached(candidate)
        seed = self._seed_latency()
        if result.latency_ms and seed:
            result = result.with_speedups(seed=seed / result.latency_ms)
        return result

    def _cached(self, candidate: Candidate) -> LatencyResult:
        if candidate.id not in self.cache:
            self.cache[candidate.id] = self._model(candidate)
        return self.cache[candidate.id]

    def _seed_latency(self) -> float | None:
        if not self._seed_done:
            self._seed_done = True
            if self.task.seed_source is not None:
                self._seed_ms = self._cached(Candidate.from_source(self.task.seed_source)).latency_ms
        return self._seed_ms

    def _failed(self, kind: str, message: str, started: float) -> LatencyResult:
        if kind in _KINDS:
            return LatencyResult(_KINDS[kind], f"latency model: {message}", source=LatencySource.MODEL,
                                 gpu=self.gpu.name, detail={"model_s": round(time.monotonic() - started, 3)})
        return LatencyResult(reason=f"latency unavailable: {message}", source=None, gpu=self.gpu.name,
                             detail={"error": message})

    def _model(self, candidate: Candidate) -> LatencyResult:
        started = time.monotonic()
        try:
            ins, outs = tensor_specs(self.case())
        except Exception as e:
            return self._failed("model_error", f"no bench case: {type(e).__name__}: {e}", started)
        load = {"op": "load", "source": candidate.source, "params": candidate.params, "name": candidate.id,
                "reuse": True}
        timeout = self.settings.latency_timeout_s
        compile_reply: dict[str, Any] | None = None
        pending = False
        try:
            try:
                compile_reply = self.compiler.request(load, timeout)
                if compile_reply.get("ok"):
                    self.compiler.submit({"op": "compile", "inputs": ins, "outputs": outs, "arch": self.gpu.arch})
                    pending = True
            except (WorkerTimeout, WorkerDied) as e:
                compile_reply = {"ok": False, "kind": "model_error", "message": f"compile worker: {e}"}
            reply = self.interp.request(load, timeout)
            if reply.get("ok"):
                settings = {"sms": self.gpu.sms, "max_blocks_per_sm": self.gpu.max_blocks_per_sm,
                            "max_warps_per_sm": self.gpu.max_warps_per_sm}
                reply = self.interp.request({"op": "profile", "inputs": ins, "outputs": outs,
                                             "settings": settings}, timeout)
        except WorkerTimeout as e:
            return self._failed("timeout", f"profiling at bench size {self.size} did not finish: {e}", started)
        except WorkerDied as e:
            return self._failed("crash", f"profiling at bench size {self.size} crashed the worker: {e.reason}",
                                started)
        finally:
            if pending:
                try:
                    compile_reply = self.compiler.collect(timeout)
                except (WorkerTimeout, WorkerDied) as e:
                    compile_reply = {"ok": False, "kind": "model_error", "message": f"compile worker: {e}"}
        if not reply.get("ok"):
            return self._failed(str(reply.get("kind")), str(reply.get("message")), started)
        launches = [LaunchCounts.from_dict(d) for d in reply["launches"]]
        notes: list[str] = []
        resources = self._resources(launches, compile_reply, notes)
        if isinstance(resources, LatencyResult):
            return resources
        try:
            est = estimate(launches, resources, self.gpu)
        except DoesNotFit as e:
            return LatencyResult(Status.COMPILE_ERROR, f"does not fit on {self.gpu.description}: {e}",
                                 source=LatencySource.MODEL, gpu=self.gpu.name)
        latency_ms = est.seconds * 1e3
        sol = sol_ms(self.task, self.size, self.gpu)
        detail: dict[str, Any] = {
            "gpu": self.gpu.name, "size": self.size, "model_s": round(time.monotonic() - started, 3),
            "dram_bytes": round(est.dram_bytes), "flops": round(est.flops),
            "launches": [{**e.to_dict(), "grid": list(c.grid), "sampled_programs": c.sampled_programs}
                         for e, c in list(zip(est.launches, launches))[:_MAX_LAUNCHES_IN_DETAIL]],
        }
        if len(launches) > _MAX_LAUNCHES_IN_DETAIL:
            notes.append(f"{len(launches)} distinct launches; the first {_MAX_LAUNCHES_IN_DETAIL} are shown")
        dependent = sorted({d for c in launches for d in c.data_dependent})
        if dependent:
            detail["data_dependent"] = dependent
        if sol is not None:
            detail["sol_ms"] = sol
        notes += list(est.notes)
        if notes:
            detail["notes"] = notes
        return LatencyResult(
            latency_ms=latency_ms, source=LatencySource.MODEL, detail=detail, gpu=self.gpu.name,
            roofline_fraction=None if sol is None else min(sol / latency_ms, 1.0),
        )

    def _resources(self, launches: list[LaunchCounts], reply: dict[str, Any] | None,
                   notes: list[str]) -> list[KernelResources | None] | LatencyResult:
        if reply is None or not reply.get("ok"):
            kind = str((reply or {}).get("kind", "model_error"))
            message = str((reply or {}).get("message", "the compile worker did not answer"))
            if kind in _KINDS:
                return LatencyResult(_KINDS[kind], message, source=LatencySource.MODEL, gpu=self.gpu.name)
            notes.append(f"static resources unavailable: {message}")
            return [None] * len(launches)
        compiled = [KernelResources.from_dict(k) for k in reply["kernels"]]
        out: list[KernelResources | None] = []
        for c in launches:
            r = compiled[c.call_index] if c.call_index < len(compiled) else None
            if r is None or r.kernel != c.kernel:
                r = next((k for k in compiled if k.kernel == c.kernel and k.num_warps == c.num_warps), None)
            out.append(r)
        return out

    def close(self) -> None:
        for own, w in zip(self._own, (self.interp, self.compiler)):
            if own:
                w.close()

