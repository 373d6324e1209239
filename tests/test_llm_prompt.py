"""The LLM's prompt as a kernel engineer would write it (issue 13): read from a real island run and built
from hand-made pieces.

The island run is real but for the GPU and the model: `islands.island.Island` (no Ray) with the `llm`
mutator alone, lint, equivalence and the roofline model in a worker (Triton interpreter), the real
`openai` client against the fake server of `tests/fakes/openai_server.py`. The model first rewrites the
softmax in one pass, then drops its max subtraction (wrong on large logits); the third request is the
prompt under test.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, IslandsConfig
from evo.contracts.gpus import PROFILES
from evo.contracts.mutator_config import LLMConfig, SelectionConfig
from evo.contracts.native_task import NativeTask
from evo.contracts.records import Individual, Proposal
from evo.contracts.verdict import Evaluation, LatencySource, Status
from fitness.evaluate import Evaluator
from fitness.latency.stage import target_hardware
from islands.evaluation import EvaluationLedger, LocalEvaluationService
from islands.island import Island
from mutators.base import MutationContext
from mutators.factory import build_mutator
from mutators.llm.attempts import Attempt, Pending, attempt_of, diverse, outcome_text, unified_diff
from mutators.llm.bottleneck import BOUND_WORDS, bottleneck_text, launch_sentence, performance_lines
from mutators.llm.mutator import LLMMutator, explanation
from mutators.llm.prompt import build_messages, task_lines
from mutators.selection import FixedWeights
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.standin import fake_evaluate

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = ROOT / "tests" / "candidates" / "softmax"
ONE_PASS = (CANDIDATES / "one_pass.py").read_text()
NO_MAX = (CANDIDATES / "no_max_subtraction.py").read_text()
REPLIES = [
    Reply(f"One pass over each row: load the whole row once.\n```python\n{ONE_PASS}```"),
    Reply(f"Skip the max subtraction to save a reduction.\n```python\n{NO_MAX}```"),
    Reply("```python\nimport triton\ndef launch(x, y:\n    pass\n```"),
]
KEY_ENV = "EVO_TEST_LLM_PROMPT_KEY"
H100 = PROFILES["h100"]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory, shared_workers) -> Iterator[tuple[Island, list[str]]]:
    """A 3-generation island run with the llm mutator; the user messages of its three requests."""
    task = NativeTask(ROOT / "evo" / "tasks" / "softmax")
    task.bench_sizes = [{"rows": 64, "cols": 1024}]  # 64 programs: fewer than the H100's 132 SMs
    settings = EvaluationConfig(timeout_s=120.0, memory_mb=2048)
    evaluator = Evaluator(task, settings, device="cpu", **shared_workers(settings))
    mp = pytest.MonkeyPatch()
    mp.setenv(KEY_ENV, "test-key")
    try:
        with FakeOpenAI(REPLIES) as server:
            cfg = LLMConfig(model="fake-model", base_url=server.base_url, api_key_env=KEY_ENV, retries=0)
            mutator = build_mutator(cfg, run_dir=tmp_path_factory.mktemp("llm_prompt"), seed=0)
            assert isinstance(mutator, LLMMutator)
            service = LocalEvaluationService(lambda c, level: evaluator.evaluate(c, level=level),
                                             EvaluationLedger(task.key, device="cpu"))
            island = Island(0, IslandsConfig(count=1, population=4, offspring=1, tournament_size=1), task=task,
                            mutators=[mutator], selector=FixedWeights({"llm": 1.0}, SelectionConfig()),
                            service=service, seed=0, hardware=target_hardware(evaluator.settings, "cpu"))
            assert island.initialize(Candidate.from_source(task.seed_source or "")).seed_ok
            for _ in range(3):
                island.step()
            users = [r.body["messages"][1]["content"] for r in server.received]
        yield island, users
    finally:
        evaluator.close()
        mp.undo()


def section(prompt: str, title: str) -> str:
    """The text under the first heading that starts with `title`, up to the next heading."""
    found = re.search(rf"^## {re.escape(title)}[^\n]*\n(.*?)(?=^## |\Z)", prompt, re.DOTALL | re.MULTILINE)
    assert found, f"no section '## {title}' in the prompt:\n{prompt}"
    return found.group(1).strip("\n")


def test_a_real_campaigns_prompt_names_the_bottleneck_the_speed_of_light_and_the_gpu(campaign):
    _, users = campaign
    assert len(users) == 3
    prompt = users[2]
    Path(ROOT / ".pytest_cache").mkdir(exist_ok=True)
    (ROOT / ".pytest_cache" / "llm_prompt_sample.txt").write_text(prompt)  # to read by eye
    perf = section(prompt, "Its performance")
    assert re.search(r"latency: [\d.e-]+ ms \(model\) at size \{'rows': 64, 'cols': 1024\}", perf)
    assert re.search(r"speed of light: the kernel reaches [\d.]+% of it", perf)
    assert any(words in perf for words in BOUND_WORDS.values()), perf
    assert "64 programs cannot fill the GPU's 132 SMs" in perf
    assert re.search(r"\d+ registers per thread, (no spills|\d+ bytes spilled)", perf)
    assert re.search(r"Traffic: [\d.]+ MB from DRAM, [\d.]+ MB through L2", perf)
    assert "132 SMs" in section(prompt, "Target hardware") and "TB/s" in section(prompt, "Target hardware")
    for unmeasured in ("model_s", "sample_seed", "full_run", "elements_compared"):
        assert unmeasured not in prompt


def test_a_real_campaigns_prompt_states_the_tolerance_and_value_distributions(campaign):
    ref = section(campaign[1][2], "The reference")
    assert "tolerance (float32): an output element passes when |out - ref| <= 1e-05 * rms(ref) + 0.0001 * |ref|" in ref
    assert "drawn from each of normal, wide" in ref


def test_a_real_campaigns_prompt_shows_the_mutators_last_attempts_with_diffs_and_outcomes(campaign):
    island, users = campaign
    assert "## Your last attempts" not in users[0]  # nothing tried yet
    mine = section(users[2], "Your last attempts")
    first, second = re.split(r"^2\. ", mine, flags=re.MULTILINE)
    assert first.startswith("1. One pass over each row: load the whole row once.")
    assert re.search(r"outcome: (improved|slower|no change): [\d.e-]+ -> [\d.e-]+ ms", first)
    assert "```diff" in first and "+    x = x - tl.max(x, axis=0)" in first
    assert second.startswith("Skip the max subtraction")
    assert "outcome: failed, wrong_output" in second and "worst case:" in second
    diff = second.split("```diff\n", 1)[1].split("\n```")[0].splitlines()
    removed = [x[1:] for x in diff if x.startswith("-") and not x.startswith(("---", "-..."))]
    added = [x[1:] for x in diff if x.startswith("+") and not x.startswith("+++")]
    assert "    x = x - tl.max(x, axis=0)" in removed or any("tl.maximum" in x for x in removed), diff
    assert all(x in NO_MAX.splitlines() for x in added), diff  # what the model wrote, and nothing else
    # the island's failures list holds the wrong child too; it is shown once, as this mutator's attempt
    assert "Recent failures on this island" not in users[2]
    assert any(not f.evaluation.ok for f in island.recent_failures)


def test_a_real_campaigns_prompt_draws_inspirations_of_other_structures(campaign):
    island, users = campaign
    structures = {i.candidate.structure for i in island.population}
    assert len(structures) >= 2, "the population holds the seed's structure and the one-pass rewrite"
    inspiration = section(users[2], "Correct kernels of other structures")
    assert "ms" in inspiration and ("```diff" in inspiration or "```python" in inspiration)
    assert "## Other correct kernels" not in users[2]
    assert len(users[2]) < 12_000, len(users[2])


# -- the pieces, on hand-made inputs --------------------------------------------------------------

LAUNCH = {"kernel": "_softmax", "us": 9.5, "repeats": 1, "bound": "latency",
          "terms_us": {"dram": 1.2, "l2": 0.4, "latency": 9.1, "issue": 2.0}, "programs_per_sm": 16,
          "occupancy_limit": "warps", "waves": 1, "dram_bytes": 524288, "l2_bytes": 786432, "registers": 40,
          "spill_bytes": 0, "shared_bytes": 1024, "pipeline_depth": 1, "grid": [64, 1, 1]}


def test_too_few_programs_to_fill_the_gpu_is_said_in_words():
    text = launch_sentence(LAUNCH, H100, 9.5)
    assert "`_softmax`: 9.5 us; latency-bound" in text and "fewer DRAM bytes alone will not" in text
    assert "64 programs cannot fill the GPU's 132 SMs (68 SMs idle, 0.03 of one wave of 2112)" in text
    assert "Terms: latency 9.1 us, issue 2 us, dram 1.2 us." in text
    assert "40 registers per thread, no spills, 1024 bytes of shared memory" in text
    assert "Traffic: 0.524 MB from DRAM, 0.786 MB through L2." in text


def test_many_programs_give_waves_and_spills_are_named():
    big = {**LAUNCH, "grid": [4096, 1, 1], "bound": "dram", "spill_bytes": 64, "repeats": 2}
    text = launch_sentence(big, H100, 40.0)
    assert "DRAM-bandwidth-bound" in text and "x2, 48% of the total" in text
    assert "4096 programs over 132 SMs x 16 = 1.94 waves, the last one 94% full" in text
    assert "64 bytes spilled per thread" in text


def test_performance_lines_give_the_speed_of_light_against_the_tasks_minimum_traffic():
    task = NativeTask(ROOT / "evo" / "tasks" / "softmax")
    e = Evaluation("c", task.key, "cpu", Status.OK, error=0.0, latency_ms=0.0095, latency_source=LatencySource.MODEL,
                   speedups={"seed": 2.5}, roofline_fraction=0.08, latency_gpu="h100",
                   latency_detail={"gpu": "h100", "size": {"rows": 64, "cols": 1024}, "dram_bytes": 1048576,
                                   "sol_ms": 0.00076, "model_s": 3.2, "sample_seed": "123", "launches": [LAUNCH]})
    lines = "\n".join(performance_lines(e, task))
    assert "latency: 0.0095 ms (model) at size {'rows': 64, 'cols': 1024}" in lines
    assert "speedup over seed: 2.5x" in lines
    assert "speed of light: the kernel reaches 8.0% of it (0.00076 ms at the GPU's peak rates vs 0.0095 ms)" in lines
    assert "1.05 MB from DRAM, 2.00x the 0.524 MB the task must read and write" in lines
    assert "model_s" not in lines and "123" not in lines and "dram_bytes" not in lines
    assert "cannot fill" in bottleneck_text(e)
    assert bottleneck_text(e.with_(latency_detail={"gpu": "h100"})) == ""  # measured on CUDA: no breakdown


def test_outcomes_say_improved_slower_or_which_check_failed_and_where():
    ok = Evaluation("c", "t", "cpu", Status.OK, error=0.0, latency_ms=0.5)
    assert outcome_text(1.0, ok, 100) == "improved: 1 -> 0.5 ms (2x)"
    assert outcome_text(0.25, ok, 100) == "slower: 0.25 -> 0.5 ms (0.5x)"
    assert outcome_text(0.5, ok, 100).startswith("no change")
    bad = Evaluation("c", "t", "cpu", Status.WRONG_OUTPUT, reason="output 0 wrong",
                     worst_case='size {"rows": 7} (wide)', max_error_ratio=812.0, mismatch_fraction=0.5)
    assert outcome_text(1.0, bad, 100) == ('failed, wrong_output: output 0 wrong; worst case: size {"rows": 7} (wide); '
                                           "max error / tolerance 812, 50.0% of elements wrong")


def test_an_attempt_carries_a_clipped_unified_diff_against_its_parent():
    before = "a\nb\nc\n" + "".join(f"line {i}\n" for i in range(200))
    after = before.replace("b\n", "B\n")
    diff = unified_diff(before, after, 300)
    assert "-b" in diff.splitlines() and "+B" in diff.splitlines() and len(diff) <= 300
    rewrite = unified_diff(before, "x\ny\n", 300)
    assert rewrite.splitlines()[3:] == ["-a", "-... (202 more lines removed)", "+x", "+y"]  # what was written shows
    long = unified_diff(before, after.replace("line", "LINE"), 300)
    assert len(long) <= 300 and long.endswith("(truncated)")
    ok = Evaluation("c", "t", "cpu", Status.OK, error=0.0, latency_ms=0.5)
    a = attempt_of(Pending(before, 1.0, "Capital B."), Candidate(after), after, ok, diff_chars=500, reason_chars=100)
    assert a.text(3).startswith("3. Capital B.\n   outcome: improved") and "```diff\n" in a.text(3)
    assert Attempt.from_dict(a.to_dict()) == a
    unknown = attempt_of(Pending("", None, "llm note"), Candidate(after), after, ok, diff_chars=500, reason_chars=100)
    assert unknown.diff == "" and unknown.outcome == "correct, 0.5 ms"


def test_explanation_is_the_prose_before_the_code():
    assert explanation("Bigger blocks,\n fewer rounds.\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE") == \
        "Bigger blocks, fewer rounds."
    assert explanation("```python\nx\n```") == ""


def _ind(source: str, latency: float, **params: int) -> Individual:
    c = Candidate(source, dict(params))
    return Individual(Proposal(c, "seed"), Evaluation(c.id, "t", "cpu", Status.OK, error=0.0, latency_ms=latency))


def test_inspirations_are_one_per_structure_and_params_variants_are_listed_apart():
    parent = _ind("A", 1.0, BLOCK=128)
    elites = [_ind("A", 0.5, BLOCK=256), _ind("A", 0.6, BLOCK=512), _ind("B", 0.9), _ind("B", 0.7, BLOCK=1)]
    population = [_ind("C", 2.0), parent]
    others, same = diverse(parent, (elites, population), 3)
    assert [(i.candidate.source, i.latency_ms) for i in others] == [("B", 0.7), ("C", 2.0)]
    assert [i.latency_ms for i in same] == [0.5, 0.6]


def test_the_prompt_of_a_population_of_near_identical_elites_stays_small():
    task = NativeTask(ROOT / "evo" / "tasks" / "softmax")
    seed = Candidate.from_source(task.seed_source or "")
    ev = Evaluation(seed.id, task.key, "cpu", Status.OK, error=0.0, latency_ms=1.0)
    parent = Individual(Proposal(seed, "seed"), ev)
    elites = [Individual(Proposal(seed.with_params(BLOCK=b), "seed"), ev.with_(latency_ms=1.0 - b / 1e4))
              for b in (256, 512, 1024)]
    one_pass = Individual(Proposal(Candidate.from_source(ONE_PASS), "llm"), ev.with_(latency_ms=0.3))
    [_, user] = build_messages(task, parent, failures=[], inspirations=[*elites, one_pass], hardware="h100",
                               cfg=LLMConfig())
    content = user["content"]
    assert content.count("```python") == 3  # reference, current kernel, the one other structure
    assert "## The current kernel with other params" in content and "{'BLOCK': 1024}: 0.8976 ms" in content
    assert "\n".join(task_lines(task)) in content


def replay_mutator(tmp_path: Path) -> LLMMutator:
    """An llm mutator that needs no server (replay from the shipped record)."""
    record = ROOT / "configs" / "llm_records" / "softmax_standin.jsonl"
    m = build_mutator(LLMConfig(mode="replay", record_path=str(record)), run_dir=tmp_path, seed=0)
    assert isinstance(m, LLMMutator)
    return m


def test_attempts_survive_a_checkpoint(tmp_path):
    m = replay_mutator(tmp_path)
    m._attempts.append(Attempt("Tried X.", "slower: 1 -> 2 ms (0.5x)", "-a\n+b"))
    again = replay_mutator(tmp_path)
    again.load_state(m.state())
    assert list(again._attempts) == list(m._attempts)


def test_other_mutators_failures_are_labelled_and_own_children_are_shown_once(tmp_path):
    m = replay_mutator(tmp_path)
    task = NativeTask(ROOT / "evo" / "tasks" / "softmax")
    wrong = Evaluation("x", task.key, "cpu", Status.WRONG_OUTPUT, reason="NaN in output 0")
    by_stoke = Individual(Proposal(Candidate("A"), "stoke"), wrong.with_(reason="stoke broke it"))
    by_me = Individual(Proposal(Candidate("B"), "llm"), wrong.with_(reason="llm broke it"))
    m._mine.append(by_me.id)
    ctx = MutationContext(task=task, rng=random.Random(0), evaluate=fake_evaluate(task.key),
                          recent_failures=[by_stoke, by_me])
    assert m._failure_lines(ctx) == ["- (stoke) wrong_output: stoke broke it\n  params: {}"]
    later = Individual(by_me.proposal, wrong.with_(reason="wrong at bench size", level="verified"))
    assert "- (llm) wrong_output: wrong at bench size" in "\n".join(m._failure_lines(
        MutationContext(task=task, rng=random.Random(0), evaluate=fake_evaluate(task.key), recent_failures=[later])))
