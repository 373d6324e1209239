"""Figures as PNG bytes (matplotlib, Agg backend: no display needed), for reports and ablations."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evo.app.report.trace import INITIAL, Trace

MUTATOR_COLORS = {"llm": "#7b3294", "stoke": "#d95f02", "optuna": "#1b9e77", INITIAL: "#8c8c8c"}
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
STYLES = ("-", "--", "-.", ":")
GRID_POINTS = 240


def _figure(width: float = 8.0, height: float = 4.5) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width, height), dpi=110)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def mutator_color(name: str, i: int = 0) -> str:
    return MUTATOR_COLORS.get(name.split("-")[0], PALETTE[i % len(PALETTE)])


def _medians(curves: Mapping[str, Sequence[Trace]], xs: Any, by: str) -> dict[str, tuple[Any, Any, Any, int]]:
    """Per variant: the median, first and third quartile of its runs' best so far on `xs`, and n."""
    timed = [t for ts in curves.values() for t in ts if t.start is not None]
    first = min((t.start_x(by) for t in timed), default=0.0)
    out = {}
    for variant, traces in curves.items():
        rows = np.array([t.best_at(list(xs), by=by) for t in traces if t.start is not None], dtype=float)
        if rows.size == 0:
            continue
        rows[:, xs < first] = np.nan  # nothing to show before any seed was evaluated
        last = max(t.evaluations if by == "evaluations" else t.wall_time_s for t in traces)
        rows[:, xs > last] = np.nan  # the line ends where the variant's longest run ended
        ok = ~np.all(np.isnan(rows), axis=0)
        med = np.full(len(xs), np.nan)
        lo, hi = med.copy(), med.copy()
        med[ok] = np.nanmedian(rows[:, ok], axis=0)
        lo[ok], hi[ok] = np.nanpercentile(rows[:, ok], [25, 75], axis=0)
        out[variant] = (med, lo, hi, len(rows))
    return out


def _levels(ax: Any, levels: Sequence[float], labels: bool = True) -> None:
    for level in levels:
        ax.axhline(level, color="black", lw=0.8, ls=":", alpha=0.7)
        if labels:
            ax.annotate(f"{level:.2f}x", (0.01, level), xycoords=ax.get_yaxis_transform(), fontsize=8, ha="left",
                        va="bottom", color="#333333")


def anytime(curves: Mapping[str, Sequence[Trace]], *, by: str, levels: Sequence[float] = (),
            source: str = "", panels_from: int = 4) -> bytes:
    """Best-so-far speedup of each variant (median over its runs, interquartile band) against
    evaluations (`by="evaluations"`) or wall time (`by="time"`); dotted lines at `levels`. With
    `panels_from` variants or more: all medians in one panel, then one small panel per variant
    (its band, the others' medians in grey), so overlapping curves stay readable."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ends = [t.evaluations if by == "evaluations" else t.wall_time_s for ts in curves.values() for t in ts]
    xs = np.linspace(0.0, max(ends, default=1.0) or 1.0, GRID_POINTS)
    stats = _medians(curves, xs, by)
    colors = {v: PALETTE[i % len(PALETTE)] for i, v in enumerate(curves)}
    xlabel = "evaluations" if by == "evaluations" else "wall time (s)"
    ylabel = f"best speedup over the seed{f' ({source})' if source else ''}"
    small = len(stats) >= panels_from
    cols = 4
    rows = (len(stats) + cols - 1) // cols if small else 0
    fig = plt.figure(figsize=(12.0 if small else 9.0, 5.0 + 2.6 * rows), dpi=110)
    grid = fig.add_gridspec(1 + rows, cols, height_ratios=[2.2] + [1.0] * rows)
    ax = fig.add_subplot(grid[0, :])
    ax.grid(True, alpha=0.3)
    for variant, (med, lo, hi, n) in stats.items():
        ax.plot(xs, med, color=colors[variant], lw=2, label=f"{variant} (n={n})", drawstyle="steps-post")
        if not small:
            ax.fill_between(xs, lo, hi, color=colors[variant], alpha=0.15, step="post", linewidth=0)
    _levels(ax, levels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title("Best so far: median over seeds" + (" (below: each variant with its interquartile band)" if small
                                                      else ", band = interquartile range"))
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    for k, (variant, (med, lo, hi, n)) in enumerate(stats.items() if small else ()):
        sub = fig.add_subplot(grid[1 + k // cols, k % cols], sharex=ax, sharey=ax)
        sub.grid(True, alpha=0.3)
        for other, (m2, _, _, _) in stats.items():
            if other != variant:
                sub.plot(xs, m2, color="#c8c8c8", lw=1, drawstyle="steps-post")
        sub.fill_between(xs, lo, hi, color=colors[variant], alpha=0.25, step="post", linewidth=0)
        sub.plot(xs, med, color=colors[variant], lw=2, drawstyle="steps-post")
        _levels(sub, levels, labels=False)
        sub.set_title(f"{variant} (n={n})", fontsize=9)
        sub.tick_params(labelsize=7)
        sub.label_outer()
    return _png(fig)


def contributions(shares: Mapping[str, Mapping[str, float]]) -> bytes:
    """A stacked horizontal bar per variant: each mutator's share of the improvements."""
    variants = list(shares)
    names: list[str] = []
    for s in shares.values():
        names += [m for m in s if m not in names]
    order = [m for m in ("llm", "stoke", "optuna", INITIAL) if m in names] + sorted(set(names) - set(MUTATOR_COLORS))
    fig, ax = _figure(9.0, 0.45 * len(variants) + 1.6)
    left = np.zeros(len(variants))
    for j, m in enumerate(order):
        vals = np.array([shares[v].get(m, 0.0) for v in variants])
        ax.barh(variants, vals, left=left, color=mutator_color(m, j), label=m, edgecolor="white")
        for k, (x0, w) in enumerate(zip(left, vals)):
            if w >= 0.08:
                ax.text(x0 + w / 2, k, f"{w:.0%}", ha="center", va="center", color="white", fontsize=8)
        left += vals
    for k, v in enumerate(variants):
        if not shares[v]:
            ax.text(0.01, k, "no improvement over the seed", va="center", fontsize=8, color="#555555")
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel("share of the log-speedup gained (pooled over seeds)")
    ax.set_title("Who made the improvements")
    if order:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    return _png(fig)


