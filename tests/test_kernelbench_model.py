"""The latency model at KernelBench's own sizes, held to KernelBench's measured H100 times
(`bench.kernelbench`): the committed figures cover every shipped seed, stay above the speed of light and
within the bounds the data justifies (bench/data/kernelbench_model_h100.md says why), today's model still
produces them, and the benchmark refuses a time measured on another file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from bench.kernelbench.analysis import OFF_BY, best_measured, efficient, flags, held_out, load, spearman, summary
from bench.kernelbench.model_at_size import (
    BETTER,
    LEVEL1,
    OUT,
    TIMES,
    Layout,
    Modeller,
    SizeMismatch,
    layout,
    measured,
)
from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig
from evo.contracts.gpus import get_profile
from evo.contracts.kernelbench_seeds import SEEDS

ROWS = {r["problem"]: r for r in load(OUT)}
TIMED = [r for r in ROWS.values() if "measured" in r]


def test_every_shipped_seed_has_measured_times_and_modelled_figures():
    assert set(ROWS) == {p.name for p in SEEDS.glob("*.py")}
    assert len(TIMED) == len(ROWS)  # every problem file is the one KernelBench timed
    for r in TIMED:
        assert "ms" in r["seed"], r["problem"]
        assert r["tuned"]["checked"] and "ms" in r["tuned"], r["problem"]
        if (BETTER / r["problem"]).is_file():
            assert r["better"]["checked"] and "ms" in r["better"], r["problem"]
        assert r["campaign"]["checked"] and "ms" in r["campaign"], r["problem"]  # the campaign's best, status ok
        assert r["label"].startswith("modelled: unverified estimate")


def test_no_modelled_figure_beats_the_speed_of_light_or_the_achievable_bandwidth():
    gpu = get_profile("h100")
    for r in TIMED:
        for kind in ("seed", "tuned", "better"):
            if "ms" in r.get(kind, {}):
                assert r[kind]["ms"] >= r["sol_ms"], (r["problem"], kind)
                assert r[kind]["ms"] >= r["bytes"] / gpu.dram_achievable * 1e3 * 0.999, (r["problem"], kind)
    assert not [f for f in flags(TIMED) if "below the" in f]


def test_the_model_agrees_with_the_best_measured_pytorch_times_within_the_bounds_the_data_justifies():
    """Bounds from the committed data (docs/kernelbench-model.md says why): against the best measured PyTorch
    time (the faster of eager and torch.compile), the median ratio within 20% (data: 1.01; held out 0.95),
    at least 90% of the problems within 2x (data: 35 of 36; held out 11 of 11; the one outside is the reverse
    cumsum, which PyTorch runs as three kernels), none beyond [0.35, 1.5] (data: [0.39, 1.29]), and the
    ranking kept across problems that span more than a decade of times (Spearman >= 0.8; data 0.85, held
    out 0.90)."""
    for part in (TIMED, [r for r in TIMED if held_out(r["problem"])]):
        s = summary(part)
        assert s["best_within_2x"] >= 0.9 * s["problems"]
        assert 0.8 <= s["best_median"] <= 1.2
        assert 0.35 <= s["best_min"] and s["best_max"] <= 1.5
        assert s["spearman_best"] >= 0.8
    times = [best_measured(r) for r in TIMED]
    assert max(times) / min(times) > 10


def test_the_search_s_kernels_counted_against_pytorch_are_the_checked_ones():
    for r in TIMED:
        kind, ms = efficient(r) or ("", 0.0)
        assert kind in ("tuned", "better") and r[kind]["checked"] and ms == r[kind]["ms"]


@pytest.fixture(scope="module")
def modeller():
    m = Modeller(get_profile("h100"), EvaluationConfig())
    yield m
    m.close()


@pytest.mark.parametrize("problem", ["19_ReLU.py", "5_Matrix_scalar_multiplication.py", "95_CrossEntropyLoss.py"])
def test_today_s_model_gives_the_committed_figures(modeller, problem):
    """The committed figures are the model's as it is: a change to the model must re-run the benchmark."""
    row = ROWS[problem]
    seed = SEEDS / problem
    got = modeller.model(seed, dict(Candidate.from_file(seed).params), layout(LEVEL1 / problem))
    assert got["ms"] == pytest.approx(row["seed"]["ms"], rel=1e-6)
    assert got["dram_bytes"] == row["seed"]["dram_bytes"]


def test_a_time_measured_on_another_file_or_at_other_sizes_is_left_out(tmp_path):
    times = json.loads(TIMES.read_text())
    gpu = get_profile("h100")
    problem = LEVEL1 / "19_ReLU.py"
    lay = layout(problem)
    assert measured(problem, lay, times, gpu)["eager_ms"] == 4.28
    edited = tmp_path / problem.name
    edited.write_text(problem.read_text().replace("dim = 393216", "dim = 393216 * 2"))
    with pytest.raises(SizeMismatch, match="differs from the one KernelBench timed"):
        measured(edited, layout(edited), times, gpu)
    # the same file, but figures no GPU could move in the time: sizes other than the timed ones
    bigger = Layout(lay.inputs, lay.outputs, lay.bytes * 4, lay.flops)
    with pytest.raises(SizeMismatch, match="below the"):
        measured(problem, bigger, times, gpu)


def test_layout_follows_the_task_contract_forward_inputs_then_parameters_then_outputs():
    lay = layout(LEVEL1 / "40_LayerNorm.py")  # x, then LayerNorm's weight and bias, then y
    assert [t["shape"] for t in lay.inputs] == [[16, 64, 256, 256], [64, 256, 256], [64, 256, 256]]
    assert [t["shape"] for t in lay.outputs] == [[16, 64, 256, 256]]
    scalar = layout(LEVEL1 / "5_Matrix_scalar_multiplication.py")  # s = 3.14: a 0-d tensor
    assert scalar.inputs[1] == {"shape": [], "dtype": "float32"}
    matmul = layout(LEVEL1 / "1_Square_matrix_multiplication_.py")
    n = matmul.inputs[0]["shape"][0]
    assert matmul.flops == 2 * n**3 and matmul.bytes == 3 * n * n * 4


def test_spearman_ranks_and_the_held_out_third():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 2, 3], [5, 5, 6, 7]) == pytest.approx(1.0)  # ties averaged
    names = [p.name for p in SEEDS.glob("*.py")]
    out = [n for n in names if held_out(n)]
    assert len(names) / 4 < len(out) < len(names) / 2.5
    assert held_out("19_ReLU.py") == (int(hashlib.sha256(b"19_ReLU.py").hexdigest(), 16) % 3 == 0)
    assert OFF_BY == 2.0


def test_the_committed_report_is_the_analysis_of_the_committed_data():
    from bench.kernelbench.analysis import report

    shipped = Path(OUT).with_suffix(".md")
    assert shipped.read_text() == report(load(OUT))
