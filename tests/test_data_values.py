"""The values a kernel's code compares its data with (`fitness.check.data_values`) and the inputs that
hold them (`evo.contracts.special_values`, ``values=``): the analysis, without running anything."""

from __future__ import annotations

import numpy as np
import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.special_values import is_special, special_draw, values_dist
from fitness.check.data_values import compared_values

HEAD = '''import triton
import triton.language as tl

LIMIT = 0.5


@triton.jit
def _k(x_ptr, y_ptr, n, t, BLOCK: tl.constexpr, MARK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = x
'''
TAIL = '''    tl.store(y_ptr + offs, y, mask=offs < n)


PARAMS = {"BLOCK": 64, "SCALE": 4.0}


def launch(x, y, *, BLOCK, SCALE):
    n = x.numel()
    third = 1.0 / 3.0
    _k[(triton.cdiv(n, BLOCK),)](x, y, n, third, BLOCK=BLOCK, MARK=1.25)
'''


def values(line: str) -> list[float]:
    return list(compared_values(Candidate.from_source(HEAD + f"    y = {line}\n" + TAIL)).values)


@pytest.mark.parametrize(("line", "expected"), [
    ("tl.where(x == 1.0, 0.0, y)", [1.0]),
    ("tl.where(x == -1.5, 0.0, y)", [-1.5]),
    ("tl.where(x * 4.0 == 3.0, 0.0, y)", [0.75]),  # solved through the arithmetic
    ("tl.where(x * SCALE == 3.0, 0.0, y)", [0.75]),  # a meta-parameter
    ("tl.where(x - LIMIT == 1.0, 0.0, y)", [1.5, 0.5]),  # a module constant; then where x - LIMIT is zero
    ("tl.where(x == MARK, 0.0, y)", [1.25]),  # a constexpr launch passes
    ("tl.where(x == t, 0.0, y)", [1.0 / 3.0]),  # a value launch computes and passes
    ("tl.where(tl.exp(x) == 2.0, 0.0, y)", [float(np.log(2.0))]),
    ("tl.where(x == tl.sqrt(2.0) * LIMIT, 0.0, y)", [float(np.sqrt(2.0) * 0.5)]),  # a threshold computed
    ("tl.where(x.to(tl.int32, bitcast=True) == 0x3F800000, 0.0, y)", [1.0]),  # the bits of 1.0
    ("tl.where(x ** 0.01 == 1e10, 0.0, y)", []),  # out of range: nothing, and no error
    ("tl.where(x % 1e300 == 1e308, 0.0, y)", [1e308, 1.000000005e308, 1.0000000025e308]),  # finite midpoints
])
def test_a_comparison_is_solved_for_the_input_value_where_it_turns(line, expected):
    assert values(line) == pytest.approx(expected)


def test_a_window_an_absolute_difference_a_truncation_and_a_clip_yield_a_value_inside():
    window = values("tl.where((x > 3.25) & (x < 3.2500005), 0.0, y)")
    assert any(3.25 < v < 3.2500005 for v in window)  # the midpoint of the two bounds
    assert 2.75 in values("tl.where(tl.abs(x - 2.75) < 1e-6, 0.0, y)")
    hashed = values("tl.where((x * 1000.0).to(tl.int32) % 9973 == 1234, 0.0, y)")
    assert any(int(np.float32(v) * np.float32(1000.0)) % 9973 == 1234 for v in hashed)
    # no comparison: a steep clip that is 1 only between 3.000001 and 3.00001
    clip = values("y * (1.0 - tl.minimum(tl.maximum((x - 3.0) * 1e6, 0.0), 1.0) "
                  "+ tl.minimum(tl.maximum((x - 3.00001) * 1e6, 0.0), 1.0))")
    assert any(3.000001 < v < 3.00001 for v in clip)


def test_two_input_values_compared_a_number_apart_bring_that_difference():
    def apart(line: str) -> tuple[float, ...]:
        return compared_values(Candidate.from_source(HEAD + f"    y = {line}\n" + TAIL)).apart

    assert apart("tl.where((x != tl.max(x, axis=0)) & (x == tl.max(x, axis=0) - 0.7071), 0.0, y)") == (-0.7071,)
    assert apart("tl.where(tl.max(x, axis=0) - x == 0.7071, 0.0, y)") == (0.7071,)
    assert apart("tl.where(x == x, 0.0, y)") == ()


