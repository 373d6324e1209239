"""How a candidate's SPACE becomes Optuna distributions, and where studies are stored.

A numeric list (BLOCK sizes, num_warps) becomes an ordinal integer: the index into the sorted
values. Neighbouring indices are neighbouring tile sizes, so every sampler, GP and CMA-ES included,
sees an ordered numeric dimension, and every value asked is one the kernel's author listed. Other
lists (strings, booleans) become categorical. A module without SPACE is tuned over v/4 .. 4v of
each integer param (doubling steps).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

from evo.contracts.candidate import Candidate, CandidateError, Params, ParamValue
from evo.contracts.mutator_config import Sampler

_LIMITS = {"num_warps": 32, "num_stages": 8}
RDB_SCHEMES = ("sqlite", "postgresql", "mysql", "oracle", "mssql")


def _numeric(values: list[ParamValue]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def derived_space(params: Params) -> dict[str, list[ParamValue]]:
    """v/4 .. 4v (doubling) for each positive integer param: the space of a module without SPACE."""
    space: dict[str, list[ParamValue]] = {}
    for key, v in params.items():
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            limit = _LIMITS.get(key, 1 << 16)
            values = sorted({x for x in (v // 4, v // 2, v, v * 2, v * 4) if 1 <= x <= limit})
            if len(values) > 1:
                space[key] = list(values)
    return space


@dataclass(frozen=True)
class Encoding:
    """The distributions of one kernel structure's space and the mapping to param values."""

    values: dict[str, list[ParamValue]]
    ordinal: frozenset[str]

    @classmethod
    def of(cls, candidate: Candidate) -> Encoding:
        try:
            space = candidate.space()
        except CandidateError:
            space = {}
        space = {k: v for k, v in space.items() if v} or derived_space(candidate.params)
        values: dict[str, list[ParamValue]] = {}
        ordinal = set()
        for key in sorted(space):
            vals = list(dict.fromkeys(space[key]))
            if _numeric(vals):
                vals = sorted(vals)
                ordinal.add(key)
            values[key] = vals
        return cls(values, frozenset(ordinal))

    @property
    def empty(self) -> bool:
        return not self.values

    @property
    def numeric(self) -> bool:
        return self.ordinal == set(self.values)

    def distributions(self) -> dict[str, BaseDistribution]:
        return {k: IntDistribution(0, len(v) - 1) if k in self.ordinal else CategoricalDistribution(v)
                for k, v in self.values.items()}

    def decode(self, encoded: dict[str, Any]) -> Params:
        return {k: self.values[k][int(x)] if k in self.ordinal else x for k, x in encoded.items()}

    def neighbours(self, encoded: dict[str, Any]) -> list[dict[str, Any]]:
        """The configs one step from `encoded` along one parameter: the next smaller and the next larger
        value of an ordinal one, every other value of a categorical one (parameters in name order)."""
        out: list[dict[str, Any]] = []
        for k, vals in self.values.items():
            x = encoded[k]
            if k in self.ordinal:
                steps: list[Any] = [int(x) + d for d in (-1, 1) if 0 <= int(x) + d < len(vals)]
            else:
                steps = [v for v in vals if v != x]
            out.extend({**encoded, k: step} for step in steps)
        return out

    def encode(self, params: Params) -> dict[str, Any] | None:
        """The trial params of `params`, None when a value lies outside the space."""
        out: dict[str, Any] = {}
        for k, vals in self.values.items():
            if k not in params or params[k] not in vals:
                return None
            out[k] = vals.index(params[k]) if k in self.ordinal else params[k]
        return out


def open_storage(url: str | None, journal: Path) -> BaseStorage:
    """An RDB storage for `url` (multi-node), else a journal file shared by the host's islands."""
    if url:
        scheme = url.split(":", 1)[0].split("+", 1)[0]
        if scheme not in RDB_SCHEMES:
            raise ValueError(f"optuna storage {url!r}: expected an RDB URL ({', '.join(RDB_SCHEMES)}://...)")
        return _rdb_storage(url)
    journal.parent.mkdir(parents=True, exist_ok=True)
    # An open(O_EXCL) lock works on network filesystems too, where symlink locks may not.
    return JournalStorage(JournalFileBackend(str(journal), lock_obj=JournalFileOpenLock(str(journal))))


def _rdb_storage(url: str, attempts: int = 6) -> RDBStorage:
    """`RDBStorage(url)`, tried again when another process is creating the schema of a fresh database
    at the same moment (islands and drivers starting together: PostgreSQL then refuses all but one
    with a duplicate table or type); once the schema exists, opening it succeeds."""
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    rng = random.Random()
    for attempt in range(attempts):
        try:
            return RDBStorage(url)
        except (IntegrityError, ProgrammingError):
            if attempt == attempts - 1:
                raise
            time.sleep(0.2 + rng.random() * (0.5 + attempt))
    raise AssertionError("unreachable")


def make_sampler(kind: Sampler, seed: int) -> optuna.samplers.BaseSampler:
    if kind is Sampler.TPE:
        return optuna.samplers.TPESampler(seed=seed, multivariate=True)
    if kind is Sampler.GP:
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=4, warn_independent_sampling=False)
    if kind is Sampler.RANDOM:
        return optuna.samplers.RandomSampler(seed=seed)
    if kind is Sampler.CMAES:
        return optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=4, warn_independent_sampling=False)
    return optuna.samplers.NSGAIISampler(seed=seed, population_size=8)
