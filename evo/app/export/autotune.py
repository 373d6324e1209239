"""`evo export --as autotune`: the best structure's configs as Triton's own `@triton.autotune` table.

The best kernel's structure (its source) was evaluated with several params; the correct ones,
fastest first, become `triton.Config`s of the kernel that `launch` calls, and `launch` stops passing
them: the module is the best source rewritten so that Triton picks among the configs per `key` (the
kernel's size arguments) at run time. `@triton.autotune` can tune only what reaches the kernel's
launch, so the rewrite needs a `launch` that calls one `@triton.jit` kernel and uses each tuned
param only as a keyword of that call (`BLOCK=BLOCK`, `num_warps=num_warps`) or in its grid; anything
else (a param deciding a branch, sizing a buffer, feeding a second kernel) is an error that names
the line, since no `@triton.autotune` table can express it (`--as torch-op` exports such kernels
with their best params).

Per-shape buckets: where the campaign's fitness weighed several bench shapes, each evaluation holds
its latency at every shape (`latency_detail.shapes`). The config fastest at each shape comes first in
the table, named in its comment ("fastest at {...}"), whatever the cut at `top`; the rest follow by the
combined (weighted geometric mean) latency. Triton's autotuner keys on the kernel's size arguments,
so at a shape like one the campaign weighed it finds that shape's own best among the configs.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Sequence
from dataclasses import dataclass

from evo.app.export.torch_op import ExportError
from evo.contracts.candidate import Candidate, Params
from evo.contracts.syntax import parse_expression, parse_module

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


@dataclass(frozen=True)
class Measured:
    """One correct evaluation of the best structure."""

    params: Params
    latency_ms: float
    source: str  # model or measured
    candidate: str
    shapes: tuple[tuple[str, float], ...] = ()  # (bench size, latency ms) per weighed shape, if several


def _is_jit(fn: ast.FunctionDef) -> bool:
    return any(ast.unparse(d).split("(")[0] in ("triton.jit", "jit") for d in fn.decorator_list)


def _launch(tree: ast.Module) -> ast.FunctionDef:
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "launch"), None)
    if fn is None:
        raise ExportError("the best kernel defines no launch function")
    return fn


def _kernel_calls(launch: ast.FunctionDef) -> list[ast.Call]:
    return [n for n in ast.walk(launch) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
            and isinstance(n.func.value, ast.Name)]


@dataclass
class _Plan:
    kernel: ast.FunctionDef
    call: ast.Call
    names: dict[str, str]  # tuned param -> the kernel keyword (or launch option) it is passed as
    grid_assign: ast.Assign | None


def _plan(tree: ast.Module, tuned: list[str]) -> _Plan:
    launch = _launch(tree)
    calls = _kernel_calls(launch)
    if len(calls) != 1:
        raise ExportError(f"launch starts {len(calls)} kernels; @triton.autotune tunes one kernel's launch")
    call = calls[0]
    assert isinstance(call.func, ast.Subscript) and isinstance(call.func.value, ast.Name)
    kname = call.func.value.id
    kernel = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == kname and _is_jit(n)), None)
    if kernel is None:
        raise ExportError(f"launch calls {kname}, which is not a @triton.jit function of the module")
    names: dict[str, str] = {}
    passed: set[int] = set()
    for kw in call.keywords:
        if kw.arg and isinstance(kw.value, ast.Name) and kw.value.id in tuned:
            names[kw.value.id] = kw.arg
            passed.add(id(kw.value))
    grid = call.func.slice
    grid_assign = None
    if isinstance(grid, ast.Name):
        assigns = [n for n in ast.walk(launch) if isinstance(n, ast.Assign)
                   and any(isinstance(t, ast.Name) and t.id == grid.id for t in n.targets)]
        if len(assigns) == 1:
            grid_assign = assigns[0]
    in_grid = {id(n) for n in ast.walk(grid_assign.value if grid_assign else grid) if isinstance(n, ast.Name)}
    for node in ast.walk(launch):
        if isinstance(node, ast.Name) and node.id in tuned and id(node) not in passed | in_grid:
            raise ExportError(f"launch uses {node.id} on line {node.lineno} outside the kernel's launch "
                              f"({ast.unparse(node)} is not a keyword of the {kname} call nor in its grid); "
                              "@triton.autotune cannot tune that")
    missing = [p for p in tuned if p not in names]
    if missing:
        raise ExportError(f"{', '.join(missing)} never reach{'es' if len(missing) == 1 else ''} the {kname} call "
                          "as a keyword; @triton.autotune cannot tune them")
    return _Plan(kernel, call, names, grid_assign)


class _ToMeta(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id in self.names:
            return ast.Subscript(ast.Name("META", ast.Load()), ast.Constant(self.names[node.id]), ast.Load())
        return node


def _meta_grid(expr: ast.expr, names: dict[str, str]) -> ast.expr:
    body = _ToMeta(names).visit(copy.deepcopy(expr))
    uses = any(isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == "META"
               for n in ast.walk(body))
    if not uses:
        return expr
    return ast.Lambda(ast.arguments(posonlyargs=[], args=[ast.arg("META")], kwonlyargs=[], kw_defaults=[],
                                    defaults=[]), body)


def _key(plan: _Plan, launch: ast.FunctionDef) -> list[str]:
    """The kernel's arguments passed as plain non-tensor names (sizes, mostly): what a config is chosen per."""
    tensors = {a.arg for a in launch.args.args}
    params = [a.arg for a in plan.kernel.args.args]
    key = []
    for i, arg in enumerate(plan.call.args):
        if i < len(params) and isinstance(arg, ast.Name) and arg.id not in tensors:
            key.append(params[i])
    return key


