"""`evo export --as autotune`: the best structure's correct configs, fastest first, as a
`@triton.autotune` table that Triton runs (here in the interpreter, each config checked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from evo.app.cli import main
from evo.contracts.candidate import Candidate
from evo.contracts.config import TaskConfig
from evo.contracts.task_files import TaskFiles
from evo.contracts.verdict import Status

from .reports.synthetic import Ev, make_run

ROOT = Path(__file__).resolve().parent.parent
MATMUL = Candidate.from_source((ROOT / "evo" / "tasks" / "matmul" / "known_better.py").read_text())
SMALL = {"BM": 32, "BN": 32, "BK": 16, "GROUP_M": 1, "num_warps": 4, "num_stages": 2}

# evaluation i: (params, latency ms, status)
EVALS = [
    ({"BM": 64, "BN": 32}, 1.50, Status.OK),
    ({"BM": 32, "BN": 64}, 0.90, Status.OK),
    ({"BM": 16, "BN": 16}, 0.50, Status.WRONG_OUTPUT),  # fastest, but wrong: never a config
    ({"BM": 32, "BN": 32}, 1.20, Status.OK),
]

RUN_IT = """
import json, sys, importlib.util
import numpy as np, torch
spec = importlib.util.spec_from_file_location("tuned", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
tuner = m._matmul
ran = []
def do_bench(fn, quantiles):  # the interpreter has no GPU timer: run each config, report equal times
    fn(); ran.append(1); return [1.0, 1.0, 1.0]
tuner.do_bench = do_bench
a, b = torch.randn(37, 45).half(), torch.randn(45, 29).half()  # the task's dtype
c = torch.empty(37, 29).half()
m.kernel(a, b, c)
ok = np.allclose(c.double().numpy(), a.double().numpy() @ b.double().numpy(), rtol=1e-2, atol=2e-2)
print(json.dumps({"configs": len(tuner.configs), "ran": len(ran), "ok": bool(ok), "key": list(tuner.keys)}))
"""


def matmul_run(tmp_path: Path) -> Path:
    seed = Candidate.from_source((ROOT / "evo" / "tasks" / "matmul" / "seed.py").read_text())
    variants = [seed, *(Candidate(MATMUL.source, {**SMALL, **p}) for p, _, _ in EVALS)]
    evs = [Ev("seed", 3.0), *(Ev("optuna", ms, at_s=i + 1.0, status=st) for i, (_, ms, st) in enumerate(EVALS))]
    built = make_run(tmp_path, "matmul-run", evs, task="matmul", pick=lambda i: variants[i])
    TaskFiles.collect(TaskConfig(name="matmul"), ROOT).with_seed(seed.source).write(built.path / "inputs")
    return built.path


def test_the_autotune_table_lists_the_correct_configs_fastest_first_and_triton_runs_each(tmp_path, capsys):
    run = matmul_run(tmp_path)
    assert main(["export", str(run), "--as", "autotune"]) == 0
    assert "3 configs of the best structure" in capsys.readouterr().err
    text = (run / "export" / "autotune.py").read_text()
    order = [text.index(f"'BM': {bm}, 'BN': {bn}") for bm, bn in ((32, 64), (32, 32), (64, 32))]
    assert order == sorted(order)
    assert "'BM': 16" not in text
    assert "@triton.autotune(configs=EVO_CONFIGS, key=['M', 'N', 'K'])" in text
    assert "# 0.9 ms (model)" in text
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", RUN_IT, str(run / "export" / "autotune.py")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got == {"configs": 3, "ran": 3, "ok": True, "key": ["M", "N", "K"]}


def test_a_launch_that_autotune_cannot_express_is_refused_with_the_reason(tmp_path, capsys):
    """softmax's best launch picks one of two kernels by MAX_BLOCK: no @triton.autotune table says that."""
    seed = Candidate.from_source((ROOT / "evo" / "tasks" / "softmax" / "seed.py").read_text())
    best = Candidate.from_source((ROOT / "evo" / "tasks" / "softmax" / "known_better.py").read_text())
    built = make_run(tmp_path, "softmax-run", [Ev("seed", 2.0), Ev("llm", 1.0)], pick=lambda i: [seed, best][i])
    TaskFiles.collect(TaskConfig(name="softmax"), ROOT).with_seed(seed.source).write(built.path / "inputs")
    assert main(["export", str(built.path), "--as", "autotune"]) == 2
    err = capsys.readouterr().err
    assert "launch starts 2 kernels" in err and "Traceback" not in err
    assert not (built.path / "export").exists()


def test_a_tuned_param_used_outside_the_kernel_launch_is_named_with_its_line(tmp_path, capsys):
    source = MATMUL.source.replace("    M, K = a.shape\n", "    M, K = a.shape\n    assert BK <= 128\n")
    seed = Candidate.from_source((ROOT / "evo" / "tasks" / "matmul" / "seed.py").read_text())
    best = Candidate(source, MATMUL.params)
    built = make_run(tmp_path, "mm", [Ev("seed", 2.0), Ev("llm", 1.0)], task="matmul", pick=lambda i: [seed, best][i])
    TaskFiles.collect(TaskConfig(name="matmul"), ROOT).with_seed(seed.source).write(built.path / "inputs")
    assert main(["export", str(built.path), "--as", "autotune"]) == 2
    line = 1 + source.splitlines().index("    assert BK <= 128")
    assert f"launch uses BK on line {line} outside the kernel's launch" in capsys.readouterr().err


def test_with_several_weighed_shapes_the_fastest_config_at_each_shape_is_in_the_table_and_named(tmp_path, capsys):
    """Per-shape buckets: the combined best first by the weighted mean, but the config fastest at each
    bench shape is kept (and said to be) whatever the cut at `top`."""
    from evo.app.export.autotune import Measured, autotune_module

    small, large = "{'M': 64, 'N': 64, 'K': 64}", "{'M': 4096, 'N': 4096, 'K': 4096}"

    def row(bm: int, combined: float, at_small: float, at_large: float) -> Measured:
        return Measured({**SMALL, "BM": bm}, combined, "model", f"c{bm}", ((small, at_small), (large, at_large)))

    rows = [row(16, 1.0, 0.30, 3.3), row(32, 1.1, 0.50, 2.4), row(64, 1.2, 0.20, 7.2), row(128, 1.3, 0.9, 1.9)]
    text = autotune_module(MATMUL, rows, campaign="c", task="matmul", top=1)
    configs = [line for line in text.splitlines() if "triton.Config(" in line]
    assert len(configs) == 2  # the two shapes' winners; `top` = 1 cuts nothing they need
    assert "'BM': 64" in configs[0] and f"fastest at {small}: 0.2 ms" in configs[0]
    assert "'BM': 128" in configs[1] and f"fastest at {large}: 1.9 ms" in configs[1]
    three = [line for line in autotune_module(MATMUL, rows, campaign="c", task="matmul", top=3).splitlines()
             if "triton.Config(" in line]
    assert ["'BM': 64" in three[0], "'BM': 128" in three[1], "'BM': 16" in three[2]] == [True] * 3
    assert "fastest at" not in three[2]
    one_shape = [Measured(r.params, r.latency_ms, r.source, r.candidate) for r in rows]
    plain = [line for line in autotune_module(MATMUL, one_shape, campaign="c", task="matmul", top=2).splitlines()
             if "triton.Config(" in line]
    assert len(plain) == 2 and "'BM': 16" in plain[0] and "fastest at" not in "".join(plain)


def test_the_export_reads_each_evaluations_per_shape_latencies(tmp_path, capsys):
    seed = Candidate.from_source((ROOT / "evo" / "tasks" / "matmul" / "seed.py").read_text())
    a, b = Candidate(MATMUL.source, {**SMALL, "BM": 64}), Candidate(MATMUL.source, {**SMALL, "BM": 16})

    def shapes(x: float, y: float) -> dict[str, object]:
        return {"shapes": [{"size": {"M": 64}, "weight": 1.0, "latency_ms": x},
                           {"size": {"M": 4096}, "weight": 1.0, "latency_ms": y}]}

    evs = [Ev("seed", 3.0), Ev("optuna", 1.0, 1.0, detail=shapes(0.5, 2.0)),
           Ev("optuna", 1.2, 2.0, detail=shapes(0.2, 7.2))]
    built = make_run(tmp_path, "mm", evs, task="matmul", pick=lambda i: [seed, a, b][i])
    TaskFiles.collect(TaskConfig(name="matmul"), ROOT).with_seed(seed.source).write(built.path / "inputs")
    assert main(["export", str(built.path), "--as", "autotune"]) == 0
    configs = [line for line in (built.path / "export" / "autotune.py").read_text().splitlines()
               if "triton.Config(" in line]
    assert "'BM': 16" in configs[0] and "fastest at {'M': 64}: 0.2 ms" in configs[0]
    assert "'BM': 64" in configs[1] and "fastest at {'M': 4096}: 2 ms" in configs[1]