def test_comparisons_of_indices_and_sizes_bring_no_value_and_the_library_kernels_few():
    assert values("tl.where(offs < n, x, 0.0)") == []
    assert values("tl.where(x == -float('inf'), 0.0, y)") == []  # non-finite: the inf_nan distribution's
    from .conftest import ROOT
    for task in ("softmax", "attention", "reduction"):
        assert not compared_values(Candidate.from_file(ROOT / "evo" / "tasks" / task / "known_better.py"))
    # layer norm's one value is where its variance plus epsilon is zero
    assert compared_values(Candidate.from_file(ROOT / "evo" / "tasks" / "layernorm" / "known_better.py")).values == (
        -1e-05,)


@pytest.mark.parametrize(("line", "expected"), [
    ("y + 1e-30 / (x - 3.25)", [3.25]),  # a pole: no comparison
    ("y + tl.exp(-((x - 3.25) * 1e6) * ((x - 3.25) * 1e6))", [3.25]),  # a bump a millionth wide
    ("y + 1e-30 / (x * 4.0 - 13.0)", [3.25]),
    ("y + 1e-30 / tl.fma(x, 4.0, -13.0)", [3.25]),
    ("y + 1e-30 / (tl.exp(x) - 2.0)", [float(np.log(2.0))]),
    ("y + 1e-30 / (LIMIT + x)", [-0.5]),
    ("y + x * (x - x)", []),  # no number: nothing
    ("y + 1e-30 / (offs - 3)", []),  # an index: the crossings' concern
])
def test_data_less_a_number_is_solved_for_where_it_is_zero(line, expected):
    assert values(line) == pytest.approx(expected)


@pytest.mark.parametrize(("line", "expected"), [
    # a sum of a row alone among zeros is its one element's; a maximum of a constant row, that value's
    ("tl.where(tl.sum(x * 2.0, axis=0) == 3.0, 0.0, y)", [1.5, 3.0, 2.25]),
    ("tl.where(tl.max(tl.exp(x), axis=0) == 2.0, 0.0, y)", [float(np.log(2.0)), 2.0, (float(np.log(2.0)) + 2) / 2]),
])
def test_a_reduction_is_solved_through_to_its_argument(line, expected):
    assert values(line) == pytest.approx(expected)


def _placed(targets: list[float], shape: tuple[int, int], dtype: str = "float32", limit: float = np.inf):
    rng = np.random.default_rng(3)
    base = rng.standard_normal(shape)

    def reference(vals):
        [x] = vals
        return None if np.abs(x).max() > limit else [x * 2.0]

    [x], [expected], note = special_draw(values_dist(targets), [base], [base * 2.0], reference, seed=9, dtype=dtype,
                                         out_dtypes=[dtype], atols=[1e-5])
    return base, x, expected, note


def test_each_value_and_its_neighbours_are_placed_and_rows_take_it_as_maximum_minimum_or_every_element():
    assert is_special(values_dist([1.25])) and not is_special("normal")
    base, x, expected, note = _placed([1.25, -3.0], (12, 40))
    assert note == "" and np.array_equal(expected, x * 2.0)
    up = float(np.nextafter(np.float32(1.25), np.float32(2)))
    down = float(np.nextafter(np.float32(1.25), np.float32(0)))
    for v in (1.25, up, down, -3.0):
        assert (x == v).sum() >= 1, v
    tops = {float(r.max()) for r in x} | {float(r.min()) for r in x}
    assert {1.25, -3.0} & tops  # a row reduced before the comparison meets the value
    assert any(np.all(r == r[0]) for r in x)  # a constant row
    # a row holding the value alone among zeros: its sum, and a sum that picks out its first elements, is the value
    assert any((r[0] in (1.25, up, down) or r[0] == pytest.approx(-3.0)) and not r[1:].any() for r in x)
    assert not np.array_equal(x, base) and (x == base).any()  # some of the draw stays


