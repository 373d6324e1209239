"""What the model's figures at KernelBench's sizes say about the model: per family and overall, the ratio of
the modelled time of an efficient kernel to KernelBench's measured PyTorch eager time, the Spearman rank
correlation across problems, the problems the model gets implausibly fast or more than 2x off, and the
table users can check.

    python -m bench.kernelbench.analysis [--data bench/data/kernelbench_model_h100.jsonl] [--markdown PATH]

The efficient kernel of a problem is its known-better kernel where one is written, else the tuned seed
(`bench.kernelbench.model_at_size`). A third of the problems is held out (chosen by a hash of the file
name): no change to the model or its GPU profile may be tuned on them, and their figures are reported apart.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench.kernelbench.model_at_size import OUT
from evo.contracts.gpus import get_profile

OFF_BY = 2.0  # a modelled time more than this factor from the measured eager time is a miss to explain


def held_out(problem: str) -> bool:
    return int(hashlib.sha256(problem.encode()).hexdigest(), 16) % 3 == 0


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def efficient(row: dict[str, Any]) -> tuple[str, float] | None:
    """(which kernel, its modelled ms): the known-better kernel where one passed, else the tuned seed."""
    for kind in ("better", "tuned"):
        if "ms" in row.get(kind, {}):
            return kind, float(row[kind]["ms"])
    return None


def ranks(values: list[float]) -> np.ndarray:
    """Ranks with ties averaged."""
    a = np.asarray(values, dtype=float)
    order = a.argsort(kind="stable")
    r = np.empty(len(a))
    r[order] = np.arange(1, len(a) + 1)
    for v in np.unique(a):
        tied = a == v
        r[tied] = r[tied].mean()
    return r


def spearman(x: list[float], y: list[float]) -> float:
    if len(x) < 3:
        return float("nan")
    return float(np.corrcoef(ranks(x), ranks(y))[0, 1])


def best_measured(row: dict[str, Any]) -> float:
    """The faster of PyTorch eager and torch.compile, measured: where eager runs several unfused kernels
    (MinGPT's GELU: eight passes over memory), torch.compile's fused kernel is the nearer figure for an
    efficient kernel."""
    return min(float(row["measured"]["eager_ms"]), float(row["measured"]["compile_ms"]))


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Ratios (median, min, max) and Spearman of the efficient kernels' modelled times against eager and
    against the best measured PyTorch time."""
    timed = [r for r in rows if "measured" in r and efficient(r) is not None]
    if not timed:
        return {"problems": 0}
    modelled = [efficient(r)[1] for r in timed]  # type: ignore[index]
    eager = [float(r["measured"]["eager_ms"]) for r in timed]
    best = [best_measured(r) for r in timed]
    to_eager = [m / e for m, e in zip(modelled, eager)]
    to_best = [m / b for m, b in zip(modelled, best)]
    return {"problems": len(timed),
            "eager_median": statistics.median(to_eager), "eager_min": min(to_eager), "eager_max": max(to_eager),
            "eager_within_2x": sum(1 / OFF_BY <= x <= OFF_BY for x in to_eager),
            "best_median": statistics.median(to_best), "best_min": min(to_best), "best_max": max(to_best),
            "best_within_2x": sum(1 / OFF_BY <= x <= OFF_BY for x in to_best),
            "spearman_eager": spearman(modelled, eager),
            "spearman_compile": spearman(modelled, [float(r["measured"]["compile_ms"]) for r in timed]),
            "spearman_best": spearman(modelled, best)}


def flags(rows: list[dict[str, Any]]) -> list[str]:
    """Problems where the model claims more than the bytes allow at the achievable bandwidth, or is more than
    `OFF_BY` from the measured eager time."""
    out = []
    for r in rows:
        best = efficient(r)
        if "measured" not in r or best is None:
            continue
        gpu = get_profile(r["gpu"])
        floor = r["bytes"] / gpu.dram_achievable * 1e3
        kind, ms = best
        eager = r["measured"]["eager_ms"]
        if ms < floor * 0.999:
            out.append(f"{r['problem']}: {kind} modelled {ms:.3f} ms, below the {floor:.3f} ms its bytes take at the "
                       "achievable bandwidth")
        if not 1 / OFF_BY <= ms / eager <= OFF_BY:
            out.append(f"{r['problem']}: {kind} modelled {ms:.3f} ms, {ms / eager:.2f}x the measured eager {eager} ms "
                       f"({ms / best_measured(r):.2f}x the best measured, {best_measured(r)} ms)")
    return out


def _tuned_ms(row: dict[str, Any]) -> float:
    return float(row.get("tuned", {}).get("ms", float("inf")))


def _efficient_ms(row: dict[str, Any]) -> float:
    best = efficient(row)
    return best[1] if best else float("inf")


def _ms(row: dict[str, Any], kind: str) -> str:
    entry = row.get(kind)
    if not entry:
        return ""
    return f"{entry['ms']:.3f}" if "ms" in entry else "failed"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| problem | family | eager ms (measured) | torch.compile ms (measured) | seed ms (modelled) | "
        "tuned seed ms (modelled) | short CPU campaign's best ms (modelled) | known-better ms (modelled) | "
        "speedup over eager (modelled / measured) | held out |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|:-:|",
    ]
    for r in rows:
        if "measured" not in r:
            lines.append(f"| {r['problem'].removesuffix('.py')} | {r['family']} | left out: {r['left_out']} |||||||")
            continue
        best = efficient(r)
        speedup = f"{r['measured']['eager_ms'] / best[1]:.2f}x" if best else ""
        lines.append(f"| {r['problem'].removesuffix('.py')} | {r['family']} | {r['measured']['eager_ms']} | "
                     f"{r['measured']['compile_ms']} | {_ms(r, 'seed')} | {_ms(r, 'tuned')} | {_ms(r, 'campaign')} | "
                     f"{_ms(r, 'better')} | "
                     f"{speedup} | {'yes' if held_out(r['problem']) else ''} |")
    return "\n".join(lines)


