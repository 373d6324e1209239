"""The candidate contract: one Python module (source text) plus its meta-parameters.

A candidate module defines at least one ``@triton.jit`` kernel and::

    PARAMS = {"BLOCK": 1024, "num_warps": 4}        # default of every meta-parameter
    SPACE = {"BLOCK": [256, 512, 1024]}             # optional: values tuners may try
    def launch(x, y, *, BLOCK, num_warps):          # task inputs, then outputs; writes outputs
        ...

The harness allocates the outputs (poisoned, guarded) and calls
``launch(*inputs, *outputs, **params)``. A candidate is the pair (source, params); its id is a
content hash of both, so the same kernel found on two islands is one candidate.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evo.contracts import syntax

ParamValue = int | float | bool | str
Params = dict[str, ParamValue]


class CandidateError(ValueError):
    """The candidate module does not follow the contract (PARAMS/SPACE unreadable)."""


def _canonical(params: Params) -> str:
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


def structure_id(source: str) -> str:
    """Hash of the source alone: candidates differing only in params share it."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Candidate:
    """A kernel module and the meta-parameters it is launched with. Immutable."""

    source: str
    params: Params = field(default_factory=dict)

    @functools.cached_property
    def id(self) -> str:  # computed once per object (the broker asks it several times per evaluation)
        h = hashlib.sha256()
        h.update(self.source.encode())
        h.update(b"\0")
        h.update(_canonical(self.params).encode())
        return h.hexdigest()[:16]

    @property
    def structure(self) -> str:
        return structure_id(self.source)

    def __hash__(self) -> int:
        return hash(self.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Candidate) and other.id == self.id

    def with_params(self, **changes: ParamValue) -> Candidate:
        return Candidate(self.source, {**self.params, **changes})

    @classmethod
    def from_source(cls, source: str, params: Params | None = None) -> Candidate:
        """A candidate whose params are the module's PARAMS overridden by `params`.

        A module that does not parse still makes a candidate: the lint stage rejects it with the
        syntax error, like any other contract violation.
        """
        try:
            defaults = module_literal(source, "PARAMS") or {}
        except CandidateError:
            defaults = {}
        if not isinstance(defaults, dict):
            raise CandidateError("PARAMS must be a dict literal")
        merged: Params = {**defaults, **(params or {})}
        return cls(source, merged)

    @classmethod
    def from_file(cls, path: str | Path, params: Params | None = None) -> Candidate:
        return cls.from_source(Path(path).read_text(), params)

    def space(self) -> dict[str, list[ParamValue]]:
        """The module's SPACE (values tuners may try), {} when absent."""
        space = module_literal(self.source, "SPACE") or {}
        if not isinstance(space, dict) or not all(isinstance(v, list) for v in space.values()):
            raise CandidateError("SPACE must be a dict literal of lists")
        return space

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "source": self.source, "params": dict(self.params)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Candidate:
        return cls(d["source"], dict(d["params"]))


def space_size(space: dict[str, list[ParamValue]]) -> int:
    """The number of points in a SPACE's grid (0 for an empty SPACE)."""
    return math.prod(len(v) for v in space.values()) if space else 0


def space_point(space: dict[str, list[ParamValue]], index: int) -> Params:
    """The `index`-th point of a SPACE's grid: names sorted, the last name varying fastest."""
    names = sorted(space)
    point: Params = {}
    for name in reversed(names):
        index, digit = divmod(index, len(space[name]))
        point[name] = space[name][digit]
    return {n: point[n] for n in names}


def parse_module(source: str) -> ast.Module:
    """The AST of a candidate module; a `CandidateError` saying why when Python cannot parse it
    (a syntax error, nesting too deep for the parser, a null byte)."""
    try:
        return syntax.parse_module(source)
    except SyntaxError as e:
        raise CandidateError(f"syntax error at line {e.lineno}: {e.msg}") from None
    except (RecursionError, MemoryError):
        raise CandidateError("the module is nested too deeply for Python's parser") from None
    except ValueError as e:
        raise CandidateError(f"the module cannot be parsed: {e}") from None


def module_literal(source: str, name: str) -> Any:
    """The literal value assigned to a module-level `name`, None when absent.

    Read from the AST, never by importing the module: candidates are untrusted.
    """
    value = None
    for node in parse_module(source).body:
        # `PARAMS = {...}` and `PARAMS: dict = {...}` alike (an annotated one was read as no PARAMS)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) and node.value is not None else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            assert isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                raise CandidateError(f"{name} (line {node.lineno}) must be a literal") from None
    return value


LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def params_problems(source: str, params: Params) -> list[str]:
    """What is wrong with `params` for the module `source` (empty when nothing is): every key must be
    a meta-parameter of its PARAMS or a keyword `launch` accepts, of the type of its default;
    ``num_warps`` a power of two in 1..32, ``num_stages`` at least 1. A module that does not parse,
    or whose PARAMS is not a dict literal, is the lint's to reject: nothing is said of its params."""
    try:
        defaults = module_literal(source, "PARAMS") or {}
        tree = parse_module(source)
    except CandidateError:
        return []
    if not isinstance(defaults, dict):
        return []
    launch = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "launch"), None)
    accepted = set(defaults)
    if launch is not None:
        accepted |= {a.arg for a in launch.args.kwonlyargs}
        if launch.args.kwarg is not None:
            accepted |= set(LAUNCH_OPTIONS)
    problems = []
    for key, value in params.items():
        if key not in accepted:
            known = ", ".join(sorted(accepted)) or "none"
            problems.append(f"unknown parameter {key!r} (the candidate's parameters: {known})")
            continue
        default = defaults.get(key)
        if isinstance(value, (dict, list)) or value is None:
            problems.append(f"parameter {key!r} must be a number, a bool or a string, not {value!r}")
        elif default is not None and type(value) is not type(default) and not (
                isinstance(default, float) and type(value) is int):
            problems.append(f"parameter {key!r} must be a {type(default).__name__} like its default "
                            f"{default!r}, not {value!r}")
        elif key == "num_warps" and not (type(value) is int and value in (1, 2, 4, 8, 16, 32)):
            problems.append(f"num_warps must be a power of two from 1 to 32, not {value!r}")
        elif key == "num_stages" and not (type(value) is int and value >= 1):
            problems.append(f"num_stages must be an integer of at least 1, not {value!r}")
    return problems
