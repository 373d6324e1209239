"""Runs `tests/candidates/latency/runtime_loop_helper.py` (a loop over a runtime bound in a kernel and
in a jit helper) plainly and under the latency model's profiler, in an interpreter whose
``tensor.__index__`` is Triton 3.6's: ``int()`` of the one-element array that holds a scalar, an
error since numpy 2.4 (and a DeprecationWarning before it, made an error here too). Prints one JSON
line. Run as ``TRITON_INTERPRET=1 python -m tests.old_interpreter_probe [--no-fix]``; without
``--no-fix`` the project's `fitness.sandbox.interp_compat.install` runs first, as the interpreter worker does.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import warnings
from typing import Any

from tests.conftest import CANDIDATES

ROWS, COLS = 6, 1000


def _old_index(triton_interpreter: Any) -> None:
    """Make the interpreter's tensor patches install Triton 3.6's ``__index__``."""
    original = triton_interpreter._patch_lang_tensor

    def patch(tensor: Any, *rest: Any) -> Any:
        out = original(tensor, *rest)
        old = lambda self: int(self.handle.data)  # noqa: E731  (Triton 3.6, verbatim)
        if rest:
            rest[0].set_attr(tensor, "__index__", old)
        else:
            tensor.__index__ = old
        return out

    triton_interpreter._patch_lang_tensor = patch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-fix", action="store_true", help="leave the emulated Triton 3.6 interpreter as it is")
    args = ap.parse_args()
    assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"
    import torch
    from triton.runtime import interpreter

    from fitness.latency.interp_profile import LaunchProfiler, ProfileSettings
    from fitness.sandbox.interp_compat import install

    _old_index(interpreter)
    if not args.no_fix:
        install()
    path = str(CANDIDATES / "latency" / "runtime_loop_helper.py")
    spec = importlib.util.spec_from_file_location("runtime_loop_helper", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.arange(ROWS * COLS, dtype=torch.float32).reshape(ROWS, COLS) % 7
    y = torch.zeros(ROWS)
    out: dict[str, Any] = {}
    warnings.simplefilter("error", DeprecationWarning)  # after the imports: only what running does
    try:
        settings = ProfileSettings(inner_samples=2, loop_full=64, full_programs=1, full_iterations=4096, sms=132,
                                    max_blocks_per_sm=32, max_warps_per_sm=64)
        with LaunchProfiler(path, settings, 0, [x], [y]) as prof:
            module.launch(x, y, **module.PARAMS)
            profile = prof.execute(set())
        out["launches"] = [c.to_dict() for c in profile.launches]
    except Exception as e:
        out["profile_error"] = f"{type(e).__name__}: {e}"
    try:
        module.launch(x, y, **module.PARAMS)
        out["max_error"] = float((y - x.sum(dim=1)).abs().max())
    except Exception as e:
        out["run_error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(out))


if __name__ == "__main__":
    main()
