"""`evo export --as torch-op`: the best kernel of a run as a registered PyTorch operator.

The written module is the run's `best_kernel.py` (the kernel, its tuned params baked in) followed by
a `torch.library.custom_op` registration: the op takes the task's inputs, allocates the outputs
(shapes and dtypes from `evo.app.export.shapes`), makes the inputs contiguous (the layout every
check ran on) and launches the kernel; a fake implementation gives `torch.compile` the output
shapes without running anything. Beside it, a pytest file checks the op against the task's
reference through `evo.app.export.check` (eager and under `torch.compile(fullgraph=True)`).
"""

from __future__ import annotations

import ast
import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evo.app.export.shapes import FLOAT, OutputRule, output_rules
from evo.contracts.candidate import Candidate
from evo.contracts.kernelbench import KernelBenchTask
from evo.contracts.syntax import parse_module
from evo.contracts.task import Size, Task

OP_NAME = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)::([A-Za-z_][A-Za-z0-9_]*)$")
_RESERVED = {"self", "out", "input", "kernel", "torch"}


class ExportError(ValueError):
    """The run cannot be exported as asked; the message names why."""


@dataclass(frozen=True)
class OpExport:
    module: Path
    test: Path
    rules: list[OutputRule]
    names: list[str]


def check_op_name(name: str) -> tuple[str, str]:
    m = OP_NAME.match(name)
    if not m:
        raise ExportError(f"--name {name!r}: expected NAMESPACE::OP (identifiers), e.g. mylib::softmax")
    return m.group(1), m.group(2)


def input_names(candidate: Candidate, count: int) -> list[str]:
    """The first `count` positional parameters of `launch` (the task inputs), where they make valid,
    distinct schema names; `x0`, `x1`... otherwise."""
    names: list[str] = []
    try:
        tree = parse_module(candidate.source)
        launch = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "launch")
        names = [a.arg for a in [*launch.args.posonlyargs, *launch.args.args]][:count]
    except (SyntaxError, StopIteration):
        pass
    ok = (len(names) == count and len(set(names)) == count
          and all(n.isidentifier() and not keyword.iskeyword(n) and n not in _RESERVED and not n.startswith("_")
                  for n in names))
    return names if ok else [f"x{i}" for i in range(count)]


def _dim(axis: int | tuple[int, int], names: list[str]) -> str:
    return f"{names[axis[0]]}.shape[{axis[1]}]" if isinstance(axis, tuple) else str(axis)


def _shape(rule: OutputRule, names: list[str]) -> str:
    dims = [_dim(a, names) for a in rule.axes]
    return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"  # () for a scalar


def _dtype(rule: OutputRule) -> str:
    return "_dt" if rule.dtype == FLOAT else f"_evo_torch.{rule.dtype}"


def number_positions(task: Task, size: Size) -> list[int]:
    """Which of the task's inputs are numbers (a KernelBench get_inputs() that returns a float): the op
    takes them as Python numbers, as the Model's forward does."""
    return task.scalar_positions(size) if isinstance(task, KernelBenchTask) else []


