"""`evo report RUN_DIR`: one campaign as a self-contained HTML page and as Markdown.

RUN_DIR/report.html (figures inline), RUN_DIR/report.md with its figures in RUN_DIR/report_files/.
Sections: outcome and latency source, the best kernel against the seed and the baselines, progress
(best so far with the mutator of each improvement; per island with migrations), migrations, mutator
statistics (operator selection, STOKE's move table, LLM usage), failures by status with examples,
and the best kernel's lineage from the seed with a diff per step. A run in progress, one with no
improvement and one whose seed was rejected are reported as such.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from evo.app.report import doc as d
from evo.app.report import plots
from evo.app.report import stats as rs
from evo.app.report.data import Record, RunData, load_run
from evo.app.report.trace import Trace, credit, trace_of
from evo.app.run.progress import duration_words
from evo.contracts.mutator_config import LLMConfig
from mutators.llm.prompt import source_with_params

STATUS_TONE = {"finished": "good", "running": "info", "interrupted": "warn", "failed": "bad"}


def _x(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}x"


def source_banner(trace: Trace, best: Record | None) -> d.Callout:
    ev = best.evaluation if best else None
    gpu = ev.latency_gpu if ev else ""
    if trace.latency_source == "cuda":
        return d.Callout(f"Latency source: cuda. Every latency here was MEASURED with CUDA events on "
                         f"{gpu or 'the GPU'}, against baselines timed in the same worker.", "good")
    if trace.latency_source == "model":
        version = f", model version {trace.model_version}" if trace.model_version else ""
        return d.Callout(f"Latency source: model. Every latency here is MODELLED (the roofline model of "
                         f"{gpu.upper() or 'the target GPU'} at the task's bench size{version}), NOT measured on a "
                         "GPU.", "warn")
    return d.Callout("No latency: the seed has no latency (latency stage off, or the seed was rejected), so there "
                     "are no speedups.", "warn")


def _status(run: RunData) -> d.Callout:
    s = run.status
    text = {"running": "In progress: no final summary yet; figures as of the last evaluation written.",
            "interrupted": f"Interrupted ({run.stop_reason}); continue with evo run --resume {run.path}.",
            "failed": f"Failed: {run.stop_reason}.",
            "finished": f"Finished: {run.stop_reason}."}.get(s, s)
    return d.Callout(text, STATUS_TONE.get(s, "info"))


def _best(run: RunData, trace: Trace, best: Record | None) -> list[d.Block]:
    out: list[d.Block] = [d.Heading("Best kernel")]
    seed = run.seed_record
    if seed is None:
        return [*out, d.Callout("Nothing was evaluated yet.", "info")]
    if not seed.evaluation.ok:
        return [*out, d.Callout(f"The seed kernel was rejected ({seed.evaluation.status.value}): "
                                f"{seed.evaluation.reason}", "bad")]
    if best is None or best is seed or not trace.steps:
        out.append(d.Callout("No kernel faster than the seed was found (yet): the best is the seed itself.", "warn"))
        best = seed
    ev = best.evaluation
    facts = [["candidate", best.candidate.id], ["found by", f"{credit(best.proposal.mutator)} on island "
             f"{best.proposal.island}, generation {best.proposal.generation} (evaluation #{best.index})"],
             ["latency", f"{ev.latency_ms:.4g} ms ({trace.latency_source}, {ev.latency_gpu})"
              if ev.latency_ms is not None else "not measured"],
             ["seed latency", f"{trace.seed_latency_ms:.4g} ms" if trace.seed_latency_ms else "-"],
             ["speedup over the seed", _x(trace.best_speedup, 3)]]
    facts += [[f"speedup over {k}", _x(v, 3)] for k, v in sorted(ev.speedups.items()) if k != "seed"]
    if ev.roofline_fraction is not None:
        facts.append(["fraction of the roofline", f"{ev.roofline_fraction:.1%}"])
    facts.append(["params", ", ".join(f"{k}={v}" for k, v in sorted(best.candidate.params.items()))])
    out.append(d.table(["", ""], facts))
    shapes = [s for s in ev.latency_detail.get("shapes", []) or [] if isinstance(s, dict)]
    if shapes:
        out.append(d.table(
            ["bench size", "weight", "latency (ms)", "speedup over the seed", "fraction of the roofline", "bound"],
            [[str(s.get("size")), f"{s.get('weight')}", f"{s['latency_ms']:.4g}" if s.get("latency_ms") else "-",
              _x((s.get("speedups") or {}).get("seed"), 3),
              f"{s['roofline_fraction']:.1%}" if s.get("roofline_fraction") else "-", str(s.get("bound") or "-")]
             for s in shapes],
            "the latency above is the weighted geometric mean of these"))
    baselines = sorted(k for k in ev.speedups if k != "seed")
    if trace.latency_source == "model" and not baselines:
        out.append(d.Para("The model has no torch baselines; they are timed on CUDA only."))
    path = run.path / "best_kernel.py"
    text = path.read_text() if path.is_file() and best.candidate.id in path.read_text() else \
        source_with_params(best.candidate)
    out.append(d.Code(text, title="best_kernel.py" if path.is_file() and text != source_with_params(best.candidate)
                      else f"kernel {best.candidate.id}"))
    return out


def _progress(run: RunData, trace: Trace) -> list[d.Block]:
    out: list[d.Block] = [d.Heading("Progress"), d.Figure("best_so_far.png", plots.steps(trace),
                          "Best speedup so far against evaluations; each point is an improvement, coloured by "
                          "the mutator that made it.")]
    curves = rs.island_curves(run, trace)
    gens = sorted({int(e.get("generation", 0)) for e in rs.migrations(run)})
    if curves:
        out.append(d.Figure("islands.png", plots.islands(curves, migrations=gens, source=trace.latency_source),
                            "Best speedup so far on each island by generation; dotted lines: migrations."))
    return out


def _migrations(run: RunData) -> list[d.Block]:
    ms = rs.migrations(run)
    out: list[d.Block] = [d.Heading("Migrations")]
    if not ms:
        return [*out, d.Para("No migrations (one island, or none were due yet).")]
    rows = []
    for m in ms:
        sent = "; ".join(f"{i} -> {', '.join(map(str, t))}" for i, t in enumerate(m.get("targets", [])))
        arrived = sum(len(a) for a in m.get("arrivals", []))
        rows.append([m.get("generation"), m.get("topology"), sent, arrived, sum(m.get("stayed", []))])
    return [*out, d.table(["generation", "topology", "island -> neighbours", "migrants sent", "stayed"], rows)]


def _timeline(run: RunData) -> list[d.Block]:
    moments = rs.timeline(run)
    out: list[d.Block] = [d.Heading("Timeline")]
    if len(moments) <= 2 and all(m.what in ("started", "stopped (finished)") for m in moments):
        return [*out, d.Para("One session, no infrastructure failures.")]
    rows = [[duration_words(m.elapsed_s), m.what, m.detail] for m in moments]
    return [*out, d.Para("Sessions (kills and resumes) and infrastructure failures, on the campaign's clock "
                         "(pauses between sessions excluded). An infrastructure failure is never a candidate's "
                         "verdict: its check ran again on a fresh worker."),
            d.table(["at", "what", "detail"], rows)]


def _nodes(run: RunData) -> list[d.Block]:
    nodes = (run.summary or {}).get("nodes") or []
    if not nodes:
        return []
    rows = [[str(n["node"])[:8], e["name"], e["evaluations"], duration_words(e["alive_s"]), f"{e['busy_fraction']:.0%}",
             "lost or replaced" if e["lost"] else ""] for n in nodes for e in n["evaluators"]]
    return [d.Heading("Nodes and evaluators"),
            d.Para(f"{len(nodes)} node(s) in the last session; each evaluator's evaluations and the share of its time "
                   "alive it spent evaluating."),
            d.table(["node", "evaluator", "evaluations", "alive", "busy", ""], rows)]


def _mutators(run: RunData, trace: Trace) -> list[d.Block]:
    out: list[d.Block] = [d.Heading("Mutators")]
    ops = rs.operator_totals(run)
    hist = rs.per_mutator(run, trace)
    elite = rs.elite_shares(run)
    names = list(dict.fromkeys([*ops, *hist]))
    rows = []
    for n in names:
        o, h = ops.get(n), hist.get(n, {})
        rows.append([n, o.pulls if o else "-", o.proposals if o else "-", o.correct if o else "-",
                     o.improvements if o else "-", f"{o.cost_s:.0f}" if o else "-", f"{o.cost_usd:.4f}" if o else "-",
                     int(h.get("evaluations", 0)), int(h.get("steps", 0)), f"{h.get('gain', 0.0):.1%}",
                     f"{elite.get(n, 0.0):.0%}"])
    out.append(d.table(["mutator", "pulls", "proposals", "correct", "beat parent", "cost s", "cost $",
                        "full evals", "new bests", "share of gain", "elite share"], rows,
                       "pulls..cost: operator selection (latest checkpoint, all islands); full evals, new bests "
                       "and share of gain (log-speedup): from the history; elite share: final populations."))
    moves = rs.stoke_moves(run)
    if moves:
        out.append(d.Heading("STOKE moves", 3))
        cols = ("proposed", "valid", "correct", "accepted", "improved")
        out.append(d.table(["move", *cols], [[m, *(getattr(s, c) for c in cols)] for m, s in
                                             sorted(moves.items(), key=lambda kv: -kv[1].proposed)]))
    usage = rs.llm_usage(run)
    out.append(d.Heading("LLM cost", 3))
    if usage is None:
        out.append(d.Para("No LLM mutator in this run: $0."))
    else:
        budget = run.config.budget.llm_usd if run.config.budget else None
        paused = f"; paused {usage.pauses} time(s) after failures in a row" if usage.pauses else ""
        out.append(d.table(["", ""], [
            ["dollars spent", f"${run.llm_usd:.4f}" + (f" of a ${budget} budget" if budget is not None else "")],
            ["requests (failed)", f"{usage.requests} ({usage.failed_requests}){paused}"],
            ["tokens in / out", f"{usage.prompt_tokens} / {usage.completion_tokens}"],
            ["replies that could not be applied", f"{usage.unusable_replies} of {usage.proposals}"],
            ["mode", ", ".join(sorted({m.mode for m in run.config.mutators if isinstance(m, LLMConfig)}))],
            *([["replay misses (prompts the record had no reply for)", str(usage.replay_misses)]]
              if any(isinstance(m, LLMConfig) and m.mode == "replay" for m in run.config.mutators) else [])]))
    return out


def _failures(run: RunData) -> list[d.Block]:
    out: list[d.Block] = [d.Heading("Failures")]
    groups = rs.failures(run)
    if not groups:
        out.append(d.Para("No evaluation failed."))
    else:
        out.append(d.table(["status", "full", "quick", "examples (reason)"],
                           [[g.status, g.full, g.quick, "\n".join(f"{r.candidate.id} ({credit(r.proposal.mutator)}): "
                             f"{rs.short(r.evaluation.reason, 160)}" for r in g.examples)] for g in groups],
                           "quick: checks inside a mutator (e.g. a STOKE chain's steps), on fewer sizes."))
    failed = rs.failed_proposals(run)
    if failed:
        out.append(d.Heading("Proposals with no kernel", 3))
        out.append(d.table(["mutator", "count", "examples"], [
            [m, len(errs), "\n".join(rs.short(e, 160) for e in list(dict.fromkeys(errs))[:rs.EXAMPLES])]
            for m, errs in failed.items()]))
    return out


def _lineage(run: RunData, trace: Trace, best: Record | None) -> list[d.Block]:
    out: list[d.Block] = [d.Heading("Lineage of the best kernel")]
    if best is None or not trace.steps:
        return [*out, d.Para("The best kernel is the seed: no lineage.")]
    chain = rs.lineage(run, best)
    rows = []
    for r in chain:
        s = trace.speedup(r)
        rows.append([r.candidate.id, credit(r.proposal.mutator), r.proposal.island, r.proposal.generation, _x(s, 3),
                     rs.short(r.proposal.note, 120)])
    out.append(d.table(["candidate", "mutator", "island", "generation", "speedup", "note"], rows))
    if chain[0].candidate.id != run.seed_id:
        out.append(d.Para("The chain stops at a kernel whose parent is not in the history."))
    for parent, child in itertools.pairwise(chain):
        text, normalized = rs.diff(parent, child)
        how = " (normalized code: comments and formatting not compared)" if normalized else ""
        out.append(d.Diff(text or "(no change in the source)",
                          f"{credit(child.proposal.mutator)}: {parent.candidate.id} -> {child.candidate.id}{how}"))
    return out


def run_report(run: RunData) -> d.Doc:
    trace = trace_of(run)
    best = rs.best_record(trace)
    task = run.summary.get("task") if run.summary else run.config.task.name
    doc = d.Doc(f"evo report: {run.name}" + (f" ({task})" if task else ""))
    doc.add(_status(run), source_banner(trace, best))
    doc.add(d.Hero((
        (_x(trace.best_speedup), f"faster than the seed ({trace.latency_source or 'no latency'})"),
        (str(trace.evaluations), "evaluations (full and quick)"),
        (duration_words(run.wall_time_s), "wall time"),
        (f"${run.llm_usd:.4f}" if "llm" in run.mutator_kinds else "$0",
         "LLM cost" if "llm" in run.mutator_kinds else "LLM cost (no LLM mutator)"))))
    for part in (_best(run, trace, best), _progress(run, trace), _timeline(run), _nodes(run), _migrations(run),
                 _mutators(run, trace), _failures(run), _lineage(run, trace, best)):
        doc.add(*part)
    doc.add(d.Para(f"Run directory: {run.path}"))
    return doc


def write_run_report(path: str | Path) -> tuple[Path, Path]:
    """Write RUN_DIR/report.html and RUN_DIR/report.md (figures in report_files/); returns both paths."""
    run = load_run(path)
    doc = run_report(run)
    html, md = run.path / "report.html", run.path / "report.md"
    d.write(doc, html, md, run.path / "report_files")
    return html, md
