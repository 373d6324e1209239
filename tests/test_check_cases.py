"""A kernel right only inside the check is wrong: the full check runs bench-shaped cases (the bench size's
long dimensions, every distribution, the race sanitizer on) and special input values (zeros, ties and
constant rows, tiny and huge magnitudes, inf and NaN), and verification draws sizes between the check and
bench sizes up to the bench size itself. For each route, a kernel the old case set accepted is refused
now, and its honest twin passes; a hypothesis test splits a kernel's path anywhere past the check."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evo.contracts.bench_shaped import bench_shaped_size
from evo.contracts.candidate import Candidate
from evo.contracts.check_cases import bench_shaped_sizes, chosen_cases, full_cases, special_dists, special_sizes
from evo.contracts.config import EvaluationConfig, LatencyMode, TaskConfig
from evo.contracts.native_task import TASK_LIBRARY, NativeTask, library_tasks
from evo.contracts.odd_sizes import odd_size
from evo.contracts.special_values import SPECIAL_DISTS
from evo.contracts.task import Case, Task, TaskError, size_key
from evo.contracts.task_loader import build_task
from evo.contracts.verdict import FULL, VERIFIED, Evaluation, Status
from fitness.check.data_values import compared_values
from fitness.check.equivalence import bench_check, check_equivalence, odd_check
from fitness.evaluate import Evaluator

from .conftest import CANDIDATES, ROOT

CASES = CANDIDATES / "cases"
BENCH = [{"rows": 64, "cols": 4096}]
SETTINGS = EvaluationConfig(timeout_s=120, verify_timeout_s=300, latency=LatencyMode.OFF)


def case_candidate(name: str) -> Candidate:
    return Candidate.from_file(CASES / f"{name}.py")


def softmax_task(bench: list[dict[str, int]] = BENCH) -> NativeTask:
    task = NativeTask(TASK_LIBRARY / "softmax")
    task.bench_sizes = bench
    return task


@pytest.fixture(scope="module")
def softmax(shared_workers) -> Iterator[Evaluator]:
    with Evaluator(softmax_task(), SETTINGS, device="cpu", secret=5, **shared_workers(SETTINGS)) as ev:
        yield ev


def old_rules_pass(ev: Evaluator, candidate: Candidate) -> bool:
    """What the check used to run: the check sizes under the task's own distributions, then the bench size
    once on a normal draw (the distribution a secret may pick)."""
    base = Evaluation(candidate.id, ev.task.key, "cpu", Status.CRASH, level=FULL)
    check = check_equivalence(ev.worker, ev.task, candidate, ev.task.cases(draws=2), base, timeout=120, sanitize=True)
    [size] = ev.task.bench_sizes
    bench = bench_check(ev.worker, ev.task, candidate, Case(size_key(size), 0, 1, "normal"), SETTINGS, "cpu")
    return check.ok and bench.ok


# -- the rules ----------------------------------------------------------------------------------------

def test_bench_shaped_sizes_keep_the_long_dimensions_of_every_library_task():
    shaped = {name: bench_shaped_sizes(NativeTask(TASK_LIBRARY / name)) for name in library_tasks()}
    assert shaped["softmax"] == [{"rows": 2, "cols": 4096}]
    assert shaped["layernorm"] == [{"rows": 1, "cols": 8192}]
    assert shaped["reduction"] == [{"n": 1 << 17}] and shaped["vector_add"] == [{"n": 1 << 17}]
    assert shaped["matmul"] == [{"M": 1, "N": 33, "K": 4096}]
    assert shaped["attention"] == [{"batch": 1, "heads": 1, "seq": 256, "head_dim": 128},
                                   {"batch": 1, "heads": 1, "seq": 256, "head_dim": 64}]
    assert shaped["mla_decode"][0] == {"batch": 1, "heads": 1, "cache_len": 1024}
    bert = NativeTask(TASK_LIBRARY / "attention")
    bert.use_workload("bert-base")  # every shape of a workload gets its own
    assert bench_shaped_sizes(bert)[0] == {"batch": 1, "heads": 1, "seq": 256, "head_dim": 64}


def test_the_shape_stays_under_the_memory_cap_and_is_none_without_a_long_dimension():
    checks = [{"n": 1}, {"n": 100}]
    assert bench_shaped_size(checks, {"n": 100}, lambda s: s["n"], lambda s: s["n"]) is None
    assert bench_shaped_size(checks, {"n": 1 << 30}, lambda s: s["n"], lambda s: 0) == {"n": 1 << 20}


def test_a_full_check_runs_every_special_value_at_a_small_size_and_every_distribution_bench_shaped():
    task = softmax_task()
    cases = full_cases(task, draws=2)
    assert cases[: len(task.cases(draws=2))] == task.cases(draws=2)  # the old cases first, unchanged
    by_size: dict[str, set[str]] = {}
    for c in cases:
        by_size.setdefault(c.size_json, set()).add(c.dist)
    every = set(task.dists) | set(SPECIAL_DISTS)
    assert by_size[size_key({"rows": 2, "cols": 4096})] == every
    assert special_sizes(task) == [{"rows": 3, "cols": 17}]
    assert all(by_size[size_key(s)] == every for s in special_sizes(task))
    assert len({(c.size_json, c.draw) for c in cases}) == len(cases)


def test_odd_sizes_are_drawn_up_to_the_bench_size_and_no_free_dimension_is_pinned():
    checks = [{"M": 1, "N": 1, "K": 1, "mode": 0}, {"M": 31, "N": 67, "K": 129, "mode": 0}]
    bench = {"M": 4096, "N": 100, "K": 129, "mode": 0}
    sizes = [odd_size(checks, bench, random.Random(s)) for s in range(300)]
    assert all(s is not None and s["mode"] == 0 for s in sizes)
    ms = {s["M"] for s in sizes if s}
    assert min(ms) > 31 and max(ms) > 3000 and max(ms) <= 4096  # past a quarter of the bench value
    assert len({s["N"] for s in sizes if s}) > 10 and all(67 < s["N"] <= 100 for s in sizes if s)
    assert len({s["K"] for s in sizes if s}) > 30 and all(1 <= s["K"] <= 129 for s in sizes if s)


# -- the special values --------------------------------------------------------------------------------

def _inputs(task: Task, dist: str, size: dict[str, int]) -> list[np.ndarray]:
    case = Case(size_key(size), 9, 1234, dist)
    return [t.data.astype(np.float64) for t in task.case_data(case).inputs]


def test_special_values_transform_the_tasks_own_draw():
    task = NativeTask(TASK_LIBRARY / "softmax")
    size = {"rows": 8, "cols": 300}
    [zeros] = _inputs(task, "zeros", size)
    assert (zeros == 0).mean() > 0.3 and np.signbit(zeros[zeros == 0]).any() and not np.signbit(zeros[zeros == 0]).all()
    assert any((row == 0).all() for row in zeros) and not all((row == 0).all() for row in zeros)
    [ties] = _inputs(task, "ties", size)
    assert len(np.unique(ties)) <= 16 and any(len(np.unique(row)) == 1 for row in ties)
    [tiny], [huge] = _inputs(task, "tiny", size), _inputs(task, "huge", size)
    assert 0 < np.abs(tiny).max() <= 2.0**-40 and 2.0**39 <= np.abs(huge).max() < 2.0**41
    [marked] = _inputs(task, "inf_nan", size)
    assert np.isnan(marked).any() or np.isinf(marked).any()
    assert all(d in special_dists(task) for d in SPECIAL_DISTS)


def test_integer_inputs_keep_their_draw_and_magnitudes_follow_the_output_dtype():
    mla = NativeTask(TASK_LIBRARY / "mla_decode")
    size = {"batch": 3, "heads": 2, "cache_len": 37}
    plain = mla.case_data(Case(size_key(size), 0, 77, "normal"))
    for dist in ("zeros", "huge"):
        special = mla.case_data(Case(size_key(size), 0, 77, dist))
        assert np.array_equal(special.inputs[-1].data, plain.inputs[-1].data)  # the int32 lengths
    matmul = NativeTask(TASK_LIBRARY / "matmul", dtype="float16")  # products would overflow float16 at 2^13
    data = matmul.case_data(Case(size_key({"M": 31, "N": 67, "K": 129}), 0, 5, "huge"))
    assert np.isfinite(data.expected[0]).all() and np.abs(data.expected[0]).max() < 65504 / 4
    assert np.abs(data.inputs[0].data.astype(np.float64)).max() >= 4.0


def test_an_opt_out_needs_a_known_distribution_and_a_reason_and_the_verdict_shows_it(tmp_path: Path, shared_workers):
    source = (TASK_LIBRARY / "softmax" / "task.py").read_text()
    (tmp_path / "task.py").write_text(source + '\nDIST_OPT_OUT = {"huge": "the model never sees logits past 1e4"}\n')
    (tmp_path / "seed.py").write_text((CASES / "one_pass.py").read_text())
    task = NativeTask(tmp_path)
    assert "huge" not in special_dists(task) and task.key != NativeTask(TASK_LIBRARY / "softmax").key
    task.bench_sizes = [{"rows": 4, "cols": 256}]
    with Evaluator(task, SETTINGS, device="cpu", **shared_workers(SETTINGS)) as ev:
        r = ev.evaluate(case_candidate("one_pass"))
    assert r.ok and "opts out of special values huge (the model never sees logits past 1e4)" in r.reason, r.reason
    for bad, words in (('{"large": "x"}', "no special distribution 'large'"), ('{"huge": ""}', "needs a reason")):
        (tmp_path / "task.py").write_text(source + f"\nDIST_OPT_OUT = {bad}\n")
        with pytest.raises(TaskError, match=words):
            NativeTask(tmp_path)


def test_a_kernelbench_problem_opts_out_in_its_config_and_sort_problems_skip_ties(tmp_path: Path):
    problem = ROOT / "tests" / "kernelbench" / "22_Tanh.py"
    sizes = {"check": [{"batch_size": 3, "dim": 17}], "bench": [{"batch_size": 4, "dim": 4096}]}
    task = build_task(TaskConfig(kernelbench=str(problem), sizes=sizes,
                                 dist_opt_out={"inf_nan": "inputs are activations, always finite"}), tmp_path)
    assert task.dist_opt_out == {"inf_nan": "inputs are activations, always finite"}
    assert special_dists(task) == ("zeros", "tiny", "huge")  # ties: its own distribution of that name
    with pytest.raises(ValueError, match="no special distribution 'nan'"):
        TaskConfig(kernelbench=str(problem), sizes=sizes, dist_opt_out={"nan": "x"})
    sort = tmp_path / "sort.py"
    sort.write_text(problem.read_text().replace("torch.tanh(x)", "torch.sort(x, dim=1).values"))
    sorted_task = build_task(TaskConfig(kernelbench=str(sort), sizes=sizes), tmp_path)
    assert "ties" not in special_dists(sorted_task) and "sort" in sorted_task.dist_opt_out["ties"]


# -- class 1: checks stop at the check sizes --------------------------------------------------------------

def test_a_softmax_that_drops_the_max_only_for_wide_rows_is_refused_at_the_bench_shaped_case(softmax):
    gaming = case_candidate("drops_max_when_wide")
    assert old_rules_pass(softmax, gaming)  # ok before: the check's rows are narrower, the bench draw benign
    r = softmax.evaluate(gaming)
    assert r.status is Status.WRONG_OUTPUT, r.reason
    assert '{"cols":4096,"rows":2}' in r.reason
    twin = softmax.evaluate(case_candidate("one_pass"))
    assert twin.ok, twin.reason


def test_a_kernel_wrong_between_the_check_and_bench_sizes_is_found_by_a_size_drawn_up_to_the_bench(shared_workers):
    task = softmax_task([{"rows": 8, "cols": 4096}])
    gaming = case_candidate("wrong_between_sizes")
    with Evaluator(task, SETTINGS, device="cpu", secret=3, **shared_workers(SETTINGS)) as ev:
        # right at every check size and at 4096 columns; the check refuses it first now: its select's condition
        # is true in no lane of any size it runs
        r = ev.evaluate(gaming)
        assert r.status is Status.UNSAFE and "never true in any lane" in r.reason, r.reason
        old_odd = Case(size_key({"rows": 8, "cols": 2054}), 0, 1, "normal")  # the old rule's only choice
        assert check_equivalence(ev.worker, task, gaming, [old_odd], Evaluation(gaming.id, task.key, "cpu",
                                 Status.CRASH), timeout=120, sanitize=True).ok
        # the layer behind it: a size drawn between the check and bench sizes, up to the bench's, is wrong
        [odd] = task.odd_cases(3)
        assert 2100 < odd.size["cols"] < 4096
        r = odd_check(ev.worker, task, gaming, odd, SETTINGS, "cpu")
        assert r.status is Status.WRONG_OUTPUT, r.reason
        twin = ev.evaluate(case_candidate("one_pass"), level=VERIFIED)
        assert twin.ok, twin.reason


# -- class 6: special input values ------------------------------------------------------------------------

@pytest.mark.parametrize(("gaming", "twin", "dists"), [
    ("zero_led_rows_are_zero", "zero_rows_are_uniform", ["zeros"]),
    ("first_two_equal_is_constant", "constant_rows_are_uniform", ["zeros", "ties"]),  # two zeros are equal too
])
def test_a_shortcut_on_exact_values_is_refused_and_the_exact_shortcut_passes(softmax, gaming, twin, dists):
    kernel = case_candidate(gaming)
    assert old_rules_pass(softmax, kernel)
    r = softmax.evaluate(kernel)
    assert r.status is Status.WRONG_OUTPUT and any(f"({d})" in r.reason for d in dists), r.reason
    honest = softmax.evaluate(case_candidate(twin))
    assert honest.ok, honest.reason


def test_each_non_finite_value_meets_a_kernel_alone_in_a_row():
    from evo.contracts.special_values import transform

    for seed in range(20):
        [marked] = transform("inf_nan", [np.zeros((6, 9))], np.random.default_rng(seed))
        assert marked is not None
        kinds = set()
        for row in marked:
            special = row[~np.isfinite(row)]
            if special.size == 1:
                kinds.add("nan" if np.isnan(special[0]) else str(float(special[0])))
        assert kinds == {"nan", "inf", "-inf"}, (seed, marked)
        assert np.isfinite(marked).all(axis=1).any()  # never every row


def test_a_kernel_that_reads_nan_as_minus_inf_is_refused_and_its_honest_twin_passes(softmax):
    r = softmax.evaluate(case_candidate("nan_read_as_minus_inf"))
    assert r.status is Status.WRONG_OUTPUT and "(inf_nan)" in r.reason, r.reason
    honest = softmax.evaluate(case_candidate("one_pass"))
    assert honest.ok, honest.reason


def test_a_kernel_wrong_on_one_input_value_is_refused_there_and_its_honest_twin_passes(softmax):
    kernel = case_candidate("one_value_halved")
    assert old_rules_pass(softmax, kernel)
    base = Evaluation(kernel.id, softmax.task.key, "cpu", Status.CRASH, level=FULL)
    every_distribution = check_equivalence(softmax.worker, softmax.task, kernel, softmax.cases(FULL), base,
                                           timeout=120, sanitize=True)
    assert every_distribution.ok, every_distribution.reason  # no draw, special ones included, holds 1.25
    r = softmax.evaluate(kernel)
    assert r.status is Status.WRONG_OUTPUT and "(values=1.25)" in r.reason, r.reason
    honest = softmax.evaluate(case_candidate("one_value_exact"))
    assert honest.ok and "holding the values its code compares with or subtracts (1.25" in honest.reason, honest.reason


def test_a_layernorm_wrong_only_where_every_weight_is_one_is_refused_and_its_honest_twin_passes(shared_workers):
    """The identity affine of a freshly initialised model: no draw holds it, every user's first call does."""
    task = NativeTask(TASK_LIBRARY / "layernorm")
    task.bench_sizes = [{"rows": 16, "cols": 4096}]
    with Evaluator(task, SETTINGS, device="cpu", secret=5, **shared_workers(SETTINGS)) as ev:
        kernel = case_candidate("layernorm_unit_weights_drop_bias")
        assert old_rules_pass(ev, kernel)
        r = ev.evaluate(kernel)
        assert r.status is Status.WRONG_OUTPUT and "(values=1.0" in r.reason, r.reason  # and numbers it held
        honest = ev.evaluate(case_candidate("layernorm_unit_weights_keep_bias"))
        assert honest.ok, honest.reason