def registration(op: str, rules: list[OutputRule], names: list[str], in_dtypes: list[str], task_dtype: str,
                 numbers: Sequence[int] = ()) -> str:
    """The code appended to the kernel module: the op, its fake, the output allocation. Inputs at
    `numbers` are Python numbers in the op's schema, handed to the kernel as the 0-d tensors (of the
    dtype in `in_dtypes`) it was checked with."""
    tensors = [n for i, n in enumerate(names) if i not in numbers]
    if not tensors:
        raise ExportError("the task's inputs are all numbers: the op would not know its device")
    args = ", ".join(names)
    tensor_args = ", ".join(tensors) + ("," if len(tensors) == 1 else "")
    schema_args = ", ".join(
        ("int" if in_dtypes[i].startswith(("int", "uint")) else "float") + f" {n}" if i in numbers else f"Tensor {n}"
        for i, n in enumerate(names))
    returns = "Tensor" if len(rules) == 1 else "(" + ", ".join("Tensor" for _ in rules) + ")"
    allocs = "\n".join(
        f"        _evo_torch.empty({_shape(r, names)}, dtype={_dtype(r)}, "
        f"device={tensors[0]}.device),  # {r.describe(names)}" for r in rules)
    result = "_outs[0]" if len(rules) == 1 else "tuple(_outs)"
    contiguous = "\n".join(
        f"    {n} = _evo_torch.tensor({n}, dtype=_evo_torch.{in_dtypes[i]}, device={tensors[0]}.device)"
        if i in numbers else f"    {n} = {n}.contiguous()" for i, n in enumerate(names))
    checked = ", ".join(f"{n!r}: _evo_torch.{d}" for i, (n, d) in enumerate(zip(names, in_dtypes)) if i not in numbers)
    return f'''

# ---- evo: registered as the PyTorch operator {op!r} ----
# Call it as torch.ops.{op.replace("::", ".")}({args}) or OP({args}); it allocates and returns the outputs.
# Inputs are made contiguous (the layout the kernel was checked on) and must have the dtypes it was
# checked with. No autograd formula: forward only.
import torch as _evo_torch

_EVO_CHECKED = {{{checked}}}


def _evo_outputs({args}):
    """The outputs, allocated as the task's check cases shape them."""
    _dt = next((_t.dtype for _t in ({tensor_args}) if _t.is_floating_point()), _evo_torch.{task_dtype})
    return [
{allocs}
    ]


def _evo_op({args}):
    for _name, _t in zip(_EVO_CHECKED, ({tensor_args})):
        if _t.dtype != _EVO_CHECKED[_name]:
            raise TypeError(f"{op}: argument {{_name}} is {{_t.dtype}}; "
                            f"the kernel was checked with {{_EVO_CHECKED[_name]}}")
{contiguous}
    _outs = _evo_outputs({args})
    kernel({args}, *_outs)
    return {result}


def _evo_fake({args}):
    _outs = _evo_outputs({args})
    return {result}


OP = _evo_torch.library.custom_op({op!r}, _evo_op, mutates_args=(), schema="({schema_args}) -> {returns}")
OP.register_fake(_evo_fake)
'''


def test_file(op: str, module: Path, run_dir: Path) -> str:
    return f'''"""Checks the exported operator {op!r} against its task's reference, on every check size of the task.

Run: pytest {module.with_name("test_" + module.name).name}  (needs the evo package; on a machine without a GPU
the kernel runs in Triton's interpreter, set here before triton is imported).
"""

import os
from pathlib import Path

import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")

from evo.app.export.check import check_op, refuses_other_dtypes  # noqa: E402

MODULE = Path(__file__).with_name({module.name!r})
RUN_DIR = Path({str(run_dir.resolve())!r})


def test_eager_matches_the_reference():
    assert check_op(MODULE, RUN_DIR, {op!r}, device=DEVICE) == []


def test_torch_compile_fullgraph_matches_the_reference():
    assert check_op(MODULE, RUN_DIR, {op!r}, device=DEVICE, compiled=True) == []


def test_inputs_of_a_dtype_the_kernel_was_not_checked_with_are_refused():
    assert refuses_other_dtypes(MODULE, RUN_DIR, {op!r}, device=DEVICE)
'''


def export_torch_op(run_dir: Path, best: Candidate, kernel_text: str, task: Task, op: str,
                    module: Path) -> OpExport:
    """Write the operator module and its test file; `kernel_text` is the standalone best kernel."""
    check_op_name(op)
    rules = output_rules(task)
    first = task.case_data(task.cases(draws=1, every_dist=False)[0])
    names = input_names(best, len(first.inputs))
    in_dtypes = [t.dtype for t in first.inputs]
    text = registration(op, rules, names, in_dtypes, task.dtype, number_positions(task, first.case.size))
    module.parent.mkdir(parents=True, exist_ok=True)
    module.write_text(kernel_text.rstrip() + "\n" + text)
    test = module.with_name("test_" + module.name)
    test.write_text(test_file(op, module, run_dir))
    return OpExport(module, test, rules, names)
