"""The sanitizer's rules on whole candidates (tests/candidates/sanitizer), each hole with a kernel that
exploits it and an honest twin: uninitialized reads, tensors the run-time guard never saw made, and
atomics with their memory semantics and scope (happens-before through acquire/release, so the lock of
Triton's layer-norm backward tutorial is ``ok``).

Before these rules, reads_output_first, empty_flag, atomic_sum_cta and ticket_relaxed_publish were
``ok`` (and host_constructor below the lint); the tutorial's lock and the ticket kernels were called
races, and the float32 exchange a compile_error."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import NativeTask
from evo.contracts.verdict import Status
from fitness.evaluate import Evaluator

from .conftest import CANDIDATES, ROOT

SANITIZER = CANDIDATES / "sanitizer"
# the library's sum at fewer check sizes (one program, several, a group of programs sharing a lock, a
# size no block divides): each honest kernel here is checked in seconds
CHECK_SIZES = [{"n": 1}, {"n": 7}, {"n": 4097}, {"n": 9001}]


def sanitizer(name: str) -> Candidate:
    return Candidate.from_file(SANITIZER / f"{name}.py")


def _reduction() -> NativeTask:
    task = NativeTask(ROOT / "evo" / "tasks" / "reduction")
    task.check_sizes = list(CHECK_SIZES)
    task.bench_sizes = [{"n": 1 << 14}]
    return task


@pytest.fixture(scope="module")
def reduction() -> Iterator[Evaluator]:
    with Evaluator(_reduction(), EvaluationConfig(timeout_s=60, latency=LatencyMode.OFF), device="cpu") as ev:
        yield ev


@pytest.fixture(scope="module")
def unlinted() -> Iterator[Evaluator]:
    settings = EvaluationConfig(timeout_s=60, latency=LatencyMode.OFF)
    with Evaluator(_reduction(), settings, device="cpu", static_lint=False) as ev:
        yield ev


# (the kernel that exploits a hole or breaks a rule, its verdict, words of its reason, its honest twin)
PAIRS = [
    # reads its output before writing it, and takes a cheap path where it finds 0.0 (never the check's poison)
    ("reads_output_first", Status.UNSAFE, "uninitialized read in kernel _sum_one_program: program (0, 0, 0) "
     "reads out_ptr[0] (output 0), which nothing in this call of launch has written yet", "empty_flag_written"),
    # the same with a torch.empty flag, which the check poisons with an extreme integer
    ("empty_flag", Status.UNSAFE, "reads flag_ptr[0] (scratch from torch.empty), which nothing", "empty_flag_written"),
    # an atomic add reads: onto an output nothing zeroed, or onto the half of scratch launch did not zero
    ("adds_onto_unwritten_output", Status.UNSAFE, "updates atomically out_ptr[0] (output 0), which nothing",
     "zeroed_on_host"),
    ("partly_zeroed_scratch", Status.UNSAFE, "updates atomically part_ptr[1] (scratch from torch.empty)",
     "xchg_float_result"),
    # an atomic accumulation with scope="cta": atomic only among one program's threads
    ("atomic_sum_cta", Status.UNSAFE, 'updates with scope="cta" out_ptr[0], which program (0, 0, 0) of the '
     "same launch", "zeroed_on_host"),
    # the tutorial's lock, broken three ways
    ("lock_relaxed_release", Status.UNSAFE, "reads lock_ptr[4], which program (0, 0, 0) of the same launch updated "
     "atomically: nothing orders the two", "lock_partial_sums"),
    ("lock_cta_scope", Status.UNSAFE, 'updates with scope="cta" lock_ptr[0]', "lock_partial_sums"),
    ("lock_no_barrier", Status.UNSAFE, "before its last tl.debug_barrier()", "lock_partial_sums"),
    ("lock_missing", Status.UNSAFE, "race in kernel _group_sums", "lock_partial_sums"),
    # results published and read back with relaxed atomics: the reads play a GPU's stale values
    ("ticket_relaxed_publish", Status.WRONG_OUTPUT, "outside tolerance", "ticket_atomic_publish"),
]
HONEST = sorted({p[3] for p in PAIRS} | {"ticket_last_program", "ticket_load_store"})


@pytest.mark.parametrize("name, status, words, twin", PAIRS, ids=[p[0] for p in PAIRS])
def test_a_kernel_that_exploits_the_hole_is_refused_with_a_reason(reduction, name, status, words, twin):
    r = reduction.evaluate(sanitizer(name))
    assert r.status is status and words in r.reason, r.reason


@pytest.mark.parametrize("name", HONEST)
def test_the_honest_twins_pass(reduction, name):
    r = reduction.evaluate(sanitizer(name))
    assert r.status is Status.OK, r.reason


def test_the_library_atomic_sum_passes_even_where_its_adds_are_zero(reduction):
    # each program's add of its partial sum reads nothing it uses: on the zeros draw every add is of 0.0,
    # an atomic that reads only, and what it returns is played stale; the sum is unaffected
    r = reduction.evaluate(Candidate.from_file(CANDIDATES / "gaming" / "atomic_sum.py"))
    assert r.status is Status.OK, r.reason


def test_a_tensor_the_guard_never_saw_made_is_refused_at_the_launch(unlinted):
    r = unlinted.evaluate(sanitizer("host_constructor"))
    assert r.status is Status.LINT_ERROR, r.reason
    assert "launch passes kernel _partials a tensor as 'part_ptr' that is neither a task input or output" in r.reason
    assert "torch.Tensor(n)" in r.reason
    source = (SANITIZER / "host_constructor.py").read_text()
    made = "    part = torch.Tensor(programs)\n"
    assert source.count(made) == 1
    twin = source.replace(made, "    part = torch.empty(programs, dtype=torch.float32, device=x.device)\n")
    r = unlinted.evaluate(Candidate.from_source(twin))
    assert r.status is Status.OK, r.reason


def test_a_fill_writes_the_elements_it_covers(reduction):
    source = (SANITIZER / "partly_zeroed_scratch.py").read_text()
    half = "    part.as_strided((programs,), (1,), 0).zero_()\n"
    assert source.count(half) == 1
    r = reduction.evaluate(Candidate.from_source(source.replace(half, "    part.zero_()\n")))
    assert r.status is Status.OK, r.reason


def test_an_atomic_store_and_load_with_relaxed_tickets_read_stale_values(reduction):
    source = (SANITIZER / "ticket_load_store.py").read_text()
    ticket = "tl.atomic_add(count_ptr, 1)"
    assert source.count(ticket) == 1
    r = reduction.evaluate(Candidate.from_source(source.replace(ticket, 'tl.atomic_add(count_ptr, 1, sem="relaxed")')))
    assert r.status is Status.WRONG_OUTPUT and "outside tolerance" in r.reason, r.reason
