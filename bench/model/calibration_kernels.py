"""The calibration kernel list: for every library task, kernels the device script measures and the
latency model is held to (`fitness.latency.calibration`).

    PYTHONPATH=. python bench/model/calibration_kernels.py [--per-task 32] [--out bench/data/calibration_kernels.jsonl]
        [--history RUN_OR_ABLATION_DIR ... [--history-per-task 8]]

Each task contributes its seed's PARAMS, its known-better kernel's PARAMS and points of both SPACEs
(enumerated in mixed radix like `mutators.sweep`, sampled without replacement from a generator seeded
by the task's name, so the list is the same on every machine). A variant with a small SPACE gives all
its points; otherwise the kernels are split between the seed and the known-better kernel. One JSON
line per kernel: task, candidate id, variant, the source file (relative to the repository), its
structure hash, and the full params. `rebuild` makes the exact candidate again and refuses one whose
source has changed since the list was written (regenerate the list then).

Kernels from campaigns' histories (variant ``history``): ``--history`` reads the given run directories
(or every run under an ablation directory) and adds, per task, up to ``--history-per-task`` correct,
fully evaluated kernels whose structure is neither the seed's nor the known-better kernel's: the
structures a search actually visits (STOKE's single block, reuse value, LLM rewrites), one structure
after another so that no single one fills the quota, each structure's fastest kernels first. Their
sources are written to ``bench/data/calibration_sources/`` (one file per structure, committed with the
list). Without ``--history`` the list keeps the history kernels it already has.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evo.contracts.candidate import Candidate, Params, space_point, space_size
from evo.contracts.native_task import TASK_LIBRARY, library_tasks

DEFAULT_LIST = ROOT / "bench" / "data" / "calibration_kernels.jsonl"
SOURCES = ROOT / "bench" / "data" / "calibration_sources"
PER_TASK = 32
HISTORY_PER_TASK = 8
VARIANTS = ("seed", "known_better")
HISTORY = "history"


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


def run_dirs(paths: list[Path]) -> list[Path]:
    """The run directories named, or found under each path (an ablation's `runs/`), in name order."""
    out: list[Path] = []
    for p in paths:
        found = [p] if (p / "history.msgpack").is_file() else sorted(h.parent for h in p.rglob("history.msgpack"))
        if not found:
            raise SystemExit(f"calibration_kernels: {p} holds no run (no history.msgpack)")
        out += found
    return out


def history_kernels(runs: list[Path], per_task: int = HISTORY_PER_TASK,
                    sources: Path = SOURCES) -> list[CalibrationKernel]:
    """Up to `per_task` kernels per task from the runs' correct full evaluations, structures that are
    neither the seed's nor the known-better kernel's, taken one structure at a time (see the docstring);
    each structure's source is written to `sources`."""
    from evo.app.report.data import load_run

    # task -> structure -> candidate id -> (its fastest latency, the candidate)
    found: dict[str, dict[str, dict[str, tuple[float, Candidate]]]] = {}
    for run_dir in runs:
        run = load_run(run_dir)
        task = run.config.task.name
        if not task or not (TASK_LIBRARY / task).is_dir():
            continue
        files = [TASK_LIBRARY / task / f"{v}.py" for v in VARIANTS]
        library = {Candidate.from_file(f).structure for f in files if f.is_file()}
        for r in run.records:
            ev = r.evaluation
            if r.full and ev.ok and ev.latency_ms is not None and r.candidate.structure not in library:
                kernels = found.setdefault(task, {}).setdefault(r.candidate.structure, {})
                old = kernels.get(r.candidate.id)
                if old is None or ev.latency_ms < old[0]:
                    kernels[r.candidate.id] = (ev.latency_ms, r.candidate)
    out = []
    for task in sorted(found):
        # structures in hash order (deterministic), each one's kernels fastest first, one of each per round
        queues = [sorted(v.values(), key=lambda x: (x[0], x[1].id)) for _, v in sorted(found[task].items())]
        rounds = itertools.zip_longest(*queues)
        chosen = [x[1] for round_ in rounds for x in round_ if x is not None][:per_task]
        for cand in chosen:
            path = sources / f"{task}_{cand.structure}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(cand.source)
            rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            out.append(CalibrationKernel(task, cand.id, HISTORY, str(rel), cand.structure, dict(cand.params)))
    return out


def merged(space: list[CalibrationKernel], history: list[CalibrationKernel]) -> list[CalibrationKernel]:
    """Each task's SPACE kernels, then its history kernels (so a per-task cap keeps the SPACE ones first)."""
    tasks = list(dict.fromkeys([k.task for k in space] + [k.task for k in history]))
    return [k for t in tasks for k in [*(k for k in space if k.task == t), *(k for k in history if k.task == t)]]


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
                          "bench/model/calibration_kernels.py")
    return cand


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-task", type=int, default=PER_TASK)
    ap.add_argument("--out", type=Path, default=DEFAULT_LIST)
    ap.add_argument("--history", type=Path, nargs="*", default=None,
                    help="run or ablation directories whose kernels join the list (default: keep the list's own)")
    ap.add_argument("--history-per-task", type=int, default=HISTORY_PER_TASK)
    args = ap.parse_args(argv)
    if args.history:
        history = history_kernels(run_dirs(args.history), args.history_per_task, SOURCES)
    else:
        history = [k for k in load(args.out) if k.variant == HISTORY] if args.out.is_file() else []
    kernels = merged(all_kernels(args.per_task), history)
    write(args.out, kernels)
    counts = {t: sum(k.task == t for k in kernels) for t in library_tasks()}
    print(f"calibration_kernels: {len(kernels)} kernels to {args.out}: "
          + ", ".join(f"{t} {n}" for t, n in counts.items())
          + f"; {len(history)} of them from campaign histories")
    return 0


if __name__ == "__main__":
    sys.exit(main())
