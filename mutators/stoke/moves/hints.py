"""STOKE moves on compiler hints, loops, masks and dtypes (the knobs around the arithmetic)."""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass
from typing import ClassVar

from mutators.stoke.moves.ast_edit import (
    AstMove,
    Kernels,
    calls_to,
    keyword,
    local_names,
    owner,
    pick,
    set_keyword,
    slots,
    tl_attr,
    tl_call,
    tl_function,
)

HINTS = ("multiple_of", "max_contiguous")


def _contains_arange(node: ast.AST, k: Kernels) -> ast.Call | None:
    return next((n for n in ast.walk(node) if isinstance(n, ast.Call) and tl_function(n, k) == "arange"), None)


@dataclass(frozen=True)
class AddHint(AstMove):
    """Wrap an offsets assignment (one built from tl.arange) in tl.multiple_of / tl.max_contiguous,
    with the arange's block size (or 16) as the hinted value."""

    hint: str

    def __post_init__(self) -> None:
        if self.hint not in HINTS:
            raise ValueError(f"unknown hint {self.hint!r}; valid: {', '.join(HINTS)}")

    @property
    def name(self) -> str:
        return f"add {self.hint}"

    def edit(self, k: Kernels, rng: random.Random) -> str | None:
        sites = [n for f in k.functions for n in ast.walk(f)
                 if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                 and _contains_arange(n.value, k) is not None and tl_function(n.value, k) != self.hint]
        if not sites:
            return None
        site = pick(rng, sites)
        arange = _contains_arange(site.value, k)
        assert arange is not None
        values: list[ast.expr] = [ast.Constant(16)]
        if len(arange.args) == 2 and isinstance(arange.args[1], ast.Name):
            values.append(ast.Name(id=arange.args[1].id, ctx=ast.Load()))
        value = pick(rng, values)
        site.value = tl_call(self.hint, [site.value, value], tl=sorted(k.tl_names)[0])
        return f"{ast.unparse(site.targets[0])} hinted {self.hint}({ast.unparse(value)})"


@dataclass(frozen=True)
class RemoveHint(AstMove):
    """Unwrap a tl.multiple_of / tl.max_contiguous / tl.max_constancy hint."""

    label: ClassVar[str] = "remove hint"

    def edit(self, k: Kernels, rng: random.Random) -> str | None:
        sites = [s for s in slots(k) if tl_function(s.node, k) in (*HINTS, "max_constancy")
                 and len(getattr(s.node, "args", ())) >= 1]
        if not sites:
            return None
        site = pick(rng, sites)
        assert isinstance(site.node, ast.Call)
        site.replace(site.node.args[0])
        return f"removed {tl_function(site.node, k)}"


_CACHE_OPTIONS: dict[str, dict[str, tuple[str | None, ...]]] = {
    "load": {"eviction_policy": ("evict_first", "evict_last", None), "cache_modifier": (".ca", ".cg", ".cv", None)},
    "store": {"eviction_policy": ("evict_first", "evict_last", None),
              "cache_modifier": (".wb", ".cg", ".cs", ".wt", None)},
}


@dataclass(frozen=True)
class CacheHint(AstMove):
    """Set, change or remove an eviction policy or cache modifier on a tl.load / tl.store."""

    label: ClassVar[str] = "cache hint"

    def edit(self, k: Kernels, rng: random.Random) -> str | None:
        calls = calls_to(k, {"load", "store"})
        if not calls:
            return None
        call = pick(rng, calls)
        kind = tl_function(call, k)
        assert kind is not None
        field = pick(rng, sorted(_CACHE_OPTIONS[kind]))
        current = keyword(call, field)
        now = current.value.value if current is not None and isinstance(current.value, ast.Constant) else None
        value = pick(rng, [v for v in _CACHE_OPTIONS[kind][field] if v != now])
        set_keyword(call, field, None if value is None else ast.Constant(value))
        return f"{kind} {field}={value!r}"


_LOOP_KINDS = ("range", "static_range", "tl.range", "tl.range stages=1", "tl.range stages=2",
               "tl.range stages=3", "tl.range stages=4")


