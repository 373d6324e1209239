"""Values where an expression of one data value meets a number, found numerically
(`fitness.check.numeric_roots`), and what the values analysis gains from it (`fitness.check.data_values`)."""

from __future__ import annotations

import ast
import math

import pytest

from evo.contracts.candidate import Candidate
from fitness.check.data_values import compared_values
from fitness.check.numeric_roots import MAX_ROOTS, function_of, roots

from .test_data_values import HEAD, TAIL


def found(expr: str, t: float, numbers: dict[str, float] | None = None) -> list[float]:
    f = function_of(ast.parse(expr, mode="eval").body, "x", numbers or {})
    assert f is not None, expr
    return roots(f, t)


@pytest.mark.parametrize(("expr", "t", "expected"), [
    ("x * x - 6.5 * x + 10.5625", 0.0, [3.25]),  # a double root: no change of sign
    ("(x - 1.7) * (x - 1.7) * 1e12", 0.0, [1.7]),
    ("tl.floor(x * 1e6)", 3250000.0, [3.25]),  # a step's edge
    ("x * x * x", 2.0, [2.0 ** (1 / 3)]),
    ("tl.where(x > 2.5, 1.0, 0.0)", 0.5, [2.5]),
    ("tl.maximum(x * LIMIT, -3.0)", -1.0, [-2.0]),
    ("x.to(tl.int32)", 7.0, [7.0, -7.0 + 14.0]),
])
def test_where_an_expression_meets_a_number(expr, t, expected):
    got = found(expr, t, {"LIMIT": 0.5})
    for v in expected:
        assert any(math.isclose(g, v, rel_tol=1e-6, abs_tol=1e-9) for g in got), (expr, got)


def test_the_nearest_roots_come_first_and_no_more_than_the_cap():
    got = found("tl.sin(x)", 0.5)
    assert len(got) == MAX_ROOTS and got[0] == pytest.approx(math.pi / 6) and got[1] == pytest.approx(5 * math.pi / 6)
    assert found("x * x", -1.0) == []  # never reached


@pytest.mark.parametrize("expr", ["tl.erf(x)", "x.to(tl.int32, bitcast=True)", "x + y", "tl.load(p)"])
def test_what_is_not_a_function_of_one_value_is_left_alone(expr):
    assert function_of(ast.parse(expr, mode="eval").body, "x", {}) is None


def values(lines: str) -> list[float]:
    return list(compared_values(Candidate.from_source(HEAD + lines + TAIL)).values)


def test_a_polynomial_bound_to_a_name_is_read_through_to_the_load():
    bump = values("    q = x * x - 6.5 * x + 10.5625\n    y = y + tl.exp(-q * 1e12)\n")
    assert any(v == pytest.approx(3.25) for v in bump), bump
    compared = values("    q = x * x - 6.5 * x\n    y = tl.where(q < -10.5625 + 1e-12, 0.0, y)\n")
    assert any(v == pytest.approx(3.25, abs=1e-5) for v in compared), compared


def test_what_the_solver_inverts_exactly_is_not_searched_again():
    assert values("    y = tl.where(x * 4.0 == 3.0, 0.0, y)\n") == [0.75]
    assert values("    y = tl.where(tl.sin(x) == 0.5, 0.0, y)\n")[:2] == pytest.approx([0.5, math.pi / 6])
