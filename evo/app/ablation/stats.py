"""The ablation's results per variant: medians and interquartile ranges over seeds, the cost of
reaching 90% and 100% of the best speedup any variant found, the share of each mutator in the
improvements, and a Mann-Whitney U test of each variant's best speedups against the baseline's.

A run that never reached a level counts as infinitely late (so a median is finite only when at
least half the seeds got there); it is written `inf` in the CSV and `never` in Markdown.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evo.app.report.trace import Trace
from fitness.latency.model_version import UNRECORDED

LEVELS = (0.9, 1.0)  # fractions of the best speedup found by any variant


@dataclass(frozen=True)
class Spread:
    """Median and quartiles of a sample (inf allowed: not reached); NaN when the sample is empty."""

    median: float
    q1: float
    q3: float
    n: int
    reached: int  # finite values (the rest: never reached)

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        finite = [v for v in values if math.isfinite(v)]
        if not values or any(math.isnan(v) for v in values):  # unknown (e.g. dollars not recorded)
            return cls(math.nan, math.nan, math.nan, len(values), len(finite))
        big = (max(finite) if finite else 0.0) * 10 + 1e6  # stands for inf inside the interpolation
        arr = np.array([v if math.isfinite(v) else big for v in values], dtype=float)
        top = max(finite) if finite else -math.inf

        def back(x: float) -> float:
            return math.inf if x > top * (1 + 1e-12) + 1e-12 else float(x)

        q1, med, q3 = (back(float(np.percentile(arr, q))) for q in (25, 50, 75))
        return cls(med, q1, q3, len(values), len(finite))

    def text(self, fmt: str = "{:.2f}") -> str:
        if self.n == 0 or math.isnan(self.median):
            return "-"

        def one(x: float) -> str:
            return "never" if math.isinf(x) else fmt.format(x)

        if self.reached == 0:
            return f"never (0/{self.n})"
        if math.isinf(self.median):
            return f"never ({self.reached}/{self.n} reached)"
        text = f"{one(self.median)} [{one(self.q1)}-{one(self.q3)}]"
        return text if self.reached == self.n else f"{text} ({self.reached}/{self.n} reached)"


@dataclass(frozen=True)
class VariantResult:
    variant: str
    seeds: tuple[int, ...]  # runs counted (finished, with a timed seed)
    best: Spread  # best speedup over the seed
    evals_to: dict[float, Spread]  # level -> evaluations to reach level * overall best
    time_to: dict[float, Spread]  # seconds
    usd_to: dict[float, Spread]  # LLM dollars (NaN-free only when recorded)
    reached_target: int
    shares: dict[str, float]  # mutator -> share of the log-speedup gained, pooled over seeds
    uses_llm: bool
    mwu_p: float | None  # two-sided Mann-Whitney U p-value of best speedups vs the baseline
    superiority: float | None  # P(this variant's best > the baseline's), ties half


@dataclass(frozen=True)
class AblationResults:
    variants: list[VariantResult]
    baseline: str
    overall_best: float | None
    target: float | None
    target_given: bool  # False: the target is 90% of the overall best
    latency_source: str
    model_versions: tuple[str, ...] = ()  # the latency model versions of modelled runs ("" = not recorded)

    @property
    def mixed_models(self) -> bool:
        """Whether modelled runs come from more than one model version (their speedups do not compare)."""
        return len(self.model_versions) > 1


def _pooled_shares(traces: Sequence[Trace]) -> dict[str, float]:
    gains: dict[str, float] = {}
    for t in traces:
        for s in t.steps:
            gains[s.mutator] = gains.get(s.mutator, 0.0) + s.gain
    total = sum(gains.values())
    return {m: g / total for m, g in sorted(gains.items())} if total > 0 else {}


def _mwu(x: Sequence[float], y: Sequence[float]) -> tuple[float | None, float | None]:
    if len(x) < 2 or len(y) < 2:
        return None, None
    from scipy.stats import mannwhitneyu

    res = mannwhitneyu(x, y, alternative="two-sided")
    p = float(res.pvalue)
    return (p if math.isfinite(p) else 1.0), float(res.statistic) / (len(x) * len(y))


def analyse(traces: Mapping[str, Sequence[tuple[int, Trace]]], *, baseline: str,
            target_speedup: float | None, uses_llm: Mapping[str, bool] | None = None) -> AblationResults:
    """Results of every variant from its runs' traces (variant -> [(seed, trace)]); `uses_llm`
    says which variants have an LLM mutator (default: as their runs' configs say)."""
    timed = {v: [(s, t) for s, t in runs if t.best_speedup is not None] for v, runs in traces.items()}
    bests = [t.best_speedup for runs in timed.values() for _, t in runs if t.best_speedup is not None]
    overall = max(bests) if bests else None
    target = target_speedup if target_speedup is not None else (0.9 * overall if overall else None)
    sources = {t.latency_source for runs in timed.values() for _, t in runs}
    base_best = [t.best_speedup or 0.0 for _, t in timed.get(baseline, [])]
    out = []
    for variant, runs in timed.items():
        ts = [t for _, t in runs]
        best = [t.best_speedup or 0.0 for t in ts]
        evals, secs, usd = {}, {}, {}
        for level in LEVELS:
            hits = [t.first_reaching(level * overall) if overall else None for t in ts]
            evals[level] = Spread.of([float(h.index) if h else math.inf for h in hits])
            secs[level] = Spread.of([h.elapsed_s if h else math.inf for h in hits])
            usd[level] = Spread.of([(h.usd if h.usd is not None else math.nan) if h else math.inf for h in hits])
        reached = sum(1 for b in best if target is not None and b >= target * (1 - 1e-12))
        p, sup = (None, None) if variant == baseline else _mwu(best, base_best)
        llm = uses_llm[variant] if uses_llm and variant in uses_llm else any(
            "llm" in t.run.mutator_kinds for _, t in traces[variant])
        out.append(VariantResult(variant, tuple(s for s, _ in runs), Spread.of(best), evals, secs, usd, reached,
                                 _pooled_shares(ts), llm, p, sup))
    versions = tuple(sorted({t.model_version for runs in timed.values() for _, t in runs
                             if t.latency_source == "model"}))
    return AblationResults(out, baseline, overall, target, target_speedup is not None, ",".join(sorted(sources)),
                           versions)


def version_words(versions: Sequence[str]) -> str:
    """Model versions for a reader: "version 1be2e1d12ff4", "versions a, b", "" when none."""
    names = [v or UNRECORDED for v in versions]
    if not names:
        return ""
    return f"version{'s' if len(names) > 1 else ''} " + ", ".join(names)


def mutators_of(results: AblationResults) -> list[str]:
    found = {m for v in results.variants for m in v.shares}
    order = ["llm", "stoke", "optuna", "initial"]
    return [m for m in order if m in found] + sorted(found - set(order))


def _num(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return "inf" if math.isinf(x) else f"{x:.6g}"


def to_csv(results: AblationResults) -> str:
    mutators = mutators_of(results)
    head = ["variant", "runs", "seeds"] + [f"best_speedup_{q}" for q in ("median", "q1", "q3")]
    for what in ("evals", "time_s", "usd"):
        for level in LEVELS:
            head += [f"{what}_to_{round(level * 100)}pct_{q}" for q in ("median", "q1", "q3")]
    head += ["reached_target", "target_speedup", *[f"share_{m}" for m in mutators], "baseline", "mannwhitney_p",
             "p_superiority"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(head)
    for v in results.variants:
        row: list[str] = [v.variant, str(len(v.seeds)), " ".join(map(str, v.seeds))]
        row += [_num(v.best.median), _num(v.best.q1), _num(v.best.q3)]
        for table in (v.evals_to, v.time_to, v.usd_to):
            for level in LEVELS:
                sp = table[level]
                row += [_num(sp.median), _num(sp.q1), _num(sp.q3)]
        row += [str(v.reached_target), _num(results.target), *[_num(v.shares.get(m, 0.0)) for m in mutators],
                results.baseline, _num(v.mwu_p), _num(v.superiority)]
        w.writerow(row)
    return buf.getvalue()


def markdown_tables(results: AblationResults) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
    """The two tables (outcome; effort to reach the best) as headers and rows of text cells."""
    best = results.overall_best
    target = f"{results.target:.2f}x" if results.target else "-"
    head1 = ["variant", "runs", "best speedup", f"reached {target}", "share of improvements",
             f"vs {results.baseline}: p (MWU)", "P(better)"]
    rows1 = []
    for v in results.variants:
        shares = ", ".join(f"{m} {s:.0%}" for m, s in sorted(v.shares.items(), key=lambda kv: -kv[1])) or "none"
        p = "baseline" if v.variant == results.baseline else ("-" if v.mwu_p is None else f"{v.mwu_p:.3g}")
        sup = "" if v.superiority is None else f"{v.superiority:.2f}"
        rows1.append([v.variant, str(len(v.seeds)), v.best.text("{:.3f}x"), f"{v.reached_target}/{len(v.seeds)}",
                      shares, p, sup])
    head2 = ["variant"]
    for level in LEVELS:
        pct = f"{round(level * 100)}%"
        head2 += [f"evals to {pct}", f"time to {pct}", f"$ to {pct}"]
    rows2 = []
    for v in results.variants:
        row = [v.variant]
        for level in LEVELS:
            usd = v.usd_to[level].text("${:.4f}") if v.uses_llm else "no LLM"
            row += [v.evals_to[level].text("{:.0f}"), v.time_to[level].text("{:.0f} s"), usd]
        rows2.append(row)
    if best is None:
        head2, rows2 = [], []
    return head1, rows1, head2, rows2


def md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cell(x: str) -> str:
        return x.replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, head)) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(map(cell, r)) + " |" for r in rows]
    return "\n".join(lines)
