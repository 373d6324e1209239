"""Wrappers that route the Triton interpreter's builder methods, reductions and truth tests
through a `fitness.latency.interp_hooks.Recorder` (installed by `fitness.latency.interp_profile`).

Memory ops are checked and counted before they run; ops that only delegate to a masked load or
store (unmasked loads, descriptors, block pointers) pass through so the inner op is counted once;
anything inside a counted op (or a reduction) is that op's own cost. While a reuse probe runs,
stores and atomics are counted but not carried out. Masked-off lanes of a load without ``other``
read poison (`fitness.sandbox.masked_poison`), as they do in the check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fitness.latency.interp_hooks import TAINT, Recorder
from fitness.sandbox.masked_poison import poison_masked_off

_FREE = {
    "create_splat", "create_broadcast", "create_expand_dims", "create_reshape", "create_trans",
    "create_get_program_id", "create_get_num_programs", "create_bitcast", "create_int_to_ptr",
    "create_ptr_to_int", "create_join", "create_split", "create_unsplat", "create_barrier", "create_assume",
    "create_assert", "create_print", "create_make_tensor_descriptor", "create_make_range",
}
_TRANSPARENT = {
    "create_load", "create_store", "create_descriptor_load", "create_descriptor_store",
    "create_descriptor_gather", "create_descriptor_scatter", "create_atomic_load", "create_atomic_store",
    "create_atomic_poll", "create_tensor_pointer_load", "create_tensor_pointer_store",  # block pointers
}


def wrap_builder_method(rec: Recorder, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` (a builder method) counted by `rec`: memory ops checked and counted, other ops counted."""
    from triton.runtime.interpreter import TensorHandle

    def transparent(*args: Any, **kwargs: Any) -> Any:
        if not rec.active or rec.depth:
            return fn(*args, **kwargs)
        if name in ("create_load", "create_store"):
            # unmasked: normally delegates to the masked op (counted there); count here if not
            kind = "load" if name == "create_load" else "store"
            rec.check_bounds(kind, args[0], None)
            before = rec.events
            if kind == "store" and rec.probing:
                rec.memory_op(kind, args[0], None)
                return None
            out = fn(*args, **kwargs)
            if rec.events == before:
                rec.memory_op(kind, args[0], None)
                if isinstance(out, TensorHandle):
                    rec.loaded(out)
            return out
        return fn(*args, **kwargs)

    def counted(*args: Any, **kwargs: Any) -> Any:
        if not rec.active or rec.depth:
            return fn(*args, **kwargs)
        handles = [a for a in args if isinstance(a, TensorHandle)]
        if name == "create_masked_load":
            rec.consume(handles)
            rec.memory_op("load", args[0], args[1])
        elif name == "create_masked_store":
            rec.consume([args[1]])
            rec.memory_op("store", args[0], args[2])
            if rec.probing:
                return None
        elif name in ("create_atomic_rmw", "create_atomic_cas"):
            rec.consume(handles)
            ptr, mask = (args[1], args[3]) if name == "create_atomic_rmw" else (args[0], None)
            rec.memory_op("store", ptr, mask, atomic=True)
            rec.memory_op("load", ptr, mask)
            if rec.probing:  # the old values are not needed for addresses
                value = args[2]
                return TensorHandle(np.zeros_like(np.asarray(value.data)), value.dtype.scalar)
        else:
            rec.consume(handles)
        rec.depth += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            rec.depth -= 1
        if name == "create_masked_load" and len(args) > 2 and args[2] is None and isinstance(out, TensorHandle):
            poison_masked_off(out, args[1], rec.poison_run)
        if name in ("create_masked_load", "create_atomic_rmw", "create_atomic_cas"):
            if isinstance(out, TensorHandle):
                rec.loaded(out)
        elif name in ("create_dot", "create_dot_scaled"):
            if name == "create_dot":
                rec.dot(args[0], args[1], args[3] if len(args) > 3 else None)
            else:
                rec.dot(args[0], args[3], None)
            if isinstance(out, TensorHandle) and any(h.attr.get(TAINT) for h in handles):
                out.attr[TAINT] = True
        elif name == "create_masked_store":
            pass
        elif isinstance(out, TensorHandle) and name not in _FREE:
            fn_name = args[0] if name == "create_libdevice_elementwise" and args and isinstance(args[0], str) else ""
            rec.op(name, handles, out, libdevice=fn_name)
        elif isinstance(out, TensorHandle) and any(h.attr.get(TAINT) for h in handles):
            out.attr[TAINT] = True
        return out

    return transparent if name in _TRANSPARENT else counted

def wrap_reduce(rec: Recorder, apply: Callable[..., Any]) -> Callable[..., Any]:
    """A reduction or scan (computed in numpy, not by the builder) counted by `rec`."""

    def wrapped(op_self: Any, input: Any) -> Any:
        if not rec.active or rec.depth:
            return apply(op_self, input)
        items = input if isinstance(input, tuple) else (input,)
        handles = [t.handle for t in items if hasattr(t, "handle")]
        rec.consume(handles)
        rec.depth += 1  # apply() re-enters itself; ops inside a reduction are its own cost
        try:
            out = apply(op_self, input)
        finally:
            rec.depth -= 1
        rec.reduction(max((int(np.asarray(h.data).size) for h in handles), default=1))
        if any(h.attr.get(TAINT) for h in handles):
            for t in out if isinstance(out, tuple) else (out,):
                if hasattr(t, "handle"):
                    t.handle.attr[TAINT] = True
        return out

    return wrapped

def wrap_bool(rec: Recorder, original: Callable[..., Any]) -> Callable[..., Any]:
    """`tensor.__bool__` noting control flow that depends on loaded data."""

    def wrapped(t: Any) -> Any:
        if rec.active and rec.tainted_value(t):
            rec.note("control flow depends on loaded data")
        return original(t)

    return wrapped
