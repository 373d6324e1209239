"""Config models of the mutator kinds (the ``mutators:`` list of a campaign config) and of operator
selection (``selection:``).

Each mutator entry is selected by ``kind``; an unknown kind is an error listing the valid ones.
Every kind has a ``weight`` used by fixed-weight operator selection (ablations) and an optional
``name`` (default: the kind) that labels its proposals. Each mutator is constructed from its own
entry (`mutators.factory.build_mutator`), so the defaults below are the only ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import Enum
from typing import Annotated, Literal, Protocol, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StokeConfig(Strict):
    """Random local AST moves walked as a Metropolis-Hastings chain (see `mutators.stoke.mutator`).

    `chain_length` counts evaluated steps (invalid moves are skipped and retried, at most
    `attempts_per_step` times per step); `move_weights` replaces the default move probabilities
    (names as in `mutators.stoke.moves.catalog.MOVE_NAMES`, checked when the mutator is built; a move left out
    is never drawn).
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
    def _positive(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if v is not None and (any(w < 0 for w in v.values()) or not any(w > 0 for w in v.values())):
            raise ValueError("move weights must be >= 0 with at least one > 0")
        return v


class Sampler(str, Enum):
    TPE = "tpe"
    GP = "gp"
    RANDOM = "random"
    CMAES = "cmaes"
    NSGA2 = "nsga2"  # two objectives: latency and worst error / tolerance


class OptunaConfig(Strict):
    """Optuna tuning of the candidate's SPACE, one study per kernel structure (see
    `mutators.optuna.tuner`). `storage`: an RDB URL (sqlite:///..., postgresql://...) for a
    multi-node cluster; default a journal file ``optuna.journal`` in the run directory, shared by
    all islands on the host. `nsga2` optimizes latency and worst error/tolerance together.
    `polish`: when the sampler asks for a config the study has already measured (it has settled),
    the untried grid neighbours of the study's `polish` best configs (one step along one parameter)
    are asked instead; 0 leaves the sampler alone. `transfer`: a new study (a new kernel structure)
    is first queued the `transfer` fastest configs this mutator measured on the task's other
    structures, where they lie in its SPACE; 0 starts from PARAMS and the known-good configs only."""

    kind: Literal["optuna"] = "optuna"
    name: str | None = None
    weight: float = Field(default=1.0, ge=0)
    sampler: Sampler = Sampler.TPE
    trials_per_proposal: int = Field(default=4, ge=1)
    storage: str | None = None
    enqueue_known: bool = True
    polish: int = Field(default=3, ge=0)
    transfer: int = Field(default=3, ge=0)


LLMMode = Literal["live", "record", "replay"]
ReplayMatch = Literal["exact", "kernel"]


class LLMConfig(Strict):
    """Rewrites by any OpenAI-compatible model (see `mutators.llm.mutator`). The key is read from the
    environment variable `api_key_env`, never stored. `mode`: live, record (live, and every exchange
    appended to `record_path`, default ``llm_record.jsonl`` in the run directory) or replay (answers
    from that file only, no network). `replay_match`: exact (the same prompt, to re-run a campaign
    exactly) or kernel (the same kernel shown, whatever else the prompt holds; an unrecorded kernel
    gets a reply recorded for another one; for comparing campaigns that share one record). A
    relative `record_path` is relative to the config file. Prices are dollars per million tokens;
    `budget_usd` stops LLM proposals once spent. After `pause_after_failures` requests in a row that
    got no reply, the mutator pauses (the island's other mutators go on) for `pause_s`, doubling with
    each further pause up to `max_pause_s`; one reply ends the pauses. The prompt shows this mutator's
    last `max_attempts_in_prompt` attempts (outcome and diff against the parent, cut at `diff_chars`),
    at most `max_failures_in_prompt` recent failures of the island's other mutators and
    `max_inspirations` kernels of other structures, each reason cut at `reason_chars` and each source
    at `source_chars`. A task without a seed kernel gets its first
    kernel from the first `llm` mutator's model (`evo.app.run.lowering`), which has `lowering_attempts`
    tries, each rejected one returned with the checker's verdict."""

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
    pause_after_failures: int = Field(default=3, ge=1)
    pause_s: float = Field(default=30.0, ge=0)
    max_pause_s: float = Field(default=600.0, ge=0)
    max_concurrent: int = Field(default=4, ge=1)
    samples_per_proposal: int = Field(default=1, ge=1)
    max_failures_in_prompt: int = Field(default=4, ge=0)
    max_inspirations: int = Field(default=3, ge=0)
    max_attempts_in_prompt: int = Field(default=4, ge=0)
    diff_chars: int = Field(default=1500, ge=200)
    reason_chars: int = Field(default=600, ge=40)
    source_chars: int = Field(default=8000, ge=200)
    price_in_per_mtok: float = Field(default=0.0, ge=0)
    price_out_per_mtok: float = Field(default=0.0, ge=0)
    budget_usd: float | None = Field(default=None, ge=0)
    mode: LLMMode = "live"
    record_path: str | None = None
    replay_match: ReplayMatch = "exact"
    lowering_attempts: int = Field(default=4, ge=1)

    @field_validator("api_key_env")
    @classmethod
    def _a_name_not_a_key(cls, v: str) -> str:
        if not v.replace("_", "").isalnum() or v.startswith(("sk-", "sk_")):
            raise ValueError("api_key_env names an environment variable (e.g. OPENAI_API_KEY), never the key")
        return v


class SweepConfig(Strict):
    """A baseline, not a search: points of the seed's SPACE, each proposed once (see `mutators.sweep`).
    `order`: random (uniform draws without replacement: random search) or grid (every point in
    order: an exhaustive sweep). `per_proposal` points per pull. Exhausted once every point is out."""

    kind: Literal["sweep"] = "sweep"
    name: str | None = None
    weight: float = Field(default=1.0, ge=0)
    order: Literal["random", "grid"] = "random"
    per_proposal: int = Field(default=4, ge=1)


AnyMutatorConfig = StokeConfig | OptunaConfig | LLMConfig | SweepConfig
MutatorConfig = Annotated[AnyMutatorConfig, Field(discriminator="kind")]
MUTATOR_KINDS: tuple[str, ...] = tuple(str(m.model_fields["kind"].default) for m in get_args(AnyMutatorConfig))


class SelectionConfig(Strict):
    """How an island picks the next mutator (see `mutators.selection` for the reward).

    policy: fixed (the entries' weights), ucb1 (`exploration` is UCB1's c) or thompson (Beta
    priors). `seconds_per_usd` converts LLM dollars into evaluation seconds for the reward's cost.
    """

    policy: Literal["fixed", "ucb1", "thompson"] = "ucb1"
    exploration: float = Field(default=math.sqrt(2), ge=0)
    prior_alpha: float = Field(default=1.0, gt=0)
    prior_beta: float = Field(default=1.0, gt=0)
    seconds_per_usd: float = Field(default=1500.0, ge=0)


class Named(Protocol):
    """A mutator entry or a mutator: its kind and, optionally, a name."""

    @property
    def kind(self) -> str: ...

    @property
    def name(self) -> str | None: ...


def entry_names(entries: Sequence[Named]) -> list[str]:
    """The names islands, reports and selection use for an island's mutators (entries or built
    mutators alike): each one's `name`, else its kind, numbered when it repeats (optuna, optuna-2)."""
    names: list[str] = []
    seen: dict[str, int] = {}
    for e in entries:
        base = e.name or e.kind
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return names
