"""What the search earns, per library task: the ablations' strategies side by side with the sweep of
the seed's SPACE and the task's known-better kernel.

    python -m bench.search.search_table [ABLATION.yaml ...] [--output DIR] [--markdown PATH]

Reads finished runs of the given ablation files (default: every file in configs/ablation_search/ and
configs/ablation_mutators.yaml, whose `all-fixed` variant has the LLM stand-in) from their ablation
directories (`evo ablate` writes them; nothing is run here) and the cached references in
bench/data/space_sweeps.json (bench/search/space_sweep.py). One row per task and strategy:

- best: the runs' best speedup over the seed, median [first quartile - third quartile] over seeds;
- vs sweep / vs known-better: the median best against the sweep's best and the known-better kernel's;
- runs above sweep: how many runs ended above the sweep's best by more than the 1% modelled figures
  vary by (a median above it may be one seed's luck or every seed's gain);
- evals / seconds to 95%: per run, the evaluations and campaign seconds until its best so far first
  reached 95% of that run's own final best (median over seeds);
- model: the version of the latency model that timed the runs (`fitness.latency.model_version`;
  "unrecorded" for runs from before versions were kept). Modelled rows compare only within a version,
  and with a cached sweep or known-better figure only where that version made it too ("not compared
  (model V)" otherwise: sweep again).

Speedups are whatever the runs measured: MODELLED (roofline model) on a machine without a GPU.

Ablation directories are not part of the repository, so a fresh checkout has none of the runs behind
the shipped table. Two things carry them over: `--save` adds the best-so-far curves of the finished runs
found here to bench/data/ablation_runs.jsonl (`bench.search.run_curves`), which is read for every seed not run
here, so seeds run in different sessions add up (`evo ablate FILE --variant V --seed N` runs just those);
and `--keep TABLE` keeps the rows of a table written before (the shipped one: bench/data/search_table.md)
whose strategy has neither a finished run here nor a saved curve, and says which were kept.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.search import run_curves
from bench.search.run_curves import Curve, CurvesError
from evo.app.ablation.config import hash_of_kept, load_ablation
from evo.app.ablation.report import run_traces
from evo.app.ablation.runner import AblationState
from evo.app.ablation.stats import Spread
from evo.app.report import doc as d
from evo.app.run.sweep_ref import (
    KNOWN_VERSION,
    SAME_WITHIN,
    SWEEP_VERSION,
    SWEEPS,
    as_of,
    compared,
    reference_of,
    version_gap,
)
from evo.contracts.config_file import ConfigError
from fitness.latency.model_version import UNRECORDED

DEFAULTS = (*sorted((ROOT / "configs" / "ablation_search").glob("*.yaml")), ROOT / "configs" / "ablation_mutators.yaml")
SKIP = {"base.yaml"}  # the search ablations' shared base campaign, not an ablation
LEVEL = 0.95


@dataclass(frozen=True)
class Row:
    task: str
    strategy: str  # "<ablation>/<variant>"
    llm: bool
    curves: tuple[Curve, ...]
    reference: dict[str, Any] | None  # the cached sweep / known-better entry

    @property
    def best(self) -> Spread:
        return Spread.of([c.best_speedup or 0.0 for c in self.curves])

    @property
    def versions(self) -> set[str]:
        """The model versions the runs recorded ("" for one not recorded or not modelled)."""
        return {c.model_version for c in self.curves}

    @property
    def model(self) -> str:
        """The model versions of the runs (modelled ones), "-" when measured."""
        versions = sorted({c.model_version or UNRECORDED for c in self.curves if c.latency_source == "model"})
        return ", ".join(versions) or "-"

    def to_level(self, by: str) -> Spread:
        out = []
        for c in self.curves:
            hit = c.first_reaching(LEVEL * c.best_speedup) if c.best_speedup else None
            out.append(math.inf if hit is None else float(hit[0]) if by == "evaluations" else hit[1])
        return Spread.of(out)


@dataclass
class Found:
    """What the ablation files gave: rows, the curves of finished runs here, saved curves set aside."""

    rows: list[Row]
    local: dict[tuple[str, str, int], Curve]
    stale: list[str]


def rows_of(path: Path, output: Path | None, sweeps: Path, saved: dict[tuple[str, str, int], Curve]) -> Found:
    """One row per variant of the ablation file at `path`: its finished runs here and, for seeds not run
    here, the `saved` curves whose config still hashes the same."""
    ablation = load_ablation(path)
    directory = ablation.directory(output)
    traces = run_traces(ablation, AblationState.load(directory, ablation))[0] if directory.is_dir() else {}
    name = ablation.cfg.name
    found = Found([], {}, [])
    for variant, cfg in ablation.variants.items():
        llm = any(m.kind == "llm" for m in cfg.mutators)
        task = cfg.task.name or Path(cfg.task.path or cfg.task.kernelbench or "?").stem  # a folder's or file's name
        specs = {spec.seed: spec for spec in ablation.select([variant])}
        curves: dict[int, Curve] = {}
        for seed, trace in traces.get(variant, []):
            curves[seed] = Curve.of(trace, ablation=name, variant=variant, seed=seed,
                                    config_hash=specs[seed].config_hash(), task=task, llm=llm,
                                    config=specs[seed].portable_config())
            found.local[curves[seed].key] = curves[seed]
        for seed, spec in specs.items():
            kept = saved.get((name, variant, seed))
            if seed in curves or kept is None:
                continue
            if kept.config_hash != spec.config_hash():
                if kept.config is None or hash_of_kept(kept.config, spec.config_dir) != spec.config_hash():
                    found.stale.append(f"{name}/{variant} seed {seed}")
                    continue
                kept = dataclasses.replace(kept, config_hash=spec.config_hash())  # today's hash, as --save keeps it
            curves[seed] = kept
        if curves:
            ordered = tuple(curves[s] for s in sorted(curves))
            key = next((c.reference_key for c in ordered if c.reference_key), None)
            ref = as_of(reference_of(key, sweeps), {c.model_version for c in ordered}) if key else None
            found.rows.append(Row(task, f"{name}/{variant}", llm, ordered, ref))
    return found


def _vs(row: Row, key: str, version: str, what: str) -> str:
    ref = row.reference or {}
    value = ref.get(key)
    if not value or not math.isfinite(row.best.median):
        return "-"
    if version_gap(ref, version, row.versions):
        return f"not compared (model {ref.get(version) or UNRECORDED})"
    return compared(row.best.median, float(value), what)


def _above(row: Row) -> str:
    """How many of the row's runs ended clearly above the sweep's best (by more than the 1% the model's
    figures vary by): whether a median above it is one lucky seed or all of them."""
    ref = row.reference or {}
    sweep = ref.get("best_speedup")
    if not sweep or version_gap(ref, SWEEP_VERSION, row.versions):
        return "-"
    above = sum(1 for c in row.curves if (c.best_speedup or 0.0) > float(sweep) * (1 + SAME_WITHIN))
    return f"{above} of {len(row.curves)}"


HEAD = ["task", "strategy", "LLM", "runs", "best", "sweep best", "vs sweep", "runs above sweep", "known-better",
        "vs known-better", f"evals to {LEVEL:.0%}", f"seconds to {LEVEL:.0%}", "model"]
ADDED = {"runs above sweep": "-", "model": UNRECORDED}  # columns a table written before them lacks, and their fill


def table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    head = HEAD
    body = []
    for r in sorted(rows, key=lambda r: (r.task, r.llm, r.strategy)):
        ref = r.reference or {}
        sweep, known = ref.get("best_speedup"), ref.get("known_better_speedup")
        body.append([r.task, r.strategy, "stand-in" if r.llm else "no", str(len(r.curves)), r.best.text("{:.3f}x"),
                     f"{sweep:.3f}x" if sweep else "not swept", _vs(r, "best_speedup", SWEEP_VERSION, "the sweep"),
                     _above(r),
                     f"{known:.3f}x" if known else "-",
                     _vs(r, "known_better_speedup", KNOWN_VERSION, "the known-better kernel"),
                     r.to_level("evaluations").text("{:.0f}"), r.to_level("time").text("{:.0f}"), r.model])
    return head, body


SOURCE_LINE = "Latency source: "


def kept_rows(path: Path, head: list[str], fresh: set[tuple[str, str]]) -> tuple[list[list[str]], set[str]]:
    """The rows of the table at `path` (written by this script, with its columns or those of an earlier
    version of it) whose (task, strategy) is not in `fresh`, and the latency sources that table names.
    A column added since that table was written is filled in (`ADDED`: the model "unrecorded")."""
    text = path.read_text().splitlines()
    lines = [line for line in text if line.startswith("|")]
    found = [c.strip() for c in lines[0].strip("|").split("|")] if lines else []
    if not found or [c for c in head if c in found] != found or any(c not in found for c in head if c not in ADDED):
        raise ValueError(f"{path} is not a table with this script's columns")
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines[2:]]
    rows = [[dict(zip(found, r)).get(c, ADDED.get(c, "-")) for c in head] for r in cells if len(r) == len(found)]
    named = next((line.removeprefix(SOURCE_LINE).split(" (")[0].rstrip(".") for line in text
                  if line.startswith(SOURCE_LINE)), "")
    return ([r for r in rows if (r[0], r[1]) not in fresh],
            {n.strip() for n in named.split(",") if n.strip()})


def _order(row: list[str]) -> tuple[str, bool, str]:
    return row[0], row[2] != "no", row[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ablations", nargs="*", type=Path, help="ablation files (default: the shipped ones)")
    ap.add_argument("--output", type=Path, help="where the ablations were written (as `evo ablate --output`)")
    ap.add_argument("--sweeps", type=Path, default=SWEEPS, help="the cached sweeps (default: %(default)s)")
    ap.add_argument("--markdown", type=Path, help="also write the table here")
    ap.add_argument("--keep", type=Path, metavar="TABLE",
                    help="keep this earlier table's rows whose strategy has no finished run here "
                         "(e.g. bench/data/search_table.md)")
    ap.add_argument("--runs", type=Path, default=run_curves.RUNS,
                    help="the saved curves of finished runs, read for seeds not run here (default: %(default)s)")
    ap.add_argument("--save", action="store_true",
                    help="add the curves of the finished runs found here to --runs (seeds run in different "
                         "sessions add up)")
    args = ap.parse_args(argv)
    rows: list[Row] = []
    local: dict[tuple[str, str, int], Curve] = {}
    stale: list[str] = []
    try:
        saved = run_curves.load(args.runs)
        for path in args.ablations or [p for p in DEFAULTS if p.name not in SKIP]:
            found = rows_of(path, args.output, args.sweeps, saved)
            rows += found.rows
            local.update(found.local)
            stale += found.stale
    except (ConfigError, CurvesError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.save and local:
        run_curves.save({**saved, **local}, args.runs)
        print(f"saved the curves of {len(local)} finished run(s) here to {args.runs}", file=sys.stderr)
    head, body = table(rows)
    sources = {c.latency_source for r in rows for c in r.curves}
    kept: list[list[str]] = []
    if args.keep:
        try:
            kept, kept_sources = kept_rows(args.keep, head, {(r[0], r[1]) for r in body})
        except (OSError, ValueError) as e:
            print(f"error: --keep: {e}", file=sys.stderr)
            return 2
        if kept:
            sources |= kept_sources
    if not body and not kept:
        print("no finished ablation runs found: run `python -m evo ablate configs/ablation_search/softmax.yaml` first",
              file=sys.stderr)
        return 1
    body = sorted(body + kept, key=_order)
    names = sorted(sources)
    text = d.to_markdown(d.Doc("", [d.table(head, body)]), Path("."), "").removeprefix("# \n\n")
    note = (f"{SOURCE_LINE}{', '.join(names)}"
            + (" (MODELLED by the roofline model, not measured)." if names == ["model"] else "."))
    versions = {v.strip() for row in body + kept for v in row[-1].split(",")} - {"-"}
    if len(versions) > 1:
        note += (f"\nThe rows come from {len(versions)} versions of the latency model (the model column: "
                 f"{', '.join(sorted(versions))}); modelled speedups compare only within one version.")
    if stale:
        note += ("\nSet aside (their variant's config changed since they ran): " + ", ".join(stale) + ".")
    if kept:
        note += ("\nKept from the earlier table (their runs are not on the machine that wrote this one): "
                 + ", ".join(r[1] for r in kept) + ".")
    print(text + "\n" + note)
    if args.markdown:
        args.markdown.write_text(f"{text}\n{note}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