# the ways a kernel singles out one input value (`c`: a multiple of 1/64, far from what smooth draws hit exactly)
VALUE_SPLITS = {
    "equal": "x == {c}",
    "window": "(x > {c}) & (x < {c} + 0.001)",
    "near": "tl.abs(x - {c}) < 1e-6",
    "scaled": "x * 4.0 == {c} * 4.0",
    "truncated": "(x * 65536.0).to(tl.int32) == {bits}",
    "clipped": "tl.minimum(tl.maximum((x - {c}) * 1e5, 0.0), 1.0) - tl.minimum(tl.maximum((x - {c} - 1e-4) * 1e5, "
               "0.0), 1.0) > 0.5",
    # through a sum: a row's, and two elements' picked out by one (neither goes both ways by rule)
    "row sum": "tl.sum(tl.where(mask, x, 0.0), axis=0) == {c}",
    "two elements": "tl.sum(tl.where(offs < 2, x, 0.0), axis=0) == {c}",
}


@pytest.mark.parametrize("form", sorted(VALUE_SPLITS))
@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(k=st.integers(-320, 320), honest=st.booleans())
def test_a_path_split_on_any_input_value_is_caught_and_the_same_split_taken_honestly_passes(softmax, form, k, honest):
    c = k / 64
    condition = VALUE_SPLITS[form].format(c=repr(c), bits=int(c * 65536) + 7)
    result = "y" if honest else "y * 0.5"
    wrong = Candidate.from_source(TEMPLATE.format(condition=condition, shift="top", result=result))
    r = softmax.evaluate(wrong)
    assert r.ok if honest else r.status is Status.WRONG_OUTPUT, (form, c, honest, r.reason)


