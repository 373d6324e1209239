"""The order in which the interpreter runs a launch's programs, changed for some check runs.

Triton's interpreter runs the programs of a grid one after another, in order: (0, 0, 0), (0, 0, 1),
... A GPU runs them in any order, many at once. The race sanitizer (`fitness.check.sanitizer`) refuses
plain accesses that make a result depend on that order, but atomics may overlap each other, and what
they return is the order: a kernel whose last program combines the partial results of the others
(read back with atomics, assuming they are done), or where the last `atomic_xchg` wins, is right when
programs run in order and wrong on a GPU. In a run with ``order="shuffled"`` every program still runs
exactly once, but the last program goes first, the first goes last and the ones between run in a
random order (fixed per grid shape, so a verdict repeats); the check compares that run with the
reference and with a run in order (`fitness.check.equivalence`), so a result that depends on the
order fails. A kernel that waits for another program by its id (a spin on a flag) may now wait for one
that has not run: it times out, as it could hang on a GPU; take a ticket from an atomic counter instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from fitness.sandbox.interp_patch import Patches

NATURAL, SHUFFLED = "natural", "shuffled"


def shuffled(n: int, grid: tuple[int, int, int]) -> np.ndarray:
    """Program numbers (x-major, as the interpreter counts) in the order a shuffled run takes them:
    the last first, the first last, the rest in an order drawn from the grid's shape."""
    if n <= 2:
        return np.arange(n)[::-1].copy()
    middle = np.random.default_rng(list(grid)).permutation(np.arange(1, n - 1))
    return np.concatenate(([n - 1], middle, [0])).astype(np.int64)


@contextmanager
def program_order(order: str) -> Iterator[None]:
    """While active, interpreted launches run their programs in `order` (natural: as the interpreter does)."""
    if order == NATURAL:
        yield
        return
    if order != SHUFFLED:
        raise ValueError(f"unknown program order {order!r}")
    from triton.runtime.interpreter import interpreter_builder as builder

    set_dim, set_idx = builder.set_grid_dim, builder.set_grid_idx
    state: dict[str, Any] = {}

    def grid_dim(x: int, y: int, z: int) -> None:
        set_dim(x, y, z)
        state["grid"], state["order"] = (x, y, z), None  # drawn at the first program, for its size

    def grid_idx(x: int, y: int, z: int) -> None:
        gx, gy, gz = state["grid"]
        if state["order"] is None:
            state["order"] = shuffled(gx * gy * gz, (gx, gy, gz))
        p = int(state["order"][(x * gy + y) * gz + z])
        set_idx(p // (gy * gz), (p // gz) % gy, p % gz)

    patches = Patches()
    patches.set(builder, "set_grid_dim", grid_dim, instance=True)
    patches.set(builder, "set_grid_idx", grid_idx, instance=True)
    try:
        yield
    finally:
        patches.restore()
