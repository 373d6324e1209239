"""The sanitizer's parts on their own: happens-before (vector clocks and release snapshots), the written
bytes of one call, the values a stale read plays, which atomics only read, and the interpreter's
bfloat16 atomic add rounding as a GPU does."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fitness.check.atomics import _rmw_reads_only
from fitness.check.happens_before import NONE, Clocks
from fitness.check.stale import History, play
from fitness.check.written import Span
from fitness.sandbox.interp_atomics import bfloat16_bits
from fitness.sandbox.provenance import Fill

NOTHING = np.array([NONE], dtype=np.int32)


def _published(clocks: Clocks, program: int, *, barrier: bool) -> tuple[int, np.ndarray]:
    """Program `program` accesses memory (its epoch), maybe waits at a barrier, then releases on a fresh
    address: the epoch and the address's release sequence after."""
    epoch = clocks.at(program)
    if barrier:
        clocks.barrier()
    return epoch, clocks.release(NOTHING.copy())


def test_a_release_after_a_barrier_orders_the_programs_accesses_before_the_acquirer():
    clocks = Clocks(4)
    epoch, sync = _published(clocks, 0, barrier=True)
    clocks.at(1)
    assert not clocks.ordered(np.array([epoch]))[0]  # nothing acquired yet
    clocks.acquire(sync)
    assert clocks.ordered(np.array([epoch]))[0]


def test_a_release_publishes_nothing_of_what_its_program_did_since_its_last_barrier():
    clocks = Clocks(4)
    epoch, sync = _published(clocks, 0, barrier=False)
    clocks.at(1)
    clocks.acquire(sync)
    assert not clocks.ordered(np.array([epoch]))[0]


def test_happens_before_is_transitive_through_chains_on_other_addresses():
    clocks = Clocks(4)
    first, x = _published(clocks, 0, barrier=True)
    clocks.at(1)
    clocks.acquire(x)
    clocks.barrier()
    y = clocks.release(NOTHING.copy())
    clocks.at(2)
    clocks.acquire(y)
    assert clocks.ordered(np.array([first]))[0]


def test_a_release_only_joins_what_the_address_published_before():
    clocks = Clocks(4)
    zero, x = _published(clocks, 0, barrier=True)
    one = clocks.at(1)  # acquires nothing, then releases on the same address
    clocks.barrier()
    x = clocks.release(x)
    clocks.at(2)
    clocks.acquire(x)
    assert clocks.ordered(np.array([zero, one])).all()


def test_a_new_program_starts_with_nothing_acquired():
    clocks = Clocks(4)
    zero, x = _published(clocks, 0, barrier=True)
    clocks.at(1)
    clocks.acquire(x)
    clocks.at(2)
    assert not clocks.ordered(np.array([zero]))[0]


def test_snapshots_no_element_holds_are_dropped():
    clocks = Clocks(64)
    held = NOTHING.copy()
    for p in range(64):
        clocks.at(p)
        clocks.acquire(held)
        clocks.barrier()
        held = clocks.release(held)
    assert clocks.held() == 64
    clocks.collect(held)
    assert clocks.held() == 1


def test_fills_write_the_elements_they_cover_and_reads_find_the_rest():
    span = Span(1000, 1000 + 4 * 12, 4, "scratch")  # twelve float32
    offs = np.arange(12) * 4
    span.mark_fill(Fill(0, 1000 + 8, (3,), (1,), 4, True))  # elements 2, 3, 4
    span.mark_fill(Fill(0, 1000 + 32, (2,), (2,), 4, False))  # elements 8 and 10: a strided view
    assert span.first_unwritten(offs[[2, 3, 4, 8, 10]], 4) is None
    assert span.first_unwritten(offs[[2, 9]], 4) == 36
    span.mark(offs[[0, 1]], 4)
    assert span.first_unwritten(offs[:5], 4) is None


def test_an_access_finer_than_the_element_is_tracked_by_the_byte():
    span = Span(0, 16, 4, "output 0")
    span.mark(np.array([0]), 4)
    span.mark(np.array([5]), 1)  # one byte of the second element
    assert span.unit == 1
    assert span.first_unwritten(np.array([0, 5]), 1) is None
    assert span.first_unwritten(np.array([4]), 4) == 4  # its other bytes were not written


def test_a_stale_read_returns_what_the_element_held_before_its_last_write():
    history = History(16)
    before = np.array([1.5, 2.5, 9.0], dtype=np.float32)
    history.record(np.array([0, 4, 0]), before)  # (the first lane on an element saw what it held)
    assert history.before(np.array([4, 0]), np.dtype(np.float32)).tolist() == [2.5, 1.5]
    returned = np.array([7.0, 8.0], dtype=np.float32)
    play(returned, np.array([0, 4]), np.array([True, True]), np.array([4]), history)
    assert returned.tolist() == [7.0, 2.5]  # only the stale lane


def _rmw(name: str, values: list[object], dtype: str) -> list[bool]:
    return _rmw_reads_only(SimpleNamespace(name=name), SimpleNamespace(data=np.array(values, dtype=dtype)),
                           (len(values),)).tolist()


def test_atomics_whose_operand_cannot_change_memory_are_reads():
    assert _rmw("FADD", [0.0, -0.0, 1.0], "float32") == [True, True, False]
    assert _rmw("ADD", [0, 1], "int32") == [True, False]
    assert _rmw("OR", [0, 2], "int32") == [True, False]
    assert _rmw("AND", [-1, 7], "int32") == [True, False]
    assert _rmw("MAX", [np.iinfo(np.int32).min, 0], "int32") == [True, False]
    assert _rmw("MIN", [np.iinfo(np.int64).max, 0], "int64") == [True, False]
    # a float max of -inf reaches the interpreter as an unsigned min of its bits, a float min of +inf as a
    # signed min of its bits
    minus_inf = int(np.array(-np.inf, dtype=np.float32).view(np.uint32))
    plus_inf = int(np.array(np.inf, dtype=np.float32).view(np.int32))
    assert _rmw("UMIN", [minus_inf, 5], "uint32") == [True, False]
    assert _rmw("MIN", [plus_inf, 5], "int32") == [True, False]
    assert _rmw("XCHG", [0, 1], "int32") == [False, False]


@pytest.mark.parametrize("seed", range(3))
def test_bfloat16_rounding_is_to_nearest_even_as_torch_and_the_gpu_round(seed):
    values = np.random.default_rng(seed).standard_normal(10_000).astype(np.float32) * 10.0 ** seed
    ties = np.array([1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, np.inf, -np.inf, 0.0, -0.0], dtype=np.float32)
    values = np.concatenate([values, ties])
    expected = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert (bfloat16_bits(values) == expected).all()
    nan = bfloat16_bits(np.array([np.nan], dtype=np.float32))
    assert np.isnan(np.array([int(nan[0]) << 16], dtype=np.uint32).view(np.float32))[0]
