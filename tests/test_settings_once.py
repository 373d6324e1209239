"""Every setting is declared once: the config schema holds each default, and the runtime objects
built from an empty config carry exactly those defaults (no constructor keeps a copy of its own)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from evo.contracts.config import (
    Config,
    EvaluationConfig,
    EvaluatorsConfig,
    IslandsConfig,
    MigrationConfig,
    SpinUpConfig,
    TaskConfig,
    TimerConfig,
)
from evo.contracts.config_file import parse_config
from evo.contracts.mutator_config import LLMConfig, OptunaConfig, SelectionConfig, StokeConfig, entry_names
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from mutators.factory import build_mutator, build_selector

ROOT = Path(__file__).resolve().parent.parent
SCHEMA: list[type[BaseModel]] = [Config, TaskConfig, EvaluationConfig, TimerConfig, SpinUpConfig, IslandsConfig,
                                 MigrationConfig, EvaluatorsConfig, SelectionConfig, StokeConfig, OptunaConfig,
                                 LLMConfig]
SCHEMA_FILES = {ROOT / "evo" / "contracts" / "config.py", ROOT / "evo" / "contracts" / "mutator_config.py"}


def schema_defaults() -> dict[str, set[Any]]:
    """Field name -> the literal defaults the schema gives fields of that name."""
    out: dict[str, set[Any]] = {}
    for model in SCHEMA:
        for name, field in model.model_fields.items():
            d = field.get_default(call_default_factory=True)
            if isinstance(d, (int, float, str, bool)) and not isinstance(d, BaseModel):
                out.setdefault(name, set()).add(d.value if hasattr(d, "value") else d)
    return out


def copied_defaults(source: str, defaults: dict[str, set[Any]]) -> list[str]:
    """Parameters and class fields named like a schema field whose literal default equals the schema's."""
    found = []

    def check(name: str, value: ast.expr | None, line: int) -> None:
        if value is None or name not in defaults:
            return
        try:
            literal = ast.literal_eval(value)
        except ValueError:
            return
        if isinstance(literal, (int, float, str, bool)) and literal in defaults[name]:
            found.append(f"line {line}: {name} = {literal!r}")

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            positional = a.posonlyargs + a.args
            for arg, d in zip(positional[len(positional) - len(a.defaults):], a.defaults):
                check(arg.arg, d, node.lineno)
            for arg, kd in zip(a.kwonlyargs, a.kw_defaults):
                check(arg.arg, kd, node.lineno)
        elif isinstance(node, ast.ClassDef):
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    check(st.target.id, st.value, st.lineno)
    return found


def test_no_runtime_object_keeps_its_own_copy_of_a_schema_default():
    defaults = schema_defaults()
    copies = {str(p.relative_to(ROOT)): found for pkg in ("evo", "fitness", "mutators", "islands")
              for p in (ROOT / pkg).rglob("*.py") if p not in SCHEMA_FILES
              if (found := copied_defaults(p.read_text(), defaults))}
    assert not copies, f"defaults declared again outside the schema: {copies}"


def test_the_scan_finds_a_copied_default():
    defaults = schema_defaults()
    source = ("class A:\n    chain_length: int = 8\n"
              "def f(*, memory_mb: int = 4096, draws=2, beta: float = 0.5):\n    pass\n")
    assert copied_defaults(source, defaults) == ["line 2: chain_length = 8", "line 3: memory_mb = 4096",
                                                 "line 3: draws = 2"]


@pytest.fixture
def empty(monkeypatch, tmp_path) -> Config:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return parse_config({"task": {"name": "softmax"}, "budget": {"generations": 1},
                         "mutators": [{"kind": "stoke"}, {"kind": "optuna"}, {"kind": "llm"}]})


def test_mutators_and_selection_built_from_an_empty_config_carry_the_schema_defaults(empty, tmp_path):
    from mutators.llm.mutator import LLMMutator
    from mutators.optuna.tuner import OptunaMutator
    from mutators.selection import UCB1
    from mutators.stoke.moves.catalog import DEFAULT_WEIGHTS
    from mutators.stoke.mutator import StokeMutator

    stoke, optuna, llm = (build_mutator(m, run_dir=tmp_path, seed=0) for m in empty.mutators)
    s, o, c = StokeConfig(), OptunaConfig(), LLMConfig()
    assert isinstance(stoke, StokeMutator)
    assert (stoke.chain_length, stoke.beta, stoke.error_weight, stoke.attempts_per_step) == (
        s.chain_length, s.beta, s.error_weight, s.attempts_per_step)
    assert [m.name for m in stoke.moves] == [n for n, w in DEFAULT_WEIGHTS.items() if w > 0]
    assert isinstance(optuna, OptunaMutator)
    assert (optuna.sampler, optuna.trials_per_proposal, optuna.enqueue_known) == (
        o.sampler, o.trials_per_proposal, o.enqueue_known)
    assert isinstance(llm, LLMMutator)
    client = llm.client
    assert (client.model, client.temperature, client.max_tokens, client.timeout_s, client.retries,
            client.backoff_s, client.budget_usd, client.mode, client.replay_match, client._slots._value) == (
        c.model, c.temperature, c.max_tokens, c.timeout_s, c.retries, c.backoff_s, c.budget_usd, c.mode,
        c.replay_match, c.max_concurrent)
    assert (llm.samples, llm.cfg.max_failures_in_prompt, llm.cfg.max_inspirations) == (
        c.samples_per_proposal, c.max_failures_in_prompt, c.max_inspirations)
    selector = build_selector(empty.selection, dict.fromkeys(entry_names(empty.mutators), 1.0))
    assert isinstance(selector, UCB1)
    assert (selector.exploration, selector.seconds_per_usd) == (
        SelectionConfig().exploration, SelectionConfig().seconds_per_usd)


def test_the_island_and_the_evaluator_built_from_an_empty_config_carry_the_schema_defaults(empty, monkeypatch):
    from fitness.evaluate import Evaluator
    from fitness.latency.model import ModelLatency
    from fitness.sandbox.process import Worker
    from islands.evaluation import EvaluationLedger, LocalEvaluationService
    from islands.island import Island
    from mutators.selection import FixedWeights

    from .islands_fakes import FakeEvaluate, ParamMutator

    task = NativeTask(TASK_LIBRARY / "softmax")
    isl = IslandsConfig()
    island = Island(0, empty.islands, task=task, mutators=[ParamMutator()],
                    selector=FixedWeights({"params": 1.0}, empty.selection),
                    service=LocalEvaluationService(FakeEvaluate(task.key), EvaluationLedger(task.key)), seed=0)
    assert (island.hof.maxsize, island.recent_failures.maxlen) == (isl.hall_of_fame, isl.recent_failures)

    monkeypatch.setattr(Worker, "start", lambda self: None)  # no subprocess: only the wiring is checked
    e = EvaluationConfig()
    ev = Evaluator(task, empty.evaluation, device="cpu")
    assert ev.settings == e and ev.worker.memory_mb == e.memory_mb
    own = task.cases(draws=e.draws)  # then the special values and the bench-shaped cases (evo.contracts.check_cases)
    assert len(own) == len(task.check_sizes) * max(e.draws, len(task.dists)) and ev.cases("full")[: len(own)] == own
    assert len(ev.cases("full")) > len(own)
    assert len(ev.cases("quick")) == min(e.quick_sizes, len(task.check_sizes))
    model = ev.latency._model_source(0)
    assert isinstance(model, ModelLatency)
    assert model.gpu.name == e.target_gpu and model.compiler.memory_mb == e.memory_mb
    assert ev.latency.mode is e.latency
