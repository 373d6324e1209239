"""The run-time torch guard's poisoning of uninitialized scratch (`fitness.sandbox.torch_guard`). Code in
this file is candidate code to the guard (it is neither torch's, triton's nor the project's own)."""

from __future__ import annotations

import math

import pytest
import torch

from fitness.sandbox.torch_guard import CandidateGuard

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.uint8,
          torch.int8, torch.bool]


def _values(t: torch.Tensor) -> set[object]:
    with torch.no_grad():
        return {v if not (isinstance(v, float) and math.isnan(v)) else "nan" for v in t.flatten().tolist()}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_uninitialized_scratch_holds_each_runs_poison_in_a_check_run(dtype):
    seen = []
    for run in (0, 1):
        with CandidateGuard(__file__, poison_run=run):
            t = torch.empty(37, dtype=dtype)
        values = _values(t)
        assert len(values) == 1, values
        seen.append(values.pop())
    assert seen[0] != seen[1]  # a result that depends on the scratch differs between the check's two runs
    if dtype is not torch.bool:
        assert 0 not in seen  # never the zero a fresh page holds
    if dtype.is_floating_point:
        huge = seen[1]
        assert seen[0] == "nan" and isinstance(huge, float) and math.isfinite(huge) and abs(huge) > 1e3


def test_every_route_to_uninitialized_memory_is_poisoned_and_whole_storages_are():
    x = torch.ones(4, 4)
    with CandidateGuard(__file__, poison_run=0):
        made = [torch.empty(3, 5), torch.empty_like(x), x.new_empty((2, 3)), torch.empty_strided((2, 2), (4, 1)),
                x.new_empty_strided((3,), (2,))]
    for t in made:
        s = t.untyped_storage()
        whole = t.new_empty(0).set_(s, 0, (s.nbytes() // t.element_size(),), (1,))
        assert torch.isnan(whole).all(), t  # the elements a strided view skips too


def test_allocations_with_contents_and_unguarded_or_timed_runs_are_not_poisoned():
    with CandidateGuard(__file__, poison_run=1):
        zeros, full = torch.zeros(8), torch.full((8,), 2.0)
    assert _values(zeros) == {0.0} and _values(full) == {2.0}
    with CandidateGuard(__file__):  # a timed or modelled run: no fill, which would cost time
        t = torch.empty(1 << 20)
    assert not torch.isnan(t).all()  # (fresh pages: zeros here; the point is that no fill ran)
