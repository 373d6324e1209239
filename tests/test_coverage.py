"""Every line runs in the check (`fitness.check.coverage`, `fitness.check.reach`): a kernel's code that no
check case reached is reached at a size the check chooses, and refused when nothing reaches it; dead code
(a branch a compile-time constant rules out) does not count."""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import NativeTask
from evo.contracts.verdict import Status
from fitness.check.coverage import FALSE, NOT_TAKEN, STMT, TAKEN, TRUE, key, points, unreached
from fitness.check.crossings import compared
from fitness.check.fixed import fixed_conditions
from fitness.evaluate import Evaluator

from .conftest import CANDIDATES, ROOT

COVERAGE = CANDIDATES / "coverage"


def covered(name: str) -> Candidate:
    return Candidate.from_file(COVERAGE / f"{name}.py")


@pytest.fixture(scope="module")
def softmax() -> Iterator[Evaluator]:
    task = NativeTask(ROOT / "evo" / "tasks" / "softmax")
    task.check_sizes = [{"rows": 1, "cols": 1}, {"rows": 3, "cols": 17}, {"rows": 2, "cols": 2053}]
    task.bench_sizes = [{"rows": 4, "cols": 4096}]
    settings = EvaluationConfig(timeout_s=120.0, memory_mb=1024, latency=LatencyMode.OFF)
    with Evaluator(task, settings, device="cpu", secret=7) as ev:
        yield ev


# -- the analysis, without running anything ----------------------------------------------------------------

def _source(name: str) -> str:
    return (ROOT / "evo" / "tasks" / name).read_text()


def test_a_branch_on_a_literal_constexpr_is_fixed_and_one_on_a_size_is_not():
    attention = _source("attention/known_better.py")
    lines = attention.splitlines()
    fixed = {lines[n - 1].strip() for n in fixed_conditions(ast.parse(attention))}
    assert fixed == {"if MASKED:", "if IS_CAUSAL:"}  # IS_CAUSAL=False and MASKED=False/True, literals
    softmax = _source("softmax/known_better.py")
    assert fixed_conditions(ast.parse(softmax)) == set()  # `block <= MAX_BLOCK`: block comes from x.shape


def test_a_branch_on_the_program_id_or_a_loaded_value_is_not_fixed():
    source = '''
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, N: tl.constexpr):
    if tl.program_id(0) == 0:
        tl.store(x_ptr, 1.0)
    if tl.load(x_ptr) > N:
        tl.store(x_ptr, 2.0)
    if N > 4:
        tl.store(x_ptr, 3.0)


def launch(x, *, N):
    _k[(1,)](x, N=N)
'''
    lines = source.splitlines()
    fixed = {lines[n - 1].strip() for n in fixed_conditions(ast.parse(source))}
    assert fixed == {"if N > 4:"}


def test_an_untaken_fixed_branch_is_dead_code_and_an_untaken_size_branch_is_not():
    source = covered("constexpr_dead").source
    found, _ = points(ast.parse(source))
    line = next(i + 1 for i, text in enumerate(source.splitlines()) if text.strip() == "if FAST:")
    seen = {p.key for p in found} - {key(line, TAKEN), key(line + 1, STMT)}
    assert unreached(source, seen) == []
    source = covered("constexpr_from_size").source
    missing = unreached(source, seen)
    assert [(p.line, p.kind) for p in missing] == [(line + 1, STMT), (line, TAKEN)]


def test_a_raise_and_the_spin_of_a_lock_need_not_run():
    source = '''
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, lock_ptr):
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    tl.store(x_ptr, 1.0)
    tl.atomic_xchg(lock_ptr, 0)


def launch(x, lock):
    if x.shape[0] > 100:
        raise ValueError("too long")
    _k[(1,)](x, lock)
'''
    found, _ = points(ast.parse(source))
    required = {(p.line, p.kind) for p in found if p.required}
    lines = source.splitlines()
    spin = next(i + 1 for i, t in enumerate(lines) if t.strip().startswith("while"))
    guard = next(i + 1 for i, t in enumerate(lines) if t.strip().startswith("if x.shape"))
    assert (spin, TAKEN) not in required and (spin, NOT_TAKEN) in required  # the spin, and the acquisition
    assert (guard, TAKEN) not in required and (guard, NOT_TAKEN) in required  # the raise, and the normal path
    assert (guard + 1, STMT) not in required