def islands(curves: Mapping[int, Sequence[tuple[int, float]]], *, migrations: Sequence[int] = (),
            source: str = "") -> bytes:
    """Best-so-far speedup of each island against generations; dotted lines at migrations."""
    fig, ax = _figure()
    for i, (island, pts) in enumerate(sorted(curves.items())):
        if pts:
            ax.plot([g for g, _ in pts], [s for _, s in pts], marker="o", ms=3, lw=1.8,
                    color=PALETTE[i % len(PALETTE)], label=f"island {island}", drawstyle="steps-post")
    for g in migrations:
        ax.axvline(g, color="#555555", lw=0.8, ls=":")
    if migrations:
        ax.plot([], [], color="#555555", lw=0.8, ls=":", label="migration")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("generation")
    ax.set_ylabel(f"best speedup over the seed{f' ({source})' if source else ''}")
    ax.set_title("Best so far per island (migrants included)")
    ax.legend(fontsize=8, frameon=False)
    return _png(fig)


def steps(trace: Trace) -> bytes:
    """The run's best-so-far against evaluations, each improvement marked by the mutator that made it."""
    fig, ax = _figure()
    if trace.start is not None:
        xs = [trace.start.index] + [s.record.index for s in trace.steps] + [trace.evaluations]
        ys = [1.0] + [s.speedup for s in trace.steps]
        ys.append(ys[-1])
        ax.plot(xs, ys, color="#333333", lw=1.5, drawstyle="steps-post", label="best so far")
        seen: set[str] = set()
        for i, s in enumerate(trace.steps):
            label = s.mutator if s.mutator not in seen else None
            seen.add(s.mutator)
            ax.scatter([s.record.index], [s.speedup], color=mutator_color(s.mutator, i), s=40, zorder=3, label=label)
        ax.legend(fontsize=8, frameon=False, loc="lower right")
    else:
        ax.text(0.5, 0.5, "no timed seed: no speedups to plot", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("evaluations")
    ax.set_ylabel(f"best speedup over the seed{f' ({trace.latency_source})' if trace.latency_source else ''}")
    ax.set_title("Best so far, each improvement coloured by its mutator")
    if trace.start is not None and not math.isnan(trace.best_speedup or math.nan):
        ax.set_ylim(bottom=min(0.95, ax.get_ylim()[0]))
    return _png(fig)
