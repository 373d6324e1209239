"""STOKE's reduction split: a loop whose results leave the kernel only as sums, spread over a new grid axis.

A kernel that walks a long extent in one program (the whole vector of a sum, a row of a row sum)
uses one SM however large the GPU; no SPACE sweep changes that, since the grid is in `launch`. The
move turns ``for v in range(a, b, s)`` into ``for v in range(a + tl.program_id(AX) * s, b, s * SPLIT)``
on a new grid axis AX of SPLIT programs (a new meta-parameter), each program's partial result is
added into the output with ``tl.atomic_add`` instead of stored, and `launch` zeroes that output
first. The sum is the same up to the order of the additions (the tolerance's business).

It applies only where that is sure to keep the meaning, and returns None elsewhere:
- the kernel is launched once, from `launch`, with a literal grid tuple of fewer than 3 axes, and
  never asks for the program id or count of the new axis;
- nothing is stored (or atomically updated) before or inside the loop, and no helper it calls stores;
- every value the loop carries from one iteration to the next is an accumulator: set to zero before
  the loop (``tl.zeros``, ``tl.full(.., 0, ..)`` or 0), only ever grown inside it by ``acc += e`` or
  ``acc = acc + e`` (or ``-``) with `e` free of accumulators (a running maximum or an online softmax is
  refused);
- after the loop come only assignments and ``tl.store(ptr, value, mask=...)`` whose values are linear
  in the accumulators (``tl.sum``, casts, sums, differences, products and quotients with values every
  program shares), and whose pointers and masks are the same in every program; a cast to a 16- or
  8-bit float is refused (each partial sum would be rounded before the additions: the matmul seed's
  ``acc.to(tl.float16)``, split over K, fails the float16 tolerance);
- each stored-to pointer is one of `launch`'s tensors, named once in the launch and nowhere else in
  `launch`, and the kernel never loads from it (zeroing it must not change an input).
"""

from __future__ import annotations

import ast
import copy
import random
from dataclasses import dataclass
from typing import ClassVar

from evo.contracts.candidate import Candidate
from mutators.stoke.moves.ast_edit import Applied, Kernels, Move, parse_kernels, pick, tl_call, tl_function, unparse
from mutators.stoke.moves.value_numbering import stored_names

SPLIT_VALUES = [4, 16, 64, 256, 1024]
_FIRST = (16, 64, 256)
_SIDE_EFFECTS = {"store", "atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor",
                 "atomic_xchg", "atomic_cas"}
_HINTS = {"cache_modifier", "eviction_policy"}
_NARROW = ("float16", "bfloat16", "fp16", "bf16", "float8", "fp8")
_METADATA = {"shape", "stride", "size", "numel", "dim", "ndim", "dtype", "device", "element_size", "is_contiguous"}


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _has_side_effects(node: ast.AST, k: Kernels) -> bool:
    return any(tl_function(n, k) in _SIDE_EFFECTS for n in ast.walk(node))


def _is_zero(value: ast.expr, k: Kernels) -> bool:
    if isinstance(value, ast.Constant):
        return not isinstance(value.value, bool) and value.value == 0
    name = tl_function(value, k)
    if name == "zeros" and isinstance(value, ast.Call):
        return True
    if name == "full" and isinstance(value, ast.Call) and len(value.args) >= 2:
        return _is_zero(value.args[1], k)
    return False


def _growth(stmt: ast.AST, name: str) -> ast.expr | None:
    """`e` of ``name += e``, ``name -= e``, ``name = name + e``, ``name = e + name`` or ``name = name - e``."""
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, (ast.Add, ast.Sub)):
        return stmt.value
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        v = stmt.value
        if isinstance(v, ast.BinOp) and isinstance(v.op, (ast.Add, ast.Sub)):
            if isinstance(v.left, ast.Name) and v.left.id == name:
                return v.right
            if isinstance(v.op, ast.Add) and isinstance(v.right, ast.Name) and v.right.id == name:
                return v.left
    return None


def _accumulators(loop: ast.For, carried: set[str]) -> bool:
    """Whether every value the loop carries is only grown inside it, by a term free of them, and read by
    nothing else in the loop (a pointer advanced each iteration and then loaded from is no accumulator)."""
    allowed: set[int] = set()
    for node in ast.walk(loop):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id in carried:
                term = _growth(node, target.id)
                if term is not None and not _loads(term) & carried:
                    allowed.add(id(target))
                    if isinstance(node, ast.Assign):  # acc = acc + e: that read of acc is the growth's own
                        assert isinstance(node.value, ast.BinOp)
                        allowed |= {id(node.value.left), id(node.value.right)}
    return all(id(n) in allowed for n in ast.walk(loop) if isinstance(n, ast.Name) and n.id in carried)


