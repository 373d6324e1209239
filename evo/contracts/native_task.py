"""The native task format: one Python module (trusted, written by the user) per task.

Module-level names (see ``evo/tasks/softmax/task.py`` for a complete example):

``DTYPES``/``DTYPE``
    dtypes the task supports and the default one.
``CHECK_SIZES``/``BENCH_SIZES``
    lists of size dicts; check sizes should include 1, primes and non-multiples of block sizes.
``inputs(size, dtype, rng, dist) -> list``
    input arrays. A float array is rounded to the task dtype; an integer array keeps its dtype;
    ``(array, "float32")`` fixes a dtype explicitly.
``reference(*inputs) -> array | tuple``
    the computation, in numpy; it receives float inputs as float64 (the rounded values).
``BENCH_WEIGHTS`` (optional)
    one positive weight per bench size: the fitness is then the weighted geometric mean of the
    latencies at every bench size (`Task.fitness_sizes`), else the latency at the first.
``DISTS`` (optional)
    value distributions the generator understands, default ``("normal", "wide")``. Continuous draws never
    tie: a task whose output depends on the order among equal inputs (an argmax, a stable sort) needs a
    distribution whose values repeat, or a kernel that breaks ties the other way passes (KernelBench
    problems get one, ``ties``, in `evo.contracts.kernelbench`).
``DIST_OPT_OUT`` (optional)
    ``{distribution: reason}``: special value distributions (`evo.contracts.special_values`: zeros, ties,
    tiny, huge, inf_nan) the task is not checked on, each with the reason the verdict shows.
``TOLERANCE`` (optional)
    ``{dtype: {"atol": .., "rtol": ..}}`` overriding the defaults of `evo.contracts.task`.
``workloads.yaml`` beside the module (optional)
    named bench-shape lists with weights and their source (`evo.contracts.workload`), picked by a
    config's ``task.workload`` instead of ``BENCH_SIZES``/``BENCH_WEIGHTS``.
``SEED`` (optional)
    the seed candidate file, relative to the task module, default ``seed.py``.
``flops(size)``, ``bytes_moved(size, itemsize)``, ``torch_reference(*tensors)`` (optional)
    FLOP and byte counts for roofline figures; a torch version of the reference for baselines.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from evo.contracts import dtypes
from evo.contracts.shape_probe import ShapeProbe
from evo.contracts.special_values import opt_outs
from evo.contracts.task import BenchCase, Case, Size, Task, TaskError, Tensor, Tolerance, bench_case_from, one_line
from evo.contracts.workload import Workload, read_workloads

TASK_LIBRARY = Path(__file__).resolve().parents[1] / "tasks"


def library_tasks() -> list[str]:
    """Names of the tasks shipped in ``evo/tasks/``."""
    return sorted(p.parent.name for p in TASK_LIBRARY.glob("*/task.py"))


def _import(path: Path) -> ModuleType:
    name = f"evo_task_{path.parent.name}_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TaskError(f"cannot import task module {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise TaskError(f"task module {path} failed to import: {type(e).__name__}: {e}") from e
    return module


def _required(module: ModuleType, name: str, path: Path) -> Any:
    if not hasattr(module, name):
        raise TaskError(f"task module {path} does not define {name}")
    return getattr(module, name)


class NativeTask(Task):
    """A task defined by a module in the native format."""

    recomputes_reference = True

    def __init__(self, path: str | Path, *, dtype: str | None = None) -> None:
        super().__init__()
        path = Path(path)
        if path.is_dir():
            path = path / "task.py"
        if not path.is_file():
            raise TaskError(f"task file not found: {path}")
        self.path = path.resolve()
        m = _import(self.path)
        self.module = m
        self.name = str(getattr(m, "NAME", self.path.parent.name))
        supported = tuple(getattr(m, "DTYPES", (getattr(m, "DTYPE", "float32"),)))
        self.dtype = dtype or str(getattr(m, "DTYPE", supported[0]))
        if self.dtype not in supported:
            raise TaskError(
                f"task {self.name} does not support dtype {self.dtype!r}; valid: {', '.join(supported)}"
            )
        self.check_sizes = list(_required(m, "CHECK_SIZES", path))
        self.bench_sizes = list(_required(m, "BENCH_SIZES", path))
        weights = getattr(m, "BENCH_WEIGHTS", None)
        self.set_bench_weights(list(weights) if weights is not None else None)
        self.default_bench = self.bench_fingerprint()
        size_names = set(self.check_sizes[0]) if self.check_sizes else set()
        self.workloads: dict[str, Workload] = read_workloads(self.path.parent, size_names)
        self.workload: str | None = None
        self._inputs: Callable[..., list[Any]] = _required(m, "inputs", path)
        self._reference: Callable[..., Any] = _required(m, "reference", path)
        self.dists = tuple(getattr(m, "DISTS", ("normal", "wide")))
        try:
            self.dist_opt_out = opt_outs(getattr(m, "DIST_OPT_OUT", None), f"{path}: DIST_OPT_OUT")
        except ValueError as e:
            raise TaskError(str(e)) from None
        self.tolerances = {k: Tolerance(**v) for k, v in getattr(m, "TOLERANCE", {}).items()}
        seed_file = self.path.parent / str(getattr(m, "SEED", "seed.py"))
        self.seed_path: Path | None = seed_file if seed_file.is_file() else None
        self.seed_source = seed_file.read_text() if seed_file.is_file() else None
        self.torch_reference: Callable[..., Any] | None = getattr(m, "torch_reference", None)

    def definition_text(self) -> str:
        return self.path.read_text()

    def use_workload(self, name: str) -> None:
        """Bench at the shapes and weights of the module's workload `name` instead of its bench sizes."""
        if name not in self.workloads:
            valid = ", ".join(self.workloads) or f"none (no {self.path.parent / 'workloads.yaml'})"
            raise TaskError(f"task {self.name}: no workload {name!r}; valid: {valid}")
        w = self.workloads[name]
        self.bench_sizes = [dict(s) for s in w.bench]
        self.set_bench_weights(list(w.weights))
        self.workload = name

    def describe(self) -> str:
        text = super().describe()
        return f"{text} (workload {self.workload})" if self.workload else text

    def check_size_names(self, sizes: list[Size], where: str) -> None:
        """Each of `sizes` (a config's) names exactly the parameters of the task's own sizes."""
        names = set(self.check_sizes[0]) if self.check_sizes else set()
        for i, size in enumerate(sizes):
            if set(size) != names:
                missing, extra = sorted(names - set(size)), sorted(set(size) - names)
                what = "; ".join(([f"lacks {', '.join(missing)}"] if missing else []) +
                                 ([f"has {', '.join(extra)}, which it does not take"] if extra else []))
                raise TaskError(f"{where}[{i}]: {size} {what} (task {self.name}'s sizes give "
                                f"{', '.join(sorted(names))})")

    def _make_inputs(self, size: Size, seed: int, dist: str) -> list[Tensor]:
        rng = np.random.default_rng(seed)
        try:
            raw = self._inputs(size, self.dtype, rng, dist)
        except Exception as e:
            raise TaskError(f"task {self.name}: inputs() failed at size {size}: {one_line(e)}") from e
        inputs: list[Tensor] = []
        for item in raw:
            arr, name = item if isinstance(item, tuple) else (item, None)
            arr = np.asarray(arr)
            if name is None:
                name = self.dtype if np.issubdtype(arr.dtype, np.floating) else dtypes.numpy_name(arr.dtype)
            inputs.append(Tensor(np.ascontiguousarray(dtypes.cast(arr, name)), name))
        return inputs

    def bench_case(self, size: Size, *, data: bool = True, draw: Case | None = None) -> BenchCase:
        """Inputs from the generator; output shapes from `torch_reference` on meta tensors when the
        task has one (no reference run at bench size), else from a full draw."""
        if self.torch_reference is None:
            return super().bench_case(size, data=data, draw=draw)
        if data:
            seed, dist = (draw.seed, draw.dist) if draw is not None else (self._bench_seed(size), self.dists[0])
            inputs = self._make_inputs(size, seed, dist)
        else:
            inputs = self._probe_inputs(size)
        try:
            outs = _meta_outputs(self.torch_reference, inputs)
        except Exception as e:
            raise TaskError(f"task {self.name}: torch_reference failed on meta tensors: {type(e).__name__}: {e}") from e
        return bench_case_from(size, inputs, [o[0] if o[0] != "float" else self.dtype for o in outs],
                               [o[1] for o in outs], data)

    def _probe_inputs(self, size: Size) -> list[Tensor]:
        """Inputs whose float draws are zeros (cheap at bench sizes); integer draws are real."""
        seed = self._bench_seed(size)
        try:
            raw = self._inputs(size, self.dtype, ShapeProbe(np.random.default_rng(seed)), self.dists[0])
        except Exception:
            return self._make_inputs(size, seed, self.dists[0])
        inputs = []
        for item in raw:
            arr, name = item if isinstance(item, tuple) else (item, None)
            arr = np.asarray(arr)
            if name is None:
                name = self.dtype if np.issubdtype(arr.dtype, np.floating) else dtypes.numpy_name(arr.dtype)
            if dtypes.is_float(name):
                inputs.append(Tensor(np.lib.stride_tricks.as_strided(np.zeros(1, dtypes.storage_type(name)), arr.shape,
                                                                      (0,) * arr.ndim), name))
            else:
                inputs.append(Tensor(np.ascontiguousarray(dtypes.cast(arr, name)), name))
        return inputs

    def _draw(self, size: Size, seed: int, dist: str) -> tuple[list[Tensor], list[np.ndarray]]:
        inputs = self._make_inputs(size, seed, dist)
        return inputs, self._reference_on(size, seed, inputs)

    def _reference_on(self, size: Size, seed: int, inputs: list[Tensor]) -> list[np.ndarray]:
        as_ref = [
            dtypes.to_float64(t.data, t.dtype) if dtypes.is_float(t.dtype) else t.data.copy() for t in inputs
        ]
        try:
            out = self._reference(*as_ref)
        except Exception as e:
            raise TaskError(f"task {self.name}: reference() failed at size {size}: {one_line(e)}") from e
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        return [np.asarray(o) for o in outs]

    def flops(self, size: Size) -> float | None:
        fn = getattr(self.module, "flops", None)
        return float(fn(size)) if fn else None

    def bytes_moved(self, size: Size) -> float | None:
        fn = getattr(self.module, "bytes_moved", None)
        return float(fn(size, dtypes.itemsize(self.dtype))) if fn else None


def _meta_outputs(fn: Callable[..., Any], inputs: list[Tensor]) -> list[tuple[str, tuple[int, ...]]]:
    """(dtype name or 'float', shape) of each output of a torch function, run on meta tensors."""
    import torch

    from evo.contracts.kernelbench import torch_dtype

    args = [torch.empty(t.shape, dtype=torch_dtype(t.dtype), device="meta") for t in inputs]
    out = fn(*args)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [("float" if o.is_floating_point() else str(o.dtype).replace("torch.", ""), tuple(o.shape)) for o in outs]
