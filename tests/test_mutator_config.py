"""Mutator and selection config entries: strict validation and `build_mutator`."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from evo.contracts.mutator_config import (
    AnyMutatorConfig,
    LLMConfig,
    MutatorConfig,
    OptunaConfig,
    SelectionConfig,
    StokeConfig,
    SweepConfig,
)
from mutators.factory import build_mutator
from mutators.llm.mutator import LLMMutator
from mutators.optuna.tuner import OptunaMutator
from mutators.stoke.mutator import StokeMutator

ENTRY: TypeAdapter[AnyMutatorConfig] = TypeAdapter(MutatorConfig)


def test_entries_are_chosen_by_kind_and_unknown_kinds_name_the_valid_ones():
    assert isinstance(ENTRY.validate_python({"kind": "stoke", "chain_length": 3}), StokeConfig)
    assert isinstance(ENTRY.validate_python({"kind": "sweep", "order": "grid"}), SweepConfig)
    with pytest.raises(ValidationError, match="'random' or 'grid'"):
        ENTRY.validate_python({"kind": "sweep", "order": "spiral"})
    with pytest.raises(ValidationError, match=r"'genetic'.*expected tags: 'stoke', 'optuna', 'llm'"):
        ENTRY.validate_python({"kind": "genetic"})
    with pytest.raises(ValidationError, match="chain_lenght"):
        ENTRY.validate_python({"kind": "stoke", "chain_lenght": 3})


def test_bad_values_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown STOKE move"):
        build_mutator(StokeConfig(move_weights={"teleport": 1.0}), run_dir=tmp_path, seed=0)
    with pytest.raises(ValidationError, match="at least one > 0"):
        StokeConfig(move_weights={"param x2": 0.0})
    with pytest.raises(ValidationError, match="names an environment variable"):
        LLMConfig(api_key_env="sk-abc123")
    with pytest.raises(ValidationError):
        OptunaConfig(sampler="bohb")
    with pytest.raises(ValidationError):
        SelectionConfig(policy="epsilon")


def test_build_mutator_builds_every_kind(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    assert isinstance(build_mutator(StokeConfig(name="stoke-hot", beta=0.5), run_dir=tmp_path, seed=1), StokeMutator)
    opt = build_mutator(OptunaConfig(sampler="random"), run_dir=tmp_path, seed=1)
    assert isinstance(opt, OptunaMutator) and opt.name == "optuna"
    llm = build_mutator(LLMConfig(name="local", base_url="http://127.0.0.1:9/v1"), run_dir=tmp_path, seed=1)
    assert isinstance(llm, LLMMutator) and llm.name == "local" and not llm.exhausted()
    # Nothing is contacted and no key is needed until the first request.
    assert llm.client.stats()["requests"] == 0