def test_a_difference_is_placed_exactly_in_the_type_the_kernel_computes_in():
    rng = np.random.default_rng(1)
    base = rng.standard_normal((5, 50))
    [x], _, note = special_draw(values_dist([], [0.7071]), [base], [base], lambda v: [np.asarray(v[0])], seed=4,
                                dtype="float32", out_dtypes=["float32"], atols=[1e-5])
    assert note == "" and x is not None
    d = np.float32(0.7071)
    x32 = x.astype(np.float32)
    for row in x32:
        assert (row == row.max() - d).any() and (row == row.min() + d).any()
        assert (row[1:] - row[:-1] == d).any() and (row[:-1] - row[1:] == d).any()


def test_values_whose_reference_does_not_fit_are_dropped_the_largest_first():
    _, x, _, note = _placed([1.5, 1e6], (6, 30), limit=1e3)
    assert note == "" and (x == 1.5).any() and not (np.abs(x) > 1e3).any()
    _, _, _, note = _placed([1e6], (6, 30), limit=1e3)
    assert "no value" in note
    _, x16, _, _ = _placed([0.1], (6, 30), dtype="float16")  # rounded to the dtype, where the kernel compares
    assert (x16 == float(np.float16(0.1))).any()


def test_direct_data_is_what_a_load_gives_and_arithmetic_of_it_not_a_reduction():
    import ast

    from fitness.check.data_flow import data_names

    fn = ast.parse('''
def _k(x_ptr, n):
    x = tl.load(x_ptr + tl.arange(0, 16))
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    s = tl.sum(e, axis=0)
    i = tl.arange(0, 16) + n
''').body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert data_names(fn, is_launched=True) == {"x", "m", "e", "s"}
    assert data_names(fn, is_launched=True, direct=True) == {"x", "e"}
    assert "n" in data_names(fn, is_launched=False)  # a device function's parameters may be data


def test_the_probe_records_a_conditions_outcomes_and_a_number_held_for_every_lane():
    from types import SimpleNamespace

    from fitness.check.probes import Probes

    def lanes(*v: float) -> SimpleNamespace:
        return SimpleNamespace(handle=SimpleNamespace(data=np.array(v)))

    probes = Probes()
    x, scalar = lanes(0.5, 0.017, 2.0), lanes(0.017)
    assert probes.compared(-1, -2, lanes(False, True, False), x, scalar).handle.data[1]  # returns its value
    probes.compared(-3, -4, lanes(False, False), lanes(1, 2), lanes(3))  # integers: indices, no number kept
    probes.compared(-5, -6, True)  # compile-time: both outcomes, the compiler keeps one
    assert set(probes.take()) == {-1, -2, -4, -5, -6}  # -3: that comparison was never true
    assert probes.take_thresholds() == [0.017] and probes.take_thresholds() == []
    probes.compared(-7, -8, lanes(False), 12, 1.0)  # Python numbers on both sides (a size and a literal)
    probes.compared(-9, -10, lanes(False), lanes(4.5), 3.0)  # a row's sum against a number: the number only
    assert probes.take_thresholds() == [3.0]
    # a clip's choice: between integers (a split's end against a length) both outcomes count; between floats,
    # only the outcomes its lanes had
    probes.clipped(-11, -12, lanes(False, False), lanes(4, 5), 9)
    probes.clipped(-13, -14, lanes(True, True), lanes(0.5, 0.25), 2.0)
    assert set(probes.take()) == {-8, -10, -11, -12, -13}  # -8, -10: the two comparisons above were false


def test_numbers_held_in_one_draw_only_are_data_not_thresholds():
    """A row's sum set against another tensor is held in the case of its draw only; a number made of the size
    holds in every case at that size. Only those are placed later; at a size with one case, all are."""
    from evo.contracts.task import Case
    from fitness.check.equivalence import Observed

    seen = Observed()
    for draw, sums in enumerate(([0.017, 4.2], [0.017, -1.3], [0.017, 0.4])):
        seen.add({"thresholds": sums}, Case('{"n":17}', draw, 100 + draw, "normal"))
        seen.add({"thresholds": sums}, Case('{"n":17}', draw, 100 + draw, "normal"))  # the same case run twice
    seen.add({"thresholds": [0.009, 7.5]}, Case('{"n":9}', 0, 7, "normal"))
    assert seen.held() == {'{"n":17}': [0.017], '{"n":9}': [0.009, 7.5]}
