"""Where each tensor a check run's ``launch`` may hand a kernel comes from, as the run-time guard
(`fitness.sandbox.torch_guard`) saw it: a task input or output the harness laid out, or memory that
candidate code allocated through torch (with contents or without), and which parts of it a host fill
(``zero_``, ``fill_``) wrote. The sanitizer (`fitness.check.sanitizer`) asks it at every launch.

Storages are told apart by their identity (`storage_key`), not their address: the registry holds a weak
reference to each one it saw, so a storage that was freed cannot hand its identity to a new one made at
the same address by a constructor the guard never saw (``torch.Tensor(n)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from torch.multiprocessing.reductions import StorageWeakRef

INPUT, OUTPUT, WRITTEN_SCRATCH, UNWRITTEN_SCRATCH = "input", "output", "scratch with contents", "scratch"


def storage_key(t: Any) -> int:
    """The identity of a tensor's storage (views of one storage share it)."""
    return int(t.untyped_storage()._cdata)


@dataclass(frozen=True)
class Fill:
    """A host fill of a tensor view: the bytes it wrote."""

    key: int
    start: int  # data_ptr
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    itemsize: int
    dense: bool  # whether the view's elements are its whole span, one after another


@dataclass
class Allocation:
    ref: StorageWeakRef  # held: keeps the identity (`storage_key`) unique while the guard lives
    how: str  # the torch function that made it
    itemsize: int
    start: int  # the storage's bytes: [start, start + nbytes)
    nbytes: int
    initialized: bool  # made with contents (zeros, ones, full...): every byte is written


@dataclass
class Provenance:
    """The harness's tensors (when the run was given them) and the allocations and fills candidate code
    made; fills wait in `fills` until the sanitizer takes them (`take_fills`)."""

    inputs: dict[int, list[Any]] = field(default_factory=dict)
    outputs: dict[int, list[Any]] = field(default_factory=dict)
    knows_harness: bool = False
    allocations: dict[int, Allocation] = field(default_factory=dict)
    fills: list[Fill] = field(default_factory=list)

    @classmethod
    def of(cls, inputs: Sequence[Any] | None, outputs: Sequence[Any] | None) -> Provenance:
        p = cls(knows_harness=outputs is not None)
        for views, into in ((inputs or (), p.inputs), (outputs or (), p.outputs)):
            for t in views:
                into.setdefault(storage_key(t), []).append(t)
        return p

    def allocated(self, how: str, t: Any, *, initialized: bool) -> None:
        key = storage_key(t)
        storage = t.untyped_storage()
        self.allocations[key] = Allocation(StorageWeakRef(storage), how, int(t.element_size()),
                                           int(storage.data_ptr()), int(storage.nbytes()), initialized)

    def filled(self, t: Any) -> None:
        self.fills.append(Fill(storage_key(t), int(t.data_ptr()), tuple(t.shape), tuple(t.stride()),
                               int(t.element_size()), bool(t.is_contiguous())))

    def take_fills(self) -> list[Fill]:
        fills, self.fills = self.fills, []
        return fills

    def origin(self, t: Any) -> str | None:
        """INPUT, OUTPUT, WRITTEN_SCRATCH, UNWRITTEN_SCRATCH, or None: a tensor the guard never saw made."""
        key = storage_key(t)
        if key in self.inputs:
            return INPUT
        if key in self.outputs:
            return OUTPUT
        a = self.allocations.get(key)
        if a is None:
            return None
        return WRITTEN_SCRATCH if a.initialized else UNWRITTEN_SCRATCH