@dataclass(frozen=True)
class LoopKind(AstMove):
    """Switch a loop between range, tl.static_range and tl.range with a pipelining depth."""

    label: ClassVar[str] = "loop kind"

    def edit(self, k: Kernels, rng: random.Random) -> str | None:
        loops = [(n, self._kind(n.iter, k)) for f in k.functions for n in ast.walk(f) if isinstance(n, ast.For)]
        loops = [(n, kind) for n, kind in loops if kind is not None]
        if not loops:
            return None
        loop, current = pick(rng, loops)
        assert isinstance(loop.iter, ast.Call)
        new = pick(rng, [x for x in _LOOP_KINDS if x != current])
        args = loop.iter.args
        tl = sorted(k.tl_names)[0]
        if new == "range":
            loop.iter = ast.Call(func=ast.Name(id="range", ctx=ast.Load()), args=args, keywords=[])
        elif new == "static_range":
            loop.iter = tl_call("static_range", args, tl=tl)
        else:
            stages = [ast.keyword(arg="num_stages", value=ast.Constant(int(new[-1])))] if "=" in new else []
            loop.iter = tl_call("range", args, stages, tl=tl)
        return f"loop over {ast.unparse(loop.target)}: {current} -> {new}"

    @staticmethod
    def _kind(it: ast.expr, k: Kernels) -> str | None:
        if not isinstance(it, ast.Call):
            return None
        if isinstance(it.func, ast.Name) and it.func.id == "range":
            return "range"
        fn = tl_function(it, k)
        if fn == "static_range":
            return "static_range"
        if fn == "range":
            stages = keyword(it, "num_stages")
            if stages is None:
                return "tl.range"
            return f"tl.range stages={ast.unparse(stages.value)}"
        return None


def _neg_inf() -> ast.expr:
    return ast.UnaryOp(ast.USub(), ast.Call(ast.Name(id="float", ctx=ast.Load()), [ast.Constant("inf")], []))


@dataclass(frozen=True)
class MaskChange(AstMove):
    """Change the mask of a tl.load / tl.store: drop it, reuse another mask in scope, or change a
    load's `other` fill value."""

    label: ClassVar[str] = "mask change"

    def edit(self, k: Kernels, rng: random.Random) -> str | None:
        calls = [c for c in calls_to(k, {"load", "store"}) if keyword(c, "mask") is not None]
        if not calls:
            return None
        call = pick(rng, calls)
        mask = keyword(call, "mask")
        assert mask is not None
        fn = owner(k, call)
        masks = {ast.unparse(m.value): m.value for c in calls_to(k, {"load", "store"}) if owner(k, c) is fn
                 for m in [keyword(c, "mask")] if m is not None}
        masks.update({x: ast.Name(id=x, ctx=ast.Load()) for x in local_names(fn) if "mask" in x.lower()})
        masks.pop(ast.unparse(mask.value), None)
        actions = ["drop"] + (["reuse"] if masks else []) + (["other"] if tl_function(call, k) == "load" else [])
        action = pick(rng, actions)
        if action == "drop":
            set_keyword(call, "mask", None)
            set_keyword(call, "other", None)
            return f"dropped the mask '{ast.unparse(mask.value)}'"
        if action == "reuse":
            text = pick(rng, sorted(masks))
            set_keyword(call, "mask", masks[text])
            return f"mask '{ast.unparse(mask.value)}' -> '{text}'"
        other = keyword(call, "other")
        fills: list[ast.expr | None] = [ast.Constant(0.0), _neg_inf(), None]
        now = ast.unparse(other.value) if other is not None else None
        fill = pick(rng, [f for f in fills if (ast.unparse(f) if f is not None else None) != now])
        set_keyword(call, "other", fill)
        return f"other={ast.unparse(fill) if fill is not None else 'unset'}"


_FLOATS = ("float16", "bfloat16", "float32")


@dataclass(frozen=True)
class DtypeChange(AstMove):
    """Change an accumulator or cast dtype (dtype=, out_dtype=, .to(...)) among fp16, bf16, fp32,
    or drop a cast."""

    label: ClassVar[str] = "dtype change"

    def edit(self, k: Kernels, rng: random.Random) -> str | None:
        sites: list[tuple[ast.AST, ast.Attribute]] = []
        for s in slots(k):
            n = s.node
            if isinstance(n, ast.keyword) and n.arg in ("dtype", "out_dtype") and self._is_float(n.value, k):
                sites.append((n, n.value))  # type: ignore[arg-type]
            elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "to"
                  and n.args and self._is_float(n.args[0], k)):
                sites.append((n, n.args[0]))  # type: ignore[arg-type]
        if not sites:
            return None
        node, dtype = pick(rng, sites)
        options = [x for x in _FLOATS if x != dtype.attr]
        if isinstance(node, ast.Call):
            options.append("no cast")
        new = pick(rng, options)
        if new == "no cast":
            assert isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            site = next(s for s in slots(k) if s.node is node)
            site.replace(node.func.value)
            return f"dropped .to({ast.unparse(dtype)})"
        old = dtype.attr
        replacement = tl_attr(new, tl=sorted(k.tl_names)[0])
        if isinstance(node, ast.keyword):
            node.value = replacement
        else:
            assert isinstance(node, ast.Call)
            node.args[0] = replacement
        return f"{old} -> {new}"

    @staticmethod
    def _is_float(node: ast.expr, k: Kernels) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr in _FLOATS and isinstance(node.value, ast.Name)
                and node.value.id in k.tl_names)
