"""Work Triton's interpreter repeats, done once (installed in every interpreter worker).

Both repeats are in how the interpreter puts its versions of ``triton.language`` in place (``_patch_lang``),
which it does before each kernel launch and again on every call of a jit helper (``tl.max``, ``tl.sum``,
``tl.cdiv`` and a candidate's own ``@triton.jit`` helpers: once per program and loop iteration).

The walk. ``_patch_builtin`` walks every member of ``triton.language``, ``tl.core``, ``tl.tensor``,
``tl.math`` and the tensor-descriptor class with ``inspect.getmembers`` (a ``dir``, a ``getattr`` per
name, a sort) to wrap the ones marked builtin: about 1 ms a call here (Triton 3.9), a fifth of an
interpreter worker's time on the library softmax's check. Which names of those can be builtins is fixed
once Triton is imported; `install` lists them once, before any launch, and the walk looks only at those,
wrapping each that is a builtin at that moment: the attributes wrapped, their order, and what the
interpreter undoes afterwards are the original walk's. A module or class not listed is walked in full.

The re-patching. Within one launch patches only accumulate: the kernel's are undone when the launch ends,
a helper's never (Triton keeps them). A helper whose ``triton.language`` modules have been patched since
the last undo would apply its patches again on top of themselves, to the same effect; `install` skips
that call (a helper's only: a launch, and the latency profiler, patch in full). Any undo forgets what was
patched, so the next call patches in full again. Cross-entropy's kernels call ``tl.max`` and ``tl.sum``
in their loops: the re-patching was over a third of the interpreter's time on them.

Overflow checks that assert nothing (`without_dead_overflow_checks`, around each check run). Triton's
``add``, ``sub`` and ``mul`` of 32-bit integers compute the result again in 64 bits, compare it with the
type's bounds and hand the outcome to ``device_assert``, which asserts only in debug mode: the interpreter's
options leave debug off and the check on, so every integer index sum computes six more arrays for nothing
(a quarter of a check run's time on a row norm's two passes). On a GPU the same instructions are generated
and dropped as dead code. The check runs with the computing off where debug is off (the wrap-around of a
32-bit index is what the GPU does too, and the check judges its effect on addresses and outputs); the
latency profiler keeps the interpreter's options, whose counts its model was fitted with.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
    _skip_repatching(interp, tl)
    return True


def _skip_repatching(interp: Any, tl: Any) -> bool:
    """Make ``_patch_lang`` a no-op for a function whose language modules are patched already (see the
    module docstring); False where the interpreter has no undoable patch scopes (nothing changed)."""
    original = getattr(interp, "_patch_lang", None)
    scope_class = getattr(interp, "_LangPatchScope", None)
    function_class = getattr(interp, "InterpretedFunction", None)
    if (original is None or scope_class is None or function_class is None
            or not callable(getattr(scope_class, "restore", None)) or "__call__" not in vars(function_class)):
        return False
    patch_lang: Callable[..., Any] = original
    call: Callable[..., Any] = function_class.__call__
    helpers = [0]  # helper calls in progress: a launch's own patching (and the profiler's) is never skipped
    langs = (tl, tl.core)
    patched: set[int] = set()  # ids of the language modules patched since the last undo
    seen: dict[int, tuple[Any, int, frozenset[int]]] = {}  # id(fn) -> (fn, len(globals), its modules)

    def modules_of(fn: Any) -> frozenset[int]:
        known = seen.get(id(fn))
        if known is None or known[0] is not fn or known[1] != len(fn.__globals__):
            found = frozenset(id(v) for v in list(fn.__globals__.values())
                              if inspect.ismodule(v) and any(v is lang for lang in langs))
            known = seen[id(fn)] = (fn, len(fn.__globals__), found)
        return known[2]

    def fast_patch_lang(fn: Any) -> Any:
        mods = modules_of(fn)
        if helpers[0] and mods and mods <= patched:
            return scope_class()  # nothing to do, nothing to undo
        scope = patch_lang(fn)
        patched.update(mods)
        undo = scope.restore

        def restore() -> None:
            patched.clear()  # whatever this undoes may have been what made the others' patches
            undo()

        scope.restore = restore
        return scope

    def helper_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        helpers[0] += 1
        try:
            return call(self, *args, **kwargs)
        finally:
            helpers[0] -= 1

    setattr(fast_patch_lang, _MARK, True)
    interp._patch_lang = fast_patch_lang
    function_class.__call__ = helper_call
    return True


@contextmanager
def without_dead_overflow_checks() -> Iterator[None]:
    """The interpreter's integer overflow checks off while inside, where its options have debug off (they
    assert nothing then: see the module docstring); its options as they were afterwards."""
    from triton.runtime import interpreter as interp

    builder = getattr(interp, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if (builder is None or not dataclasses.is_dataclass(options) or isinstance(options, type)
            or getattr(options, "debug", True) or not getattr(options, "sanitize_overflow", False)):
        yield
        return
    builder.options = dataclasses.replace(options, sanitize_overflow=False)
    try:
        yield
    finally:
        builder.options = options
