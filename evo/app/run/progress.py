"""Campaign progress: a live `rich` table on a terminal, plain log lines otherwise (`ray job logs`)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import IO, Protocol

from rich.console import Console
from rich.live import Live
from rich.table import Table


@dataclass
class IslandRow:
    index: int
    generation: int = 0
    population: int = 0
    best_latency_ms: float | None = None
    best_speedup: float | None = None
    evaluations: int = 0  # evaluations this island ran (full and inner)
    failures: dict[str, int] = field(default_factory=dict)
    restored: int = 0


@dataclass(frozen=True)
class Totals:
    evaluations: int
    failures: dict[str, int]
    cache_hits: int
    llm_usd: float
    elapsed_s: float
    best_latency_ms: float | None
    best_speedup: float | None
    latency_source: str
    evaluators: int
    replaced: int
    busy_fraction: float | None = None  # the evaluators' (`EvaluationStats.busy_fraction`)


def duration_words(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def _latency(ms: float | None, source: str) -> str:
    return "-" if ms is None else f"{ms:.4g} ms" + (f" ({source})" if source else "")


def _speedup(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _failures(f: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(f.items())) or "none"


class Display(Protocol):
    def update(self, row: IslandRow, rows: list[IslandRow], totals: Totals) -> None: ...

    def message(self, text: str) -> None: ...

    def close(self) -> None: ...


class PlainLog:
    """One line per island generation, flushed at once (log collectors see it live)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def update(self, row: IslandRow, rows: list[IslandRow], totals: Totals) -> None:
        print(
            f"[{totals.elapsed_s:8.1f}s] island {row.index} gen {row.generation}: pop {row.population}, "
            f"best {_latency(row.best_latency_ms, totals.latency_source)} "
            f"({_speedup(row.best_speedup)} the seed), evals {row.evaluations}, "
            f"failures {_failures(row.failures)} | all: evals {totals.evaluations}, "
            f"best {_speedup(totals.best_speedup)}, llm ${totals.llm_usd:.2f}",
            file=self.stream, flush=True,
        )

    def message(self, text: str) -> None:
        print(f"evo: {text}", file=self.stream, flush=True)

    def close(self) -> None:
        self.stream.flush()


class LiveTable:
    """A table redrawn in place: one row per island, totals in the caption."""

    def __init__(self, stream: IO[str]) -> None:
        self.console = Console(file=stream)
        self.live = Live(console=self.console, auto_refresh=False, transient=False)
        self.live.start()

    def update(self, row: IslandRow, rows: list[IslandRow], totals: Totals) -> None:
        table = Table(title="evo campaign", caption=(
            f"{totals.elapsed_s:.0f} s | evaluations {totals.evaluations} (cache hits {totals.cache_hits}) | "
            f"failures {_failures(totals.failures)} | best {_latency(totals.best_latency_ms, totals.latency_source)}"
            f" = {_speedup(totals.best_speedup)} the seed | LLM ${totals.llm_usd:.2f} | "
            f"evaluators {totals.evaluators} (replaced {totals.replaced})"))
        for name in ("island", "gen", "pop", "best latency", "speedup", "evals", "failures", "restored"):
            table.add_column(name, justify="left" if name == "failures" else "right")
        for r in rows:
            table.add_row(str(r.index), str(r.generation), str(r.population),
                          _latency(r.best_latency_ms, ""), _speedup(r.best_speedup), str(r.evaluations),
                          _failures(r.failures), str(r.restored))
        self.live.update(table, refresh=True)

    def message(self, text: str) -> None:
        self.console.print(f"evo: {text}")

    def close(self) -> None:
        self.live.stop()


def make_display(stream: IO[str] | None = None) -> Display:
    stream = stream or sys.stdout
    return LiveTable(stream) if stream.isatty() else PlainLog(stream)
