"""Every specialization the check ran compiles for the GPU, not only the bench size's.

The interpreter runs what the GPU compiler refuses (a plain Python helper called inside a kernel, a
construct only the interpreter accepts), and a kernel may take such a path only where a compile-time
constant from a small size leads it (a block size below some threshold): no bench size launches it, so
the latency model's compile never sees it. The verification compiles, for the target GPU, every
specialization any of its check runs launched (`fitness.sandbox.launch_specs`, gathered in
`fitness.check.equivalence.Observed`); a refusal is a ``compile_error`` naming the kernel and the case
that took that path. On a GPU the check's own launches compiled each one already.
"""

from __future__ import annotations

import json

from evo.contracts.candidate import Candidate
from evo.contracts.verdict import Status
from fitness.check.equivalence import Observed
from fitness.sandbox.process import Worker, WorkerDied, WorkerTimeout


def compile_all(compiler: Worker, candidate: Candidate, observed: Observed, *, arch: int,
                timeout: float) -> tuple[Status, str] | None:
    """None when every specialization in `observed` compiles for sm_`arch` in `compiler` (a compile
    worker), else the verdict's status and reason."""
    if not observed.specs:
        return None
    specs = [json.loads(text) for text in observed.specs]
    where = list(observed.specs.values())
    try:
        reply = compiler.request({"op": "load", "source": candidate.source, "params": candidate.params,
                                  "name": candidate.id}, timeout)
        if reply.get("ok"):
            reply = compiler.request({"op": "compile", "specs": specs, "arch": arch, "resources": False}, timeout)
    except WorkerTimeout as e:
        return Status.COMPILE_ERROR, f"compiling the check's {len(specs)} specializations did not finish: {e}"
    except WorkerDied as e:
        return Status.CRASH, f"the compile worker died compiling the check's specializations: {e.reason}"
    if reply.get("ok"):
        return None
    index = reply.get("index")
    at = f" (the specialization the check launched at {where[index]})" if isinstance(index, int) and \
        0 <= index < len(where) else ""
    status = Status.COMPILE_ERROR if reply.get("kind") in ("compile_error", None) else Status.CRASH
    return status, f"{reply.get('message')}{at}: the GPU compiler refuses a path the interpreter ran"