def _linear(e: ast.expr, lin: set[str], varying: set[str], k: Kernels) -> bool:
    """Whether `e` is a linear function of the names in `lin`, with everything else the same in every program."""
    def shared(x: ast.expr) -> bool:
        return not (_loads(x) & (lin | varying)) and not _has_side_effects(x, k)

    if isinstance(e, ast.Name):
        return e.id in lin
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        return _linear(e.operand, lin, varying, k)
    if isinstance(e, ast.BinOp):
        if isinstance(e.op, (ast.Add, ast.Sub)):
            return _linear(e.left, lin, varying, k) and _linear(e.right, lin, varying, k)
        if isinstance(e.op, ast.Mult):
            return (_linear(e.left, lin, varying, k) and shared(e.right)) or (
                shared(e.left) and _linear(e.right, lin, varying, k))
        if isinstance(e.op, ast.Div):
            return _linear(e.left, lin, varying, k) and shared(e.right)
        return False
    if isinstance(e, ast.Call):
        if tl_function(e, k) == "sum" and e.args:
            return _linear(e.args[0], lin, varying, k) and all(shared(a) for a in e.args[1:]) and all(
                shared(kw.value) for kw in e.keywords)
        f = e.func  # value.to(dtype), but not to a half-precision type: each partial sum would be rounded
        if isinstance(f, ast.Attribute) and f.attr == "to" and len(e.args) == 1 and not e.keywords:
            narrow = any(t in ast.unparse(e.args[0]) for t in _NARROW)
            return not narrow and _linear(f.value, lin, varying, k) and shared(e.args[0])
    return False


def _pointer_param(ptr: ast.expr, tensors: dict[str, str]) -> str | None:
    """The one kernel parameter among the terms of a ``p + offset + ...`` pointer that `launch` passes a tensor."""
    terms: list[ast.expr] = []
    stack = [ptr]
    while stack:
        t = stack.pop()
        if isinstance(t, ast.BinOp) and isinstance(t.op, ast.Add):
            stack += [t.left, t.right]
        else:
            terms.append(t)
    found = {t.id for t in terms if isinstance(t, ast.Name) and t.id in tensors}
    return found.pop() if len(found) == 1 else None


def _program_axes(k: Kernels) -> set[int] | None:
    """The constant axes of `tl.program_id`/`tl.num_programs` in the kernels (helpers included); None when
    one is not a constant."""
    axes: set[int] = set()
    for n in (n for fn in k.functions for n in ast.walk(fn)):
        if isinstance(n, ast.Call) and tl_function(n, k) in ("program_id", "num_programs"):
            arg = n.args[0] if n.args else next((kw.value for kw in n.keywords if kw.arg == "axis"), None)
            if not (isinstance(arg, ast.Constant) and isinstance(arg.value, int)):
                return None
            axes.add(arg.value)
    return axes


@dataclass
class _Site:
    fn: ast.FunctionDef
    loop: ast.For
    stores: list[ast.Call]
    call: ast.Call
    grid: ast.Tuple
    axis: int
    zero: list[str]
    launch: ast.FunctionDef
    statement: int


def _launch_call(tree: ast.Module, fn: ast.FunctionDef) -> tuple[ast.FunctionDef, int, ast.Call, ast.Tuple] | None:
    """`launch`, the index of its statement that launches `fn` (the only launch of it), the call, its grid."""
    launch = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "launch"), None)
    if launch is None:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
             and isinstance(n.func.value, ast.Name) and n.func.value.id == fn.name]
    if len(calls) != 1:
        return None
    call = calls[0]
    index = next((i for i, s in enumerate(launch.body) if isinstance(s, ast.Expr) and s.value is call), None)
    if index is None:
        return None
    assert isinstance(call.func, ast.Subscript)
    grid = call.func.slice
    if isinstance(grid, ast.Name):  # grid = (...) assigned once in launch
        sets = [s for s in ast.walk(launch) if grid.id in stored_names(s) and isinstance(s, (ast.Assign, ast.AugAssign,
                                                                                        ast.For, ast.AnnAssign))]
        if len(sets) != 1 or not isinstance(sets[0], ast.Assign) or len(sets[0].targets) != 1:
            return None
        grid = sets[0].value
    if not isinstance(grid, ast.Tuple) or not 1 <= len(grid.elts) <= 2:
        return None
    return launch, index, call, grid


