"""Check an exported PyTorch operator against its run's task: every check size, every input
distribution, the outputs' shapes, dtypes and values within the task's tolerance.

Used by the test file `evo export --as torch-op` writes beside the operator module. On a machine
without a GPU the kernel runs in Triton's interpreter: `TRITON_INTERPRET=1` must be set before
triton is first imported (the written test file does it).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np

from evo.app.export.command import run_task
from evo.app.export.torch_op import check_op_name, number_positions
from evo.contracts import dtypes
from evo.contracts.task import CaseData, Task
from fitness.check.compare import compare
from fitness.latency.bench_tensors import make_tensor


def load_module(path: Path) -> Any:
    """Import the operator module (which registers the op)."""
    name = f"evo_export_{abs(hash(str(path.resolve())))}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _to_numpy(t: Any, dtype: str) -> np.ndarray:
    import torch

    t = t.detach().cpu().contiguous()
    if dtype == "bfloat16":
        return np.asarray(t.view(torch.int16).numpy().view(np.uint16))
    return np.asarray(t.numpy())


def _op(module: Path, op: str) -> Any:
    """The registered operator `op` (its module imported first)."""
    import torch

    load_module(module)
    namespace, name = check_op_name(op)
    return getattr(getattr(torch.ops, namespace), name)


def _case_args(torch: Any, task: Task, data: CaseData, device: str) -> list[Any]:
    """A case's inputs as the op takes them: tensors, and the task's numbers as Python numbers."""
    numbers = number_positions(task, data.case.size)
    return [(dtypes.to_float64(t.data, t.dtype).item() if dtypes.is_float(t.dtype) else int(t.data)) if i in numbers
            else make_tensor(torch, {"dtype": t.dtype, "shape": list(t.shape), "data": t.data.tobytes()}, device)
            for i, t in enumerate(data.inputs)]


def refuses_other_dtypes(module: Path, run_dir: Path, op: str, *, device: str = "cpu") -> bool:
    """Whether the op refuses a float input of a dtype the kernel was not checked with (True when
    the task has no float input)."""
    import torch

    fn = _op(module, op)
    task = run_task(run_dir)
    args = _case_args(torch, task, task.case_data(task.cases(draws=1, every_dist=False)[0]), device)
    k = next((i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
    if k is None:
        return True
    args[k] = args[k].to(torch.float64 if args[k].dtype != torch.float64 else torch.float32)
    try:
        fn(*args)
    except TypeError:
        return True
    return False


def check_op(module: Path, run_dir: Path, op: str, *, device: str = "cpu", compiled: bool = False) -> list[str]:
    """The problems found (empty: the op matches the reference on every check case)."""
    import torch

    fn = _op(module, op)
    call = torch.compile(fn, fullgraph=True) if compiled else fn
    task = run_task(run_dir)
    problems: list[str] = []
    for case in task.cases(draws=1):
        data = task.case_data(case)
        args = _case_args(torch, task, data, device)
        got = call(*args)
        outs = list(got) if isinstance(got, (tuple, list)) else [got]
        if len(outs) != len(data.expected):
            problems.append(f"{case.label()}: {len(outs)} outputs, expected {len(data.expected)}")
            continue
        for k, (out, want, dtype) in enumerate(zip(outs, data.expected, data.output_dtypes)):
            where = f"{case.label()}, output {k}"
            if tuple(out.shape) != tuple(want.shape):
                problems.append(f"{where}: shape {tuple(out.shape)}, expected {tuple(want.shape)}")
                continue
            if str(out.dtype).replace("torch.", "") != dtype:
                problems.append(f"{where}: dtype {out.dtype}, expected {dtype}")
                continue
            diff = compare(_to_numpy(out, dtype), dtype, want, task.tolerance_for(dtype))
            if not diff.ok:
                problems.append(f"{where}: {diff.describe()}")
    return problems
