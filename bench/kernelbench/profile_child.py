"""One interpreted profile of a seed kernel at a KernelBench problem's own sizes (a child process of
`bench.kernelbench.model_at_size`; ``TRITON_INTERPRET=1`` is set before triton is imported).

Reads JSON requests on stdin, one per line: the kernel file, its parameters, the sampling settings and
the layout of ``launch``'s arguments (shape and dtype of every input and output). Answers each with one
JSON line: the launch counts, the specializations that ran (for the cross-compile) and the host fills,
as `fitness.latency.ops` returns them to the model. Tensors of one layout are kept for the next request.

What differs from the model's own run (`fitness.latency.model`), and why it is a calibration figure, not a
verdict: the tensors are zero pages that the kernel's sampled programs touch on demand (KernelBench's
sizes are 0.5-17 GB per problem, more than this machine holds in float64 references and poisoned copies),
nothing is compared with a reference (the kernels are the shipped seeds, checked by the tests at the check
sizes; nor are the stored elements gathered for a comparison, nor every program of a launch run so that they
could be), and launches are keyed without hashing their tensors' contents (all zeros here: hashing gigabytes
of zero pages would say nothing and cost seconds per launch).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from typing import Any


def _zeros(torch: Any, shape: list[int], dtype: str) -> Any:
    """A tensor of zeros whose pages are not touched until a program touches them (calloc'd by numpy)."""
    import numpy as np

    return torch.from_numpy(np.zeros(shape, dtype=np.dtype(dtype)))


def _install() -> None:
    import numpy as np

    from fitness.latency import interp_hooks, interp_profile
    from fitness.sandbox import interp_compat

    interp_compat.install()  # the interpreter computes what a GPU would, as in the evaluation worker
    # zero pages and no comparison: see the module docstring
    interp_profile._digest = lambda t: f"{t.data_ptr()}:{t.numel()}"
    interp_hooks.MemoryState.verifiable = lambda self, index: np.zeros(0, dtype=np.int64)  # type: ignore[method-assign]
    # nor every program of a launch whose partial results a later launch combines (run in full so that the
    # combined outputs can be compared): the sample's counts are extrapolated like any other launch's
    interp_profile.LaunchProfiler._full_axes = lambda self, i: ()  # type: ignore[method-assign]


_tensors: dict[str, tuple[list[Any], list[Any]]] = {}


def profile(request: dict[str, Any]) -> dict[str, Any]:
    import torch

    from fitness.latency.interp_profile import LaunchProfiler, ProfileSettings
    from fitness.sandbox.torch_guard import CandidateGuard

    path = str(request["kernel"])
    spec = importlib.util.spec_from_file_location("kernelbench_seed", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    layout = json.dumps([request["inputs"], request["outputs"]])
    if layout not in _tensors:
        _tensors.clear()
        _tensors[layout] = ([_zeros(torch, t["shape"], t["dtype"]) for t in request["inputs"]],
                            [_zeros(torch, t["shape"], t["dtype"]) for t in request["outputs"]])
    ins, outs = _tensors[layout]
    settings = ProfileSettings(**request["settings"])
    guard = CandidateGuard(path)
    with LaunchProfiler(path, settings, int(request["seed"]), ins, outs) as prof:
        with guard:  # what launch allocates and fills on the host, as the model records it
            module.launch(*ins, *outs, **request["params"])
        result = prof.execute(guard.initialized)
    return {"launches": [c.to_dict() for c in result.launches], "specs": result.specs,
            "fills": guard.filled_bytes, "programs_run": result.programs_run,
            "unmodelled": sorted(result.unmodelled), "notes": sorted(result.notes)}


def main() -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("profile_child needs TRITON_INTERPRET=1 before triton is imported")
    _install()
    for line in sys.stdin:
        try:
            reply = {"ok": True, **profile(json.loads(line))}
        except Exception as e:  # the driver records the failure against the kernel and goes on
            reply = {"ok": False, "message": f"{type(e).__name__}: {e}"}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
