"""Reversible patches of Triton's interpreter, for the instruments that run inside it (the race and
bounds sanitizer of the check, the profiler of the latency model)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Patches:
    """Attribute and dict changes that `restore` undoes, last first."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def set(self, obj: Any, name: str, value: Any, *, instance: bool = False) -> None:
        if instance:
            had = name in vars(obj)
            old = vars(obj).get(name)
            setattr(obj, name, value)
            self._undo.append(lambda: setattr(obj, name, old) if had else delattr(obj, name))
        else:
            old = getattr(obj, name)
            setattr(obj, name, value)
            self._undo.append(lambda: setattr(obj, name, old))

    def set_item(self, d: dict[str, Any], key: str, value: Any) -> None:
        had, old = key in d, d.get(key)
        d[key] = value
        self._undo.append(lambda: d.__setitem__(key, old) if had else d.pop(key, None))

    def launches(self, run: Callable[..., Any]) -> None:
        """Route every kernel launch through `run(fn, *args, grid=..., warmup=False, **kwargs)`, in place of
        ``InterpretedFunction.run``: ``kernel[grid](...)`` reaches ``run`` in recent Triton, a grid executor
        directly in older ones, so ``__getitem__`` is routed too."""
        from triton.runtime.interpreter import InterpretedFunction

        self.set(InterpretedFunction, "run", run)
        self.set(InterpretedFunction, "__getitem__",
                 lambda fn_self, grid: lambda *args, **kwargs: run(fn_self, *args, grid=grid, **kwargs))

    def restore(self) -> None:
        while self._undo:
            self._undo.pop()()


def tensor_span(t: Any) -> tuple[int, int]:
    """[first byte, last byte + 1) of the elements a tensor (view) can address."""
    start = int(t.data_ptr())
    if t.numel() == 0:
        return start, start
    dims = [(int(n) - 1, int(s)) for n, s in zip(t.shape, t.stride())]
    low = sum(n * s for n, s in dims if s < 0)
    high = sum(n * s for n, s in dims if s > 0)
    item = int(t.element_size())
    return start + low * item, start + high * item + item


def program_label(pid: tuple[int, int, int]) -> str:
    return f"program ({pid[0]}, {pid[1]}, {pid[2]})"