def report(rows: list[dict[str, Any]]) -> str:
    timed = [r for r in rows if "measured" in r]
    out = ["Modelled figures are the latency model's UNVERIFIED ESTIMATES of honest kernels on the "
           f"{rows[0]['gpu'] if rows else '?'} profile; measured figures are KernelBench's (H100 80GB HBM3, "
           "PyTorch 2.5.0, mean of 100 trials).", ""]
    out.append("| part | problems | modelled / eager: median [min, max] | within 2x | modelled / best measured: "
               "median [min, max] | within 2x | Spearman vs eager | vs torch.compile | vs best measured |")
    out.append("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    parts: list[tuple[str, list[dict[str, Any]]]] = [("all", timed)]
    families = dict.fromkeys(r["family"] for r in timed)
    parts += [(f"family: {f}", [r for r in timed if r["family"] == f]) for f in families]
    parts += [("tuned-on two thirds", [r for r in timed if not held_out(r["problem"])]),
              ("held-out third", [r for r in timed if held_out(r["problem"])])]
    for name, part in parts:
        s = summary(part)
        if not s["problems"]:
            continue
        out.append(f"| {name} | {s['problems']} | {s['eager_median']:.2f} [{s['eager_min']:.2f}, "
                   f"{s['eager_max']:.2f}] | "
                   f"{s['eager_within_2x']} | {s['best_median']:.2f} [{s['best_min']:.2f}, {s['best_max']:.2f}] | "
                   f"{s['best_within_2x']} | {s['spearman_eager']:.3f} | {s['spearman_compile']:.3f} | "
                   f"{s['spearman_best']:.3f} |")
    out.append("")
    campaigns = [r for r in timed if "ms" in r.get("campaign", {})]
    if campaigns:
        eager = sum(1 for r in campaigns if r["campaign"]["ms"] < r["measured"]["eager_ms"])
        compiled = sum(1 for r in campaigns if r["campaign"]["ms"] < r["measured"]["compile_ms"])
        slower = sum(1 for r in campaigns if r["campaign"]["ms"] > r["seed"].get("ms", float("inf")) * 1.001)
        out.append(f"The short CPU campaigns' best kernels ({len(campaigns)} problems) are modelled faster than "
                   f"PyTorch eager (measured) on {eager} and than torch.compile (measured) on {compiled}; on {slower} "
                   "of them the campaign's best is modelled slower at KernelBench's size than the seed it started "
                   "from (its parameters were chosen at the CPU bench size, at most 65536 input values).")
    for what, ms_of in (("The search's kernel (the tuned seed)", _tuned_ms),
                        ("The efficient kernel (known-better where written, else the tuned seed)", _efficient_ms)):
        eager = sum(1 for r in timed if ms_of(r) < r["measured"]["eager_ms"])
        compiled = sum(1 for r in timed if ms_of(r) < r["measured"]["compile_ms"])
        out.append(f"{what} is modelled faster than PyTorch eager (measured) on {eager} of {len(timed)} problems, "
                   f"and faster than torch.compile (measured) on {compiled} of {len(timed)}.")
    out.append("")
    found = flags(timed)
    if found:
        out += ["Misses to explain:", *[f"- {f}" for f in found], ""]
    out += [table(rows), ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=OUT)
    ap.add_argument("--markdown", type=Path, default=None, help="also write the report here")
    args = ap.parse_args(argv)
    text = report(load(args.data))
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
