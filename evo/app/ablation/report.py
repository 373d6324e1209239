"""The results of an ablation, written into its directory:

    results.csv                 one row per variant (medians, quartiles, shares, Mann-Whitney U)
    results.md                  the tables, the figures, what the columns mean
    ablation.html               the same as one self-contained page
    anytime_evaluations.png     best so far against evaluations (median and IQR band per variant)
    anytime_time.png            ... against wall time
    contributions.png           each mutator's share of the improvements, per variant

Only finished runs count in the statistics; every run is listed with its status.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from evo.app.ablation.config import Ablation
from evo.app.ablation.runner import AblationState, RunStatus
from evo.app.ablation.stats import LEVELS, AblationResults, analyse, markdown_tables, to_csv, version_words
from evo.app.report import doc as d
from evo.app.report import plots
from evo.app.report.data import load_run
from evo.app.report.trace import Trace, trace_of
from evo.app.run.store import RunStoreError
from evo.app.run.sweep_ref import KNOWN_VERSION, SWEEP_VERSION, SWEEPS, as_of, compared, reference_of, version_gap


@dataclass(frozen=True)
class Written:
    csv: Path
    markdown: Path
    html: Path
    figures: tuple[Path, ...]
    results: AblationResults
    tables_markdown: str  # the two tables, for a terminal or a note


def run_traces(ablation: Ablation, state: AblationState) -> tuple[dict[str, list[tuple[int, Trace]]], list[list[str]]]:
    """Finished runs' traces per variant (seed, trace), and one listing row per run (any status)."""
    traces: dict[str, list[tuple[int, Trace]]] = {v: [] for v in ablation.variants}
    listing = []
    for spec in ablation.runs():
        e = state.runs[spec.key]
        best, evals, wall, usd = "-", "-", "-", "-"
        if e.run_dir:
            try:
                t = trace_of(load_run(e.run_dir))
            except RunStoreError:
                t = None
            if t is not None:
                best = f"{t.best_speedup:.3f}x" if t.best_speedup is not None else "-"
                evals, wall, usd = str(t.evaluations), f"{t.wall_time_s:.0f} s", f"${t.run.llm_usd:.4f}"
                if e.status is RunStatus.FINISHED:
                    traces[spec.variant].append((spec.seed, t))
        rel = Path(e.run_dir).name if e.run_dir else "-"
        listing.append([spec.variant, str(spec.seed), e.status.value + (f": {e.error}" if e.error else ""), best, evals,
                        wall, usd, rel])
    return traces, listing


def _notes(results: AblationResults) -> list[str]:
    target = "given in the ablation file" if results.target_given else "90% of the best speedup found"
    return [
        "Cells are the median [first quartile - third quartile] over the seeds' finished runs.",
        "best speedup: the best kernel's speedup over the seed at the end of the run.",
        f"reached: runs whose best reached the target ({target}).",
        "share of improvements: each mutator's part of the log-speedup gained whenever the best so far rose, "
        "pooled over seeds; initial: the generation-0 draws from the seed's SPACE.",
        f"p (MWU): two-sided Mann-Whitney U test of the best speedups against {results.baseline}; P(better): the "
        "chance a run of this variant beats a run of the baseline (ties count half). With few seeds no p-value "
        "can be small.",
        "evals / time / $ to X%: evaluations (full and quick), campaign wall time and LLM dollars until the best so "
        "far first reached X% of the best speedup any variant found; never: not reached by that quantile of runs.",
    ]


def reference_words(results: AblationResults, traces: dict[str, list[tuple[int, Trace]]],
                    sweeps: Path = SWEEPS) -> str:
    """Each variant's median best against the cached sweep of the seed's SPACE and the task's
    known-better kernel, when `bench/data/space_sweeps.json` has the task ('' otherwise)."""
    summary = next((t.run.summary for ts in traces.values() for _, t in ts if t.run.summary), None)
    ref = as_of(reference_of(summary, sweeps), set(results.model_versions)) if summary else None
    if not ref:
        return ""
    refs = [(f"the exhaustive sweep of the seed's SPACE ({ref['points']} points)", "the sweep",
             ref.get("best_speedup"), SWEEP_VERSION),
            ("the task's known-better kernel", "the known-better kernel", ref.get("known_better_speedup"),
             KNOWN_VERSION)]
    parts = []
    for head, what, value, version in refs:
        if value:
            each = version_gap(ref, version, set(results.model_versions)) or "; ".join(
                f"{v.variant} {compared(v.best.median, float(value), what)}" for v in results.variants
                if v.best.n and math.isfinite(v.best.median))
            parts.append(f"{head}: {float(value):.3f}x ({each})")
    return (f"Cached references ({sweeps.name}: same task, latency source and GPU) against each "
            "variant's median best: " + "; and ".join(parts) + ".") if parts else ""


