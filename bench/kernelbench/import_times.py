"""Copy KernelBench's measured H100 times of the level-1 problems this project ships seeds for into
`bench/data/kernelbench_h100_times.json`, with their source named.

    python -m bench.kernelbench.import_times GIT_DIR [--commit 1f8d20f]

GIT_DIR is a clone (or bare mirror) of https://github.com/ScalingIntelligence/KernelBench. The times are
its ``results/timing/H100_Modal/`` files at the commit that added them (PyTorch 2.5.0+cu124, CUDA 12.4,
3 warm-ups and 100 trials, wall clock, milliseconds). Each problem's record carries the SHA-256 of the
problem file at that commit, so that `bench.kernelbench.model_at_size` models only a problem whose file
(and so whose sizes) is the one that was timed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from evo.contracts.kernelbench_seeds import SEEDS

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench" / "data" / "kernelbench_h100_times.json"
TIMING = "results/timing/H100_Modal"
FILES = {"eager": "baseline_time_torch.json", "compile": "baseline_time_torch_compile_inductor_default.json"}


def _show(git_dir: str, commit: str, path: str) -> bytes:
    return subprocess.run(["git", "-C", git_dir, "show", f"{commit}:{path}"], capture_output=True,
                          check=True).stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("git_dir")
    ap.add_argument("--commit", default="1f8d20f")
    args = ap.parse_args(argv)
    full = subprocess.run(["git", "-C", args.git_dir, "rev-parse", args.commit], capture_output=True, text=True,
                          check=True).stdout.strip()
    tables = {k: json.loads(_show(args.git_dir, full, f"{TIMING}/{f}"))["level1"] for k, f in FILES.items()}
    problems = {}
    for seed in sorted(SEEDS.glob("*.py"), key=lambda p: int(p.name.split("_")[0])):
        source = _show(args.git_dir, full, f"KernelBench/level1/{seed.name}")
        record: dict[str, Any] = {"file_sha256": hashlib.sha256(source).hexdigest()}
        for kind, table in tables.items():
            t = table[seed.name]
            record[kind] = {k: t[k] for k in ("mean", "std", "min", "max", "num_trials")}
            record["hardware"] = t["hardware"]
        problems[seed.name] = record
    data = {
        "source": {"repository": "https://github.com/ScalingIntelligence/KernelBench", "commit": full,
                   "files": [f"{TIMING}/{f}" for f in FILES.values()], "license": "MIT",
                   "measured_with": "PyTorch 2.5.0+cu124, CUDA 12.4, 3 warm-ups, 100 trials, wall clock",
                   "unit": "ms"},
        "problems": problems,
    }
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{len(problems)} problems written to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
