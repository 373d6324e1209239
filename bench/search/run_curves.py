"""Finished ablation runs kept as their best-so-far curves, so the search table outlives the runs.

An ablation's run directories are not part of the repository (megabytes each), and a fresh checkout
has none: without this file every session would have to run an ablation's every variant and seed
again for its row of `bench/search/search_table.py`. A curve is what the table needs of one finished run,
a few hundred bytes: the seed's evaluation and every later gain (evaluation index, campaign seconds,
best speedup so far), the run's totals, the latency source and model version, and the fields of its
summary that name the cached sweep. One JSON object per line in `bench/data/ablation_runs.jsonl`,
keyed by ablation, variant and seed; `python -m bench.search.search_table --save` adds the finished runs
found here, so seeds run in different sessions add up. A curve counts for the ablation file only
while its variant's config hashes the same (`evo.app.ablation.config.config_hash`, independent of the
checkout's folder, or its kept config read by today's schema): a changed variant's old curves are set
aside, not mixed in.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evo.app.report.trace import Trace

RUNS = Path(__file__).resolve().parents[1] / "data" / "ablation_runs.jsonl"


@dataclass(frozen=True)
class Curve:
    ablation: str  # the ablation's name
    variant: str
    seed: int
    config_hash: str  # the variant's config with this seed (RunSpec.config_hash)
    task: str
    llm: bool
    latency_source: str  # "model", "cuda" or "" (the seed had no latency)
    model_version: str
    evaluations: int
    wall_time_s: float
    points: tuple[tuple[int, float, float], ...]  # (evaluation, seconds, best so far): the seed, then each gain
    # the summary's fields that name its cached sweep (`evo.app.run.sweep_ref.reference_of`)
    reference_key: dict[str, Any]
    # the run's config as written (`RunSpec.portable_config`): a schema that gained a key since hashes it
    # the same as the variant now, where `config_hash` (today's schema then) no longer matches
    config: dict[str, Any] | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        return self.ablation, self.variant, self.seed

    @property
    def best_speedup(self) -> float | None:
        return self.points[-1][2] if self.points else None

    def first_reaching(self, speedup: float) -> tuple[int, float] | None:
        """(evaluation, seconds) where the best so far first reached `speedup`; None: never."""
        return next(((i, s) for i, s, best in self.points if best >= speedup * (1 - 1e-12)), None)

    @classmethod
    def of(cls, trace: Trace, *, ablation: str, variant: str, seed: int, config_hash: str, task: str,
           llm: bool, config: dict[str, Any] | None = None) -> Curve:
        points: list[tuple[int, float, float]] = []
        if trace.start is not None:
            points.append((trace.start.index, round(trace.start.elapsed_s, 3), 1.0))
            points += [(s.record.index, round(s.record.elapsed_s, 3), s.speedup) for s in trace.steps]
        summary = trace.run.summary or {}
        reference: dict[str, Any] = {k: summary[k] for k in ("task_key", "latency_source", "bench_tag") if k in summary}
        gpu = (summary.get("best") or {}).get("latency_gpu")
        if gpu:
            reference["best"] = {"latency_gpu": gpu}
        return cls(ablation, variant, seed, config_hash, task, llm, trace.latency_source, trace.model_version,
                   trace.evaluations, round(trace.wall_time_s, 3), tuple(points), reference, config)

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "points": [list(p) for p in self.points]}, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> Curve:
        d = json.loads(line)
        d["points"] = tuple((int(i), float(s), float(b)) for i, s, b in d["points"])
        d["seed"] = int(d["seed"])
        return cls(**d)


class CurvesError(ValueError):
    """The curves file cannot be read: which line, and why."""


def load(path: Path = RUNS) -> dict[tuple[str, str, int], Curve]:
    """The curves in `path` by (ablation, variant, seed); none when the file does not exist."""
    if not path.is_file():
        return {}
    out = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            curve = Curve.from_json(line)
        except (ValueError, TypeError, KeyError) as e:
            raise CurvesError(f"{path}:{n}: not a run curve ({type(e).__name__}: {e})") from e
        out[curve.key] = curve
    return out


def save(curves: dict[tuple[str, str, int], Curve], path: Path = RUNS) -> None:
    """Write `curves`, one per line in key order (so a change reads as a small diff)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(curves[k].to_json() + "\n" for k in sorted(curves)))
    tmp.replace(path)
