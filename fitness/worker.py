"""The evaluation worker: a subprocess that imports candidates and runs them, nothing more.

Started by `fitness.sandbox.process.Worker` with a scrubbed environment (``TRITON_INTERPRET=1`` on a
machine without CUDA, set before triton is imported). It lays out guarded buffers, calls
``launch`` under `CandidateGuard` and sends every storage back byte for byte: all judgement
(guards, inputs unchanged, poison left, tolerance) happens in the driver, which never runs
candidate code. Importing torch and triton is paid once per worker, not once per candidate: on the
CPU (the interpreter, the compile worker) the worker is a fork server that runs each candidate in a
process forked from it (`fitness.sandbox.forkserver`), so no candidate shares a process with another.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from fitness.check.probes import Probes
from fitness.sandbox import isolation, protocol

PROJECT_ROOT = Path(__file__).resolve().parents[1]
MAX_RETURNED = 64  # numbers a run's comparisons held per lane, returned (those of the most lanes first)
# requests a fork-server worker answers itself, in the parent every candidate's process is forked from:
# the bench inputs of the latency model (each candidate's process inherits them), a counter
PARENT_OPS = frozenset({"profile_setup", "compile_seconds"})


def sanitizer(views: list[Any], msg: dict[str, Any]) -> Any:
    """The check's race and bounds sanitizer for one interpreted run (`fitness.check.sanitizer`):
    races at check sizes, bounds everywhere; none when the evaluation turned it off."""
    from fitness.check.sanitizer import Sanitizer

    if msg.get("sanitize") == "off":
        return nullcontext()

    return Sanitizer(views, races=msg.get("sanitize", "races") == "races", run=int(msg["run"]))


@contextmanager
def interpreted_check(views: list[Any], msg: dict[str, Any], probes: Probes | None = None
                      ) -> Iterator[dict[str, Any]]:
    """What wraps one interpreted check run: the sanitizer, the order its programs run in
    (`fitness.sandbox.program_order`: natural, or shuffled as the message says), and the record of the
    specializations it launches (`fitness.latency.launch_specs`) and, with `probes`, of the points of the
    candidate's code it reaches (`fitness.check.probes`), which join the reply."""
    from fitness.latency.launch_specs import recording
    from fitness.sandbox.interp_speed import without_dead_overflow_checks
    from fitness.sandbox.program_order import NATURAL, program_order

    specs: list[dict[str, Any]] = []
    extra: dict[str, Any] = {"specs": specs}
    if probes is not None:
        probes.take()  # what this run reaches, not what an earlier one did
        probes.take_thresholds()
    with recording(specs), program_order(str(msg.get("order", NATURAL))), sanitizer(views, msg), \
            without_dead_overflow_checks():
        yield extra
    if probes is not None:
        extra["probes"] = probes.take()
        extra["thresholds"] = probes.take_thresholds()[:MAX_RETURNED]


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
    ap.add_argument("--bench-memory-mb", type=int, default=0)
    ap.add_argument("--compile-only", action="store_true", help="cross-compiles kernels; runs none")
    ap.add_argument("--isolation", choices=("on", "off"), default="on")
    args = ap.parse_args()
    sandbox, problems = isolation.NONE, ["isolation turned off (evaluation.isolation: false)"]
    if args.isolation == "on":  # first, while this process has one thread and has imported no torch
        sandbox, problems = isolation.apply(os.getcwd(), PROJECT_ROOT, gpu=args.device != "cpu")
    if args.compile_only and os.environ.get("TRITON_INTERPRET") == "1":
        raise SystemExit("worker: a compile worker must not run under TRITON_INTERPRET=1")
    if args.device == "cpu" and not args.compile_only and os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("worker: a CPU worker needs TRITON_INTERPRET=1 before triton is imported")
    import torch
    import triton  # noqa: F401  (paid once per worker)

    from fitness.sandbox.limits import set_memory_limit
    from fitness.sandbox.runner import Runner

    if args.device != "cpu":
        from fitness.sandbox.jit_hooks import install_clock

        torch.cuda.init()
        install_clock()
    elif not args.compile_only:
        from fitness.sandbox import addresses, interp_compat, interp_speed, interp_undefined

        interp_compat.install()  # the interpreter computes what a GPU would (see its docstring)
        addresses.install()  # and kernels may not read addresses
        interp_undefined.install()  # nor compute what a GPU leaves undefined
        interp_speed.install()  # last: it lists the builtins the patches above leave
    _exit_with_parent()  # before the memory limit: the thread's stack counts against it
    if args.memory_mb and args.device == "cpu":
        set_memory_limit(args.memory_mb, args.bench_memory_mb)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    from fitness.latency.ops import LatencyOps

    runner = Runner(args.device)
    latency_ops = LatencyOps(runner)
    interpreted = args.device == "cpu" and not args.compile_only
    forks = args.device == "cpu"  # the interpreter and the compile worker: one process per candidate
    if forks:
        _warm_up(runner, interpreted)
    gc.freeze()  # what the imports made is never garbage: keep each unload's collection cheap

    probes: list[Probes | None] = [None]  # the loaded candidate's, when its check asked for them

    def instrument(views: list[Any], msg: dict[str, Any]) -> Any:
        return interpreted_check(views, msg, probes[0])

    def handle(msg: dict[str, Any]) -> dict[str, Any]:
        op = msg.get("op")
        if op == "load":
            probes[0] = Probes() if interpreted and msg.get("coverage") else None
            return runner.load(msg, probes[0].load if probes[0] is not None else None)
        if op == "run":
            reply = runner.run(msg, instrument if interpreted else None)
            if interpreted and reply.get("ok"):
                reply["order"] = msg.get("order", "natural")  # the order its programs ran in
            return reply
        if op == "warm":
            return runner.warm(msg)
        if op == "compile_seconds":
            from fitness.sandbox.jit_hooks import compile_seconds

            return {"ok": True, "seconds": compile_seconds()}
        if op == "unload":
            runner.unload()
            return {"ok": True}
        if op in latency_ops.names:
            return latency_ops.handle(op, msg)
        if op == "ping":
            return {"ok": True}
        return {"ok": False, "kind": "crash", "message": f"unknown op {op!r}"}

    def send(reply: dict[str, Any], msg: dict[str, Any]) -> dict[str, Any]:
        return _send_reply(args.fd_out, reply, msg)

    protocol.send(args.fd_out, {"op": "ready", "pid": os.getpid(), "torch": torch.__version__, "sandbox": sandbox,
                                "sandbox_problems": problems, "forks": forks})
    if forks:
        from fitness.sandbox.forkserver import ForkServer

        confine = isolation.confine_candidate_process if "seccomp" in sandbox else None
        ForkServer(args.fd_in, args.fd_out, os.getcwd(), parent_ops=PARENT_OPS, handle_parent=handle,
                   handle_child=handle, send=send, confine=confine).serve()
        return
    # a CUDA worker serves every candidate itself: a process forked after CUDA is initialized cannot use it
    while True:
        try:
            msg = protocol.receive(args.fd_in)
        except protocol.ChannelClosed:
            return
        if msg.get("op") == "exit":
            return
        if send(handle(msg), msg).get("fatal"):
            os._exit(3)  # the CUDA context or the heap may be gone: let the driver start afresh