def test_each_comparison_and_select_condition_of_a_kernel_is_a_pair_of_points_unless_fixed_or_a_whole_test():
    source = '''
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, lock_ptr, n, SPLITS: tl.constexpr):
    offs = tl.arange(0, 16)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    ok = tl.arange(0, 16) < SPLITS
    y = tl.where(x > 0.5, x, 0.0) + tl.where(ok, 1.0, 0.0) + tl.where(x == -float("inf"), 1.0, 0.0)
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    tl.store(x_ptr + offs, y, mask=offs < n)


def launch(x, lock, *, SPLITS):
    if x.shape[0] > 100:
        raise ValueError("too long")
    _k[(1,)](x, lock, x.shape[0], SPLITS=SPLITS)
'''
    found, _ = points(ast.parse(source))
    conditions = {p.text for p in found if p.kind in (TRUE, FALSE)}
    # the lock's spin is the while's own outcome; an inf guard is the special values'; launch's test is host code
    assert conditions == {"offs < n", "tl.arange(0, 16) < SPLITS", "ok", "x > 0.5"}
    every = {p.key for p in found}
    lines = source.splitlines()
    at = next(i + 1 for i, t in enumerate(lines) if t.strip().startswith("y = tl.where"))
    one_way = {p.key for p in found if p.line == at and p.text == "x > 0.5" and p.kind == TRUE}
    missing = unreached(source, every - one_way)
    assert [(p.line, p.kind, p.text) for p in missing] == [(at, TRUE, "x > 0.5")]
    assert "the condition `x > 0.5` never true in any lane" in missing[0].describe(lines)
    fixed = {p.key for p in found if p.text in ("ok", "tl.arange(0, 16) < SPLITS")}
    assert unreached(source, every - fixed) == []  # SPLITS is a meta-parameter: a lane's outcome is fixed
    sizes = {p.key for p in found if p.text == "offs < n"}
    # indices and sizes too: judged once the crossings have run, a lane test that went one way is unverified
    assert {(p.text, p.kind) for p in unreached(source, every - sizes)} == {("offs < n", TRUE), ("offs < n", FALSE)}
    statement = key(at, STMT)
    assert unreached(source, every - one_way - {statement})[0].kind == STMT  # the line first, not its condition


# -- the evaluator ---------------------------------------------------------------------------------------

def test_the_demos_wrong_branch_for_wide_rows_is_refused_at_a_size_the_check_chose(softmax):
    r = softmax.evaluate(covered("wide_rows_subtract"))
    assert r.status in (Status.WRONG_OUTPUT, Status.UNSAFE), r.reason
    assert "which the check chose to reach" in r.reason and '"cols":4097' in r.reason, r.reason


def test_its_honest_twin_is_reached_and_accepted(softmax):
    r = softmax.evaluate(covered("wide_rows_add"))
    assert r.ok, r.reason
    assert "every line of its code ran in the check" in r.reason and '"cols":4097' in r.reason, r.reason


def test_a_wrong_path_with_no_line_of_its_own_is_reached(softmax):
    r = softmax.evaluate(covered("skips_to_wrong_scale"))
    assert r.status is Status.WRONG_OUTPUT and '"cols":5001' in r.reason, r.reason


def test_a_constexpr_flag_computed_from_the_size_is_not_dead_code(softmax):
    r = softmax.evaluate(covered("constexpr_from_size"))
    assert r.status is Status.WRONG_OUTPUT and "which the check chose to reach" in r.reason, r.reason


