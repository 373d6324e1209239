"""KernelBench problem files are accepted as they are."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig
from evo.contracts.config_file import load_config
from evo.contracts.kernelbench import KernelBenchTask, _tied
from evo.contracts.task import TaskError
from evo.contracts.task_loader import build_task
from evo.contracts.verdict import Evaluation
from fitness.evaluate import Evaluator

from .conftest import candidate

KB = Path(__file__).resolve().parent / "kernelbench"


def verdicts(task: KernelBenchTask, *sources: str, level: str = "verified") -> list[Evaluation]:
    """Each source evaluated as a candidate of `task` on the CPU, in one evaluator."""
    with Evaluator(task, EvaluationConfig(timeout_s=60), device="cpu") as ev:
        return [ev.evaluate(Candidate.from_source(src), level=level) for src in sources]


def seed_edited(name: str, old: str, new: str) -> tuple[KernelBenchTask, str]:
    """Task `name` and its seed with `old` replaced by `new` (which must be there)."""
    task = task_from(name)
    assert task.seed_source is not None and old in task.seed_source, old
    return task, task.seed_source.replace(old, new)


def task_from(name: str) -> KernelBenchTask:
    path = KB / f"{name}.yaml"
    t = build_task(load_config(path).task, KB)
    assert isinstance(t, KernelBenchTask)
    return t


def test_sizes_override_constants_and_derived_constants_follow():
    task = task_from("cross_entropy")
    ns = task.namespace({"batch_size": 7, "num_classes": 5})
    assert ns["batch_size"] == 7 and ns["input_shape"] == (5,)  # input_shape = (num_classes,) follows
    data = task.case_data(task.cases(draws=1)[0])
    assert data.inputs[0].shape == (7, 5) and data.inputs[1].dtype == "int64"
    assert data.expected[0].shape == () and data.output_shapes == [()]  # a 0-d loss


def test_unknown_size_names_are_an_error_naming_the_constants():
    with pytest.raises(TaskError, match=r"batchsize.*its constants: batch_size, dim"):
        KernelBenchTask(KB / "23_Softmax.py", check_sizes=[{"batchsize": 2}], bench_sizes=[], dtype="float32",
                        redraw_params=True)


def test_state_dict_tensors_follow_the_inputs_and_are_redrawn():
    task = task_from("layernorm")
    data = task.case_data(task.cases(draws=1)[0])
    assert [t.shape for t in data.inputs] == [(2, 3, 5, 7), (3, 5, 7), (3, 5, 7)]
    weight, bias = data.inputs[1].data, data.inputs[2].data
    assert not np.all(weight == 1.0) and not np.all(bias == 0.0)  # not the default init


@pytest.mark.parametrize("name", ["softmax", "layernorm", "cross_entropy", "argmax", "matmul_bf16", "gelu"])
def test_kernelbench_seeds_pass(name):
    task = task_from(name)
    assert task.seed_source is not None
    [result] = verdicts(task, task.seed_source)
    assert result.ok, result.reason


def test_a_kernel_that_assumes_default_weights_is_rejected():
    task = task_from("layernorm")
    with Evaluator(task, EvaluationConfig(timeout_s=30), device="cpu") as ev:
        result = ev.evaluate(candidate("layernorm_ignores_weights"))
    assert not result.ok and "outside tolerance" in result.reason


def test_bytes_moved_is_found_from_shapes_without_computing():
    task = task_from("softmax")
    assert task.bytes_moved({"batch_size": 64, "dim": 4096}) == 2 * 64 * 4096 * 4


def test_the_ties_distribution_repeats_values_of_the_draw_itself_within_its_range_and_sign():
    task = task_from("softmax")
    cases = [c for c in task.cases(draws=1) if c.size == {"batch_size": 5, "dim": 1000}]
    assert [c.dist for c in cases] == ["as_given", "wide", "ties"]
    given, tied = (task.case_data(c).inputs[0].data for c in (cases[0], cases[2]))
    assert 2 <= len(np.unique(tied)) <= 16  # 1000 values per row, at most 16 distinct ones in all
    assert len(np.unique(given)) > 4000  # continuous draws do not tie
    assert tied.min() >= -6 and tied.max() <= 6 and (tied < 0).any() and (tied > 0).any()  # randn's range, signs
    positive = torch.rand(2, 64) + 0.5  # a problem whose inputs are positive keeps them positive
    assert float(_tied(positive, torch.Generator().manual_seed(1)).min()) >= 0.5


def test_an_argmax_that_keeps_the_last_of_equal_maxima_is_wrong_only_where_inputs_tie():
    """torch.argmax returns the first maximal index; `>=` returns the last. Continuous draws never tie,
    so only the `ties` distribution tells them apart, and the verdict names it."""
    task, last = seed_edited("argmax", "take = v > best", "take = v >= best")
    [result] = verdicts(task, last)
    assert result.status.value == "wrong_output", result.reason
    assert "(ties)" in result.reason and "must match exactly" in result.reason, result.reason


def test_a_problem_whose_reference_orders_ties_arbitrarily_is_not_checked_on_ties(tmp_path):
    """torch.topk's (like sort's) order among equal values is unspecified: the reference's indices there
    would be one arbitrary choice, and a correct kernel could be rejected for making another."""
    source = (KB / "23_Softmax.py").read_text().replace("torch.softmax(x, dim=1)", "torch.topk(x, 4, dim=1).indices")
    (tmp_path / "topk.py").write_text(source)
    task = KernelBenchTask(tmp_path / "topk.py", check_sizes=[{"batch_size": 2, "dim": 64}], bench_sizes=[],
                           dtype="float32", redraw_params=True)
    assert task.dists == ("as_given", "wide")
    assert [c.dist for c in task.cases(draws=1)] == ["as_given", "wide"]


def test_a_launch_that_takes_other_arguments_is_told_what_it_is_called_with():
    """A launch that expects one argument more than it gets fails on its call, and the verdict lists what
    launch receives: the forward inputs, the Model's state tensors, the outputs, the params."""
    task, one_more = seed_edited("layernorm", "def launch(x, weight, bias, y, *, BLOCK):",
                                 "def launch(x, weight, bias, eps, y, *, BLOCK):")
    [result] = verdicts(task, one_more)
    assert result.status.value == "compile_error" and "TypeError: launch()" in result.reason, result.reason
    assert ("launch is called with 3 input(s) [float32 [2, 3, 5, 7], float32 [3, 5, 7], float32 [3, 5, 7]], "
            "then 1 output(s) to write [float32 [2, 3, 5, 7]], then the params as keywords [BLOCK]") in result.reason


