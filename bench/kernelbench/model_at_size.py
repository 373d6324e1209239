"""The latency model at KernelBench's own problem sizes, beside KernelBench's measured H100 times.

    python -m bench.kernelbench.model_at_size [--problems 19,23] [--target h100] [--tune-evals 24]

For every level-1 problem a seed ships for (`evo/kernelbench_seeds/`), on KernelBench's file (the copy in
tests/kernelbench/level1/, which must be the file that was timed: its SHA-256 is checked against
bench/data/kernelbench_h100_times.json, and the measured eager time must not be below what the problem's
bytes and FLOPs take at the GPU's peak rates), it models:

- ``seed``: the shipped seed at its own PARAMS;
- ``tuned``: the seed at the best point of its SPACE the model finds by coordinate descent (each
  parameter's values in turn, from PARAMS, until no change helps; at most ``--tune-evals`` points), then
  checked in full at the CPU check sizes `evo init` picks (a point that fails the check is dropped and
  the next best is checked);
- ``better``: a known-better kernel where one is written (bench/kernelbench/better/NAME.py), checked the
  same way.

and writes one JSON line per problem to bench/data/kernelbench_model_h100.jsonl (`bench.kernelbench.analysis`
reads it). Every modelled figure is an UNVERIFIED ESTIMATE OF AN HONEST KERNEL: it is a calibration figure of
the model, computed here outside every fitness path (`bench.kernelbench.profile_child` says how its run
differs from the model's own), never a verdict on a candidate. The measured figures are KernelBench's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo.contracts.candidate import Candidate, ParamValue
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.gpus import GpuProfile, get_profile
from evo.contracts.kernelbench import KernelBenchTask
from evo.contracts.kernelbench_seeds import SEEDS, shipped_seed
from fitness.latency.counts import KernelResources, LaunchCounts
from fitness.latency.model import sample_seed
from fitness.latency.roofline import DoesNotFit, estimate, fill_seconds
from fitness.sandbox.process import Worker

ROOT = Path(__file__).resolve().parents[2]
LEVEL1 = ROOT / "tests" / "kernelbench" / "level1"
BETTER = Path(__file__).resolve().parent / "better"
TIMES = ROOT / "bench" / "data" / "kernelbench_h100_times.json"
OUT = ROOT / "bench" / "data" / "kernelbench_model_h100.jsonl"
LABEL = "modelled: unverified estimate of an honest kernel (calibration figure, not a verdict)"

FAMILIES = {
    "matmul": (1, 2, 16, 17), "matrix-vector/scalar": (4, 5),
    "elementwise": (19, 20, 21, 22, 25, 26, 27, 28, 29, 30, 31, 32, 88), "softmax": (23, 24),
    "norm": (36, 37, 38, 39, 40), "reduction": (47, 48, 49, 51, 52, 53), "cumulative": (89, 91),
    "loss": (94, 95),
}


def family(name: str) -> str:
    number = _number(name)
    return next((f for f, numbers in FAMILIES.items() if number in numbers), "other")


@dataclass(frozen=True)
class Layout:
    """What ``launch`` receives at the problem's own sizes (found on the meta device: nothing allocated)."""

    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    bytes: int  # every input, parameter and output once
    flops: float  # what torch's FLOP counter counts (matmuls; zero for element-wise work)


def layout(problem: Path, dtype: str = "float32") -> Layout:
    """The candidate's arguments as `evo.contracts.kernelbench` hands them: forward inputs (float ones in
    `dtype`, a number as a 0-d tensor), then ``Model.state_dict()`` tensors, then the outputs."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    task = KernelBenchTask(problem, check_sizes=[], bench_sizes=[{}], dtype=dtype, redraw_params=False)
    ns = task.namespace({})
    with torch.device("meta"):
        model = ns["Model"](*ns["get_init_inputs"]())
        forward = list(ns["get_inputs"]())
        with FlopCounterMode(display=False) as counter:
            out = model(*forward)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]

    def arg(x: Any) -> dict[str, Any]:
        if not isinstance(x, torch.Tensor):
            return {"shape": [], "dtype": dtype if isinstance(x, float) else "int64"}
        kind = dtype if x.is_floating_point() else str(x.dtype).removeprefix("torch.")
        return {"shape": list(x.shape), "dtype": kind}

    inputs = [arg(x) for x in [*forward, *model.state_dict().values()]]
    outputs = [arg(o) for o in outs]
    _, total = task.buffer_sizes({})
    return Layout(inputs, outputs, total, float(counter.get_total_flops()))


class SizeMismatch(Exception):
    """The problem file is not the one KernelBench timed, or its figures contradict the time."""


def measured(problem: Path, lay: Layout, times: dict[str, Any], gpu: GpuProfile) -> dict[str, Any]:
    """KernelBench's measured times for `problem`, after checking that they were measured at its sizes."""
    record = times["problems"].get(problem.name)
    if record is None:
        raise SizeMismatch(f"{problem.name}: no measured time")
    digest = hashlib.sha256(problem.read_bytes()).hexdigest()
    if digest != record["file_sha256"]:
        raise SizeMismatch(f"{problem.name}: the file differs from the one KernelBench timed")
    floor_ms = max(lay.bytes / gpu.dram_peak, lay.flops / gpu.fp32_peak) * 1e3
    if record["eager"]["min"] < floor_ms:
        raise SizeMismatch(f"{problem.name}: measured {record['eager']['min']} ms, below the {floor_ms:.3f} ms "
                           "its bytes and FLOPs take at peak: timed at other sizes")
    return {"eager_ms": record["eager"]["mean"], "compile_ms": record["compile"]["mean"],
            "eager_min_ms": record["eager"]["min"], "compile_min_ms": record["compile"]["min"],
            "hardware": record["hardware"], "floor_ms": floor_ms}


