"""The STOKE move set: a list of frozen move values, looked up by name.

Weights are the default proposal probabilities (relative): meta-parameter moves are the cheapest
way to a faster correct kernel, so they are drawn more often than a random statement deletion.
"""

from __future__ import annotations

from mutators.ast_edit import Applied, Move
from mutators.moves_code import (
    REWRITES,
    DeleteStatement,
    DuplicateStatement,
    NearOp,
    ReplaceOperand,
    Rewrite,
    ScaleParam,
    SwapStatements,
)
from mutators.moves_hints import HINTS, AddHint, CacheHint, DtypeChange, LoopKind, MaskChange, RemoveHint

__all__ = ["DEFAULT_WEIGHTS", "MOVES", "Applied", "Move", "move_named"]

MOVES: tuple[Move, ...] = (
    ScaleParam(up=True),
    ScaleParam(up=False),
    SwapStatements(),
    DeleteStatement(),
    DuplicateStatement(),
    ReplaceOperand(),
    *(Rewrite(r) for r in REWRITES),
    NearOp(),
    *(AddHint(h) for h in HINTS),
    RemoveHint(),
    CacheHint(),
    LoopKind(),
    MaskChange(),
    DtypeChange(),
)
MOVE_NAMES: tuple[str, ...] = tuple(m.name for m in MOVES)
DEFAULT_WEIGHTS: dict[str, float] = {name: 1.0 for name in MOVE_NAMES} | {"param x2": 4.0, "param /2": 4.0}


def move_named(name: str) -> Move:
    for m in MOVES:
        if m.name == name:
            return m
    raise ValueError(f"unknown STOKE move {name!r}; valid: {', '.join(MOVE_NAMES)}")
