"""The data of one check case: tolerances, the case, the tensors a candidate receives, the expected outputs.

Split from `evo.contracts.task` (which re-exports every name here) so that modules that build cases
(`evo.contracts.check_cases`) need not import the task class.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evo.contracts import dtypes

Size = dict[str, Any]


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


DEFAULT_TOLERANCE: dict[str, Tolerance] = {
    "float64": Tolerance(atol=1e-10, rtol=1e-8),
    # fp16 rounding is up to 4.9e-4 relative: an fp32 task computed in fp16 fails this.
    "float32": Tolerance(atol=1e-5, rtol=1e-4),
    "float16": Tolerance(atol=1e-3, rtol=4e-3),
    "bfloat16": Tolerance(atol=8e-3, rtol=3e-2),
}
EXACT = Tolerance(atol=0.0, rtol=0.0)


def default_tolerance(dtype: str) -> Tolerance:
    return DEFAULT_TOLERANCE.get(dtype, EXACT)


@dataclass(frozen=True)
class Case:
    """One concrete check: a size, the k-th draw of inputs for it, and a value distribution."""

    size_json: str
    draw: int
    seed: int
    dist: str

    @property
    def size(self) -> Size:
        return dict(json.loads(self.size_json))

    def label(self) -> str:
        return f"size {self.size_json} draw {self.draw} ({self.dist})"


@dataclass(frozen=True)
class Tensor:
    """A host array with the dtype name the candidate sees it as."""

    data: np.ndarray
    dtype: str

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)


@dataclass(frozen=True)
class CaseData:
    """Inputs as the candidate receives them and expected outputs (float64 or exact ints)."""

    case: Case
    inputs: list[Tensor]
    expected: list[np.ndarray]
    output_dtypes: list[str]
    output_shapes: list[tuple[int, ...]] = field(default_factory=list)
    # why a special-value case holds its distribution's plain draw instead ('' when it does not)
    note: str = ""

    def launch_words(self) -> str:
        """What `launch` receives here, in words: each input, then each output (dtype, shape)."""
        ins = ", ".join(f"{t.dtype} {list(t.shape)}" for t in self.inputs)
        outs = ", ".join(f"{d} {list(s)}" for d, s in zip(self.output_dtypes, self.output_shapes))
        return f"{len(self.inputs)} input(s) [{ins}], then {len(self.output_dtypes)} output(s) to write [{outs}]"


@dataclass(frozen=True)
class BenchCase:
    """What a candidate is timed (or modelled) on: inputs at a bench size and the output layout.

    ``inputs`` hold data for every tensor when drawn with ``data=True``; with ``data=False``
    float tensors carry no data (``Tensor.data`` is an empty array of the right dtype and the
    shape is in ``input_shapes``), which is all the latency model needs. Integer inputs
    (indices, labels) always carry data: addresses may depend on them.
    """

    size: Size
    inputs: list[Tensor]
    input_shapes: list[tuple[int, ...]]
    output_dtypes: list[str]
    output_shapes: list[tuple[int, ...]]

    @property
    def has_float_data(self) -> bool:
        return all(t.shape == s for t, s in zip(self.inputs, self.input_shapes))


def size_key(size: Size) -> str:
    return json.dumps(size, sort_keys=True, separators=(",", ":"))


class TaskError(ValueError):
    """The task definition is unusable; the message names what is wrong."""


def one_line(e: BaseException) -> str:
    """An exception in one line: its type and the first line of its message (torch's argument errors
    list every overload after it)."""
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__


def bench_case_from(size: Size, inputs: list[Tensor], out_dtypes: list[str], out_shapes: list[tuple[int, ...]],
                    data: bool) -> BenchCase:
    """A BenchCase from drawn inputs; float data dropped unless `data`."""
    shapes = [t.shape for t in inputs]
    if not data:
        inputs = [t if not dtypes.is_float(t.dtype) else Tensor(np.empty(0, dtype=t.data.dtype), t.dtype)
                  for t in inputs]
    return BenchCase(size, inputs, shapes, out_dtypes, out_shapes)