def _site(tree: ast.Module, fn: ast.FunctionDef, index: int, k: Kernels) -> _Site | None:
    loop = fn.body[index]
    if not isinstance(loop, ast.For) or loop.orelse or not isinstance(loop.target, ast.Name):
        return None
    it = loop.iter
    plain = isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
    if not (isinstance(it, ast.Call) and 1 <= len(it.args) <= 3 and (plain or tl_function(it, k) == "range")):
        return None
    if any(isinstance(n, (ast.Break, ast.Continue, ast.Return)) for n in ast.walk(loop)):
        return None
    found = _launch_call(tree, fn)
    axes = _program_axes(k)
    if found is None or axes is None:
        return None
    launch, statement, call, grid = found
    axis = len(grid.elts)
    if axis in axes:
        return None
    pre, post = fn.body[:index], fn.body[index + 1:]
    helpers = {f.name: f for f in k.functions if f is not fn}
    called = {n.func.id for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    if any(_has_side_effects(helpers[h], k) for h in called & set(helpers)):
        return None
    if any(_has_side_effects(s, k) for s in pre) or _has_side_effects(loop, k):
        return None
    args = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    inside = stored_names(loop)
    carried = inside & (set(args) | set().union(*(stored_names(s) for s in pre)))
    if not carried or carried & set(args) or not _accumulators(loop, carried):
        return None
    for name in carried:  # set once before the loop, to zero
        sets = [s for s in pre if name in stored_names(s)]
        if len(sets) != 1 or not (isinstance(sets[0], ast.Assign) and len(sets[0].targets) == 1
                                  and _is_zero(sets[0].value, k)):
            return None
    # which kernel parameters launch passes one of its tensors (its positional parameters)
    tensors_of_launch = {a.arg for a in [*launch.args.posonlyargs, *launch.args.args]}
    passed: dict[str, str] = {}
    if len(call.args) > len(args):
        return None
    for param, value in [*zip(args, call.args), *((kw.arg, kw.value) for kw in call.keywords if kw.arg)]:
        if isinstance(value, ast.Name) and value.id in tensors_of_launch:
            passed[param] = value.id
    lin = set(carried)
    varying = inside - carried
    stores: list[ast.Call] = []
    zero: list[str] = []
    for s in post:
        if isinstance(s, ast.Pass):
            continue
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            target = s.targets[0].id
            linear = _linear(s.value, lin, varying, k)
            if not linear and (_loads(s.value) & (lin | varying) or _has_side_effects(s.value, k)):
                return None  # neither linear in the sums nor the same in every program
            lin.discard(target)
            varying.discard(target)
            if linear:
                lin.add(target)
            continue
        if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and tl_function(s.value, k) == "store"):
            return None
        store = s.value
        if len(store.args) != 2 or any(kw.arg not in _HINTS | {"mask"} for kw in store.keywords):
            return None
        ptr, stored = store.args
        mask = [kw.value for kw in store.keywords if kw.arg == "mask"]
        if (_loads(ptr) | set().union(*(_loads(m) for m in mask))) & (lin | varying):
            return None
        if not _linear(stored, lin, varying, k):
            return None
        pointer = _pointer_param(ptr, passed)
        if pointer is None:
            return None
        if passed[pointer] in zero:
            return None  # two stores into one output could hit one address: added twice, not stored twice
        stores.append(store)
        zero.append(passed[pointer])
    if not stores:
        return None
    zeroed = set(zero)
    loaded = {p for n in ast.walk(fn) if isinstance(n, ast.Call) and (tl_function(n, k) == "load" or (
        isinstance(n.func, ast.Name) and n.func.id in helpers)) for p in _loads(n)}
    if loaded & {p for p, t in passed.items() if t in zeroed}:
        return None  # the kernel reads what would be zeroed
    # launch may read the zeroed tensors' shapes and strides, but pass each to the kernel once and use it
    # for nothing else (written by a second kernel or a torch call, its zeroing would change the result)
    metadata = {id(n.value) for n in ast.walk(launch) if isinstance(n, ast.Attribute) and n.attr in _METADATA}
    bare = [a for a in [*call.args, *(kw.value for kw in call.keywords)] if isinstance(a, ast.Name) and a.id in zeroed]
    other = [n for n in ast.walk(launch) if isinstance(n, ast.Name) and n.id in zeroed and id(n) not in metadata]
    if len(bare) != len(zeroed) or len(other) != len(bare):
        return None
    return _Site(fn, loop, stores, call, grid, axis, zero, launch, statement)


