import numpy as np

from evo.contracts.task import DEFAULT_TOLERANCE, Tolerance
from fitness.check.compare import compare


def test_fp16_rounding_of_an_fp32_softmax_fails_the_default_fp32_tolerance():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 4096))
    ref = np.exp(x - x.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)  # values near 2e-4: an absolute atol would hide this
    downgraded = ref.astype(np.float16).astype(np.float32)
    assert not compare(downgraded, "float32", ref, DEFAULT_TOLERANCE["float32"]).ok
    assert compare(ref.astype(np.float32), "float32", ref, DEFAULT_TOLERANCE["float32"]).ok


def test_nan_matches_nan_and_infinities_match_themselves():
    ref = np.array([np.nan, np.inf, -np.inf, 1.0])
    out = np.array([np.nan, np.inf, -np.inf, 1.0], dtype=np.float32)
    assert compare(out, "float32", ref, Tolerance(0, 0)).ok
    assert not compare(np.array([1.0, np.inf, -np.inf, 1.0], np.float32), "float32", ref, Tolerance(1, 1)).ok


def test_graded_error_is_zero_iff_pass_and_grows_with_the_error():
    ref = np.linspace(-1, 1, 100)
    tol = Tolerance(1e-5, 1e-4)
    small = compare((ref + 1e-3).astype(np.float32), "float32", ref, tol)
    large = compare((ref + 1e-1).astype(np.float32), "float32", ref, tol)
    few = compare(np.where(np.arange(100) < 5, ref + 1e-1, ref).astype(np.float32), "float32", ref, tol)
    assert compare(ref.astype(np.float32), "float32", ref, tol).graded == 0.0
    assert 0 < few.graded < large.graded and small.graded < large.graded
    assert "elements outside tolerance" in large.describe()


def test_integer_outputs_must_match_exactly():
    ref = np.array([1, 2, 3], dtype=np.int64)
    assert compare(ref.copy(), "int64", ref, Tolerance(1, 1)).ok
    assert compare(np.array([1, 2, 4], np.int64), "int64", ref, Tolerance(1, 1)).mismatches == 1
