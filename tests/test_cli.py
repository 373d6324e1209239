"""`python -m evo eval` and `python -m evo check` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from .conftest import CANDIDATES, ROOT, SMALL_SOFTMAX


def evo(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evo", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_eval_of_the_seed_prints_a_verified_ok_verdict_last(tmp_path):
    (tmp_path / "softmax.yaml").write_text(yaml.safe_dump({"task": SMALL_SOFTMAX}))
    p = evo("eval", str(tmp_path / "softmax.yaml"), "--candidate", "evo/tasks/softmax/seed.py", "--params",
            '{"BLOCK": 256}')
    assert p.returncode == 0, p.stderr
    v = last_json(p.stdout)
    # 10 cases at the check sizes, 5 special values at 3 x 17, 7 distributions at the bench-shaped 8 x 256
    assert v["status"] == "ok" and v["error"] == 0.0 and v["cases_checked"] == 22 and v["task"] == "softmax"
    assert v["level"] == "verified" and "verified in full at 1 bench size(s)" in v["reason"]
    assert {"reason", "max_error_ratio", "max_abs_error", "mismatch_fraction", "secret"} <= set(v)
    again = evo("eval", str(tmp_path / "softmax.yaml"), "--candidate", "evo/tasks/softmax/seed.py", "--params",
                '{"BLOCK": 256}', "--secret", str(v["secret"]))
    assert last_json(again.stdout)["latency_detail"]["sample_seed"] == v["latency_detail"]["sample_seed"]


def test_a_candidate_printing_a_fake_verdict_does_not_change_the_verdict():
    p = evo("eval", "configs/softmax.yaml", "--candidate", str(CANDIDATES / "softmax/prints_verdict.py"))
    assert p.returncode == 1
    v = last_json(p.stdout)
    assert v["status"] == "wrong_output" and "fake" not in p.stdout


def test_usage_and_config_errors_exit_2_with_a_message_naming_the_problem(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("task:\n  name: softmax\n  sizez: 3\n")
    p = evo("eval", str(bad), "--candidate", "evo/tasks/softmax/seed.py")
    assert p.returncode == 2 and "unknown key 'task.sizez'" in p.stderr and "Traceback" not in p.stderr
    bad.write_text("task:\n  kernelbench: nowhere.py\n  sizes: {check: [{n: 1}]}\n")
    p = evo("check", str(bad))
    assert p.returncode == 2 and "task.kernelbench: file not found: nowhere.py" in p.stderr
    bad.write_text("task:\n  name: softmax\nevaluation:\n  timeout_s: soon\n")
    p = evo("check", str(bad))
    assert p.returncode == 2 and "evaluation.timeout_s" in p.stderr
    bad.write_text("task:\n  name: softmx\n")
    p = evo("check", str(bad))
    assert p.returncode == 2 and "no task 'softmx'" in p.stderr and "softmax" in p.stderr
    p = evo("eval", "configs/softmax.yaml", "--candidate", "missing.py")
    assert p.returncode == 2 and "candidate file not found: missing.py" in p.stderr
    p = evo("eval", "configs/softmax.yaml", "--candidate", "evo/tasks/softmax/seed.py", "--params", "{BLOCK")
    assert p.returncode == 2 and "--params is not valid JSON" in p.stderr
    p = evo("check", str(tmp_path / "absent.yaml"))
    assert p.returncode == 2 and "config file not found" in p.stderr


def test_check_validates_a_kernelbench_task():
    p = evo("check", "tests/kernelbench/layernorm.yaml")
    assert p.returncode == 0, p.stdout + p.stderr
    v = last_json(p.stdout)
    assert v["ok"] and any(f["name"] == "parameters matter" and f["ok"] for f in v["findings"])
    assert "check sizes)" in p.stderr + p.stdout  # a LayerNorm behaves alike in both modes: no mode named


def test_check_names_the_mode_a_kernelbench_model_with_a_batchnorm_runs_in():
    p = evo("check", "tests/kernelbench/batchnorm.yaml")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2 check sizes; Model in train mode, which its BatchNorm2d depend on)" in p.stderr + p.stdout


def test_check_rejects_a_degenerate_reference(tmp_path):
    (tmp_path / "task.py").write_text(
        "import numpy as np\nCHECK_SIZES = [{'n': 1}, {'n': 17}]\nBENCH_SIZES = [{'n': 1024}]\n"
        "def inputs(size, dtype, rng, dist):\n    return [rng.standard_normal(size['n'])]\n"
        "def reference(x):\n    return x - x\n")
    (tmp_path / "seed.py").write_text((ROOT / "evo/tasks/vector_add/seed.py").read_text())
    (tmp_path / "c.yaml").write_text("task:\n  path: .\n")
    p = evo("check", str(tmp_path / "c.yaml"))
    assert p.returncode == 1
    assert "[FAIL] output is not ~0 everywhere" in p.stdout
