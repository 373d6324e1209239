"""Seeds shipped for KernelBench problems: found by the problem's content under any file name, each correct
on KernelBench's own current file at the sizes `evo init` picks for it (`evo.app.kernelbench_sizes`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evo.app.kernelbench_sizes import CPU_BENCH_ELEMENTS, check_sizes, kernelbench_sizes, problem_dimensions
from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, TaskConfig
from evo.contracts.kernelbench import KernelBenchTask
from evo.contracts.kernelbench_seeds import problem_fingerprint, shipped_seed, shipped_seeds
from evo.contracts.task import TaskError
from evo.contracts.task_loader import build_task
from fitness.evaluate import Evaluator

KB = Path(__file__).resolve().parent / "kernelbench"
LEVEL1 = sorted((KB / "level1").glob("*.py"))


def test_a_problem_finds_its_seed_by_content_whatever_its_name_or_sizes_or_comments(tmp_path):
    source = (KB / "level1" / "23_Softmax.py").read_text()
    assert shipped_seed(KB / "level1" / "23_Softmax.py") is not None
    renamed = tmp_path / "my_problem.py"
    renamed.write_text(source.replace("batch_size = 4096", "batch_size = 7  # smaller")
                       .replace('"""\n        Applies Softmax', '"""\n        Softmax, said otherwise'))
    assert shipped_seed(renamed) == shipped_seed(KB / "level1" / "23_Softmax.py")
    other = tmp_path / "log_softmax.py"  # the code differs: another problem, no seed of another's
    other.write_text(source.replace("torch.softmax(x, dim=1)", "torch.log_softmax(x, dim=1)"))
    assert problem_fingerprint(other.read_text()) != problem_fingerprint(source)
    assert shipped_seed(other) is None
    assert shipped_seed(tmp_path / "missing.py") is None


def test_every_shipped_seed_names_a_problem_it_was_checked_on():
    seeds = set(shipped_seeds().values())
    problems = {shipped_seed(p) for p in LEVEL1}
    assert len(seeds) >= 30 and seeds == problems  # each found for KernelBench's current file


def test_a_config_without_a_seed_starts_from_the_shipped_one(tmp_path):
    cfg = TaskConfig(kernelbench=str(KB / "level1" / "22_Tanh.py"),
                     sizes={"check": [{"batch_size": 3, "dim": 17}], "bench": [{"batch_size": 2, "dim": 64}]})
    task = build_task(cfg, tmp_path)
    seed = shipped_seed(KB / "level1" / "22_Tanh.py")
    assert seed is not None and task.seed_source == seed.read_text()


@pytest.mark.parametrize("problem", LEVEL1, ids=[p.stem for p in LEVEL1])
def test_the_shipped_seed_passes_on_kernelbench_s_own_file_at_the_sizes_init_picks(problem, shared_workers):
    sizes = kernelbench_sizes(problem, "cpu")
    task = KernelBenchTask(problem, check_sizes=sizes["check"], bench_sizes=sizes["bench"], dtype="float32",
                           redraw_params=True)
    seed = shipped_seed(problem)
    assert seed is not None
    settings = EvaluationConfig(timeout_s=120)
    with Evaluator(task, settings, device="cpu", **shared_workers(settings)) as ev:
        verdict = ev.evaluate(Candidate.from_source(seed.read_text()), level="full")
    assert verdict.ok, verdict.reason


def test_init_sizes_keep_equal_dimensions_equal_and_the_cpu_bench_small():
    problem = KB / "level1" / "95_CrossEntropyLoss.py"  # input_shape = (num_classes,): equal in every size
    dims = problem_dimensions(problem)
    assert dims == {"batch_size": 32768, "num_classes": 4096, "input_shape": (4096,)}
    sizes = kernelbench_sizes(problem, "cpu")
    for size in [*sizes["check"], *sizes["bench"]]:
        assert size["input_shape"] == [size["num_classes"]], size
    assert len(sizes["check"]) == 3 and {"batch_size": 1, "num_classes": 3, "input_shape": [3]} in sizes["check"]
    [bench] = sizes["bench"]
    assert bench["batch_size"] * bench["num_classes"] <= CPU_BENCH_ELEMENTS
    assert bench["batch_size"] * bench["num_classes"] > CPU_BENCH_ELEMENTS // 4  # as large as it may be
    assert bench["batch_size"] / bench["num_classes"] == 32768 / 4096  # shrunk together
    assert kernelbench_sizes(problem, "cuda")["bench"] == [{"batch_size": 32768, "num_classes": 4096,
                                                           "input_shape": [4096]}]


POOL = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, kernel_size: int, dilation: int):
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size=kernel_size, dilation=dilation)

    def forward(self, x):
        return self.pool(x)


batch_size = 64
features = 32
length = 65536
kernel_size = 4
dilation = 3


def get_inputs():
    return [torch.rand(batch_size, features, length)]


def get_init_inputs():
    return [kernel_size, dilation]
'''


def test_check_sizes_the_problem_cannot_run_are_left_out_and_none_at_all_is_an_error(tmp_path):
    problem = tmp_path / "pool.py"
    problem.write_text(POOL)
    dims = problem_dimensions(problem)
    assert dims == {"batch_size": 64, "features": 32, "length": 65536}  # kernel_size and dilation kept
    sizes = check_sizes(problem, dims)
    assert sizes and all(s["length"] >= 10 for s in sizes)  # a window of 4 dilated by 3 spans 10
    narrow = tmp_path / "narrow.py"
    narrow.write_text(POOL.replace("kernel_size = 4", "kernel_size = 60"))  # wider than any check length
    with pytest.raises(TaskError, match=r"no check size found for narrow.py .*write task.sizes by hand"):
        check_sizes(narrow, problem_dimensions(narrow))


def test_evo_tasks_lists_the_problems_a_seed_ships_for(capsys):
    from evo.app.cli import main

    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    assert f"KernelBench level 1, seeds shipped for {len(set(shipped_seeds().values()))} problems" in out
    assert "\n  23_Softmax\n" in out and "\n  95_CrossEntropyLoss\n" in out
    assert main(["tasks", "softmax"]) == 0 and "KernelBench" not in capsys.readouterr().out  # only those named
