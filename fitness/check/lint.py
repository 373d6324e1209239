"""Stage 1: static checks of a candidate module (pure AST, no import, no execution).

The module must define ``launch`` and at least one ``@triton.jit`` kernel that ``launch`` actually
launches (``kernel[grid](...)``, directly or through a helper). Only triton, triton.language,
its libdevice, math, typing and torch may be imported, and torch only for allocation, dtypes and
device queries: computing on data with torch, through an alias or ``getattr``, is rejected here,
and again at run time by the worker (`fitness.sandbox.torch_guard`). No exception handling (a try/except
fallback hides a broken kernel), no classes, ``global``, ``with``, threads, streams, subprocess,
sockets, files, ``exec``/``eval``, ``__import__`` or introspection (``inspect``,
``sys._getframe``, ``globals()``, any ``_private`` attribute).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from evo.contracts.candidate import CandidateError, module_literal, parse_module

ALLOWED_MODULES = {
    "triton", "triton.language", "triton.language.extra", "triton.language.extra.libdevice",
    "math", "torch", "typing", "__future__",
}
TORCH_ATTRS = {
    "empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like",
    "empty_strided", "Tensor", "Size", "dtype", "device", "cuda",
    "float16", "float32", "float64", "bfloat16", "half", "float", "double", "int8", "int16",
    "int32", "int64", "uint8", "bool", "long", "int", "float8_e4m3fn", "float8_e5m2",
}
TORCH_CUDA_ATTRS = {"get_device_properties", "get_device_capability", "is_available", "current_device"}
TRITON_ATTRS = {"jit", "cdiv", "next_power_of_2", "language", "heuristics", "constexpr_function"}
BUILTINS = {
    "range", "len", "min", "max", "abs", "int", "float", "bool", "str", "tuple", "list", "dict", "set",
    "enumerate", "zip", "isinstance", "print", "round", "divmod", "pow", "sorted", "reversed", "any",
    "all", "map", "sum", "ValueError", "RuntimeError", "AssertionError", "TypeError",
    "NotImplementedError", "True", "False", "None",
}
JIT_BUILTINS = {"range", "min", "max", "len", "int", "float", "abs", "print", "isinstance", "tuple"}
FORBIDDEN_NODES: dict[type, str] = {
    ast.Try: "try/except (a fallback hides a broken kernel)",
    ast.With: "with-statements",
    ast.AsyncWith: "async code",
    ast.AsyncFunctionDef: "async code",
    ast.Await: "async code",
    ast.Global: "global state",
    ast.Nonlocal: "nonlocal state",
    ast.ClassDef: "class definitions",
    ast.Yield: "generators",
    ast.YieldFrom: "generators",
}
if hasattr(ast, "TryStar"):
    FORBIDDEN_NODES[ast.TryStar] = "try/except (a fallback hides a broken kernel)"


@dataclass
class LintResult:
    problems: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def reason(self) -> str:
        shown = "; ".join(self.problems[:5])
        more = f" (+{len(self.problems) - 5} more)" if len(self.problems) > 5 else ""
        return shown + more


def _decorator_name(d: ast.expr) -> str:
    target = d.func if isinstance(d, ast.Call) else d
    parts = []
    while isinstance(target, ast.Attribute):
        parts.append(target.attr)
        target = target.value
    if isinstance(target, ast.Name):
        parts.append(target.id)
    return ".".join(reversed(parts))


class _Linter:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.problems: list[str] = []
        self.aliases: dict[str, str] = {}  # local name -> module
        self.jit: set[str] = set()
        self.functions: dict[str, ast.FunctionDef] = {}
        self.module_names: set[str] = set()

    def add(self, node: ast.AST, msg: str) -> None:
        line = getattr(node, "lineno", "?")
        self.problems.append(f"line {line}: {msg}")

    def collect(self) -> None:
        for node in self.tree.body:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name not in ALLOWED_MODULES:
                        self.add(node, f"import of {a.name!r} is not allowed")
                    elif a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        self.aliases[a.name.split(".")[0]] = a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                for a in node.names:
                    full = f"{mod}.{a.name}"
                    local = a.asname or a.name
                    if full in ALLOWED_MODULES:
                        self.aliases[local] = full
                    elif mod in ("triton.language", "math", "typing", "__future__") and not a.name.startswith("_"):
                        self.module_names.add(local)
                    elif mod == "torch" and a.name in TORCH_ATTRS:
                        self.module_names.add(local)
                    elif mod == "triton" and a.name in TRITON_ATTRS:
                        self.module_names.add(local)
                    else:
                        self.add(node, f"import of {full!r} is not allowed")
            elif isinstance(node, ast.FunctionDef):
                self.functions[node.name] = node
                names = [_decorator_name(d) for d in node.decorator_list]
                for n in names:
                    head, _, tail = n.partition(".")
                    if n in ("jit", "heuristics") and n in self.module_names:
                        continue
                    if self.aliases.get(head) != "triton" or tail not in ("jit", "heuristics"):
                        self.add(node, f"decorator {n!r} is not allowed (only triton.jit / triton.heuristics)")
                if any(n.endswith("jit") for n in names):
                    self.jit.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for sub in ast.walk(t):
                        if isinstance(sub, ast.Name):
                            self.module_names.add(sub.id)
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # docstring
            elif type(node) not in FORBIDDEN_NODES:
                self.add(node, f"{type(node).__name__} statements are not allowed at module level")

    def check_all(self) -> None:
        for node in ast.walk(self.tree):
            if type(node) in FORBIDDEN_NODES:
                self.add(node, f"{FORBIDDEN_NODES[type(node)]} not allowed")
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                self.add(node, f"access to private attribute {node.attr!r} (introspection) is not allowed")
            elif isinstance(node, ast.Name) and node.id.startswith("__"):
                self.add(node, f"name {node.id!r} is not allowed")
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                self.check_module_attr(node)
        self.check_module_values()
        known = self.module_names | set(self.functions) | set(self.aliases) | BUILTINS
        for stmt in self.tree.body:
            parts = stmt.decorator_list if isinstance(stmt, ast.FunctionDef) else [stmt]
            for part in parts:
                for node in ast.walk(part):
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in known:
                        self.add(node, f"name {node.id!r} is not allowed at module level")
        for fn in self.functions.values():
            self.check_function(fn, jit=fn.name in self.jit)

    def check_module_attr(self, node: ast.Attribute) -> None:
        mod = self.aliases.get(node.value.id)  # type: ignore[attr-defined]
        if mod == "torch" and node.attr not in TORCH_ATTRS:
            self.add(node, f"torch.{node.attr} is not allowed: candidates compute with Triton kernels; "
                     "torch is for allocation, dtypes and device queries only")
        elif mod == "torch" and node.attr == "cuda":
            parent_ok = False
            for p in ast.walk(self.tree):
                if isinstance(p, ast.Attribute) and p.value is node and p.attr in TORCH_CUDA_ATTRS:
                    parent_ok = True
            if not parent_ok:
                self.add(node, "torch.cuda is allowed only for device property queries")
        elif mod == "triton" and node.attr not in TRITON_ATTRS:
            self.add(node, f"triton.{node.attr} is not allowed (meta-parameters are tuned by the search)")

    def check_module_values(self) -> None:
        """Module aliases may only head an attribute chain: never be passed, stored or rebound."""
        heads = {id(n.value) for n in ast.walk(self.tree) if isinstance(n, ast.Attribute)}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and node.id in self.aliases:
                if isinstance(node.ctx, ast.Store):
                    self.add(node, f"rebinding the module name {node.id!r} is not allowed")
                elif id(node) not in heads:
                    self.add(node, f"the module {node.id!r} may only be used as {node.id}.<name>")
            elif isinstance(node, ast.arg) and node.arg in self.aliases:
                self.add(node, f"parameter {node.arg!r} shadows a module name")

    def check_function(self, fn: ast.FunctionDef, *, jit: bool) -> None:
        local = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
        for extra in (fn.args.vararg, fn.args.kwarg):
            if extra is not None:
                local.add(extra.arg)
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                local.add(node.id)
            elif isinstance(node, ast.arg):
                local.add(node.arg)
            elif isinstance(node, ast.comprehension):
                for n in ast.walk(node.target):
                    if isinstance(n, ast.Name):
                        local.add(n.id)
        known = local | self.module_names | set(self.functions) | set(self.aliases)
        allowed_builtins = JIT_BUILTINS if jit else BUILTINS
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if node.id in known or node.id in allowed_builtins:
                    if jit and self.aliases.get(node.id) == "torch":
                        self.add(node, f"torch used inside @triton.jit function {fn.name!r}")
                    continue
                self.add(node, f"name {node.id!r} is not allowed in {fn.name!r}")

    def launched_kernels(self) -> set[str]:
        """Jit kernels launched as kernel[grid](...) from launch or helpers it calls."""
        seen: set[str] = set()
        launched: set[str] = set()
        todo = ["launch"]
        while todo:
            name = todo.pop()
            if name in seen or name not in self.functions:
                continue
            seen.add(name)
            for node in ast.walk(self.functions[name]):
                if isinstance(node, ast.Call):
                    f = node.func
                    if isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name) and f.value.id in self.jit:
                        launched.add(f.value.id)
                    elif isinstance(f, ast.Name) and f.id in self.functions and f.id not in self.jit:
                        todo.append(f.id)
        return launched

    def check_contract(self, source: str) -> None:
        if "launch" not in self.functions:
            self.problems.append("the module does not define launch(*inputs, *outputs, **params)")
            return
        if not self.jit:
            self.problems.append("the module defines no @triton.jit kernel")
        elif not self.launched_kernels():
            self.problems.append("launch never launches a @triton.jit kernel (expected kernel[grid](...))")
        try:
            params = module_literal(source, "PARAMS")
        except CandidateError as e:
            self.problems.append(str(e))
            return
        if params is not None and not isinstance(params, dict):
            self.problems.append("PARAMS must be a dict literal")
            return
        launch = self.functions["launch"]
        accepted = {a.arg for a in [*launch.args.args, *launch.args.kwonlyargs]}
        if launch.args.kwarg is None:
            missing = [k for k in (params or {}) if k not in accepted]
            if missing:
                self.problems.append(f"PARAMS names {missing} that launch does not accept")


def lint(source: str) -> LintResult:
    """All contract violations found in `source` (empty when it may run)."""
    try:
        tree = parse_module(source)
    except CandidateError as e:
        return LintResult([str(e)])
    linter = _Linter(tree)
    linter.collect()
    linter.check_all()
    linter.check_contract(source)
    return LintResult(list(dict.fromkeys(linter.problems)), sorted(linter.jit))