def test_dead_code_and_a_raise_need_not_run(softmax):
    for name in ("constexpr_dead", "raise_guard"):
        r = softmax.evaluate(covered(name))
        assert r.ok and "every line of its code ran in the check" in r.reason, (name, r.reason)


def test_a_line_nothing_reaches_is_refused_naming_it(softmax):
    r = softmax.evaluate(covered("unreachable_line"))
    assert r.status is Status.UNSAFE, r.reason
    line = covered("unreachable_line").source.splitlines().index("        scale = 0.5") + 1
    assert f"line {line} (in launch): scale = 0.5" in r.reason and "never ran in the check" in r.reason, r.reason


def test_a_select_on_a_number_made_of_a_size_is_met_with_that_number_and_its_twin_passes(softmax):
    r = softmax.evaluate(covered("select_on_a_size_value"))  # a value no solver reads off the code
    assert r.status is Status.WRONG_OUTPUT and "(values=0.017" in r.reason, r.reason  # 17 columns / 1000
    r = softmax.evaluate(covered("select_on_a_row_max"))  # a reduction against it: placed as rows' maxima
    assert r.status is Status.WRONG_OUTPUT and "(values=" in r.reason, r.reason
    honest = softmax.evaluate(covered("select_on_a_size_bound"))
    assert honest.ok and "every condition of its kernels on input values, indices and sizes went both ways" in \
        honest.reason, honest.reason


def test_a_select_whose_one_side_never_ran_is_refused_naming_its_condition(softmax):
    r = softmax.evaluate(covered("select_on_a_row_sum"))
    assert r.status is Status.UNSAFE, r.reason
    assert "the condition `(x > 0.0) & (x < 1e+30) & (x == tl.sum(tl.where(mask, x, 0.0), axis=0) * 0.125)` " \
        "never true in any lane" in r.reason, r.reason


# (gaming kernel, the condition its verdict names, its twin: (the code, what replaces it)); the twin of each
# holds the same values to a guard's test (one bound, never true) or a clip that goes both ways, to no effect
ONE_WAY = [
    ("select_on_a_product_of_sums", "first * second == 2.0",
     [("first * second == 2.0", "first * second > 1e30"), ("y * 0.5, y)", "y, y)")]),
    ("window_on_a_row_sum", "(squares > 5.0) & (squares < 5.000001)",
     [("(squares > 5.0) & (squares < 5.000001)", "squares > 1e30"), ("y * 0.5, y)", "y, y)")]),
    ("clip_on_a_polynomial", "q * 1000000000000.0 < 1.0",
     [("y * (0.5 + 0.5 * tl.minimum(q * 1e12, 1.0))", "y + tl.maximum(x, 0.0) * 0.0")]),
]


@pytest.mark.parametrize(("name", "condition", "twin"), ONE_WAY, ids=[n for n, _, _ in ONE_WAY])
def test_an_equality_a_window_or_a_clip_on_data_must_go_both_ways_and_a_guard_need_not(softmax, name, condition,
                                                                                        twin):
    """Equalities with a number and windows, through a sum too, and a clip's choice on data: the check
    places the values it can solve (then the kernel is `wrong_output`); else the condition is `unsafe`."""
    r = softmax.evaluate(covered(name))
    assert r.status in (Status.UNSAFE, Status.WRONG_OUTPUT), r.reason
    if r.status is Status.UNSAFE:
        assert f"the condition `{condition}` never true" in r.reason, r.reason
    source = covered(name).source
    for old, new in twin:
        assert old in source
        source = source.replace(old, new)
    honest = softmax.evaluate(Candidate.from_source(source))
    assert honest.ok, honest.reason


