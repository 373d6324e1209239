"""Named bench-shape lists a task ships beside its default bench sizes (``workloads.yaml``).

A workload is the shapes a kernel meets in one deployment (the batch and sequence lengths of a
serving workload, the layers of a model), with a weight per shape and the source of the figures.
A config picks one (``task: {name: matmul, workload: llama3-8b-prefill}``); the fitness is then the
weighted geometric mean of the latencies at its shapes, each verified like any bench size
(`Task.fitness_sizes`). The task's check sizes, tolerances and key do not change: what a correct
kernel computes is the same, only where its speed is measured. The lists live in a data file beside
the task module (not in it: the module's text is the task's definition, and its key), e.g.
``evo/tasks/matmul/workloads.yaml``::

    llama3-8b-prefill:
      source: Llama-3-8B linear layers ... for a batch of 2048 prompt tokens
      bench:
        - {M: 2048, N: 6144, K: 4096}
        - ...
      weights: [1.5, 1.0, 7.0, 3.5]      # optional: equal weights
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from evo.contracts.task import Size, Task, TaskError

FILE_NAME = "workloads.yaml"


@dataclass(frozen=True)
class Workload:
    name: str
    bench: list[Size]
    weights: list[float]
    source: str


def shape_text(size: Size) -> str:
    """A size in words: ``rows 64, cols 512``."""
    return ", ".join(f"{k} {v}" for k, v in size.items())


def weighted_shapes_text(task: Task) -> str:
    """The sizes the fitness covers, each with its weight when there are several."""
    sizes = task.fitness_sizes()
    return "; ".join(shape_text(task.bench_sizes[i]) + (f" (weight {w:g})" if len(sizes) > 1 else "")
                     for i, w in sizes)


def read_workloads(folder: Path, size_names: set[str]) -> dict[str, Workload]:
    """The workloads in `folder`'s ``workloads.yaml`` (none without one), checked by `parse_workloads`."""
    path = folder / FILE_NAME
    if not path.is_file():
        return {}
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise TaskError(f"{path}: not valid YAML: {e}") from e
    return parse_workloads(raw, size_names, str(path))


def parse_workloads(raw: Any, size_names: set[str], where: str) -> dict[str, Workload]:
    """Workloads read from `where`, checked: every shape names exactly the task's size
    parameters (`size_names`, those of its check sizes) with positive integers, one positive weight
    per shape, a non-empty source. Errors name the workload and what is wrong."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise TaskError(f"{where}: must map workload names to workloads, not be a {type(raw).__name__}")
    out = {}
    for name, spec in raw.items():
        at = f"{where}: workload {name!r}"
        if not isinstance(name, str) or not name:
            raise TaskError(f"{where}: workload names must be non-empty strings, not {name!r}")
        if not isinstance(spec, dict):
            raise TaskError(f"{at} must be a dict with 'source', 'bench' and optional 'weights'")
        unknown = set(spec) - {"source", "bench", "weights"}
        if unknown:
            raise TaskError(f"{at}: unknown key(s) {sorted(unknown)}; valid: source, bench, weights")
        source = spec.get("source")
        if not isinstance(source, str) or not source.strip():
            raise TaskError(f"{at}: 'source' must say where the shapes come from")
        bench = spec.get("bench")
        if not isinstance(bench, list) or not bench:
            raise TaskError(f"{at}: 'bench' must be a non-empty list of sizes")
        for size in bench:
            if not isinstance(size, dict) or set(size) != size_names:
                raise TaskError(f"{at}: size {size!r} must give exactly {sorted(size_names)}")
            if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size.values()):
                raise TaskError(f"{at}: size {size!r} must hold positive integers")
        if len({tuple(sorted(s.items())) for s in bench}) != len(bench):
            raise TaskError(f"{at}: a size is listed twice")
        weights = spec.get("weights", [1.0] * len(bench))
        if not isinstance(weights, list) or len(weights) != len(bench):
            raise TaskError(f"{at}: one weight per bench size ({len(bench)}), not {weights!r}")
        if not all(isinstance(w, (int, float)) and not isinstance(w, bool) and w > 0 and math.isfinite(w)
                   for w in weights):
            raise TaskError(f"{at}: weights must be positive numbers, not {weights}")
        out[name] = Workload(name, [dict(s) for s in bench], [float(w) for w in weights], source.strip())
    return out
