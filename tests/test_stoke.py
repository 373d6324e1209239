"""STOKE: the moves (data applied to copies) and the Metropolis-Hastings chain."""

from __future__ import annotations

import ast
import math
import random
from pathlib import Path

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.mutator_config import StokeConfig
from evo.contracts.native_task import NativeTask
from evo.contracts.records import Individual, Proposal
from evo.contracts.verdict import Evaluation, Status
from fitness.check.lint import lint
from mutators.base import MutationContext
from mutators.stoke.moves.catalog import DEFAULT_WEIGHTS, MOVE_NAMES, MOVES, move_named
from mutators.stoke.moves.code import LOG2E, next_value
from mutators.stoke.mutator import StokeMutator, cost

# a fake evaluate on purpose: these tests count what the chain asks and how moves apply; no worker
# keeps them fast (the real latency model drives tests/test_mutators_improve.py)
from tests.fakes.loop_kernels import ROW_STATS, SCALE_ROWS
from tests.fakes.standin import fake_evaluate

ROOT = Path(__file__).resolve().parent.parent
SOFTMAX = Candidate.from_file(ROOT / "evo" / "tasks" / "softmax" / "seed.py")
MATMUL = Candidate.from_file(ROOT / "evo" / "tasks" / "matmul" / "seed.py")
REDUCTION = Candidate.from_file(ROOT / "evo" / "tasks" / "reduction" / "seed.py")  # the "split reduction" site
HINTED = Candidate.from_source("""import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.max_contiguous(tl.multiple_of(tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), BLOCK), BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    y = tl.fma(x, 2.0, 1.0) * (1.0 / 3.0)
    tl.store(y_ptr + offs, tl.exp2(y), mask=offs < n)


PARAMS = {"BLOCK": 256, "num_warps": 4}


def launch(x, y, *, BLOCK, num_warps):
    _k[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
""")

# reads its input twice (an LLM's or a duplicate move's leftover): the structural "reuse value" site
REREAD = Candidate.from_source(HINTED.source.replace(
    "    y = tl.fma(", "    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)\n    y = tl.fma("))

TWO_PASSES = Candidate.from_source(ROW_STATS)  # the "fuse loops" site
ROW_LOOP = Candidate.from_source(SCALE_ROWS)  # the "hoist invariant" site


def test_every_move_kind_is_listed_once_with_a_default_weight():
    assert len(set(MOVE_NAMES)) == len(MOVES) >= 19
    assert set(DEFAULT_WEIGHTS) == set(MOVE_NAMES)
    with pytest.raises(ValueError, match="unknown STOKE move 'teleport'; valid: param x2"):
        move_named("teleport")


@pytest.mark.parametrize("move", MOVES, ids=MOVE_NAMES)
def test_moves_change_a_copy_and_never_the_parent(move):
    applied_any = False
    for parent in (SOFTMAX, MATMUL, HINTED, REREAD, REDUCTION, TWO_PASSES, ROW_LOOP):
        before = (parent.source, dict(parent.params), parent.id)
        rng = random.Random(5)
        for _ in range(10):
            applied = move.apply(parent, rng)
            if applied is None:
                continue
            applied_any = True
            ast.parse(applied.candidate.source)
            assert applied.candidate.id != parent.id and applied.detail
        assert (parent.source, parent.params, parent.id) == before
    assert applied_any, f"{move.name} found no site in any test kernel"


def test_every_move_on_every_library_seed_and_the_init_template_gives_a_copy_or_no_site():
    """A move that raises loses the whole chain's proposal ("stoke proposal failed"): the fma rewrite of
    `total += x * x` (the `evo init` template's sum of squares) once did, on an assignment it made."""
    from evo.app.init import _fill
    from evo.contracts.native_task import TASK_LIBRARY, library_tasks

    seeds = [Candidate.from_file(TASK_LIBRARY / name / "seed.py") for name in library_tasks()]
    seeds.append(Candidate.from_source(_fill("seed.py.tmpl", name="my_norm")))
    for move in MOVES:
        for seed in seeds:
            for s in range(4):
                applied = move.apply(seed, random.Random(s))  # raises nothing
                if applied is not None:
                    ast.parse(applied.candidate.source)
    fused = _apply("fma", seeds[-1])
    assert "total = tl.fma(x, x, total)" in fused, fused


