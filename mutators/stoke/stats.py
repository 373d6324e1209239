"""STOKE's per-move statistics and their printable table."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

COLUMNS = ("proposed", "valid", "correct", "accepted", "improved")


@dataclass
class MoveStats:
    """Counts for one move kind.

    proposed: drawn by the chain; valid: applied, parsed, passed lint and changed something (so it
    was evaluated); correct: its quick check passed; accepted: Metropolis kept it; improved: correct
    and cheaper than the state it was applied to.
    """

    proposed: int = 0
    valid: int = 0
    correct: int = 0
    accepted: int = 0
    improved: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MoveStats:
        return cls(**{f.name: int(d.get(f.name, 0)) for f in fields(cls)})


def format_table(table: dict[str, MoveStats]) -> str:
    """The move table as aligned text, one row per move kind plus a total."""
    width = max([len("move"), len("total"), *map(len, table)])
    lines = [f"{'move':<{width}}" + "".join(f"{c:>10}" for c in COLUMNS)]
    total = MoveStats()
    for name, row in table.items():
        lines.append(f"{name:<{width}}" + "".join(f"{getattr(row, c):>10}" for c in COLUMNS))
        for c in COLUMNS:
            setattr(total, c, getattr(total, c) + getattr(row, c))
    lines.append(f"{'total':<{width}}" + "".join(f"{getattr(total, c):>10}" for c in COLUMNS))
    return "\n".join(lines)