def test_a_gelu_with_the_tanh_approximation_is_not_the_exact_gelu_of_the_reference():
    """The seed's libdevice erf runs in the interpreter (`fitness.sandbox.interp_libdevice`); the tanh
    approximation, 5e-4 off, is rejected at float32's tolerance."""
    task, tanh = seed_edited("gelu", "libdevice.erf(x * 0.7071067811865476)",
                             "libdevice.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))")
    [result] = verdicts(task, tanh)
    assert result.status.value == "wrong_output" and "outside tolerance" in result.reason, result.reason


def test_a_libdevice_function_costs_the_model_what_the_same_triton_op_costs():
    """libdevice.erf runs through the interpreter's builder (`create_erf`), so the latency model counts it
    as it counts tl.math.erf: moving math into libdevice makes no kernel cheaper on paper."""
    task, native = seed_edited("gelu", "libdevice.erf(", "tl.math.erf(")
    with_libdevice, with_tl = verdicts(task, str(task.seed_source), native, level="full")
    assert with_libdevice.ok and with_tl.ok, (with_libdevice.reason, with_tl.reason)
    mine, theirs = with_libdevice.latency_detail["launches"][0], with_tl.latency_detail["launches"][0]
    assert mine["terms_us"]["sfu"] > 0 and mine["terms_us"] == theirs["terms_us"], (mine, theirs)
    assert mine["other_flops"] == theirs["other_flops"]
