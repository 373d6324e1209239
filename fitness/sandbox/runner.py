"""The worker's handle on the candidate: load its module, run ``launch`` on guarded buffers, and turn
what goes wrong into a failure reply (kind and message) the driver can judge.

Runs inside the evaluation worker only (`fitness.worker`); the driver never imports candidate code.
"""

from __future__ import annotations

import errno
import gc
import importlib.util
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from types import ModuleType
from typing import Any

import numpy as np

from evo.contracts import dtypes
from fitness.sandbox import zones as guard
from fitness.sandbox.interp_compat import tf32_dots
from fitness.sandbox.limits import roomy_address_space

Execute = Callable[[ModuleType, str, str], None]


class UnsafeAccess(BaseException):
    """An instrument inside the worker saw an access a GPU would not allow (out of bounds, a race).
    A BaseException: the interpreter wraps every Exception of a kernel, and candidates cannot catch it."""


def describe_exception(e: BaseException, filename: str | None) -> str:
    """The exception and the innermost line of candidate code it came from."""
    where = ""
    if filename:
        for fs in traceback.extract_tb(e.__traceback__):
            if fs.filename == filename:
                where = f" (candidate line {fs.lineno}: {(fs.line or '').strip()})"
    text = str(e).strip().splitlines()
    first = text[-1] if text else ""
    return f"{type(e).__name__}: {first[:500]}{where}"


