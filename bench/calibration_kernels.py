"""The calibration kernel list: for every library task, kernels the device script measures and the
latency model is held to (`fitness.latency.calibration`).

    PYTHONPATH=. python bench/calibration_kernels.py [--per-task 32] [--out bench/data/calibration_kernels.jsonl]

Each task contributes its seed's PARAMS, its known-better kernel's PARAMS and points of both SPACEs
(enumerated in mixed radix like `mutators.sweep`, sampled without replacement from a generator seeded
by the task's name, so the list is the same on every machine). A variant with a small SPACE gives all
its points; otherwise the kernels are split between the seed and the known-better kernel. One JSON
line per kernel: task, candidate id, variant, the source file (relative to the repository), its
structure hash, and the full params. `rebuild` makes the exact candidate again and refuses one whose
source has changed since the list was written (regenerate the list then).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evo.contracts.candidate import Candidate, Params, space_point, space_size
from evo.contracts.native_task import TASK_LIBRARY, library_tasks

DEFAULT_LIST = ROOT / "bench" / "data" / "calibration_kernels.jsonl"
PER_TASK = 32
VARIANTS = ("seed", "known_better")


class StaleKernel(ValueError):
    """The list names a source that is missing or has changed since the list was written."""


@dataclass(frozen=True)
class CalibrationKernel:
    """One line of the list: enough to rebuild the exact candidate."""

    task: str
    id: str
    variant: str
    source_path: str  # relative to the repository root
    structure: str  # `Candidate.structure` of the source the list was written from
    params: Params

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "id": self.id, "variant": self.variant, "source_path": self.source_path,
                "structure": self.structure, "params": dict(self.params)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CalibrationKernel:
        return cls(str(d["task"]), str(d["id"]), str(d["variant"]), str(d["source_path"]),
                   str(d["structure"]), dict(d["params"]))


def variant_kernels(task: str, variant: str, count: int) -> list[Candidate]:
    """The variant's own PARAMS, then up to `count` - 1 distinct points of its SPACE, drawn in a fixed order."""
    base = Candidate.from_file(TASK_LIBRARY / task / f"{variant}.py")
    space = base.space()
    order = list(range(space_size(space)))
    random.Random(f"evo-calibration:{task}:{variant}").shuffle(order)
    out, seen = [base], {base.id}
    for i in order:
        if len(out) >= count:
            break
        cand = base.with_params(**space_point(space, i))
        if cand.id not in seen:
            seen.add(cand.id)
            out.append(cand)
    return out


def task_kernels(task: str, per_task: int = PER_TASK) -> list[CalibrationKernel]:
    """`per_task` kernels of one task: half of them the known-better kernel's (all of its SPACE when smaller)."""
    variants = [v for v in VARIANTS if (TASK_LIBRARY / task / f"{v}.py").is_file()]
    chosen: dict[str, list[Candidate]] = {}
    if "known_better" in variants:
        chosen["known_better"] = variant_kernels(task, "known_better", per_task // 2)
    chosen["seed"] = variant_kernels(task, "seed", per_task - sum(len(c) for c in chosen.values()))
    kernels = []
    for v in variants:
        rel = str((TASK_LIBRARY / task / f"{v}.py").relative_to(ROOT))
        kernels += [CalibrationKernel(task, c.id, v, rel, c.structure, dict(c.params)) for c in chosen[v]]
    return kernels


def all_kernels(per_task: int = PER_TASK, tasks: list[str] | None = None) -> list[CalibrationKernel]:
    return [k for t in (tasks or library_tasks()) for k in task_kernels(t, per_task)]


def write(path: Path, kernels: list[CalibrationKernel]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(k.to_dict(), sort_keys=True) + "\n" for k in kernels))


def load(path: Path = DEFAULT_LIST) -> list[CalibrationKernel]:
    return [CalibrationKernel.from_dict(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def rebuild(kernel: CalibrationKernel, root: Path = ROOT) -> Candidate:
    """The exact candidate the line was written from; `StaleKernel` when its source changed since."""
    path = root / kernel.source_path
    if not path.is_file():
        raise StaleKernel(f"{kernel.task}/{kernel.id}: {kernel.source_path} is missing")
    cand = Candidate(path.read_text(), dict(kernel.params))
    if cand.structure != kernel.structure or cand.id != kernel.id:
        raise StaleKernel(f"{kernel.task}/{kernel.id}: {kernel.source_path} changed since the list was written "
                          f"(structure {cand.structure}, listed {kernel.structure}); regenerate it with "
                          "bench/calibration_kernels.py")
    return cand


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-task", type=int, default=PER_TASK)
    ap.add_argument("--out", type=Path, default=DEFAULT_LIST)
    args = ap.parse_args(argv)
    kernels = all_kernels(args.per_task)
    write(args.out, kernels)
    counts = {t: sum(k.task == t for k in kernels) for t in library_tasks()}
    print(f"calibration_kernels: {len(kernels)} kernels to {args.out}: "
          + ", ".join(f"{t} {n}" for t, n in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
