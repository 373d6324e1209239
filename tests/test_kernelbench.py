"""KernelBench problem files are accepted as they are."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, TaskConfig
from evo.contracts.config_file import load_config
from evo.contracts.kernelbench import KernelBenchTask, _depends_on_mode, _tied
from evo.contracts.task import TaskError
from evo.contracts.task_loader import build_task
from evo.contracts.verdict import Evaluation
from fitness.evaluate import Evaluator
from fitness.latency.cuda import task_info

from .conftest import SharedWorkers, candidate

KB = Path(__file__).resolve().parent / "kernelbench"


def verdicts(workers: SharedWorkers, task: KernelBenchTask, *sources: str, level: str = "verified"
             ) -> list[Evaluation]:
    """Each source evaluated as a candidate of `task` on the CPU, in one evaluator (on the session's workers)."""
    settings = EvaluationConfig(timeout_s=60)
    with Evaluator(task, settings, device="cpu", **workers(settings)) as ev:
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


@pytest.mark.parametrize("name", ["softmax", "layernorm", "cross_entropy", "argmax", "matmul_bf16", "gelu",
                                  "batchnorm", "tanh", "scalar"])
def test_kernelbench_seeds_pass(name, shared_workers):
    task = task_from(name)
    assert task.seed_source is not None
    [result] = verdicts(shared_workers, task, task.seed_source)
    assert result.ok, result.reason


def test_a_kernel_that_assumes_default_weights_is_rejected(shared_workers):
    task = task_from("layernorm")
    settings = EvaluationConfig(timeout_s=30)
    with Evaluator(task, settings, device="cpu", **shared_workers(settings)) as ev:
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


def test_an_argmax_that_keeps_the_last_of_equal_maxima_is_wrong_only_where_inputs_tie(shared_workers):
    """torch.argmax returns the first maximal index; `>=` returns the last. Continuous draws never tie,
    so only the `ties` distribution tells them apart, and the verdict names it."""
    task, last = seed_edited("argmax", "take = v > best", "take = v >= best")
    [result] = verdicts(shared_workers, task, last)
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


def test_a_launch_that_takes_other_arguments_is_told_what_it_is_called_with(shared_workers):
    """A launch that expects one argument more than it gets fails on its call, and the verdict lists what
    launch receives: the forward inputs, the Model's state tensors, the outputs, the params."""
    task, one_more = seed_edited("layernorm", "def launch(x, weight, bias, y, *, BLOCK):",
                                 "def launch(x, weight, bias, eps, y, *, BLOCK):")
    [result] = verdicts(shared_workers, task, one_more)
    assert result.status.value == "compile_error" and "TypeError: launch()" in result.reason, result.reason
    assert ("launch is called with 3 input(s) [float32 [2, 3, 5, 7], float32 [3, 5, 7], float32 [3, 5, 7]], "
            "then 1 output(s) to write [float32 [2, 3, 5, 7]], then the params as keywords [BLOCK]") in result.reason


def test_a_gelu_with_the_tanh_approximation_is_not_the_exact_gelu_of_the_reference(shared_workers):
    """The seed's libdevice erf runs in the interpreter (`fitness.sandbox.interp_libdevice`); the tanh
    approximation, 5e-4 off, is rejected at float32's tolerance."""
    task, tanh = seed_edited("gelu", "libdevice.erf(x * 0.7071067811865476)",
                             "libdevice.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))")
    [result] = verdicts(shared_workers, task, tanh)
    assert result.status.value == "wrong_output" and "outside tolerance" in result.reason, result.reason


def test_a_libdevice_function_costs_the_model_what_the_same_triton_op_costs(shared_workers):
    """libdevice.erf runs through the interpreter's builder (`create_erf`), so the latency model counts it
    as it counts tl.math.erf: moving math into libdevice makes no kernel cheaper on paper."""
    task, native = seed_edited("gelu", "libdevice.erf(", "tl.math.erf(")
    with_libdevice, with_tl = verdicts(shared_workers, task, str(task.seed_source), native, level="full")
    assert with_libdevice.ok and with_tl.ok, (with_libdevice.reason, with_tl.reason)
    mine, theirs = with_libdevice.latency_detail["launches"][0], with_tl.latency_detail["launches"][0]
    assert mine["terms_us"]["sfu"] > 0 and mine["terms_us"] == theirs["terms_us"], (mine, theirs)
    assert mine["other_flops"] == theirs["other_flops"]


def test_a_libdevice_function_without_a_triton_op_costs_the_model_more_than_one_op(shared_workers):
    """libdevice.tanh has no builder op of its own: the model charges it the special-function and float
    ops of libdevice's implementation (`LIBDEVICE_COSTS`), in the range of the same tanh written with
    tl.exp and a division, where it used to be one float op and no special-function op at all."""
    task, formula = seed_edited("tanh", "libdevice.tanh(x)", "tl.where(x < 0, -1.0, 1.0) * (1.0 - tl.exp(-2.0 * "
                                "tl.abs(x))) / (1.0 + tl.exp(-2.0 * tl.abs(x)))")
    # 1 - exp(-2|x|) cancels for tiny x (it is 0 at 1e-12, where tanh is 1e-12): the special values' tiny
    # magnitudes refuse the formula, which is here for its cost only
    task.dist_opt_out["tiny"] = "the written-out formula loses tiny inputs to cancellation; compared for cost only"
    with_libdevice, written_out = verdicts(shared_workers, task, str(task.seed_source), formula, level="full")
    assert with_libdevice.ok and written_out.ok, (with_libdevice.reason, written_out.reason)
    mine, theirs = with_libdevice.latency_detail["launches"][0], written_out.latency_detail["launches"][0]
    elements = 16 * 4096
    assert mine["other_flops"] >= 8 * elements and theirs["other_flops"] >= 8 * elements, (mine, theirs)
    assert 0.5 <= mine["terms_us"]["sfu"] / theirs["terms_us"]["sfu"] <= 1.0, (mine, theirs)


def test_a_model_runs_in_training_mode_as_kernelbench_runs_it_unless_the_config_says_eval(tmp_path, shared_workers):
    """KernelBench's harness never calls eval(): its BatchNorm normalizes with the batch's statistics (the
    seed does; `test_kernelbench_seeds_pass` runs it, a 0-d step counter among its inputs). A kernel that
    uses the running statistics is right only in eval mode, and the seed only in training mode; the
    mode is written under the source the LLM reads."""
    train = task_from("batchnorm")
    config = load_config(KB / "batchnorm.yaml").task.model_copy(update={"model_mode": "eval"})
    evaluated = build_task(config, KB)
    assert isinstance(evaluated, KernelBenchTask) and train.seed_source is not None
    running = (KB / "seeds" / "batchnorm_running_stats.py").read_text()
    [running_in_train] = verdicts(shared_workers, train, running, level="quick")
    assert running_in_train.status.value == "wrong_output", running_in_train.reason
    running_in_eval, seed_in_eval = verdicts(shared_workers, evaluated, running, train.seed_source, level="quick")
    assert running_in_eval.ok, running_in_eval.reason
    assert seed_in_eval.status.value == "wrong_output", seed_in_eval.reason
    text = train.definition_text()
    assert "runs Model in training mode" in text and "(layers: BatchNorm2d)" in text
    assert "runs Model in eval mode" in evaluated.definition_text() and train.key != evaluated.key
    assert task_from("softmax").definition_text() == (KB / "23_Softmax.py").read_text()  # no such layers


def test_only_layers_that_behave_differently_in_the_two_modes_are_named():
    nn = torch.nn
    differ = [nn.BatchNorm2d(3), nn.InstanceNorm2d(3, track_running_stats=True), nn.Dropout(0.1),
              nn.Dropout2d(0.2), nn.RReLU()]
    same = [nn.BatchNorm1d(3, track_running_stats=False), nn.InstanceNorm2d(3), nn.Dropout(0.0), nn.ReLU(),
            nn.LayerNorm(3)]
    assert [_depends_on_mode(m) for m in differ] == [True] * 5
    assert [_depends_on_mode(m) for m in same] == [False] * 5


def test_a_forward_that_is_random_is_refused_when_the_task_loads_with_the_way_out(tmp_path):
    source = (KB / "23_Softmax.py").read_text()
    source = source.replace("torch.softmax(x, dim=1)", "torch.softmax(self.drop(x), dim=1)").replace(
        "super().__init__()", "super().__init__()\n        self.drop = nn.Dropout(0.25)")
    assert "nn.Dropout(0.25)" in source and "self.drop(x)" in source
    (tmp_path / "drop.py").write_text(source)
    config = load_config(KB / "softmax.yaml").task.model_copy(update={"kernelbench": "drop.py", "seed": None})
    with pytest.raises(TaskError, match=r"random in training mode \(layers: Dropout\).*`model_mode: eval`"):
        build_task(config, tmp_path)
    task = build_task(config.model_copy(update={"model_mode": "eval"}), tmp_path)  # Dropout off: deterministic
    expected = task.case_data(task.cases(draws=1)[0]).expected[0]
    assert np.allclose(expected.sum(axis=1), 1.0)


def test_tensors_the_forward_makes_are_float64_and_random_ones_are_named_as_such(tmp_path):
    """The reference runs in float64, tensors the forward makes itself too (a float32 torch.eye would not
    multiply a float64 input); a forward that draws torch.randn itself is random in either mode, and the
    error says so rather than blaming a Dropout."""
    source = (KB / "23_Softmax.py").read_text()
    made = source.replace("torch.softmax(x, dim=1)", "torch.softmax(x @ torch.eye(x.shape[1]), dim=1)")
    (tmp_path / "made.py").write_text(made)
    config = load_config(KB / "softmax.yaml").task.model_copy(update={"kernelbench": "made.py", "seed": None})
    build_task(config, tmp_path)  # loads: its reference runs
    (tmp_path / "drawn.py").write_text(source.replace("torch.softmax(x, dim=1)", "x + torch.randn(x.shape)"))
    for mode in ("train", "eval"):
        with pytest.raises(TaskError, match=rf"random \({mode} mode\).*draws random numbers itself"):
            build_task(config.model_copy(update={"kernelbench": "drawn.py", "model_mode": mode}), tmp_path)


def test_model_mode_is_for_kernelbench_problems_only():
    with pytest.raises(ValueError, match="model_mode is for kernelbench tasks"):
        TaskConfig(name="softmax", model_mode="eval")


def test_a_number_among_the_forward_inputs_reaches_launch_as_a_0d_tensor_and_is_widened_too(tmp_path, shared_workers):
    """5_Matrix_scalar_multiplication's get_inputs() returns [A, 3.14]: launch gets s as a 0-d float32
    tensor, the reference the number; the wide draws scale it as they scale A, so a kernel that wrote
    3.14 in is wrong there."""
    task = task_from("scalar")
    case = task.cases(draws=1)[0]
    data = task.case_data(case)
    assert data.inputs[1].shape == () and data.inputs[1].dtype == "float32"
    assert float(data.inputs[1].data) == pytest.approx(3.14)
    assert task.reference_args(data.inputs, case.size)[1] == pytest.approx(3.14)
    assert task_info(task, case.size)["scalars"] == [1] and task_info(task, case.size)["mode"] == "train"
    assert task.bytes_moved({"M": 4, "N": 8}) == 2 * 4 * 8 * 4  # A and C; the number is no traffic
    assert task.seed_source is not None
    hardcoded_source = task.seed_source.replace("s = tl.load(s_ptr)", "s = 3.14")
    [hardcoded] = verdicts(shared_workers, task, hardcoded_source, level="full")
    assert hardcoded.status.value == "wrong_output" and "(wide)" in hardcoded.reason, hardcoded.reason
    (tmp_path / "text.py").write_text((KB / "5_Matrix_scalar_multiplication.py").read_text().replace(
        "s = 3.14", "s = 'x'"))
    bad = KernelBenchTask(tmp_path / "text.py", check_sizes=[{"M": 2, "N": 2}], bench_sizes=[], dtype="float32",
                          redraw_params=True)
    with pytest.raises(TaskError, match=r"get_inputs\(\) item 1 is str, not a tensor or a number"):
        bad.check_forward()


COUNTED = '''import torch
import torch.nn as nn

FORWARDS = [0]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, s: float) -> torch.Tensor:
        FORWARDS[0] += 1
        return self.fc(x) @ torch.eye(dim) * s


batch_size = 4
dim = 8


def get_inputs():
    return [torch.randn(batch_size, dim), 0.5]


def get_init_inputs():
    return []
'''


def test_the_forward_is_checked_once_in_the_driver_and_the_layout_comes_without_drawing_bench_data(tmp_path):
    """The driver runs the reference twice at start-up (it refuses a random forward); an evaluator or
    island, given the task the driver checked, runs none. What the GPU worker needs to know of the bench
    size's inputs (how many, which are numbers) comes from a draw on the meta device: a bench size whose
    inputs would take terabytes still answers. `evo check`'s parameter finding runs the reference as the
    checks do (float64, tensors the forward makes too)."""
    from evo.app.check import reference_findings

    (tmp_path / "counted.py").write_text(COUNTED)
    config = TaskConfig.model_validate({"kernelbench": "counted.py", "sizes": {
        "check": [{"batch_size": 3, "dim": 5}], "bench": [{"batch_size": 10**6, "dim": 10**6}]}})
    driver = build_task(config, tmp_path)
    assert isinstance(driver, KernelBenchTask)
    assert driver.namespace({"batch_size": 3, "dim": 5})["FORWARDS"] == [2]
    evaluator = build_task(config, tmp_path, check_forward=False)
    assert isinstance(evaluator, KernelBenchTask) and not evaluator._namespaces  # nothing ran, not even the module
    big = {"batch_size": 10**6, "dim": 10**6}
    info = task_info(evaluator, big)
    assert info["n_forward"] == 2 and info["scalars"] == [1]
    case = evaluator.cases(draws=1)[0]
    assert evaluator.reference_args(evaluator.case_data(case).inputs[:2], case.size)[1] == 0.5
    params = next(f for f in reference_findings(evaluator) if f.name == "parameters matter")
    assert params.ok, params.detail


def test_references_drawn_in_threads_at_once_match_those_drawn_alone_and_leave_the_default_dtype(tmp_path):
    """`evo run --executor local` runs each evaluator on a thread of one process: the reference's torch
    state (the global random generator get_inputs() draws from, the float64 default for tensors the
    forward makes) is process-wide, so two references drawn at once must not see each other's."""
    import threading

    (tmp_path / "counted.py").write_text(COUNTED)
    config = TaskConfig.model_validate({"kernelbench": "counted.py",
                                        "sizes": {"check": [{"batch_size": 64, "dim": 64}]}})
    alone = build_task(config, tmp_path)
    cases = alone.cases(draws=2)
    want = {c: alone.case_data(c).expected[0] for c in cases}
    failures: list[str] = []

    def draw() -> None:
        for _ in range(15):
            task = build_task(config, tmp_path, check_forward=False)
            for c in cases:
                try:
                    got = task.case_data(c).expected[0]
                except TaskError as e:
                    failures.append(str(e))
                    continue
                if not np.array_equal(got, want[c]):
                    failures.append(f"{c.label()}: another draw")

    threads = [threading.Thread(target=draw) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]
    assert torch.get_default_dtype() == torch.float32