def _apply(name: str, c: Candidate, seed: int = 0) -> str:
    applied = move_named(name).apply(c, random.Random(seed))
    assert applied is not None
    return applied.candidate.source


def test_equivalent_rewrites_produce_the_expected_code():
    assert f"tl.exp2((x - m) * {LOG2E})" in _apply("exp->exp2", SOFTMAX)
    assert "tl.exp(y * 0.6931471805599453)" in _apply("exp2->exp", HINTED)
    assert "y = tl.exp(x - m) * (1.0 / s)" in _apply("div->mul-recip", SOFTMAX)
    assert "y = (x * 2.0 + 1.0) * (1.0 / 3.0)" in _apply("unfma", HINTED)
    assert "y = tl.fma(x, 2.0, 1.0) / 3.0" in _apply("mul-recip->div", HINTED)
    assert any("rm = tl.fma(pid_m, BM, tl.arange(0, BM))" in x for x in {_apply("fma", MATMUL, s) for s in range(8)})
    unhinted = {_apply("remove hint", HINTED, s) for s in range(8)}
    assert any("offs = tl.max_contiguous(tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), BLOCK)" in x
               for x in unhinted)


def test_hint_loop_mask_and_dtype_moves():
    hinted = {_apply("add multiple_of", SOFTMAX, s) for s in range(6)}
    assert any("tl.multiple_of(start + tl.arange(0, BLOCK), BLOCK)" in s for s in hinted)
    loops = {_apply("loop kind", MATMUL, s) for s in range(12)}
    assert any("tl.static_range(0, K, BK)" in s for s in loops)
    assert any("tl.range(0, K, BK, num_stages=3)" in s for s in loops)
    caches = {_apply("cache hint", SOFTMAX, s) for s in range(12)}
    assert any("eviction_policy='evict_last'" in s for s in caches) and any("cache_modifier=" in s for s in caches)
    masks = {_apply("mask change", SOFTMAX, s) for s in range(12)}
    assert any(s.count("mask=") < SOFTMAX.source.count("mask=") for s in masks)  # a mask dropped
    dtypes = {_apply("dtype change", MATMUL, s) for s in range(12)}
    assert any("dtype=tl.float16" in s or "dtype=tl.bfloat16" in s for s in dtypes)


def test_parameter_moves_stay_within_space_or_double():
    assert next_value("BM", 16, [16, 32, 64], True) == 32
    assert next_value("BM", 16, [16, 32, 64], False) is None
    assert next_value("num_stages", 1, [1, 2, 3, 4, 5], True) == 2  # next listed value when x2 is not listed
    assert next_value("num_stages", 4, [1, 2, 3, 4, 5], False) == 2
    assert next_value("num_stages", 3, [1, 2, 3, 4, 5], False) == 1
    assert next_value("BLOCK", 128, None, True) == 256 and next_value("num_warps", 32, None, True) is None
    seen = set()
    for s in range(30):
        applied = move_named("param x2").apply(MATMUL, random.Random(s))
        assert applied is not None and applied.candidate.source == MATMUL.source
        (key,) = [k for k in MATMUL.params if applied.candidate.params[k] != MATMUL.params[k]]
        seen.add(key)
        assert applied.candidate.params[key] in MATMUL.space()[key]
    assert seen == set(MATMUL.params)


def test_cost_weights_error_and_treats_missing_latency_as_a_constant():
    ok = Evaluation("a", "t", "cpu", Status.OK, error=0.0, latency_ms=2.0)
    assert cost(ok, error_weight=10, fallback_log_latency=5.0) == pytest.approx(math.log(2.0))
    assert cost(ok.with_(latency_ms=None), error_weight=10, fallback_log_latency=5.0) == 5.0
    wrong = ok.with_(status=Status.WRONG_OUTPUT, error=0.5, latency_ms=None)
    assert cost(wrong, error_weight=10, fallback_log_latency=0.0) == pytest.approx(5.0)
    assert cost(ok.with_(status=Status.COMPILE_ERROR, error=math.inf), error_weight=10,
                fallback_log_latency=0.0) == math.inf