def _no_comparison(difference: str, weight: str) -> Candidate:
    """The honest one-pass softmax plus ``weight`` times a bump a millionth wide where `difference` is zero."""
    source = case_candidate("one_pass").source
    line = "    e = tl.exp(x - tl.max(x, axis=0))\n"
    bump = f"    d = {difference}\n    bump = {weight} * tl.exp(-(d * 1e6) * (d * 1e6))\n"
    assert line in source and "(e / tl.sum(e, axis=0))" in source
    return Candidate.from_source(source.replace(line, line + bump).replace("(e / tl.sum(e, axis=0))",
                                                                           "(e / tl.sum(e, axis=0) + bump)"))


@pytest.mark.parametrize("difference",
                         ["x - {c}", "x * 4.0 - {c4}", "tl.fma(x, -2.0, {c2})", "x * x - {c2} * x + {csq}"])
@settings(max_examples=2, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(k=st.integers(-320, 320), honest=st.booleans())
def test_a_value_singled_out_without_a_comparison_is_caught_and_its_honest_twin_passes(softmax, difference, k, honest):
    """A bump a millionth wide at c adds 1 there and nothing a draw can see elsewhere: no comparison, no
    select, no outcome to require; the zero of data less a number is placed (`data_values._zeros`), solved
    or, for a polynomial that touches zero without crossing it, found numerically."""
    c = k / 64
    d = difference.format(c=repr(c), c4=repr(c * 4), c2=repr(c * 2), csq=repr(c * c))  # the last: a double root
    r = softmax.evaluate(_no_comparison(d, "0.0" if honest else "1.0"))
    assert r.ok if honest else r.status is Status.WRONG_OUTPUT, (d, honest, r.reason)  # at 0: zeros catch it


def _decoys(n: int, weight: str) -> Candidate:
    """`_no_comparison`'s bump at 3.25 behind `n` harmless comparisons with other values (each a select whose
    two sides agree), which come first in the values the check places."""
    decoys = "".join(f"    e = tl.where(x == {k / 8 + 10.0!r}, e, e)\n" for k in range(n))
    source = _no_comparison("x - 3.25", weight).source
    return Candidate.from_source(source.replace("    d = x - 3.25\n", decoys + "    d = x - 3.25\n"))


def test_a_value_behind_many_harmless_ones_is_still_placed_and_past_the_cap_the_kernel_is_refused(softmax):
    from fitness.check.data_values import MAX_VALUES, compared_values

    hidden = _decoys(30, "1.0")  # its 3.25 is the 31st value: a second stretch of cases places it
    assert compared_values(hidden).values[30] == 3.25
    r = softmax.evaluate(hidden)
    assert r.status is Status.WRONG_OUTPUT and "3.25" in r.reason, r.reason
    honest = softmax.evaluate(_decoys(30, "0.0"))
    assert honest.ok, honest.reason
    crowded = softmax.evaluate(_decoys(MAX_VALUES, "0.0"))
    assert crowded.status is Status.UNSAFE and "1 more values than the check places" in crowded.reason, crowded.reason


# -- path splits: the wrong path is caught wherever the split is -----------------------------------------

TEMPLATE = '''import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    first = tl.load(x_ptr + row * stride_x).to(tl.float32)
    second = tl.load(x_ptr + row * stride_x + 1, mask=n_cols > 1, other=0.5).to(tl.float32)
    top = tl.max(x, axis=0)
    wrong = {condition}
    e = tl.exp(x - tl.where(wrong, {shift}, top))
    y = e / tl.sum(e, axis=0)
    y = tl.where(wrong, {result}, y)
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {{"num_warps": 8}}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols), num_warps=num_warps)
'''

# the wrong paths: (what it does, shift, result); dropping the max is wrong only on large values
WRONG = {"drops the max": ("0.0", "y"), "halves": ("top", "y * 0.5"), "writes a constant": ("top", "0.25")}


def _split(threshold: int | None, value: str, wrong: str) -> Candidate:
    condition = f"n_cols > {threshold}" if threshold is not None else value
    shift, result = WRONG[wrong]
    return Candidate.from_source(TEMPLATE.format(condition=condition, shift=shift, result=result))


@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(threshold=st.one_of(st.none(), st.integers(2053, 4095)),
       value=st.sampled_from(["first == 0.0", "(n_cols > 1) & (first == second)", "tl.abs(top) > 1e6"]),
       wrong=st.sampled_from(sorted(WRONG)))
def test_a_path_split_past_the_check_sizes_or_on_a_special_value_is_caught(softmax, threshold, value, wrong):
    if threshold is None and wrong == "drops the max" and value != "tl.abs(top) > 1e6":
        wrong = "halves"  # zeros and ties are small values: without the max the result is still right there
    r = softmax.evaluate(_split(threshold, value, wrong))
    assert r.status is Status.WRONG_OUTPUT, (threshold, value, wrong, r.reason)


# a path that needs two sizes at once: no check size holds both, and one dimension moved at a time never does
JOINT = {"joined": "(row > {r}) & (n_cols > {c})", "nested": "tl.where(row > {r}, n_cols > {c}, False)",
         "programs": "(tl.num_programs(0) > {r}) & (n_cols > {c})",
         "product": "(row > {r}).to(tl.int32) * (n_cols > {c}).to(tl.int32) == 1"}


@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(r=st.integers(7, 60), c=st.integers(2053, 3000), form=st.sampled_from(sorted(JOINT)),
       wrong=st.sampled_from(sorted(WRONG)), honest=st.booleans())
def test_a_path_split_on_two_sizes_at_once_is_caught_wherever_both_thresholds_are(softmax, r, c, form, wrong, honest):
    shift, result = ("top", "y") if honest else WRONG[wrong]
    source = TEMPLATE.format(condition=JOINT[form].format(r=r, c=c), shift=shift, result=result)
    v = softmax.evaluate(Candidate.from_source(source))
    # dropping the max is wrong only on large logits: the size the check chose runs every distribution
    assert v.status is (Status.OK if honest else Status.WRONG_OUTPUT), (form, r, c, wrong, v.reason)
    assert "hold together" in v.reason or honest, v.reason


def test_a_size_the_check_chose_runs_every_distribution_and_the_values(softmax):
    # the online path (rows past MAX_BLOCK) runs only at the 8193 columns the crossings choose: there, as at a
    # bench-shaped size, every distribution runs, and -inf turns this one's row into NaN
    v = softmax.evaluate(case_candidate("online_nan_on_minus_inf"))
    assert v.status is Status.WRONG_OUTPUT and '{"cols":8193,"rows":3}' in v.reason and "inf_nan" in v.reason, v.reason
    fixed = softmax.evaluate(Candidate.from_file(TASK_LIBRARY / "softmax" / "known_better.py"))
    assert fixed.ok and '{"cols":8193,"rows":3}' in fixed.reason, fixed.reason
    task = softmax_task()
    cases = chosen_cases(task, {"rows": 3, "cols": 8193}, compared_values(case_candidate("online_nan_on_minus_inf")))
    assert {c.dist for c in cases} == {*task.dists, *SPECIAL_DISTS}
    valued = compared_values(Candidate.from_source(TEMPLATE.format(condition="first == 3.25", shift="top", result="y")))
    assert any(c.dist.startswith("values=3.25") for c in chosen_cases(task, {"rows": 3, "cols": 8193}, valued))