def ablation_doc(ablation: Ablation, state: AblationState,
                 sweeps: Path = SWEEPS) -> tuple[d.Doc, AblationResults, str]:
    traces, listing = run_traces(ablation, state)
    results = analyse(traces, baseline=ablation.cfg.baseline, target_speedup=ablation.cfg.target_speedup,
                      uses_llm={v: any(m.kind == "llm" for m in cfg.mutators) for v, cfg in ablation.variants.items()})
    head1, rows1, head2, rows2 = markdown_tables(results)
    doc = d.Doc(f"evo ablation: {ablation.cfg.name}")
    finished = sum(1 for e in state.runs.values() if e.status is RunStatus.FINISHED)
    total = len(ablation.runs())
    if finished < total:
        doc.add(d.Callout(f"{finished} of {total} runs finished; the statistics cover finished runs only. Run the "
                          "same command again to continue.", "warn"))
    source = results.latency_source
    if source == "model":
        doc.add(d.Callout("Latency source: model. Speedups are MODELLED by the roofline model "
                          f"({version_words(results.model_versions)}), not measured.", "warn"))
        if results.mixed_models:
            doc.add(d.Callout(f"The runs were modelled by {len(results.model_versions)} versions of the latency model "
                              "(its code changed between them): speedups of different versions do not compare. "
                              "Run the older runs again (another ablation name or --output).", "bad"))
    elif source == "cuda":
        doc.add(d.Callout("Latency source: cuda. Speedups are MEASURED on the GPU.", "good"))
    best = f"{results.overall_best:.3f}x" if results.overall_best else "-"
    b = ablation.cfg.budget.model_dump(exclude_none=True)
    doc.add(d.Hero(((best, "best speedup found by any variant"), (str(len(ablation.variants)), "variants"),
                    (str(len(ablation.cfg.seeds)), "seeds each"), (f"{finished}/{total}", "runs finished"))))
    doc.add(d.Para(f"Base config: {ablation.cfg.base}; budget of every run: "
                   f"{', '.join(f'{k} {v}' for k, v in b.items())}; baseline variant: {ablation.cfg.baseline}."))
    replay = sorted({f"{m.record_path} (replay by {m.replay_match})" for cfg in ablation.variants.values()
                     for m in cfg.mutators if m.kind == "llm" and m.mode == "replay"})
    if replay:
        doc.add(d.Callout("LLM answers are REPLAYED from a record, not asked live: " + "; ".join(replay), "info"))
    doc.add(d.Heading("Outcome"), d.table(head1, rows1))
    refs = reference_words(results, traces, sweeps)
    if refs:
        doc.add(d.Para(refs))
    if head2:
        doc.add(d.Heading("Effort to reach the best"), d.table(head2, rows2))
    doc.add(d.Heading("Figures"))
    curves = {v: [t for _, t in ts] for v, ts in traces.items() if ts}
    levels = [lv * results.overall_best for lv in LEVELS] if results.overall_best else []
    if curves:
        doc.add(d.Figure("anytime_evaluations.png", plots.anytime(curves, by="evaluations", levels=levels,
                                                                  source=source),
                         "Best speedup so far against evaluations: median over seeds, band = interquartile range "
                         "(a run past its end holds its last value; a line ends with its variant's longest run); "
                         "dotted: 90% and 100% of the best found."),
                d.Figure("anytime_time.png", plots.anytime(curves, by="time", levels=levels, source=source),
                         "Best speedup so far against campaign wall time (same conventions)."),
                d.Figure("contributions.png", plots.contributions({v.variant: v.shares for v in results.variants}),
                         "Each mutator's share of the improvements (log-speedup gained), pooled over seeds."))
    else:
        doc.add(d.Para("No finished run yet: no figures."))
    doc.add(d.Heading("What the columns mean"), *[d.Para(n) for n in _notes(results)])
    doc.add(d.Heading("Runs"), d.table(["variant", "seed", "status", "best speedup", "evaluations", "wall time",
                                        "LLM $", "run directory (runs/)"], listing,
                                       "evo report RUN_DIR gives the full report of one run."))
    tables = d.to_markdown(d.Doc("", [d.table(head1, rows1), *([d.table(head2, rows2)] if head2 else [])]),
                           Path("."), "").removeprefix("# \n\n")
    return doc, results, tables + (f"\n{refs}\n" if refs else "")


def write_ablation_report(ablation: Ablation, directory: Path, state: AblationState) -> Written:
    doc, results, tables = ablation_doc(ablation, state)
    directory.mkdir(parents=True, exist_ok=True)
    csv_path = directory / "results.csv"
    csv_path.write_text(to_csv(results))
    html, md = directory / "ablation.html", directory / "results.md"
    d.write(doc, html, md, directory)
    figures = tuple(directory / b.name for b in doc.blocks if isinstance(b, d.Figure))
    return Written(csv_path, md, html, figures, results, tables)
