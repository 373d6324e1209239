"""Config models of the mutator kinds (the ``mutators:`` list of a campaign config) and of operator
selection (``selection:``).

Each mutator entry is selected by ``kind``; an unknown kind is an error listing the valid ones.
Every kind has a ``weight`` used by fixed-weight operator selection (ablations) and an optional
``name`` (default: the kind) that labels its proposals; names must be unique within an island.
`build_mutator` turns an entry into a `Mutator`, `build_selector` the selection entry into a
`Selector`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mutators.base import Mutator
from mutators.selection import UCB1, FixedWeights, Selector, Thompson


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StokeConfig(_Strict):
    """Random local AST moves walked as a Metropolis-Hastings chain (see `mutators.stoke`).

    `chain_length` counts evaluated steps (invalid moves are skipped and retried, at most
    `attempts_per_step` times per step); `move_weights` replaces the default move probabilities
    (names as in `mutators.moves.MOVE_NAMES`; a move left out is never drawn).
    """

    kind: Literal["stoke"] = "stoke"
    name: str | None = None
    weight: float = Field(default=1.0, ge=0)
    chain_length: int = Field(default=8, ge=1)
    beta: float = Field(default=3.0, gt=0)
    error_weight: float = Field(default=10.0, ge=0)
    attempts_per_step: int = Field(default=20, ge=1)
    move_weights: dict[str, float] | None = None

    @field_validator("move_weights")
    @classmethod
    def _known_moves(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        from mutators.moves import MOVE_NAMES

        if v is not None:
            unknown = sorted(set(v) - set(MOVE_NAMES))
            if unknown:
                raise ValueError(f"unknown STOKE move(s) {unknown}; valid: {', '.join(MOVE_NAMES)}")
            if any(w < 0 for w in v.values()) or not any(w > 0 for w in v.values()):
                raise ValueError("move weights must be >= 0 with at least one > 0")
        return v


class OptunaConfig(_Strict):
    """Optuna tuning of the candidate's SPACE, one study per kernel structure (see
    `mutators.optuna_tuner`). `storage`: an RDB URL (sqlite:///..., postgresql://...) for a
    multi-node cluster; default a journal file ``optuna.journal`` in the run directory, shared by
    all islands on the host. `nsga2` optimizes latency and worst error/tolerance together."""

    kind: Literal["optuna"] = "optuna"
    name: str | None = None
    weight: float = Field(default=1.0, ge=0)
    sampler: Literal["tpe", "gp", "random", "cmaes", "nsga2"] = "tpe"
    trials_per_proposal: int = Field(default=4, ge=1)
    storage: str | None = None
    enqueue_known: bool = True


class LLMConfig(_Strict):
    """Rewrites by any OpenAI-compatible model (see `mutators.llm`). The key is read from the
    environment variable `api_key_env`, never stored. `mode`: live, record (live, and every exchange
    appended to `record_path`, default ``llm_record.jsonl`` in the run directory) or replay (answers
    from that file only, no network). `replay_match`: exact (the same prompt, to re-run a campaign
    exactly) or kernel (the same kernel shown, whatever else the prompt holds; an unrecorded kernel
    gets a reply recorded for another one; for comparing campaigns that share one record). A
    relative `record_path` is relative to the config file. Prices are dollars per million tokens;
    `budget_usd` stops LLM proposals once spent."""

    kind: Literal["llm"] = "llm"
    name: str | None = None
    weight: float = Field(default=1.0, ge=0)
    model: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = Field(default=0.7, ge=0)
    max_tokens: int = Field(default=4096, ge=1)
    timeout_s: float = Field(default=120.0, gt=0)
    retries: int = Field(default=3, ge=0)
    backoff_s: float = Field(default=1.0, ge=0)
    max_concurrent: int = Field(default=4, ge=1)
    samples_per_proposal: int = Field(default=1, ge=1)
    max_failures_in_prompt: int = Field(default=4, ge=0)
    max_inspirations: int = Field(default=3, ge=0)
    price_in_per_mtok: float = Field(default=0.0, ge=0)
    price_out_per_mtok: float = Field(default=0.0, ge=0)
    budget_usd: float | None = Field(default=None, ge=0)
    mode: Literal["live", "record", "replay"] = "live"
    record_path: str | None = None
    replay_match: Literal["exact", "kernel"] = "exact"

    @field_validator("api_key_env")
    @classmethod
    def _a_name_not_a_key(cls, v: str) -> str:
        if not v.replace("_", "").isalnum() or v.startswith(("sk-", "sk_")):
            raise ValueError("api_key_env names an environment variable (e.g. OPENAI_API_KEY), never the key")
        return v


MutatorConfig = Annotated[StokeConfig | OptunaConfig | LLMConfig, Field(discriminator="kind")]
MUTATOR_KINDS = ("llm", "stoke", "optuna")


class SelectionConfig(_Strict):
    """How an island picks the next mutator (see `mutators.selection` for the reward).

    policy: fixed (the entries' weights), ucb1 (`exploration` is UCB1's c) or thompson (Beta
    priors). `seconds_per_usd` converts LLM dollars into evaluation seconds for the reward's cost.
    """

    policy: Literal["fixed", "ucb1", "thompson"] = "ucb1"
    exploration: float = Field(default=math.sqrt(2), ge=0)
    prior_alpha: float = Field(default=1.0, gt=0)
    prior_beta: float = Field(default=1.0, gt=0)
    seconds_per_usd: float = Field(default=1500.0, ge=0)


def mutator_name(cfg: StokeConfig | OptunaConfig | LLMConfig) -> str:
    return cfg.name or cfg.kind


def build_mutator(cfg: StokeConfig | OptunaConfig | LLMConfig, *, run_dir: Path, seed: int) -> Mutator:
    """The mutator an entry describes; `run_dir` holds its files (Optuna journal, LLM record).

    `seed` seeds the mutator's own randomness (Optuna's sampler); STOKE and the LLM draw from the
    island's `MutationContext.rng`.
    """
    if isinstance(cfg, StokeConfig):
        from mutators.stoke import StokeMutator

        return StokeMutator(chain_length=cfg.chain_length, beta=cfg.beta, error_weight=cfg.error_weight,
                            move_weights=cfg.move_weights, attempts_per_step=cfg.attempts_per_step, name=cfg.name)
    if isinstance(cfg, OptunaConfig):
        from mutators.optuna_tuner import OptunaMutator

        return OptunaMutator(journal_path=run_dir / "optuna.journal", seed=seed, sampler=cfg.sampler,
                             trials_per_proposal=cfg.trials_per_proposal, storage=cfg.storage,
                             enqueue_known=cfg.enqueue_known, name=cfg.name)
    if isinstance(cfg, LLMConfig):
        from mutators.llm import LLMMutator

        return LLMMutator.from_config(cfg, run_dir=run_dir)
    raise ValueError(f"unknown mutator kind {getattr(cfg, 'kind', cfg)!r}; valid: {', '.join(MUTATOR_KINDS)}")


def build_selector(cfg: SelectionConfig, mutators: Sequence[StokeConfig | OptunaConfig | LLMConfig] | Mapping[
        str, float]) -> Selector:
    """The selector for an island's mutator entries (or a name -> weight mapping)."""
    weights = dict(mutators) if isinstance(mutators, Mapping) else {mutator_name(m): m.weight for m in mutators}
    if isinstance(mutators, Sequence) and len(weights) != len(mutators):
        raise ValueError("mutator names must be unique within an island; set `name:` on repeated kinds")
    if cfg.policy == "fixed":
        return FixedWeights(weights, seconds_per_usd=cfg.seconds_per_usd)
    if cfg.policy == "ucb1":
        return UCB1(list(weights), exploration=cfg.exploration, seconds_per_usd=cfg.seconds_per_usd)
    return Thompson(list(weights), prior_alpha=cfg.prior_alpha, prior_beta=cfg.prior_beta,
                    seconds_per_usd=cfg.seconds_per_usd)
