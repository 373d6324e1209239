"""Work Triton's interpreter repeats, done once (installed in every interpreter worker).

Before each kernel launch, and again on every call of a jit helper (``tl.max``, ``tl.sum``, ``tl.cdiv``
and a candidate's own ``@triton.jit`` helpers are such calls, once per program and loop iteration), the
interpreter's ``_patch_builtin`` walks every member of ``triton.language``, ``tl.core``, ``tl.tensor``,
``tl.math`` and the tensor-descriptor class with ``inspect.getmembers`` (a ``dir``, a ``getattr`` per
name, a sort) to wrap the ones marked builtin. Measured here (Triton 3.9): about 1 ms a call, a fifth of
an interpreter worker's time on the library softmax's check.

Which names of those modules and classes can be builtins is fixed once Triton is imported; `install`
lists them once, before any launch, and the patched walk looks only at those, wrapping each that is a
builtin at that moment: the attributes wrapped, their order, and what the interpreter undoes afterwards
are the same as the original walk's. A module or class not listed at install time is walked in full, as
before.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

_MARK = "_evo_speed"


def install() -> bool:
    """Replace the interpreter's ``_patch_builtin`` with the listed walk; False where the interpreter has
    no such function (nothing changed). Idempotent. Call it after every other patch of the interpreter
    that adds or replaces a builtin, and before any kernel runs."""
    import triton.language as tl
    from triton.runtime import interpreter as interp

    original = getattr(interp, "_patch_builtin", None)
    patch_attr = getattr(interp, "_patch_attr", None)
    is_builtin = getattr(getattr(tl, "core", None), "is_builtin", None)
    if original is None or patch_attr is None or is_builtin is None:
        return False
    if getattr(original, _MARK, False):
        return True
    walk: Callable[..., Any] = original
    known = [tl, tl.core, tl.core.tensor, getattr(tl, "math", None), getattr(tl.core, "tensor_descriptor_base", None)]
    listed: dict[int, tuple[Any, tuple[str, ...]]] = {
        id(pkg): (pkg, tuple(name for name, member in inspect.getmembers(pkg) if is_builtin(member)))
        for pkg in known if pkg is not None}

    def patched(pkg: Any, builder: Any, *scope: Any) -> None:  # older interpreters pass no scope
        entry = listed.get(id(pkg))
        if entry is None or entry[0] is not pkg:
            walk(pkg, builder, *scope)
            return
        for name in entry[1]:
            member = getattr(pkg, name, None)
            if is_builtin(member):
                patch_attr(pkg, name, member, builder, *scope)

    setattr(patched, _MARK, True)
    interp._patch_builtin = patched
    return True
