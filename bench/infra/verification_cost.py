"""What fitness verification and the race/bounds sanitizer cost per evaluation, on the demo's softmax
candidates (CPU, Triton interpreter, modelled latency).

    PYTHONPATH=. python bench/infra/verification_cost.py [RUN_DIR ...] [--candidates 12] [--config configs/demo.yaml]

Live figures (this checkout): candidates of the demo campaign (the distinct kernels of the RUN_DIRs'
histories when given, else points of the seed's SPACE spread evenly) are evaluated as a campaign
evaluates them, with the settings of the config's ``evaluation:`` section:

- ``check, no sanitizer`` / ``check, sanitizer``: the equivalence check (every check size, draw and
  value distribution) with the sanitizer off (the check as it was before it existed) and on (the
  default); ``x`` is their ratio;
- ``model``: the roofline model at the bench size, which now runs the sampled programs and loop
  iterations from a secret seed and compares what they stored with a float64 reference;
- ``verify``: what level ``verified`` adds (a full interpreted run at every bench size, compared
  with the reference), paid once per candidate that becomes an island's best and by ``evo eval``;
  0 where the model's own run was already a full one; left out where the model estimates the full
  run to exceed ``verify_timeout_s`` (not started: such a kernel cannot become a best on this CPU).

Recorded figures: for each RUN_DIR, the check and model seconds its full evaluations recorded
(``check_seconds``, ``latency_detail.model_s``). A run made by an earlier version of the project is
the "before" of the model's cost: run the demo on both versions and pass both run directories.
Each table prints the median and the 90th percentile of each column.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evo.app.report.data import load_run
from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.config_file import load_config
from evo.contracts.task import Task
from evo.contracts.task_loader import build_task
from evo.contracts.verdict import FULL, VERIFIED
from fitness.evaluate import Evaluator

COLUMNS = ("check, no sanitizer", "check, sanitizer", "x", "model", "verify")


def spread(items: Sequence[Candidate], n: int) -> list[Candidate]:
    """`n` of `items` spread evenly over the sequence (all of them when there are fewer)."""
    if len(items) <= n:
        return list(items)
    return [items[round(i * (len(items) - 1) / (n - 1))] for i in range(n)] if n > 1 else [items[0]]


def space_points(task: Task) -> list[Candidate]:
    """Every point of the seed's SPACE (the demo's first generations draw from it)."""
    assert task.seed_source is not None, "the task has no seed"
    seed = Candidate.from_source(task.seed_source)
    points = [seed]
    for name, values in seed.space().items():
        points = [p.with_params(**{name: v}) for p in points for v in values]
    return points


def run_candidates(run_dirs: Iterable[Path]) -> list[Candidate]:
    """The distinct kernels the runs evaluated in full, in the order they first appeared."""
    seen: dict[str, Candidate] = {}
    for path in run_dirs:
        for record in load_run(path).records:
            if record.full:
                seen.setdefault(record.candidate.id, record.candidate)
    return list(seen.values())


def quantiles(values: list[float]) -> tuple[float, float]:
    return float(np.median(values)), float(np.percentile(values, 90))


def live(task: Task, settings: EvaluationConfig, candidates: list[Candidate]) -> dict[str, list[float]]:
    """Per-candidate seconds of each column, measured with warm workers (the seed runs first)."""
    plain = settings.model_copy(update={"sanitize": False, "latency": LatencyMode.OFF})
    modelled = settings.model_copy(update={"sanitize": True, "latency": LatencyMode.MODEL})
    out: dict[str, list[float]] = {c: [] for c in COLUMNS}
    assert task.seed_source is not None
    seed = Candidate.from_source(task.seed_source)
    with Evaluator(task, plain, device="cpu") as before, Evaluator(task, modelled, device="cpu") as after:
        before.evaluate(seed)
        after.evaluate(seed)
        for i, cand in enumerate(candidates, 1):
            off = before.evaluate(cand, level=FULL)
            on = after.evaluate(cand, level=FULL)
            start = time.monotonic()
            verified = after.evaluate(cand, level=VERIFIED)  # the model's figure is cached by id
            verify = max(0.0, time.monotonic() - start - verified.check_seconds)
            model = float(on.latency_detail.get("model_s") or 0.0)
            print(f"  {i:2d}/{len(candidates)} {cand.params}: {on.status.value}, check {off.check_seconds:.2f} s -> "
                  f"{on.check_seconds:.2f} s, model {model:.2f} s, verify {verify:.2f} s ({verified.status.value})",
                  flush=True)
            if not (off.ok and on.ok):
                continue  # a failing check stops early: its time says nothing about the cost of a full one
            out["check, no sanitizer"].append(off.check_seconds)
            out["check, sanitizer"].append(on.check_seconds)
            out["x"].append(on.check_seconds / max(off.check_seconds, 1e-9))
            out["model"].append(model)
            if verified.ok:  # a run estimated to exceed verify_timeout_s is not started (a `timeout`)
                out["verify"].append(verify)
    return out


def recorded(run_dir: Path) -> dict[str, list[float]]:
    """Check and model seconds of the run's full evaluations that passed the check."""
    out: dict[str, list[float]] = {"check": [], "model": []}
    for record in load_run(run_dir).records:
        ev = record.evaluation
        if record.full and ev.check_seconds > 0 and ev.cases_checked:
            out["check"].append(ev.check_seconds)
            if ev.latency_detail.get("model_s") is not None:
                out["model"].append(float(ev.latency_detail["model_s"]))
    return out


def table(title: str, columns: dict[str, list[float]]) -> None:
    print(f"\n{title}")
    print(f"{'':8s}" + "".join(f"{name:>22s}" for name in columns))
    for row, pick in (("median", 0), ("p90", 1)):
        cells = []
        for name, values in columns.items():
            if not values:
                cells.append(f"{'-':>22s}")
                continue
            value = quantiles(values)[pick]
            cells.append(f"{value:>21.2f}" + ("x" if name == "x" else "s"))
        print(f"{row:8s}" + "".join(cells))
    print(f"{'n':8s}" + "".join(f"{len(v):>22d}" for v in columns.values()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", type=Path, help="run directories of demo campaigns (any version)")
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    ap.add_argument("--candidates", type=int, default=12, help="how many candidates to evaluate live")
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    task = build_task(cfg.task, args.config.parent)
    pool = run_candidates(args.runs) if args.runs else space_points(task)
    chosen = spread(pool, args.candidates)
    print(f"task {task.name}: {len(chosen)} of {len(pool)} candidates "
          f"({'from ' + ', '.join(map(str, args.runs)) if args.runs else 'points of the seed SPACE'}), "
          f"bench size {task.bench_sizes[0]}, target {cfg.evaluation.target_gpu}")
    table("live, this checkout (seconds per evaluation)", live(task, cfg.evaluation, chosen))
    for run_dir in args.runs:
        table(f"recorded in {run_dir} (seconds per full evaluation)", recorded(run_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
