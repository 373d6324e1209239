"""Mutators and operator selection built from their config entries (`evo.contracts.mutator_config`):
the one place a config entry becomes a runtime object."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from evo.contracts.mutator_config import (
    MUTATOR_KINDS,
    AnyMutatorConfig,
    LLMConfig,
    OptunaConfig,
    SelectionConfig,
    StokeConfig,
    SweepConfig,
)
from mutators.base import Mutator
from mutators.selection import UCB1, FixedWeights, Selector, Thompson


def build_mutator(cfg: AnyMutatorConfig, *, run_dir: Path, seed: int) -> Mutator:
    """The mutator an entry describes; `run_dir` holds its files (Optuna journal, LLM record).

    `seed` seeds the mutator's own randomness (Optuna's sampler); STOKE and the LLM draw from the
    island's `MutationContext.rng`.
    """
    if isinstance(cfg, StokeConfig):
        from mutators.stoke.mutator import StokeMutator

        return StokeMutator(cfg)
    if isinstance(cfg, OptunaConfig):
        from mutators.optuna.tuner import OptunaMutator

        return OptunaMutator(cfg, journal_path=run_dir / "optuna.journal", seed=seed)
    if isinstance(cfg, LLMConfig):
        from mutators.llm.mutator import LLMMutator

        return LLMMutator(cfg, run_dir=run_dir)
    if isinstance(cfg, SweepConfig):
        from mutators.sweep import SweepMutator

        return SweepMutator(cfg, seed=seed)
    raise ValueError(f"unknown mutator kind {getattr(cfg, 'kind', cfg)!r}; valid: {', '.join(MUTATOR_KINDS)}")


def build_selector(cfg: SelectionConfig, weights: Mapping[str, float]) -> Selector:
    """The selector over an island's mutators, by name (see `entry_names`) with their weights."""
    if cfg.policy == "fixed":
        return FixedWeights(weights, cfg)
    if cfg.policy == "ucb1":
        return UCB1(list(weights), cfg)
    return Thompson(list(weights), cfg)
