"""Operator selection: the reward, fixed weights, UCB1, Thompson sampling, report figures."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.mutator_config import LLMConfig, OptunaConfig, SelectionConfig, StokeConfig, entry_names
from evo.contracts.verdict import Evaluation, Status
from mutators.base import Proposal
from mutators.factory import build_selector
from mutators.selection import UCB1, FixedWeights, Outcome, Thompson, elite_share, format_table, pull_reward


def out(parent: float | None, child: float | None, *, correct: bool = True, s: float = 1.0, usd: float = 0.0):
    return Outcome(valid=True, correct=correct, parent_latency_ms=parent, child_latency_ms=child, cost_s=s,
                   cost_usd=usd)


def test_the_reward_is_log_speedup_per_unit_of_cost():
    assert out(2.0, 1.0).improvement() == pytest.approx(math.log(2))
    assert out(1.0, 2.0).improvement() == 0.0  # slower: no improvement
    assert out(2.0, 1.0, correct=False).improvement() == 0.0
    assert out(None, 1.0).improvement() == 1.0  # a correct child of an unmeasured parent
    assert out(2.0, None).improvement() == 0.0
    assert pull_reward([out(2.0, 1.0, s=2.0), out(2.0, 3.0, s=2.0)], 1500) == pytest.approx(math.log(2) / 4)
    assert pull_reward([out(2.0, 1.0, s=1.0, usd=0.01)], 1500) == pytest.approx(math.log(2) / 16)  # $0.01 = 15 s
    assert pull_reward([], 1500) == 0.0


def test_an_outcome_is_read_from_a_proposal_and_its_evaluation():
    c = Candidate("x = 1\n", {})
    p = Proposal(c, "llm", ("parent",), cost_s=2.0, cost_usd=0.5)
    e = Evaluation(c.id, "t", "cpu", Status.OK, error=0.0, latency_ms=1.0, check_seconds=3.0)
    o = Outcome.of(p, e, parent_latency_ms=4.0)
    assert (o.valid, o.correct, o.cost_s, o.cost_usd, o.child_latency_ms) == (True, True, 5.0, 0.5, 1.0)
    lint = Outcome.of(p, e.with_(status=Status.LINT_ERROR, latency_ms=None), 4.0)
    assert not lint.valid and not lint.correct
    assert not Outcome.of(Proposal(None, "llm", (), error="garbage"), None, 4.0).valid


def test_fixed_weights_follow_the_weights_and_never_pick_a_zero_weight():
    sel = FixedWeights({"stoke": 3.0, "optuna": 1.0, "llm": 0.0}, SelectionConfig())
    rng = random.Random(0)
    counts = Counter(sel.choose(rng) for _ in range(4000))
    assert counts["llm"] == 0 and 2.5 < counts["stoke"] / counts["optuna"] < 3.5
    with pytest.raises(ValueError, match="weight 0"):
        sel.choose(rng, ["llm"])


def test_ucb1_tries_everything_once_then_prefers_the_better_reward():
    sel = UCB1(["a", "b", "c"], SelectionConfig(exploration=0.2))
    rng = random.Random(0)
    assert [sel.choose(rng) for _ in range(1)] == ["a"]
    for name in ("a", "b", "c"):
        sel.record(name, [out(2.0, 1.0 if name == "b" else 2.0)])
    picks = []
    for _ in range(30):
        name = sel.choose(rng)
        picks.append(name)
        sel.record(name, [out(2.0, 1.0 if name == "b" else 2.0)])
    assert Counter(picks).most_common(1)[0][0] == "b"
    assert sel.choose(rng, available=["a", "c"]) in ("a", "c")  # an exhausted mutator is left out


def test_thompson_sampling_learns_which_mutator_pays():
    sel = Thompson(["good", "bad"], SelectionConfig())
    rng = random.Random(1)
    picks = []
    for _ in range(200):
        name = sel.choose(rng)
        picks.append(name)
        sel.record(name, [out(3.0, 1.0 if name == "good" and rng.random() < 0.6 else 4.0)])
    late = Counter(picks[100:])
    assert late["good"] > 3 * late["bad"]


@pytest.mark.parametrize("policy", [UCB1, Thompson])
def test_a_generation_chosen_before_it_is_recorded_pulls_every_mutator_first(policy):
    # an island chooses all of a generation's pulls, then records them: the mutators never pulled go first
    # (one run gave Optuna no pull at all because UCB1 kept choosing the first unrecorded mutator)
    sel = policy(["llm", "stoke", "optuna"], SelectionConfig())
    rng = random.Random(3)
    batch = [sel.choose(rng) for _ in range(4)]
    assert batch[:3] == ["llm", "stoke", "optuna"], batch
    for name in batch:
        sel.record(name, [out(2.0, 2.0)])
    assert not +sel.pending and sum(sel.table[n].pulls for n in sel.names) == 4
    assert sel.choose(rng, available=["optuna"]) == "optuna"


def test_stats_report_and_checkpoint():
    sel = UCB1(["stoke", "llm"], SelectionConfig())
    sel.record("stoke", [out(2.0, 1.0), out(2.0, 3.0, correct=False)])
    sel.record("llm", [Outcome(False, False, 2.0, None, 5.0, 0.02)])
    s = sel.table["stoke"]
    assert (s.pulls, s.proposals, s.correct, s.improvements) == (1, 2, 1, 1)
    assert sel.table["llm"].cost_usd == pytest.approx(0.02)
    text = format_table(sel, elite_share(["stoke", "stoke", "seed", "llm"]))
    assert "stoke" in text.splitlines()[1] and "50.0%" in text
    fresh = UCB1(["stoke", "llm"], SelectionConfig())
    fresh.load_state(sel.state())
    assert fresh.state() == sel.state()


def test_elite_share_counts_creators():
    assert elite_share(["llm", "stoke", "llm", "optuna"]) == {"llm": 0.5, "optuna": 0.25, "stoke": 0.25}
    assert elite_share([]) == {}


def test_build_selector_from_config_entries():
    entries: list[StokeConfig | OptunaConfig | LLMConfig] = [
        StokeConfig(weight=2.0), OptunaConfig(weight=0.0), LLMConfig(name="cheap-llm")]
    weights = dict(zip(entry_names(entries), (e.weight for e in entries)))
    fixed = build_selector(SelectionConfig(policy="fixed"), weights)
    assert isinstance(fixed, FixedWeights) and fixed.weights == {"stoke": 2.0, "optuna": 0.0, "cheap-llm": 1.0}
    assert isinstance(build_selector(SelectionConfig(policy="thompson"), weights), Thompson)
    assert isinstance(build_selector(SelectionConfig(), {"a": 1.0}), UCB1)
    # repeated kinds get numbered names, so every entry is its own arm
    assert entry_names([LLMConfig(), LLMConfig(temperature=0.0), StokeConfig(name="llm")]) == ["llm", "llm-2", "llm-3"]
    with pytest.raises(ValueError, match="unique"):
        UCB1(["llm", "llm"], SelectionConfig())
