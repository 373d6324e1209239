"""The evaluation worker: a subprocess that imports candidates and runs them, nothing more.

Started by `fitness.sandbox.process.Worker` with a scrubbed environment (``TRITON_INTERPRET=1`` on a
machine without CUDA, set before triton is imported). It lays out guarded buffers, calls
``launch`` under `CandidateGuard` and sends every storage back byte for byte: all judgement
(guards, inputs unchanged, poison left, tolerance) happens in the driver, which never runs
candidate code. Importing torch and triton is paid once per worker, not once per candidate.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import resource
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import numpy as np

from evo.contracts import dtypes
from fitness.sandbox import protocol
from fitness.sandbox import zones as guard


def _set_memory_limit(megabytes: int) -> None:
    """Cap the address space at what imports took plus `megabytes` (no harm to the machine).

    The hard limit is higher (half the machine's memory, if that is more): bench-size profiling
    allocates full-size buffers (a naive attention's score matrix is 8 GiB) but touches only the
    parts its sampled programs use, so it lifts the soft cap for its duration (`roomy_address_space`).
    """
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))
    with open("/proc/meminfo") as f:
        total_kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    soft = vm * 1024 + megabytes * 1024 * 1024
    hard = max(soft, vm * 1024 + total_kb * 1024 // 2)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextmanager
def roomy_address_space() -> Iterator[None]:
    """Raise the soft address-space cap to the hard one while bench-size buffers are needed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _describe(e: BaseException, filename: str | None) -> str:
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

        text = _describe(e, self.filename)
        if isinstance(e, ForbiddenOperation):
            return {"ok": False, "kind": "lint_error", "message": str(e)}
        if isinstance(e, MemoryError) or "out of memory" in str(e).lower() or "can't allocate memory" in str(e).lower():
            return {"ok": False, "kind": "crash", "message": f"memory limit exceeded: {text}", "fatal": True}
        if "illegal memory access" in str(e) or "misaligned address" in str(e) or "CUDA error" in str(e):
            return {"ok": False, "kind": "crash", "message": text, "fatal": True}
        if isinstance(e, (SystemExit, KeyboardInterrupt)):
            return {"ok": False, "kind": "crash", "message": f"candidate tried to exit: {text}", "fatal": True}
        return {"ok": False, "kind": "compile_error", "message": text}

    # -- ops ---------------------------------------------------------------------------------
    def load(self, msg: dict[str, Any]) -> dict[str, Any]:
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

    def _tensor(self, storage: np.ndarray, dtype: str, shape: list[int]) -> tuple[Any, Any]:
        torch = self.torch
        t = torch.from_numpy(storage.copy())
        if dtype == "bfloat16":
            t = t.view(torch.bfloat16)
        t = t.to(self.device)
        g = guard.guard_elems(dtype)
        view = t[g : g + guard.numel(shape)].view(tuple(shape))
        return t, view

    def _bytes(self, t: Any) -> bytes:
        torch = self.torch
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        return bytes(t.cpu().numpy().tobytes())

    def run(self, msg: dict[str, Any]) -> dict[str, Any]:
        from fitness.sandbox.torch_guard import CandidateGuard

        if self.module is None:
            return {"ok": False, "kind": "crash", "message": "no candidate loaded"}
        ins, outs, in_views, out_views = [], [], [], []
        for spec in msg["inputs"]:
            data = np.frombuffer(spec["data"], dtype=dtypes.storage_type(spec["dtype"]))
            t, v = self._tensor(guard.layout(data, spec["dtype"]), spec["dtype"], spec["shape"])
            ins.append(t)
            in_views.append(v)
        for spec in msg["outputs"]:
            shape = tuple(spec["shape"])
            t, v = self._tensor(guard.poisoned(shape, spec["dtype"], msg["run"]), spec["dtype"], spec["shape"])
            outs.append(t)
            out_views.append(v)
        if self.device != "cpu":
            self.torch.cuda.synchronize()
        start = time.perf_counter()
        try:
            with CandidateGuard(self.filename or ""):
                self.module.launch(*in_views, *out_views, **self.params)
            if self.device != "cpu":
                self.torch.cuda.synchronize()
        except BaseException as e:
            return self.failure(e)
        seconds = time.perf_counter() - start
        return {
            "ok": True,
            "seconds": seconds,
            "inputs": [self._bytes(t) for t in ins],
            "outputs": [self._bytes(t) for t in outs],
        }


def _exit_with_parent() -> None:
    """Exit when the process that started us is gone (e.g. an evaluator actor that was killed): an
    orphaned worker stuck in a candidate's endless loop would otherwise hold a CPU forever."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(4)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fd-in", type=int, required=True)
    ap.add_argument("--fd-out", type=int, required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--memory-mb", type=int, default=0)
    ap.add_argument("--compile-only", action="store_true", help="cross-compiles kernels; runs none")
    args = ap.parse_args()
    if args.compile_only and os.environ.get("TRITON_INTERPRET") == "1":
        raise SystemExit("worker: a compile worker must not run under TRITON_INTERPRET=1")
    if args.device == "cpu" and not args.compile_only and os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("worker: a CPU worker needs TRITON_INTERPRET=1 before triton is imported")
    import torch
    import triton  # noqa: F401  (paid once per worker)

    if args.device != "cpu":
        torch.cuda.init()
    elif not args.compile_only:
        from fitness.sandbox.interp_compat import install

        install()  # older interpreters under numpy >= 2.4: loops over runtime scalars
    _exit_with_parent()  # before the memory limit: the thread's stack counts against it
    if args.memory_mb and args.device == "cpu":
        _set_memory_limit(args.memory_mb)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    from fitness.latency.ops import LatencyOps

    gc.freeze()  # what the imports made is never garbage: keep each unload's collection cheap
    runner = Runner(args.device)
    latency_ops = LatencyOps(runner)
    protocol.send(args.fd_out, {"op": "ready", "pid": os.getpid(), "torch": torch.__version__})
    while True:
        try:
            msg = protocol.receive(args.fd_in)
        except protocol.ChannelClosed:
            return
        op = msg.get("op")
        if op == "load":
            reply = runner.load(msg)
        elif op == "run":
            reply = runner.run(msg)
        elif op == "unload":
            runner.unload()
            reply = {"ok": True}
        elif op in latency_ops.names:
            reply = latency_ops.handle(op, msg)
        elif op == "ping":
            reply = {"ok": True}
        elif op == "exit":
            return
        else:
            reply = {"ok": False, "kind": "crash", "message": f"unknown op {op!r}"}
        protocol.send(args.fd_out, reply)
        if reply.get("fatal"):
            os._exit(3)  # the CUDA context or the heap may be gone: let the driver start afresh


if __name__ == "__main__":
    main()