class Runner:
    def __init__(self, device: str) -> None:
        import torch

        self.torch = torch
        self.device = device
        self.dir = tempfile.mkdtemp(prefix="evo-worker-")
        self.module: ModuleType | None = None
        self.filename: str | None = None
        self.params: dict[str, Any] = {}

    # -- classification -------------------------------------------------------------------
    def failure(self, e: BaseException) -> dict[str, Any]:
        from fitness.sandbox.torch_guard import ForbiddenOperation

        text = describe_exception(e, self.filename)
        if isinstance(e, ForbiddenOperation):
            return {"ok": False, "kind": "lint_error", "message": str(e)}
        if isinstance(e, UnsafeAccess):
            return {"ok": False, "kind": "unsafe", "message": str(e)}
        causes = [e]
        while causes[-1].__cause__ is not None and len(causes) < 8:  # the interpreter wraps errors of kernels
            causes.append(causes[-1].__cause__)
        if any(isinstance(c, MemoryError) for c in causes) or "out of memory" in str(e).lower() \
                or "can't allocate memory" in str(e).lower():
            return {"ok": False, "kind": "crash", "message": f"memory limit exceeded: {text}", "fatal": True}
        if "illegal memory access" in str(e) or "misaligned address" in str(e) or "CUDA error" in str(e):
            return {"ok": False, "kind": "crash", "message": text, "fatal": True}
        blocked = [c for c in causes if isinstance(c, OSError) and c.errno in (errno.EACCES, errno.EPERM, errno.EBADF)]
        if blocked:
            return {"ok": False, "kind": "lint_error",
                    "message": f"blocked by the worker's isolation (the candidate reached outside the contract): "
                               f"{describe_exception(blocked[0], self.filename)}"}
        if isinstance(e, (SystemExit, KeyboardInterrupt)):
            return {"ok": False, "kind": "crash", "message": f"candidate tried to exit: {text}", "fatal": True}
        return {"ok": False, "kind": "compile_error", "message": text}

    # -- ops ---------------------------------------------------------------------------------
    def load(self, msg: dict[str, Any], execute: Execute | None = None) -> dict[str, Any]:
        """Import the candidate of `msg`; `execute(module, source, path)` runs its code in the module
        (default: as written; the check's probes instrument it: `fitness.check.probes`)."""
        from fitness.sandbox.torch_guard import CandidateGuard

        if msg.get("reuse") and self.module is not None and self.module.__name__ == f"evo_candidate_{msg['name']}" \
                and dict(msg.get("params", {})) == self.params:
            return {"ok": True}  # the latency stage after equivalence: the same candidate is loaded
        self.unload()
        name = f"evo_candidate_{msg['name']}"
        path = os.path.join(self.dir, f"{name}.py")
        with open(path, "w") as f:
            f.write(msg["source"])
        self.filename = path
        self.params = dict(msg.get("params", {}))
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            with CandidateGuard(path):
                if execute is not None:
                    execute(module, msg["source"], path)
                else:
                    spec.loader.exec_module(module)
        except BaseException as e:
            return self.failure(e)
        if not callable(getattr(module, "launch", None)):
            return {"ok": False, "kind": "lint_error", "message": "module has no callable launch"}
        self.module = module
        return {"ok": True}

    def unload(self) -> None:
        if self.module is not None:
            sys.modules.pop(self.module.__name__, None)
            self.module = None
        try:
            from triton.runtime.interpreter import InterpretedFunction

            InterpretedFunction.rewritten_fn.clear()
        except Exception:
            pass
        gc.collect()

    def _tensor(self, storage: np.ndarray, dtype: str, shape: list[int], exact: bool = False) -> tuple[Any, Any]:
        """The guarded storage as a tensor, and the tensor the candidate gets: a view inside it at the guard's
        offset, or (`exact`, on the CPU) a tensor whose own storage is exactly its elements (offset 0, as a
        user's tensor is) placed between the same guards in memory."""
        torch = self.torch
        arr = storage if storage.flags.writeable and storage.flags.owndata else storage.copy()
        t = torch.from_numpy(arr)
        if dtype == "bfloat16":
            t = t.view(torch.bfloat16)
        t = t.to(self.device)
        g, n = guard.guard_elems(dtype), guard.numel(shape)
        if exact and self.device == "cpu":
            part = torch.from_numpy(arr[g : g + n])  # shares the guarded array's memory, a storage of its own
            return t, (part.view(torch.bfloat16) if dtype == "bfloat16" else part).view(tuple(shape))
        return t, t[g : g + n].view(tuple(shape))

    def _bytes(self, t: Any) -> memoryview:
        """A storage's bytes for the reply, without a copy on the CPU (msgpack packs the view as bytes)."""
        torch = self.torch
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        return memoryview(t.cpu().contiguous().numpy()).cast("B")

    def run(self, msg: dict[str, Any],
            instrument: Callable[[list[Any], dict[str, Any]], AbstractContextManager[Any]] | None = None
            ) -> dict[str, Any]:
        """Run ``launch`` on guarded buffers; `instrument(views, msg)` (the check's sanitizer) wraps the call, and
        what it yields (a dict) joins the reply.
        A bench-size run (``msg["bench"]``) may use the larger address space of bench-size buffers."""
        try:
            with roomy_address_space() if msg.get("bench") else nullcontext():
                return self._run(msg, instrument)
        except MemoryError as e:
            return self.failure(e)

    def warm(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Compile the loaded candidate's kernels for each case of ``msg["cases"]`` (shapes and dtypes;
        inputs are zeros) without running them (`fitness.sandbox.jit_hooks.compile_only`). GPU workers
        only: in the interpreter a launch is the run itself."""
        from fitness.sandbox.jit_hooks import compile_only
        from fitness.sandbox.torch_guard import CandidateGuard

        if self.module is None:
            return {"ok": False, "kind": "crash", "message": "no candidate loaded"}
        if self.device == "cpu":
            return {"ok": False, "kind": "unavailable", "message": "compile-ahead needs a GPU worker"}
        start = time.perf_counter()
        for case in msg["cases"]:
            ins = [self._tensor(guard.layout(np.zeros(guard.numel(s["shape"]), dtypes.storage_type(s["dtype"])),
                                             s["dtype"]), s["dtype"], s["shape"])[1] for s in case["inputs"]]
            outs = [self._tensor(guard.poisoned(tuple(s["shape"]), s["dtype"], 0), s["dtype"], s["shape"])[1]
                    for s in case["outputs"]]
            try:
                with CandidateGuard(self.filename or ""), compile_only():
                    self.module.launch(*ins, *outs, **self.params)
                self.torch.cuda.synchronize()
            except BaseException as e:
                return self.failure(e)
        return {"ok": True, "seconds": time.perf_counter() - start}

    def _run(self, msg: dict[str, Any],
             instrument: Callable[[list[Any], dict[str, Any]], AbstractContextManager[Any]] | None) -> dict[str, Any]:
        from fitness.sandbox.torch_guard import CandidateGuard

        if self.module is None:
            return {"ok": False, "kind": "crash", "message": "no candidate loaded"}
        ins, outs, in_views, out_views = [], [], [], []
        exact = msg.get("layout") == "exact"
        for spec in msg["inputs"]:
            # the request's bytes are let go once laid out: at bench sizes they are hundreds of MB
            data = np.frombuffer(spec.pop("data"), dtype=dtypes.storage_type(spec["dtype"]))
            t, v = self._tensor(guard.layout(data, spec["dtype"]), spec["dtype"], spec["shape"], exact)
            del data
            ins.append(t)
            in_views.append(v)
        for spec in msg["outputs"]:
            shape = tuple(spec["shape"])
            t, v = self._tensor(guard.poisoned(shape, spec["dtype"], int(msg.get("poison", msg["run"]))),
                                spec["dtype"], spec["shape"], exact)
            outs.append(t)
            out_views.append(v)
        if self.device != "cpu":
            self.torch.cuda.synchronize()
        start, dots = time.perf_counter(), tf32_dots()
        around = instrument([*in_views, *out_views], msg) if instrument is not None else nullcontext()
        try:
            with CandidateGuard(self.filename or "", poison_run=int(msg["run"]), inputs=in_views, outputs=out_views), \
                    around as extra:  # the instrument may add fields to the reply (the launches' specializations)
                self.module.launch(*in_views, *out_views, **self.params)
            if self.device != "cpu":
                self.torch.cuda.synchronize()
        except BaseException as e:
            return self.failure(e)
        seconds = time.perf_counter() - start
        return {
            **(extra if isinstance(extra, dict) else {}),
            "ok": True,
            "seconds": seconds,
            "inputs": [self._bytes(t) for t in ins],
            "outputs": [self._bytes(t) for t in outs],
            "tf32_dots": tf32_dots() - dots,  # in the interpreter: float32 dots rounded as a GPU rounds them
        }