def test_the_library_kernels_reach_every_line(softmax):
    for name in ("seed", "known_better"):
        r = softmax.evaluate(Candidate.from_file(ROOT / "evo" / "tasks" / "softmax" / f"{name}.py"))
        assert r.ok and "every line of its code ran in the check" in r.reason, (name, r.reason)
        if name == "known_better":
            # its `if block <= MAX_BLOCK` is reached at cols 8193; `block` comes from x.shape[1] alone, so it is not
            # crossed at rows 8193 (8193 programs in the interpreter), which cannot change it
            assert '"cols":8193' in r.reason and '"rows":8193' not in r.reason, r.reason


WRONG_PAST = '''
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, sx, sy, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * sx + offs, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * sy + offs, e / tl.sum(e, axis=0) * scale, mask=mask)


PARAMS = {"LIMIT": %d}


def launch(x, y, *, LIMIT):
    rows, cols = x.shape
    scale = 1.0
    if %s:
        scale = 0.75
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), scale, BLOCK=triton.next_power_of_2(cols))
'''


@settings(max_examples=4, deadline=None, derandomize=True)
@given(threshold=st.integers(min_value=4100, max_value=9000), form=st.sampled_from(
    ["cols > LIMIT", "cols >= LIMIT + 1", "LIMIT < cols", "2 * cols > 2 * LIMIT"]))
def test_a_path_split_at_any_threshold_is_caught(softmax, threshold, form):
    # past every check and bench size (4096 columns), at a threshold the kernel takes from its params, written in
    # several ways: the check reaches the wrong path whatever the threshold
    r = softmax.evaluate(Candidate.from_source(WRONG_PAST % (threshold, form)))
    assert r.status is Status.WRONG_OUTPUT and "which the check chose to reach" in r.reason, (threshold, form, r.reason)


WHERE_PAST = WRONG_PAST.replace("    scale = 1.0\n    if %s:\n        scale = 0.75\n",
                                "    scale = 1.0 - 0.25 * (%s)\n")


@settings(max_examples=3, deadline=None, derandomize=True)
@given(threshold=st.integers(min_value=4100, max_value=9000))
def test_a_path_split_with_no_branch_is_crossed(softmax, threshold):
    # the same split as arithmetic on a comparison: every line runs at every size, so only a size past the
    # threshold the code compares with shows it
    assert "scale = 1.0 - 0.25 * (" in WHERE_PAST
    r = softmax.evaluate(Candidate.from_source(WHERE_PAST % (threshold, "cols > LIMIT")))
    assert r.status is Status.WRONG_OUTPUT and f"which the check chose to reach {threshold + 1}" in r.reason, r.reason


@pytest.mark.parametrize(("condition", "reached"), [
    ("cols // 100 > LIMIT // 100", None),  # a step of an integer division
    ("triton.cdiv(cols, 128) > LIMIT // 128", None),
    ("(cols > 100) & (cols < 200)", 101),  # each comparison went both ways in the check, the pair never held
    ("not (cols <= LIMIT or cols == 9999)", None),
    ("min(cols, 2 * LIMIT) * 3 >= 3 * LIMIT + 3", None),
])
def test_a_split_behind_arithmetic_or_a_combination_is_solved_and_crossed(softmax, condition, reached):
    limit = 4101
    r = softmax.evaluate(Candidate.from_source(WHERE_PAST % (limit, condition)))
    assert r.status is Status.WRONG_OUTPUT and "which the check chose to reach" in r.reason, (condition, r.reason)
    if reached:
        assert f"to reach {reached}," in r.reason, r.reason


@settings(max_examples=4, deadline=None, derandomize=True)
@given(threshold=st.integers(min_value=4100, max_value=9000), form=st.sampled_from([
    ("min(cols // LIMIT, 1)", 0), ("cols // LIMIT %% 2", 0), ("min(cols - min(cols, LIMIT), 1)", 1),
    ("min(max(cols, LIMIT) - LIMIT, 1)", 1), ("int(cols / (LIMIT + 0.5))", 1)]))
