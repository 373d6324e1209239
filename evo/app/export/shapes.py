"""How a task's outputs follow from its inputs, read off the task's own check cases.

An exported operator allocates its outputs, so it needs each output's dtype and shape as a function
of the inputs. The task says neither in closed form (the reference computes them), but its check
sizes (1, primes, non-multiples of any block) pin them down: every output axis is either an axis of
some input that matches it in every case, or a constant. A rule no case contradicts is taken; an
axis that follows no input axis and is not constant is an error naming the output and axis.
"""

from __future__ import annotations

from dataclasses import dataclass

from evo.contracts import dtypes
from evo.contracts.task import CaseData, Task

FLOAT = "float"  # an output in the inputs' float dtype (the task dtype)

Axis = tuple[int, int] | int  # (input index, input axis) or a constant size


class ShapeRuleError(ValueError):
    """The outputs' shapes do not follow the inputs' in a way the check cases agree on."""


@dataclass(frozen=True)
class OutputRule:
    dtype: str  # FLOAT or an integer/bool dtype name
    axes: tuple[Axis, ...]

    def describe(self, names: list[str]) -> str:
        dims = ", ".join(f"{names[a[0]]}.shape[{a[1]}]" if isinstance(a, tuple) else str(a) for a in self.axes)
        return f"({dims}{',' if len(self.axes) == 1 else ''}) {self.dtype if self.dtype != FLOAT else 'float'}"


def _axis_rule(cases: list[CaseData], out: int, axis: int) -> Axis:
    first = cases[0]
    options = [(i, j) for i, t in enumerate(first.inputs) for j in range(len(t.shape))]
    matching = [(i, j) for i, j in options if all(
        len(c.inputs[i].shape) > j and c.inputs[i].shape[j] == c.output_shapes[out][axis] for c in cases)]
    varying = len({c.output_shapes[out][axis] for c in cases}) > 1
    if matching:  # an input axis over a constant: a fixed head count stays the input's
        # prefer an axis that varies across the cases: it carries the most evidence
        return max(matching, key=lambda ij: len({c.inputs[ij[0]].shape[ij[1]] for c in cases}))
    if not varying:
        return int(first.output_shapes[out][axis])
    raise ShapeRuleError(f"output {out} axis {axis} has sizes {[c.output_shapes[out][axis] for c in cases]} "
                         "across the check cases, and no input axis has the same sizes")


def output_rules(task: Task) -> list[OutputRule]:
    """One rule per output, from every check size of `task` (one draw each)."""
    cases = [task.case_data(c) for c in task.cases(draws=1, every_dist=False)]
    if not cases:
        raise ShapeRuleError(f"task {task.name} has no check sizes to read output shapes from")
    ranks = {tuple(len(s) for s in c.output_shapes) for c in cases}
    if len(ranks) != 1 or len({len(c.output_shapes) for c in cases}) != 1:
        raise ShapeRuleError(f"task {task.name}: the number or rank of the outputs changes between check sizes")
    rules = []
    for out, shape in enumerate(cases[0].output_shapes):
        kinds = {c.output_dtypes[out] for c in cases}
        dtype = cases[0].output_dtypes[out]
        if dtypes.is_float(dtype):
            dtype = FLOAT
        elif len(kinds) != 1:
            raise ShapeRuleError(f"task {task.name}: output {out} changes dtype between check sizes: {sorted(kinds)}")
        rules.append(OutputRule(dtype, tuple(_axis_rule(cases, out, a) for a in range(len(shape)))))
    return rules