_WARM_UP = """
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def launch(x, y):
    _copy[(1,)](x, y, x.numel(), BLOCK=16)
"""


def _warm_up(runner: Any, interpreted: bool) -> None:
    """Pay once, in the process every candidate's is forked from, what each would pay again: the lazy
    imports and first calls of a check run (Triton's specialization code alone took 0.25 s in each
    child) or of a compile for the GPU. The kernel is this module's own; nothing of it stays loaded."""
    import numpy as np

    import fitness.check.coverage
    import fitness.latency.interp_profile  # noqa: F401  (imported for the children)

    reply = runner.load({"source": _WARM_UP, "params": {}, "name": "warm_up"})
    try:
        if not reply.get("ok"):
            return
        if interpreted:
            data = np.arange(20, dtype=np.float32).tobytes()
            runner.run({"op": "run", "run": 0, "order": "natural", "sanitize": "races",
                        "inputs": [{"dtype": "float32", "shape": [20], "data": data}],
                        "outputs": [{"dtype": "float32", "shape": [20]}]}, interpreted_check)
        else:
            from fitness.latency.target_compile import compile_op

            spec = {"kernel": "_copy", "signature": {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32",
                                                    "BLOCK": "constexpr"},
                    "constexprs": [[3, 16]], "attrs": [], "options": {}}
            compile_op(runner, {"specs": [spec], "arch": 90, "resources": False})
    finally:
        runner.unload()


def _send_reply(fd: int, reply: dict[str, Any], msg: dict[str, Any]) -> dict[str, Any]:
    """Send `reply` to `msg`; the reply sent. A bench-size run's reply (its buffers) is packed with the
    address space its run had (`roomy_address_space`); one that still does not fit is answered with a
    fatal ``crash`` that says so, not by the worker dying with a MemoryError."""
    from fitness.sandbox.limits import roomy_address_space

    roomy = msg.get("op") == "run" and bool(msg.get("bench"))
    try:
        with roomy_address_space() if roomy else nullcontext():
            protocol.send(fd, {**reply, "seq": msg.get("seq")})
        return reply
    except MemoryError:
        size = sum(len(b) for key in ("inputs", "outputs") for b in reply.get(key) or [])
        failure = {"ok": False, "kind": "crash", "fatal": True,
                   "message": f"the worker ran out of memory packing its reply ({size / 2**20:.0f} MB of buffers); "
                              f"raise evaluation.profile_memory_mb or bench at smaller sizes"}
        reply.clear()  # let the buffers go before the short answer is packed
        protocol.send(fd, {**failure, "seq": msg.get("seq")})
        return failure


if __name__ == "__main__":
    main()
