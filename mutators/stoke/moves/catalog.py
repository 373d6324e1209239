"""The STOKE move set: a list of frozen move values, looked up by name.

Structural moves change what the sweep of SPACE cannot: a loop
specialized away when one block covers it, a value computed twice computed once
(`mutators.stoke.moves.structure`); two loops over one range fused, a loop-invariant value or load moved out
of its loop (`mutators.stoke.moves.loops`); a summing loop spread over a new grid axis, its partial sums
added atomically (`mutators.stoke.moves.split`).
Weights are the default proposal probabilities (relative): meta-parameter moves are the cheapest
way to a faster correct kernel, so they are drawn more often than a random statement deletion.
"""

from __future__ import annotations

from mutators.stoke.moves.ast_edit import Applied, Move
from mutators.stoke.moves.code import (
    REWRITES,
    DeleteStatement,
    DuplicateStatement,
    NearOp,
    ReplaceOperand,
    Rewrite,
    ScaleParam,
    SwapStatements,
)
from mutators.stoke.moves.hints import HINTS, AddHint, CacheHint, DtypeChange, LoopKind, MaskChange, RemoveHint
from mutators.stoke.moves.loops import FuseLoops, HoistInvariant
from mutators.stoke.moves.split import SplitReduction
from mutators.stoke.moves.structure import ReuseValue, SingleBlock

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
    SingleBlock(),
    ReuseValue(),
    FuseLoops(),
    HoistInvariant(),
    SplitReduction(),
)
MOVE_NAMES: tuple[str, ...] = tuple(m.name for m in MOVES)
# a structural move has few sites and each is a large step, so it is drawn a little more often than a
# statement edit; where it finds no site the chain just draws again
DEFAULT_WEIGHTS: dict[str, float] = {name: 1.0 for name in MOVE_NAMES} | {
    "param x2": 4.0, "param /2": 4.0, "single block": 2.0, "split reduction": 2.0,
    "fuse loops": 2.0, "hoist invariant": 2.0}


def move_named(name: str) -> Move:
    for m in MOVES:
        if m.name == name:
            return m
    raise ValueError(f"unknown STOKE move {name!r}; valid: {', '.join(MOVE_NAMES)}")