def _config(params: Params, names: dict[str, str]) -> str:
    meta = {names[k]: v for k, v in sorted(params.items()) if k in names and names[k] not in LAUNCH_OPTIONS}
    options = "".join(f", {names[k]}={v!r}" for k, v in sorted(params.items())
                      if k in names and names[k] in LAUNCH_OPTIONS)
    return f"triton.Config({meta!r}{options})"


def shape_picks(rows: list[Measured]) -> dict[int, list[tuple[str, float]]]:
    """Index in `rows` of the fastest config at each weighed bench shape -> the shapes it wins (in the
    shapes' order); empty when the evaluations have one shape."""
    sizes = [size for size, _ in rows[0].shapes] if rows and len(rows[0].shapes) > 1 else []
    picks: dict[int, list[tuple[str, float]]] = {}
    for size in sizes:
        at = [(ms, i) for i, m in enumerate(rows) if (ms := dict(m.shapes).get(size)) is not None]
        if at:
            ms, i = min(at)
            picks.setdefault(i, []).append((size, ms))
    return picks


def autotune_module(best: Candidate, measured: list[Measured], *, campaign: str, task: str, top: int = 8) -> str:
    """The best structure as a module whose kernel is `@triton.autotune`d over the `top` fastest
    correct configs measured for it (fastest first)."""
    tree = parse_module(best.source)
    launch = _launch(tree)
    tuned = [a.arg for a in launch.args.kwonlyargs]
    if not tuned:
        raise ExportError("launch takes no meta-parameters: nothing to autotune")
    plan = _plan(tree, tuned)
    key = _key(plan, launch)
    rows: dict[str, Measured] = {}
    for m in sorted(measured, key=lambda m: m.latency_ms):
        rows.setdefault(repr(sorted((k, v) for k, v in m.params.items() if k in plan.names)), m)
    if not rows:
        raise ExportError("no correct evaluation of the best structure has a latency")
    ordered = list(rows.values())
    picks = shape_picks(ordered)
    chosen = list(picks) + [i for i in range(len(ordered)) if i not in picks][:max(0, top - len(picks))]
    configs = "\n".join(f"    {_config(ordered[i].params, plan.names)},  # {ordered[i].latency_ms:.4g} ms "
                        f"({ordered[i].source}), candidate {ordered[i].candidate}"
                        + "".join(f"; fastest at {size}: {ms:.4g} ms" for size, ms in picks.get(i, []))
                        for i in chosen)
    plan.call.keywords = [kw for kw in plan.call.keywords
                          if not (isinstance(kw.value, ast.Name) and kw.value.id in plan.names)]
    if plan.grid_assign is not None:
        plan.grid_assign.value = _meta_grid(plan.grid_assign.value, plan.names)
    else:
        assert isinstance(plan.call.func, ast.Subscript)
        plan.call.func.slice = _meta_grid(plan.call.func.slice, plan.names)
    launch.args.kwonlyargs, launch.args.kw_defaults = [], []
    decorator = parse_expression(f"triton.autotune(configs=EVO_CONFIGS, key={key!r})").body
    plan.kernel.decorator_list.insert(0, decorator)
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    rest = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom)) and not (
        isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id in ("PARAMS", "SPACE") for t in n.targets))]
    body = ast.unparse(ast.fix_missing_locations(ast.Module(body=rest, type_ignores=[])))
    header = (f'"""The best kernel structure of campaign {campaign!r} on task {task!r}, autotuned by Triton over\n'
              f"the {len(chosen)} fastest correct configs the campaign measured for it (fastest first; figures in\n"
              "the comments). Comments of the original source are not kept (the module is rewritten).\n\n"
              "kernel(*inputs, *outputs) runs it; Triton times the configs on the first call for each key.\n"
              '"""\n')
    return (f"{header}{_imports(imports)}EVO_CONFIGS = [\n{configs}\n]\n\n{body}\n\n\n"
            "def kernel(*tensors):\n    launch(*tensors)\n")


def _imports(nodes: Sequence[ast.stmt]) -> str:
    lines = [ast.unparse(n) for n in nodes]
    if "import triton" not in lines:
        lines.append("import triton")
    return "\n".join(lines) + "\n\n"
