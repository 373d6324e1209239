"""Config models of the mutator kinds (the ``mutators:`` list of a campaign config).

Each entry is selected by ``kind``; an unknown kind is an error listing the valid ones. Every kind
has a ``weight`` used by fixed-weight operator selection (ablations). `build_mutator` turns an
entry into a `Mutator`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from mutators.base import Mutator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StokeConfig(_Strict):
    """Random local AST moves walked as a Metropolis-Hastings chain."""

    kind: Literal["stoke"] = "stoke"
    weight: float = Field(default=1.0, ge=0)
    chain_length: int = Field(default=8, ge=1)
    beta: float = Field(default=1.0, gt=0)
    error_weight: float = Field(default=10.0, ge=0)


class OptunaConfig(_Strict):
    """Optuna tuning of the candidate's SPACE, one study per kernel structure."""

    kind: Literal["optuna"] = "optuna"
    weight: float = Field(default=1.0, ge=0)
    sampler: Literal["tpe", "gp", "random", "cmaes", "nsga2"] = "tpe"
    trials_per_proposal: int = Field(default=4, ge=1)
    storage: str | None = None  # RDB URL for multi-node clusters; default: a journal file in the run dir


class LLMConfig(_Strict):
    """Rewrites by any OpenAI-compatible model. The key is read from `api_key_env`, never stored."""

    kind: Literal["llm"] = "llm"
    weight: float = Field(default=1.0, ge=0)
    model: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = Field(default=0.7, ge=0)
    max_tokens: int = Field(default=4096, ge=1)
    timeout_s: float = Field(default=120.0, gt=0)
    retries: int = Field(default=3, ge=0)
    max_concurrent: int = Field(default=4, ge=1)
    price_in_per_mtok: float = Field(default=0.0, ge=0)
    price_out_per_mtok: float = Field(default=0.0, ge=0)
    budget_usd: float | None = Field(default=None, ge=0)
    mode: Literal["live", "record", "replay"] = "live"
    record_path: str | None = None  # default: llm_record.jsonl in the run directory


MutatorConfig = Annotated[StokeConfig | OptunaConfig | LLMConfig, Field(discriminator="kind")]
MUTATOR_KINDS = ("llm", "stoke", "optuna")


def build_mutator(cfg: StokeConfig | OptunaConfig | LLMConfig, *, run_dir: Path, seed: int) -> Mutator:
    """The mutator an entry describes; `run_dir` holds its files (journal, LLM record)."""
    raise NotImplementedError(f"mutator kind {cfg.kind!r} is not implemented yet")