@pytest.fixture(scope="module")
def task() -> NativeTask:
    return NativeTask(ROOT / "evo" / "tasks" / "softmax")


class Counting:
    """The fake evaluate, counting what it is asked."""

    def __init__(self, key: str) -> None:
        self.inner = fake_evaluate(key)
        self.calls: list[tuple[Candidate, str]] = []

    def __call__(self, c: Candidate, level: str) -> Evaluation:
        self.calls.append((c, level))
        return self.inner(c, level)


def _run(task, **kw):
    m = StokeMutator(StokeConfig(**kw))
    evaluate = Counting(task.key)
    parent = Individual(Proposal(SOFTMAX, "seed"), fake_evaluate(task.key)(SOFTMAX, "full"))
    props = m.propose(parent, MutationContext(task=task, rng=random.Random(11), evaluate=evaluate))
    return m, evaluate, parent, props


def _walk(task, **kw):
    """The chain `propose` walks with the same seed, and what it proposed from it."""
    _, _, parent, props = _run(task, **kw)
    m = StokeMutator(StokeConfig(**kw))
    chain = m.walk(parent, MutationContext(task=task, rng=random.Random(11), evaluate=Counting(task.key)))
    return parent, chain, props


def test_only_valid_moves_are_evaluated_and_only_with_quick_checks(task):
    m, evaluate, _, props = _run(task, chain_length=12)
    rows = m.stats()["moves"].values()
    assert len(evaluate.calls) == 12 == sum(r["valid"] for r in rows) == m.stats()["chain_steps"]
    assert sum(r["proposed"] for r in rows) > 12  # some draws had no site or failed lint, and were skipped
    assert all(level == "quick" and lint(c.source).ok for c, level in evaluate.calls)
    assert props and "12-step chain" in props[0].note


def test_metropolis_acceptance_follows_the_drawn_bound(task):
    _, chain, (p,) = _walk(task, chain_length=12)
    assert chain.steps and all(step.accepted == (step.cost <= step.bound) for step in chain.steps)
    current = chain.start.cost
    for step in chain.steps:  # the bound is drawn above the current state's cost
        assert step.bound >= current
        if step.accepted:
            current = step.cost
    outcome = chain.outcome()
    assert outcome is not None and p.candidate == outcome[0].candidate  # propose returns the chain's outcome


def test_a_cold_chain_only_goes_downhill_and_returns_the_best_correct_state(task):
    parent, chain, props = _walk(task, chain_length=10, beta=1e6)
    costs = [parent.latency_ms]
    for step in chain.steps:
        if step.accepted:
            assert step.cost <= math.log(costs[-1]) + 1e-5
            costs.append(math.exp(step.cost))
    if props and "best correct" in props[0].note:
        assert chain.best is not None and chain.best.cost < chain.start.cost


def test_the_move_table_is_printable_and_survives_a_checkpoint(task):
    m, _, _, _ = _run(task, chain_length=6)
    table = m.table_text().splitlines()
    assert table[0].split() == ["move", "proposed", "valid", "correct", "accepted", "improved"]
    assert table[-1].startswith("total") and len(table) == len(MOVES) + 2
    fresh = StokeMutator(StokeConfig(chain_length=6))
    fresh.load_state(m.state())
    assert fresh.table_text() == m.table_text()


def test_move_weights_select_the_moves_drawn(task):
    m, _, _, _ = _run(task, chain_length=5, move_weights={"param x2": 1.0, "exp->exp2": 1.0})
    assert set(m.stats()["moves"]) == {"param x2", "exp->exp2"}
    with pytest.raises(ValueError, match="unknown STOKE move"):
        StokeMutator(StokeConfig(move_weights={"nope": 1.0}))
