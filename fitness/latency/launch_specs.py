"""The kernel specializations one interpreted check run launches, as the GPU compiler would see them
(`fitness.latency.interp_profile.compile_spec`), for the verification to compile every one: a path a
kernel takes only at small sizes (a constexpr block size below some threshold) is compiled for the GPU
at no bench size, and the interpreter runs what the GPU compiler refuses (a call of a plain Python
helper inside a kernel)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fitness.sandbox.interp_patch import Patches


@contextmanager
def recording(specs: list[dict[str, Any]]) -> Iterator[None]:
    """Append to `specs` the specialization of every kernel launch made inside (each distinct one once)."""
    from triton.runtime import interpreter

    from fitness.latency.interp_profile import bind_launch, compile_spec

    original = interpreter.InterpretedFunction.run
    seen: set[str] = set()

    def run(fn_self: Any, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        if not warmup:
            try:
                spec: dict[str, Any] | None = compile_spec(fn_self, *bind_launch(fn_self, args, kwargs))
            except (TypeError, ValueError):
                spec = None  # the launch itself will fail and say why
            if spec is not None:
                text = json.dumps(spec, sort_keys=True, default=repr)
                if text not in seen:
                    seen.add(text)
                    specs.append(spec)
        return original(fn_self, *args, grid=grid, warmup=warmup, **kwargs)

    patches = Patches()
    patches.launches(run)
    try:
        yield
    finally:
        patches.restore()
