"""KernelBench problem files are accepted as they are."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evo.contracts.config import EvaluationConfig
from evo.contracts.config_file import load_config
from evo.contracts.kernelbench import KernelBenchTask
from evo.contracts.task import TaskError
from evo.contracts.task_loader import build_task
from fitness.evaluate import Evaluator

from .conftest import candidate

KB = Path(__file__).resolve().parent / "kernelbench"


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


@pytest.mark.parametrize("name", ["softmax", "layernorm", "cross_entropy"])
def test_kernelbench_seeds_pass(name):
    task = task_from(name)
    with Evaluator(task, EvaluationConfig(timeout_s=30), device="cpu") as ev:
        from evo.contracts.candidate import Candidate

        assert task.seed_source is not None
        result = ev.evaluate(Candidate.from_source(task.seed_source))
    assert result.ok, result.reason


def test_a_kernel_that_assumes_default_weights_is_rejected():
    task = task_from("layernorm")
    with Evaluator(task, EvaluationConfig(timeout_s=30), device="cpu") as ev:
        result = ev.evaluate(candidate("layernorm_ignores_weights"))
    assert not result.ok and "outside tolerance" in result.reason


def test_bytes_moved_is_found_from_shapes_without_computing():
    task = task_from("softmax")
    assert task.bytes_moved({"batch_size": 64, "dim": 4096}) == 2 * 64 * 4096 * 4