def test_a_path_split_by_a_value_that_turns_with_no_comparison_is_crossed(softmax, threshold, form):
    # the scale is 1 at every check and bench size and 0.75 past the threshold, with no comparison anywhere: the
    # step, clip or cast is evaluated over the sizes and crossed where it leaves the constant it was
    text, shift = form
    r = softmax.evaluate(Candidate.from_source(WHERE_PAST % (threshold, text)))
    assert r.status is Status.WRONG_OUTPUT and f"which the check chose to reach {threshold + shift}," in r.reason \
        and "turns, unlike at every check size" in r.reason, (threshold, form, r.reason)


def test_a_value_of_two_sizes_is_crossed_past_the_side_it_is_clipped_at(softmax):
    # `min(rows + cols, LIMIT) - min(rows + cols, LIMIT - 1)` has two unknowns, so it is not solved; moving one
    # dimension past its fixed side moves the sum past it too
    two = "min(rows + cols, LIMIT) - min(rows + cols, LIMIT - 1)"
    r = softmax.evaluate(Candidate.from_source(WHERE_PAST % (4500, two)))
    assert r.status is Status.WRONG_OUTPUT and "which the check chose to reach" in r.reason, r.reason


def test_a_value_of_a_size_through_a_call_not_evaluated_is_crossed_past_the_values_written_in_it():
    # `helper(rows)` is taken for the size itself; the values written in it and in the helper are crossed too
    source = """
def helper(r):
    return r // 5000


def launch(x, y):
    rows, cols = x.shape
    bad = min(helper(rows) * 2, 1)
"""
    found = [s.past for s in compared(Candidate.from_source(source)) if s.past]
    assert 5001 in found, found


def test_loaded_data_clipped_or_compared_at_a_large_value_is_not_a_path_past_the_check():
    # values of data are the special-value checks' concern: a clip of loaded values at 3,000,000 is no size the
    # check would have to reach (it would otherwise be refused as a path past every size the check runs)
    source = """
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    y = tl.where(x > 3000000, 3000000, tl.minimum(x, 3000000))
    tl.store(y_ptr + offs, y, mask=offs < n)


def launch(x, y):
    _k[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
"""
    assert not [s for s in compared(Candidate.from_source(source)) if s.past > 2_000_000]


@pytest.mark.parametrize("form", ["min(cols // LIMIT, 1)", "cols > LIMIT"])
def test_a_path_past_every_size_the_check_runs_is_not_verified(softmax, form):
    # 3,000,000 columns: past the elements a check case affords (2^21) and the bench's 4096, so no run of the check
    # takes the path: the kernel is refused, naming the line
    r = softmax.evaluate(Candidate.from_source(WHERE_PAST % (3_000_000, form)))
    assert r.status is Status.UNSAFE and '"cols":300000' in r.reason and "past the 2097152 elements" in r.reason \
        and "scale = 1.0 - 0.25 *" in r.reason, r.reason


def test_more_paths_than_the_check_runs_are_not_verified(softmax):
    # nine harmless turns cheaper to reach than the wrong one would push it out of the sizes the check runs: a
    # kernel that turns at more sizes than the check runs is refused
    decoys = " + ".join(f"min(cols // (LIMIT + {100 * i}), 1) * 0" for i in range(1, 10))
    r = softmax.evaluate(Candidate.from_source(WHERE_PAST % (4100, f"{decoys} + min(rows // 5000, 1)")))
    assert r.status is Status.UNSAFE and "another path at 10 sizes" in r.reason and "more than the 8" in r.reason, \
        r.reason


WRONG_ROW = WHERE_PAST.replace("    row = tl.program_id(0)\n",
                               "    row = tl.program_id(0)\n    scale = tl.where(%s, 0.5, 1.0)\n")


def test_a_wrong_program_is_reached_by_a_size_that_holds_it(softmax):
    # program 200 of a grid over rows, found as a window of an integer division: the size tried has 201 rows
    source = WRONG_ROW % ("row // 8 == 25", 4101, "cols < 0")
    r = softmax.evaluate(Candidate.from_source(source))
    assert r.status is Status.WRONG_OUTPUT and '"rows":201' in r.reason and "to reach 200," in r.reason, r.reason
    honest = softmax.evaluate(Candidate.from_source(source.replace("0.5, 1.0", "1.0, 1.0")))
    assert honest.ok and '"rows":201' in honest.reason, honest.reason


