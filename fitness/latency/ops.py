"""Latency ops of the evaluation worker (kept out of `fitness.worker`, which imports this module).

- ``profile_setup`` / ``profile`` (interpreter worker): keep the bench inputs of one bench size (real
  values, sent once per worker session), then run the loaded candidate's ``launch`` on fresh copies
  of them and on poisoned outputs, every kernel launch profiled on a sample of programs
  (`fitness.latency.interp_profile`); the reply carries the counts, the specializations to compile
  and the output elements to compare with the reference.
- ``compile`` (compile worker, no interpreter): compile those specializations for the target GPU
  (`fitness.latency.target_compile`).
- ``bench_setup`` / ``bench`` (CUDA worker): time the candidate and the baselines (`fitness.latency.cuda_bench`).

Every op answers ``{"ok": True, ...}`` or ``{"ok": False, "kind": ..., "message": ...}`` with the
kinds of `fitness.sandbox.runner` plus ``unsafe`` (an access outside every buffer, or an input
modified, at bench size), ``need_setup`` (the worker holds no bench inputs for that key) and
``model_error`` (the model could not run for reasons of its own: the candidate keeps its status).
"""

from __future__ import annotations

import time
from typing import Any


class LatencyOps:
    """The latency ops of one worker; `runner` is the worker's `Runner` (loaded module, device)."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self._bench: Any = None
        self._profile_inputs: tuple[str, list[Any], list[dict[str, Any]]] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return ("profile_setup", "profile", "compile", "bench_setup", "bench")

    def handle(self, op: str, msg: dict[str, Any]) -> dict[str, Any]:
        if op == "profile_setup":
            return self.profile_setup(msg)
        if op == "profile":
            return self.profile(msg)
        if op == "compile":
            from fitness.latency.target_compile import compile_op

            return compile_op(self.runner, msg)
        if self._bench is None:
            from fitness.latency.cuda_bench import BenchOps

            self._bench = BenchOps(self.runner)
        return dict(self._bench.handle(op, msg))

    def profile_setup(self, msg: dict[str, Any]) -> dict[str, Any]:
        from fitness.latency.bench_tensors import make_tensor
        from fitness.sandbox.limits import roomy_address_space

        self._profile_inputs = None
        try:
            with roomy_address_space():
                ins = [make_tensor(self.runner.torch, s, "cpu") for s in msg["inputs"]]
        except (MemoryError, RuntimeError) as e:
            return {"ok": False, "kind": "crash", "fatal": True,
                    "message": f"memory limit: cannot hold the bench-size inputs: {e}"}
        self._profile_inputs = (str(msg["key"]), ins, list(msg["outputs"]))
        return {"ok": True}

    def profile(self, msg: dict[str, Any]) -> dict[str, Any]:
        from fitness.sandbox.limits import roomy_address_space

        runner = self.runner
        if runner.module is None:
            return {"ok": False, "kind": "crash", "message": "no candidate loaded"}
        if self._profile_inputs is None or self._profile_inputs[0] != msg.get("key"):
            return {"ok": False, "kind": "need_setup", "message": "no bench inputs for this key"}
        with roomy_address_space():
            return self._profile(msg)

    def _profile(self, msg: dict[str, Any]) -> dict[str, Any]:
        from fitness.latency.interp_hooks import DataDependentAccess, OutOfBounds
        from fitness.latency.interp_profile import LaunchProfiler, ProfileSettings
        from fitness.sandbox import zones
        from fitness.sandbox.runner import describe_exception
        from fitness.sandbox.torch_guard import CandidateGuard

        runner, torch = self.runner, self.runner.torch
        assert self._profile_inputs is not None
        _, pristine, out_specs = self._profile_inputs
        start = time.perf_counter()
        try:
            ins = [t.clone() for t in pristine]  # the candidate never touches the kept copy
            outs = []
            poison = int(msg["seed"]) % 3  # NaN, an odd value or zero, as the check's runs have: a secret here
            for spec in out_specs:
                shape, dtype = tuple(spec["shape"]), spec["dtype"]
                t = torch.from_numpy(zones.filled(shape, dtype, poison))
                outs.append(t.view(torch.bfloat16) if dtype == "bfloat16" else t)
        except (MemoryError, RuntimeError) as e:
            return {"ok": False, "kind": "crash", "fatal": True,
                    "message": f"memory limit: cannot allocate the bench-size buffers: {e}"}
        settings = ProfileSettings(**msg["settings"])
        guard = CandidateGuard(runner.filename or "")
        try:
            with guard, LaunchProfiler(runner.filename or "", settings, int(msg["seed"]), ins, outs) as prof:
                runner.module.launch(*ins, *outs, **runner.params)
                profile = prof.execute(guard.initialized)
        except (OutOfBounds, DataDependentAccess) as e:
            return {"ok": False, "kind": "unsafe", "message": f"at bench size: {e}"}
        except BaseException as e:
            failure = runner.failure(e)
            if failure["kind"] in ("crash", "lint_error"):
                return failure
            return {"ok": False, "kind": "compile_error",
                    "message": f"fails at bench size: {describe_exception(e, runner.filename)}"}
        changed = [i for i, (a, b) in enumerate(zip(ins, pristine)) if not _same_bits(a, b)]
        if changed:
            return {"ok": False, "kind": "unsafe", "message": f"input {changed[0]} was modified at bench size"}
        return {"ok": True, "launches": [c.to_dict() for c in profile.launches], "specs": profile.specs,
                "notes": sorted(profile.notes), "unmodelled": sorted(profile.unmodelled),
                "verified": [list(v) for v in profile.verified], "written": profile.written,
                "coverage": profile.coverage, "programs_run": profile.programs_run,
                "full_run_s": profile.full_run_s, "fills": guard.filled_bytes,
                "seconds": time.perf_counter() - start}


def _same_bits(a: Any, b: Any) -> bool:
    """Whether two CPU tensors hold the same bits (0-d ones too: a BatchNorm's step counter is one)."""
    import torch

    from fitness.check.compare import same_bits

    if a.numel() == 0:
        return True
    if a.dtype == torch.bfloat16:
        a, b = a.view(torch.int16), b.view(torch.int16)
    return bool(same_bits(a.contiguous().numpy(), b.contiguous().numpy()).all())