class Modeller:
    """Profiles kernels at a layout in an interpreter child and cross-compiles what ran for the target."""

    def __init__(self, gpu: GpuProfile, settings: EvaluationConfig) -> None:
        self.gpu = gpu
        self.settings = {"inner_samples": settings.profile_samples, "loop_full": settings.profile_full_loop,
                         "full_programs": settings.profile_full_programs,
                         "full_iterations": settings.profile_full_iterations, "sms": gpu.sms,
                         "max_blocks_per_sm": gpu.max_blocks_per_sm, "max_warps_per_sm": gpu.max_warps_per_sm}
        env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
        self.child = subprocess.Popen([sys.executable, "-m", "bench.kernelbench.profile_child"], cwd=ROOT, env=env,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.compiler = Worker(compile_only=True, memory_mb=8192, isolation=True)
        self.compiler.start()
        self._resources: dict[str, KernelResources] = {}

    def _profile(self, kernel: Path, params: dict[str, ParamValue], lay: Layout) -> dict[str, Any]:
        assert self.child.stdin is not None and self.child.stdout is not None
        request = {"kernel": str(kernel), "params": params, "seed": sample_seed(0), "settings": self.settings,
                   "inputs": lay.inputs, "outputs": lay.outputs}
        self.child.stdin.write(json.dumps(request) + "\n")
        self.child.stdin.flush()
        line = self.child.stdout.readline()
        if not line:
            raise RuntimeError(f"the profile child died (exit {self.child.wait()})")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def _compile(self, candidate: Candidate, specs: list[dict[str, Any]]) -> list[KernelResources] | str:
        keys = [f"{candidate.structure}:{json.dumps(s, sort_keys=True)}" for s in specs]
        missing = [s for k, s in zip(keys, specs) if k not in self._resources]
        if missing:
            load = {"op": "load", "source": candidate.source, "params": candidate.params, "name": candidate.id}
            reply = self.compiler.request(load, 300)
            if reply.get("ok"):
                reply = self.compiler.request({"op": "compile", "specs": missing, "arch": self.gpu.arch}, 600)
            if not reply.get("ok"):
                return str(reply.get("message"))
            for s, k in zip(missing, reply["kernels"]):
                self._resources[f"{candidate.structure}:{json.dumps(s, sort_keys=True)}"] = \
                    KernelResources.from_dict(k)
        return [self._resources[k] for k in keys]

    def model(self, kernel: Path, params: dict[str, ParamValue], lay: Layout) -> dict[str, Any]:
        """{"ms": ..., ...} or {"error": ...} for `kernel` at `params`."""
        started = time.monotonic()
        reply = self._profile(kernel, params, lay)
        if not reply.get("ok"):
            return {"error": f"profile: {reply.get('message')}"}
        resources = self._compile(Candidate.from_file(kernel, params), reply["specs"])
        if isinstance(resources, str):
            return {"error": f"compile: {resources}"}
        launches = [LaunchCounts.from_dict(d) for d in reply["launches"]]
        try:
            est = estimate(launches, [resources[c.spec] for c in launches], self.gpu)
        except DoesNotFit as e:
            return {"error": f"does not fit: {e}"}
        ms = (est.seconds + fill_seconds([int(b) for b in reply["fills"]], self.gpu)) * 1e3
        return {"ms": ms, "dram_bytes": round(est.dram_bytes), "launches": len(launches),
                "bound": sorted({str(e.bound) for e in est.launches}),
                "unmodelled": reply["unmodelled"], "model_s": round(time.monotonic() - started, 2)}

    def close(self) -> None:
        if self.child.stdin is not None:
            self.child.stdin.close()
        self.child.wait(timeout=60)
        self.compiler.close()


def tune(modeller: Modeller, kernel: Path, lay: Layout, max_evals: int) -> list[tuple[float, dict[str, ParamValue]]]:
    """Points of the kernel's SPACE the model timed, fastest first: a coordinate descent from PARAMS."""
    candidate = Candidate.from_file(kernel)
    space, current = candidate.space(), dict(candidate.params)
    timed: dict[str, float] = {}

    def time_of(params: dict[str, ParamValue]) -> float:
        key = json.dumps(params, sort_keys=True)
        if key not in timed and len(timed) < max_evals:
            timed[key] = modeller.model(kernel, params, lay).get("ms", float("inf"))
        return timed.get(key, float("inf"))

    best = time_of(current)
    changed = True
    while changed and len(timed) < max_evals:
        changed = False
        for name, values in space.items():
            for value in values:
                trial = {**current, name: value}
                t = time_of(trial)
                if t < best:
                    best, current, changed = t, trial, True
    return sorted(((t, json.loads(k)) for k, t in timed.items() if t != float("inf")), key=lambda tp: tp[0])


def check(problem: Path, source: str, params: dict[str, ParamValue]) -> str | None:
    """None if the kernel passes the full equivalence check at the CPU sizes `evo init` picks, else why not."""
    from evo.app.kernelbench_sizes import kernelbench_sizes
    from fitness.evaluate import Evaluator

    sizes = kernelbench_sizes(problem, "cpu")
    task = KernelBenchTask(problem, check_sizes=sizes["check"], bench_sizes=sizes["bench"], dtype="float32",
                           redraw_params=True)
    settings = EvaluationConfig(timeout_s=300, latency=LatencyMode.OFF)
    with Evaluator(task, settings, device="cpu") as ev:
        verdict = ev.evaluate(Candidate.from_source(source, params), level="full")
    return None if verdict.ok else f"{verdict.status.value}: {verdict.reason}"


def problem_row(modeller: Modeller, problem: Path, times: dict[str, Any], max_evals: int) -> dict[str, Any]:
    seed = shipped_seed(problem)
    assert seed is not None
    lay = layout(problem)
    row: dict[str, Any] = {"problem": problem.name, "family": family(problem.name), "bytes": lay.bytes,
                           "flops": lay.flops, "gpu": modeller.gpu.name, "label": LABEL}
    try:
        row["measured"] = measured(problem, lay, times, modeller.gpu)
    except SizeMismatch as e:
        row["left_out"] = str(e)
        return row
    row["sol_ms"] = row["measured"]["floor_ms"]  # the least time the bytes and FLOPs take at peak
    seed_params = dict(Candidate.from_file(seed).params)
    row["seed"] = {"params": seed_params, **modeller.model(seed, seed_params, lay)}
    tried = tune(modeller, seed, lay, max_evals)
    row["tune_points"] = len(tried)
    for ms, params in tried:
        why = check(problem, seed.read_text(), params)
        if why is None:
            row["tuned"] = {"params": params, **modeller.model(seed, params, lay), "checked": True}
            break
        row.setdefault("tuned_refused", []).append({"params": params, "ms": ms, "why": why[:300]})
    better = BETTER / problem.name
    if better.is_file():
        params = dict(Candidate.from_file(better).params)
        why = check(problem, better.read_text(), params)
        row["better"] = ({"params": params, **modeller.model(better, params, lay), "checked": True} if why is None
                         else {"error": f"fails the check: {why[:300]}"})
    return row


def read_rows(path: Path) -> dict[str, dict[str, Any]]:
    """The data file's rows by problem file name."""
    return {json.loads(line)["problem"]: json.loads(line) for line in path.read_text().splitlines() if line}


def write_rows(path: Path, rows: dict[str, dict[str, Any]]) -> None:
    """The rows, one JSON line each, in problem-number order (rewritten after each problem: nothing lost on
    a crash)."""
    path.write_text("".join(json.dumps(r) + "\n" for _, r in sorted(rows.items(), key=lambda kv: _number(kv[0]))))


def _number(name: str) -> int:
    return int(name.split("_")[0])


def shipped_problems(wanted: set[int]) -> list[Path]:
    """KernelBench's files of the problems a seed ships for, by number; only those in `wanted` if any."""
    names = sorted((s.name for s in SEEDS.glob("*.py")), key=_number)
    return [LEVEL1 / n for n in names if not wanted or _number(n) in wanted]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default="", help="problem numbers, comma-separated (default: every shipped seed's)")
    ap.add_argument("--target", default="h100")
    ap.add_argument("--tune-evals", type=int, default=24)
    ap.add_argument("--output", type=Path, default=OUT)
    args = ap.parse_args(argv)
    wanted = {int(n) for n in args.problems.split(",") if n}
    problems = shipped_problems(wanted)
    times = json.loads(TIMES.read_text())
    gpu = get_profile(args.target)
    modeller = Modeller(gpu, EvaluationConfig())
    rows = read_rows(args.output) if args.output.exists() else {}  # a partial run keeps the others' rows
    try:
        for i, problem in enumerate(problems, 1):
            started = time.monotonic()
            row = problem_row(modeller, problem, times, args.tune_evals)
            rows[problem.name] = row
            write_rows(args.output, rows)
            eager = row.get("measured", {}).get("eager_ms")
            figures = "  ".join(f"{k} {row[k]['ms']:.3f} ms" if "ms" in row.get(k, {}) else
                                f"{k} {row[k].get('error', '-')[:60]}" for k in ("seed", "tuned", "better") if k in row)
            print(f"[{i}/{len(problems)}] {problem.stem:38s} eager {eager} ms  {figures}  "
                  f"({time.monotonic() - started:.0f} s)", flush=True)
    finally:
        modeller.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