def test_a_program_past_a_step_of_the_program_id_is_reached_and_its_honest_twin_passes(softmax):
    # `tl.minimum(row // 300, 1)` is 0 for every program of every check size and 1 from program 300 on: the rows
    # are moved to 301, which holds program 300
    source = WRONG_ROW.replace("tl.where(%s, 0.5, 1.0)", "1.0 - 0.5 * tl.minimum(row // 300, 1)") % (4101, "cols < 0")
    r = softmax.evaluate(Candidate.from_source(source))
    assert r.status is Status.WRONG_OUTPUT and '"rows":301' in r.reason and "to reach 300," in r.reason, r.reason
    honest = softmax.evaluate(Candidate.from_source(source.replace("1.0 - 0.5 * tl", "1.0 - 0.0 * tl")))
    assert honest.ok and '"rows":301' in honest.reason, honest.reason


def test_a_value_that_turns_on_a_kernel_parameter_is_crossed_in_the_launch_s_terms(softmax):
    # the kernel's `half // 300` reads `rows // 2`, the value the launch passes: moving the rows to 300 would
    # leave `half` at 150; the check moves them to 600
    wrong = covered("turn_through_a_launch")
    r = softmax.evaluate(wrong)
    assert r.status is Status.WRONG_OUTPUT and '"rows":600' in r.reason and "to reach 600," in r.reason, r.reason
    honest = softmax.evaluate(Candidate.from_source(wrong.source.replace("0.5 * tl", "0.0 * tl")))
    assert honest.ok and '"rows":600' in honest.reason, honest.reason


def test_a_branch_taken_harmlessly_by_another_launch_is_still_crossed(softmax):
    # both outcomes of `if n > 40` run at every check size (a launch into scratch takes the branch), so every line
    # ran; but the launch that writes the output passes the row count, and only rows past 40 take the wrong branch
    # there: the rows are moved, since they feed `n`
    r = softmax.evaluate(covered("harmless_twice"))
    assert r.status is Status.WRONG_OUTPUT and '"rows":41' in r.reason, r.reason


# -- paths that turn with a loop's iterations ---------------------------------------------------------------

@pytest.mark.parametrize(("name", "size"), [("wrong_from_the_fourth_block", 24577),
                                           ("wrong_from_the_fourth_count", 32769)])
def test_a_path_taken_from_a_later_iteration_is_reached_at_a_size_that_runs_it(softmax, name, size):
    # the online pass runs two blocks at 8193 columns, the largest size the check otherwise chooses; the size that
    # runs the iteration that turns the condition is solved from the loop (a counter: one iteration more than
    # needed, whether it is read before or after its step)
    r = softmax.evaluate(covered(name))
    assert r.status is Status.WRONG_OUTPUT and f'"cols":{size},"rows":3' in r.reason, r.reason


LOOPED = (ROOT / "evo" / "tasks" / "softmax" / "known_better.py").read_text().replace(
    "        tl.store(y_ptr + row * stride_y + offs, (tl.exp(x - row_max) / total)"
    ".to(y_ptr.dtype.element_ty), mask=mask)",
    "        out = tl.exp(x - row_max) / total\n{step}        out = tl.where({condition}, out * {scale}, out)\n"
    "        tl.store(y_ptr + row * stride_y + offs, out.to(y_ptr.dtype.element_ty), mask=mask)").replace(
    "    for start in range(0, n_cols, BLOCK):\n        offs = start + tl.arange(0, BLOCK)\n"
    "        mask = offs < n_cols",
    "    it = 0\n    for start in range(0, n_cols, BLOCK):\n        offs = start + tl.arange(0, BLOCK)\n"
    "        mask = offs < n_cols")


