"""How a campaign's result compares with a sweep of the seed's SPACE (the baseline any search must
beat): the reference is measured once per task, target and latency source by `bench/search/space_sweep.py`
and kept in `bench/data/space_sweeps.json`; a campaign on the same task (same task key), benched at
the same sizes (`Task.bench_tag`: a workload has its own entries) and with the same source of
latency says, in its last lines, how far above or below it ended.

Modelled figures vary a little between runs (the model samples programs from the run's secret), so
a difference within about 1% is "the same as the sweep", not a win. Modelled figures compare only when
one version of the latency model made both (`fitness.latency.model_version`): an entry records the
version of its sweep and of its known-better figure, and a run modelled by another version (or an entry
from before versions were kept) is told to sweep again instead of being compared. A sweep by a new model
version keeps the entry's figures of the versions before it under ``earlier`` (`as_of`), so that
results those versions modelled (an ablation table's rows) still compare with their own version's sweep.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SWEEPS = Path(__file__).resolve().parents[3] / "bench" / "data" / "space_sweeps.json"
SAME_WITHIN = 0.01


def sweep_key(task_key: str, latency_source: str, gpu: str, bench_tag: str = "") -> str:
    """The cache key; `bench_tag` ('' at the task's own bench sizes) keeps workloads apart."""
    return f"{task_key}|{latency_source}|{gpu}" + (f"|{bench_tag}" if bench_tag else "")


def load_sweeps(path: Path = SWEEPS) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def reference_of(summary: dict[str, Any], path: Path = SWEEPS) -> dict[str, Any] | None:
    """The cached entry for a run's task key, bench sizes, latency source and GPU (None without one)."""
    gpu = str((summary.get("best") or {}).get("latency_gpu") or "")
    return load_sweeps(path).get(sweep_key(str(summary.get("task_key")), str(summary.get("latency_source")), gpu,
                                           str(summary.get("bench_tag") or "")))


SWEEP_VERSION = "model_version"  # an entry's field: the model version of its sweep
KNOWN_VERSION = "known_better_model_version"  # ... and of its known-better figure


EARLIER = "earlier"  # an entry's field: {model version: that version's figures of the entry}


def as_of(ref: dict[str, Any] | None, versions: set[str]) -> dict[str, Any] | None:
    """The entry as the one model version in `versions` saw it: its figures from `earlier` where that
    version made them and a later one swept again (the entry itself otherwise)."""
    if not ref or len(versions) != 1:
        return ref
    [version] = versions
    then = (ref.get(EARLIER) or {}).get(version)
    if not version or ref.get(SWEEP_VERSION) == version or not isinstance(then, dict):
        return ref
    return {**{k: v for k, v in ref.items() if k != EARLIER}, **then}


def with_earlier(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The new sweep's entry, keeping the old entry's figures under `earlier` when another (recorded)
    model version made them."""
    earlier = dict(old.get(EARLIER) or {})
    version = str(old.get(SWEEP_VERSION) or "")
    if version and version != new.get(SWEEP_VERSION) and old.get("best_speedup"):
        earlier[version] = {k: v for k, v in old.items() if k != EARLIER}
    return {**new, EARLIER: earlier} if earlier else new


def model_of(summary: dict[str, Any]) -> str:
    """The latency model version of a run's best kernel ('' where not modelled or not recorded)."""
    return str((summary.get("best") or {}).get("model_version") or "")


def version_gap(ref: dict[str, Any], field: str, versions: set[str]) -> str:
    """Why the entry's figure (its version in `field`) cannot be compared with figures modelled by
    `versions` ('' when it can: measured, or one recorded version for both)."""
    if ref.get("latency_source") != "model":
        return ""
    theirs = str(ref.get(field) or "")
    if theirs and versions == {theirs}:
        return ""
    mine = ", ".join(sorted(v or "unrecorded" for v in versions)) or "unrecorded"
    workload = f" --workload {ref['workload']}" if ref.get("workload") else ""
    return (f"not compared: the cached figure was modelled by latency model {theirs or 'unrecorded'}, the run(s) "
            f"by {mine} (sweep again: python bench/search/space_sweep.py {ref.get('source') or ref.get('task', 'TASK')}"
            f"{workload})")


def compared(speedup: float, reference: float, what: str) -> str:
    """How a speedup compares with `what`'s, in words (within 1%: the same)."""
    gain = speedup / reference - 1.0
    return (f"the same as {what} (within 1%)" if abs(gain) <= SAME_WITHIN else
            f"{100 * abs(gain):.1f}% {'above' if gain > 0 else 'below'} {what}")


def sweep_words(summary: dict[str, Any], path: Path = SWEEPS) -> str:
    """One line comparing the run's best with the cached sweep of its seed's SPACE and with the task's
    known-better kernel ('' without either)."""
    speedup = (summary.get("best") or {}).get("speedup_over_seed")
    versions = {model_of(summary)}
    ref = as_of(reference_of(summary, path), versions)
    if not ref or not speedup:
        return ""
    known = ref.get("known_better_speedup")
    known_gap = version_gap(ref, KNOWN_VERSION, versions)
    known_words = (f"the task's known-better kernel: {known:.3f}x, the campaign "
                   f"{known_gap or compared(speedup, known, 'it')}" if known else "")
    if not ref.get("best_speedup"):  # the SPACE was too large to sweep
        return f"campaign {speedup:.3f}x over the seed; {known_words}" if known else ""
    sweep = float(ref["best_speedup"])
    verdict = version_gap(ref, SWEEP_VERSION, versions) or compared(speedup, sweep, "the sweep")
    return (f"vs a sweep of the seed's SPACE ({ref['points']} points, {ref['evaluations']} evaluations, "
            f"{ref['seconds']:.0f} s, cached in bench/data/space_sweeps.json): campaign {speedup:.3f}x over the "
            f"seed, sweep {sweep:.3f}x: {verdict}; random draws from the SPACE reach 95% of the sweep's best "
            f"in {ref['draws_to_95']:.1f} evaluations on average" + (f"; {known_words}" if known else ""))
