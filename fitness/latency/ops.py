"""Latency ops of the evaluation worker (kept out of `fitness.worker`, which imports this module).

- ``profile`` (interpreter worker): run the loaded candidate's ``launch`` at a bench size with every
  kernel launch profiled on a sample of programs (`fitness.latency.interp_profile`).
- ``compile`` (compile worker, no interpreter): record what ``launch`` launches on meta tensors and
  compile each kernel for the target GPU (`fitness.latency.target_compile`).
- ``bench_setup`` / ``bench`` (CUDA worker): time the candidate and the baselines (`fitness.latency.cuda_bench`).

Every op answers ``{"ok": True, ...}`` or ``{"ok": False, "kind": ..., "message": ...}`` with the
kinds of `fitness.sandbox.runner` plus ``unsafe`` (out-of-bounds access at bench size), ``wrong_output``
and ``model_error`` (the latency model could not run: no status change, the figure is missing).
"""

from __future__ import annotations

import time
from typing import Any


class LatencyOps:
    """The latency ops of one worker; `runner` is the worker's `Runner` (loaded module, device)."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self._bench: Any = None
        self._profile_tensors: tuple[str, list[Any], list[Any]] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return ("profile", "compile", "bench_setup", "bench")

    def handle(self, op: str, msg: dict[str, Any]) -> dict[str, Any]:
        if op == "profile":
            return self.profile(msg)
        if op == "compile":
            from fitness.latency.target_compile import compile_op

            return compile_op(self.runner, msg)
        if self._bench is None:
            from fitness.latency.cuda_bench import BenchOps

            self._bench = BenchOps(self.runner)
        return dict(self._bench.handle(op, msg))

    def profile(self, msg: dict[str, Any]) -> dict[str, Any]:
        from fitness.sandbox.limits import roomy_address_space

        runner = self.runner
        if runner.module is None:
            return {"ok": False, "kind": "crash", "message": "no candidate loaded"}
        with roomy_address_space():
            return self._profile(msg)

    def _profile(self, msg: dict[str, Any]) -> dict[str, Any]:
        from fitness.latency.interp_hooks import DataDependentAccess, OutOfBounds
        from fitness.latency.interp_profile import LaunchProfiler, ProfileSettings
        from fitness.sandbox.runner import describe_exception
        from fitness.sandbox.torch_guard import CandidateGuard

        runner = self.runner
        start = time.perf_counter()
        try:
            ins, outs = self._bench_tensors(msg)
        except (MemoryError, RuntimeError) as e:
            return {"ok": False, "kind": "model_error", "message": f"cannot allocate bench-size tensors: {e}"}
        settings = ProfileSettings(**msg.get("settings", {}))
        try:
            with CandidateGuard(runner.filename or ""), LaunchProfiler(runner.filename or "", settings) as prof:
                runner.module.launch(*ins, *outs, **runner.params)
        except OutOfBounds as e:
            return {"ok": False, "kind": "unsafe", "message": f"at bench size: {e}"}
        except DataDependentAccess as e:
            return {"ok": False, "kind": "model_error", "message": str(e)}
        except BaseException as e:
            failure = runner.failure(e)
            if failure["kind"] in ("crash", "lint_error"):
                return failure
            return {"ok": False, "kind": "model_error",
                    "message": f"profiling failed: {describe_exception(e, runner.filename)}"}
        return {"ok": True, "launches": [c.to_dict() for c in prof.launches],
                "seconds": time.perf_counter() - start}

    def _bench_tensors(self, msg: dict[str, Any]) -> tuple[list[Any], list[Any]]:
        """Bench-size tensors, kept while consecutive candidates use the same layout (values do not
        matter to the counts: only sampled programs run, on zeros)."""
        import hashlib

        import msgpack

        from fitness.latency.bench_tensors import make_tensor

        key = hashlib.sha256(msgpack.packb([msg["inputs"], msg["outputs"]], use_bin_type=True)).hexdigest()
        if self._profile_tensors is None or self._profile_tensors[0] != key:
            self._profile_tensors = None
            torch = self.runner.torch
            ins = [make_tensor(torch, s, "cpu") for s in msg["inputs"]]
            outs = [make_tensor(torch, s, "cpu") for s in msg["outputs"]]
            self._profile_tensors = (key, ins, outs)
        return self._profile_tensors[1], self._profile_tensors[2]