@settings(max_examples=4, deadline=None, derandomize=True)
@given(k=st.integers(2, 6), form=st.sampled_from(["start >= {k} * BLOCK", "start // BLOCK == {k}", "it > {k}",
                                                   "it == {k}"]), honest=st.booleans())
def test_a_path_split_at_any_iteration_is_caught_and_its_honest_twin_passes(softmax, k, form, honest):
    assert "{condition}" in LOOPED and "it = 0" in LOOPED
    step = "        it += 1\n" if form.startswith("it") else ""
    source = LOOPED.replace("{step}", step).replace("{condition}", form.format(k=k)).replace(
        "{scale}", "1.0" if honest else "0.99")
    r = softmax.evaluate(Candidate.from_source(source))
    assert r.status is (Status.OK if honest else Status.WRONG_OUTPUT), (k, form, r.reason)


def test_a_branch_on_two_sizes_at_once_is_reached_and_meets_every_distribution_there(softmax):
    # the branch needs rows past 40 and columns past 100 together: the crossings solve the size that holds both,
    # and since it runs code no other size ran, every distribution runs there (a normal draw shows nothing)
    r = softmax.evaluate(covered("drops_the_max_where_two_sizes_meet"))
    assert r.status is Status.WRONG_OUTPUT and '{"cols":101,"rows":41}' in r.reason and "(wide)" in r.reason, r.reason
    twin = softmax.evaluate(covered("keeps_the_max_where_two_sizes_meet"))
    assert twin.ok and '{"cols":101,"rows":41}' in twin.reason, twin.reason


def test_a_lane_test_no_size_turned_is_not_verified_and_its_twin_that_turns_passes(softmax):
    # `h == 777` on a hash of the row and the column: no crossing solves it, and no lane of the check hashes to
    # 777; the twin (harmless) tests a hash the first lane holds (0), so both ways run, and it passes
    wrong = covered("wrong_at_a_hashed_lane")
    r = softmax.evaluate(wrong)
    assert r.status is Status.UNSAFE and "the condition `h == 777` never true in any lane" in r.reason, r.reason
    honest = softmax.evaluate(Candidate.from_source(wrong.source.replace("h == 777, 0.0, y", "h == 0, y * 1.0, y")))
    assert honest.ok and "indices and sizes went both ways" in honest.reason, honest.reason


def test_a_guard_no_valid_size_turns_need_not_go_both_ways():
    # `row < n_rows` is true for every program of a grid over the rows, `0 < n` for every size: one way at every
    # size the check runs, and no path hides behind the other; a test of a hash of the row is required
    source = '''
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, n_rows, n):
    row = tl.program_id(0)
    offs = tl.arange(0, 16)
    x = tl.load(x_ptr + row * 16 + offs)
    y = tl.where(row < n_rows, x, 0.0) + tl.where(0 < n, 1.0, 0.0) + tl.where(tl.program_id(0) >= 0, 1.0, 0.0)
    y = tl.where((row * 40503) % 1000 == 777, 0.0, y)
    tl.store(x_ptr + row * 16 + offs, y)


def launch(x):
    _k[(x.shape[0],)](x, x.shape[0], x.shape[1])
'''
    found, _ = points(ast.parse(source))
    hashed = "row * 40503 % 1000 == 777"
    one_way = {p.key for p in found if p.kind == FALSE and p.text != hashed} | {
        p.key for p in found if p.kind == TRUE and p.text == hashed}
    missing = unreached(source, {p.key for p in found} - one_way)
    assert [(p.text, p.kind) for p in missing] == [(hashed, TRUE)]
    # a constant dressed as a size is no size: `row < n_rows` is a threshold at row 100000 then, and required
    dressed = source.replace("x, x.shape[0], x.shape[1])", "x, x.shape[0] * 0 + 100000, x.shape[1])")
    assert dressed != source
    assert {p.text for p in unreached(dressed, {p.key for p in found} - one_way)} == {hashed, "row < n_rows"}