def _free_name(tree: ast.Module, params: dict[str, object]) -> str | None:
    taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in [*n.args, *n.kwonlyargs]} | set(params)
    return next((n for n in ("SPLIT", "SPLIT_K", "N_SPLIT", "SPLIT_PROGRAMS") if n not in taken), None)


def _add_to_dict(tree: ast.Module, module_name: str, key: str, value: ast.expr) -> None:
    for s in tree.body:
        if (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                and s.targets[0].id == module_name and isinstance(s.value, ast.Dict)):
            s.value.keys.append(ast.Constant(key))
            s.value.values.append(value)


def _name(n: str) -> ast.Name:
    return ast.Name(id=n, ctx=ast.Load())


@dataclass(frozen=True)
class SplitReduction(Move):
    """Spread a summing loop over a new grid axis of SPLIT programs, their partial sums added atomically."""

    label: ClassVar[str] = "split reduction"

    def apply(self, candidate: Candidate, rng: random.Random) -> Applied | None:
        k = parse_kernels(candidate.source)
        if k is None:
            return None
        tree = k.tree
        found = [_site(tree, fn, i, k) for fn in k.functions for i in range(len(fn.body))]
        sites = [x for x in found if x is not None]
        if not sites:
            return None
        site = pick(rng, sites)
        tl = sorted(k.tl_names)[0]
        split = _free_name(tree, dict(candidate.params))
        if split is None:
            return None
        first = pick(rng, _FIRST)
        # the loop: this program's share of the iterations
        it = site.loop.iter
        assert isinstance(it, ast.Call)
        a, b, s = (ast.Constant(0), it.args[0], ast.Constant(1)) if len(it.args) == 1 else (
            it.args[0], it.args[1], it.args[2] if len(it.args) == 3 else ast.Constant(1))
        pid = tl_call("program_id", [ast.Constant(site.axis)], tl=tl)
        share = ast.BinOp(pid, ast.Mult(), s)
        it.args = [share if isinstance(a, ast.Constant) and a.value == 0 else ast.BinOp(a, ast.Add(), share), b,
                   ast.BinOp(copy.deepcopy(s), ast.Mult(), _name(split))]
        for store in site.stores:  # partial results added, not stored
            store.func = ast.Attribute(value=_name(tl), attr="atomic_add", ctx=ast.Load())
            store.keywords = [kw for kw in store.keywords if kw.arg == "mask"]
        site.fn.args.args.append(ast.arg(arg=split, annotation=ast.Attribute(value=_name(tl), attr="constexpr",
                                                                             ctx=ast.Load())))
        if site.fn.args.defaults:  # after parameters with defaults, the new one needs one too
            site.fn.args.defaults.append(ast.Constant(first))
        # launch: the new axis, the new parameter, the outputs zeroed before the launch
        site.grid.elts.append(_name(split))
        site.call.keywords.append(ast.keyword(arg=split, value=_name(split)))
        site.launch.args.kwonlyargs.append(ast.arg(arg=split))
        site.launch.args.kw_defaults.append(None)
        zeroes = [ast.Expr(ast.Call(ast.Attribute(value=_name(t), attr="zero_", ctx=ast.Load()), [], []))
                  for t in site.zero]
        site.launch.body[site.statement:site.statement] = zeroes
        _add_to_dict(tree, "PARAMS", split, ast.Constant(first))
        _add_to_dict(tree, "SPACE", split, ast.List([ast.Constant(v) for v in SPLIT_VALUES], ast.Load()))
        source = unparse(tree)
        if source is None:
            return None
        detail = (f"'{ast.unparse(site.loop.iter)[:60]}' of {site.fn.name} over {split}={first} programs on axis "
                  f"{site.axis}, {len(site.stores)} store(s) now atomic adds into {', '.join(site.zero)} (zeroed)")
        return Applied(Candidate(source, {**candidate.params, split: first}), detail)
