"""Stage 1: static checks of a candidate module (pure AST, no import, no execution).

The module must define ``launch`` and at least one ``@triton.jit`` kernel that ``launch`` actually
launches (``kernel[grid](...)``, directly or through a helper). The names it may use are an exact
allowlist (`fitness.check.allowed`): every attribute chain rooted at an imported module (triton,
triton.language, its math and libdevice, math, torch, typing) must reach a listed name, at any depth,
and attributes of values must be listed tensor, dtype or device-property queries; torch serves only
allocation, dtypes, views and device queries (computing on data is rejected here, and again at run
time by `fitness.sandbox.torch_guard`). Builtins are a short list, ``typing`` names appear only in
annotations, annotations are never strings, ``torch.Tensor`` appears only in annotations, and the module
level holds only imports, function definitions and constant assignments. Nothing a call does may outlive
it (`fitness.check.module_state`): module-level values and defaults are immutable, no attribute is ever
assigned, and no item store or mutating method reaches a module-level object or an alias of one. No
exception handling (a try/except fallback hides a broken kernel), no classes, ``global``, ``with``,
generators, no private or dunder attribute anywhere. The operating system confines what slips through
(`fitness.sandbox.isolation`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from evo.contracts.candidate import CandidateError, module_literal, parse_module
from fitness.check.aliases import chain
from fitness.check.allowed import (
    BUILTINS,
    CHAINS,
    DEVICE_ALLOCATIONS,
    HOST_VALUE_ATTRS,
    JIT_BUILTINS,
    JIT_VALUE_ATTRS,
    MODULES,
    RANDOM,
    canonical,
)
from fitness.check.module_state import ModuleNames, state_problems
from fitness.sandbox.device_queries import DEVICE_QUERIES

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


AUTOTUNE_HINT = (": the search tunes meta-parameters itself; drop the decorator, take them as keyword "
                 "arguments of launch, passed on to the kernel, with a default in PARAMS and the configs' values "
                 "in SPACE (e.g. SPACE = {\"BLOCK\": [1024, 2048], \"num_warps\": [4, 8]})")


# torch.Tensor(n) allocates on the host, where the harness neither poisons nor guards the buffer and a GPU
# kernel cannot reach it; an isinstance test has nothing to decide (launch is handed tensors)
TENSOR_ONLY_IN_ANNOTATIONS = (" may appear only in annotations: torch.Tensor(...) makes a host tensor that the "
                              "harness neither poisons nor puts on the device (allocate with torch.empty(..., "
                              "device=x.device))")


def _hint(module: str, name: str) -> str:
    """Why `name` (reached from `module`) is left off the allowlist, where a reason is worth saying."""
    if name in RANDOM or name.startswith("triton.language.random."):
        return (" (random numbers: the task's reference is deterministic, and a value no input holds is one the "
                "check cannot steer to both sides of a comparison)")
    if module == "torch":
        return " (candidates compute with Triton kernels; torch is for allocation, dtypes and device queries only)"
    if module == "triton":
        return " (meta-parameters are tuned by the search)"
    return ""


def _decorator_name(d: ast.expr) -> str:
    target = d.func if isinstance(d, ast.Call) else d
    parts = []
    while isinstance(target, ast.Attribute):
        parts.append(target.attr)
        target = target.value
    if isinstance(target, ast.Name):
        parts.append(target.id)
    return ".".join(reversed(parts))


_CONSTANT_NODES = (ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.BinOp, ast.UnaryOp, ast.BoolOp,
                   ast.Compare, ast.IfExp, ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Slice, ast.keyword,
                   ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.expr_context)


class _Linter:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.problems: list[str] = []
        self.aliases: dict[str, str] = {}  # local name -> canonical module
        self.jit: set[str] = set()
        self.functions: dict[str, ast.FunctionDef] = {}
        self.module_names: set[str] = set()  # listed names imported by name, and module-level constants
        self.imported: dict[str, str] = {}  # local name -> canonical name, of names imported by name
        self.typing_names: set[str] = set()
        self.parents: dict[int, ast.AST] = {}
        self.annotation_nodes: set[int] = set()
        self.jit_nodes: set[int] = set()

    def add(self, node: ast.AST, msg: str) -> None:
        line = getattr(node, "lineno", "?")
        self.problems.append(f"line {line}: {msg}")

    def collect(self) -> None:
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
        for node in self.tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.collect_import(node)
            elif isinstance(node, ast.FunctionDef):
                self.functions[node.name] = node
                names = [_decorator_name(d) for d in node.decorator_list]
                for n in names:
                    head, _, tail = n.partition(".")
                    if n in ("jit", "heuristics") and n in self.module_names:
                        continue
                    if self.aliases.get(head) != "triton" or tail not in ("jit", "heuristics"):
                        tune = AUTOTUNE_HINT if tail == "autotune" else ""
                        self.add(node, f"decorator {n!r} is not allowed (only triton.jit / triton.heuristics){tune}")
                if any(n.endswith("jit") for n in names):
                    self.jit.add(node.name)
                    self.jit_nodes.update(id(n) for n in ast.walk(node))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                self.collect_constant(node)
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # docstring
            elif type(node) not in FORBIDDEN_NODES:
                self.add(node, f"{type(node).__name__} statements are not allowed at module level "
                               "(only imports, function definitions and constant assignments)")
        for node in ast.walk(self.tree):
            annotations: list[ast.expr | None] = []
            if isinstance(node, ast.arg):
                annotations.append(node.annotation)
            elif isinstance(node, ast.FunctionDef):
                annotations.append(node.returns)
            elif isinstance(node, ast.AnnAssign):
                annotations.append(node.annotation)
            for a in annotations:
                if a is not None:
                    self.annotation_nodes.update(id(n) for n in ast.walk(a))

    def collect_import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name not in MODULES:
                    self.add(node, f"import of {a.name!r} is not allowed")
                elif a.asname:
                    self.aliases[a.asname] = MODULES[a.name]
                else:
                    self.aliases[a.name.split(".")[0]] = a.name.split(".")[0]
            return
        mod = node.module or ""
        for a in node.names:
            full = f"{mod}.{a.name}"
            local = a.asname or a.name
            if node.level:
                self.add(node, f"import of {full!r} is not allowed")
            elif full in MODULES:  # a listed module from its package: `from triton.language.extra import libdevice`
                self.aliases[local] = MODULES[full]
            elif mod not in MODULES:
                self.add(node, f"import of {full!r} is not allowed")
            elif canonical(f"{MODULES[mod]}.{a.name}") in CHAINS:
                self.module_names.add(local)
                self.imported[local] = canonical(f"{MODULES[mod]}.{a.name}")
                if mod == "typing":
                    self.typing_names.add(local)
            else:
                name = canonical(f"{MODULES[mod]}.{a.name}")
                self.add(node, f"import of {full!r} is not allowed (not on the allowlist of names){_hint(mod, name)}")

    def collect_constant(self, node: ast.Assign | ast.AnnAssign) -> None:
        """A module-level assignment: names := a constant expression (literals, arithmetic, listed names)."""
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Name):
                    self.module_names.add(sub.id)
                elif not isinstance(sub, (ast.Tuple, ast.List, ast.expr_context)):
                    self.add(node, "module-level assignments may only bind names")
        if node.value is None:
            return
        for sub in ast.walk(node.value):
            if not isinstance(sub, _CONSTANT_NODES):
                self.add(sub, f"{type(sub).__name__} in a module-level assignment is not allowed "
                              "(module-level values are constants: literals, arithmetic, listed names)")
            elif isinstance(sub, ast.Call) and not isinstance(sub.func, (ast.Name, ast.Attribute)):
                self.add(sub, "module-level values may call only listed functions")

    def check_all(self) -> None:
        for node in ast.walk(self.tree):
            if type(node) in FORBIDDEN_NODES:
                self.add(node, f"{FORBIDDEN_NODES[type(node)]} not allowed")
            elif isinstance(node, (ast.Import, ast.ImportFrom)) and node not in self.tree.body:
                what = ", ".join(a.name for a in node.names)
                self.add(node, f"import of {what!r} inside a function: imports belong at module level")
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                self.add(node, f"access to private attribute {node.attr!r} (introspection) is not allowed")
            elif isinstance(node, ast.Name) and node.id.startswith("__"):
                self.add(node, f"name {node.id!r} is not allowed")
            elif isinstance(node, ast.Attribute) and not isinstance(self.parents.get(id(node)), ast.Attribute):
                if isinstance(node.ctx, ast.Load):  # a store or delete is refused whatever it names (module_state)
                    self.check_chain(node)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) in self.annotation_nodes:
                self.add(node, "string annotations are not allowed (write the annotation as an expression)")
            elif isinstance(node, ast.Name) and node.id in self.typing_names and id(node) not in self.annotation_nodes:
                self.add(node, f"typing name {node.id!r} may appear only in annotations")
            elif isinstance(node, ast.Name) and self.imported.get(node.id) == "torch.Tensor" \
                    and id(node) not in self.annotation_nodes:
                self.add(node, f"{node.id}{TENSOR_ONLY_IN_ANNOTATIONS}")
        self.check_module_values()
        names = ModuleNames(bound=frozenset(self.module_names | set(self.functions) | set(self.aliases)),
                            functions=frozenset(self.functions), aliases=self.aliases, imported=self.imported)
        for node, msg in state_problems(self.tree, names):
            self.add(node, msg)
        known = self.module_names | set(self.functions) | set(self.aliases) | BUILTINS
        for stmt in self.tree.body:
            parts = stmt.decorator_list if isinstance(stmt, ast.FunctionDef) else [stmt]
            for part in parts:
                for node in ast.walk(part):
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in known:
                        self.add(node, f"name {node.id!r} is not allowed at module level")
        for fn in self.functions.values():
            self.check_function(fn, jit=fn.name in self.jit)
        for stmt in self.tree.body:
            if not (isinstance(stmt, ast.FunctionDef) and stmt.name in self.jit):
                self.check_device_use(stmt)

    def check_chain(self, node: ast.Attribute) -> None:
        """An outermost attribute chain: from a module it must reach a listed name; what follows (and
        any attribute of a value) must be a listed value attribute."""
        root, attrs = chain(node)
        values = JIT_VALUE_ATTRS if id(node) in self.jit_nodes else HOST_VALUE_ATTRS
        rest = attrs
        if isinstance(root, ast.Name) and root.id in self.aliases:
            module = self.aliases[root.id]
            written = ".".join([root.id, *attrs])
            for k in range(1, len(attrs) + 1):
                name = canonical(".".join([module, *attrs[:k]]))
                if name in CHAINS:
                    rest = attrs[k:]
                    if name.startswith("typing.") and id(node) not in self.annotation_nodes:
                        self.add(node, f"{written}: typing names may appear only in annotations")
                    if name == "torch.Tensor" and id(node) not in self.annotation_nodes:
                        self.add(node, f"{'.'.join([root.id, *attrs[:k]])}{TENSOR_ONLY_IN_ANNOTATIONS}")
                    break
            else:
                name = canonical(".".join([module, *attrs]))
                self.add(node, f"{written} is not allowed: {name} is not on the allowlist of names a candidate may "
                               "use" + _hint(module, name))
                return
        for attr in rest:
            if attr not in values and not attr.startswith("_"):
                where = "inside @triton.jit code" if values is JIT_VALUE_ATTRS else "in launch code"
                hint = " (torch serves allocation, views and metadata only)" if values is HOST_VALUE_ATTRS else ""
                if attr in DEVICE_QUERIES:
                    hint = " (code that asks which device runs it could run differently on the GPU than where it was " \
                           "checked)"
                self.add(node, f"attribute {attr!r} (in {ast.unparse(node)}) is not on the allowlist {where}{hint}")
                return

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

    def called_name(self, call: ast.Call) -> str | None:
        """The canonical name a call reaches through a module alias or a name imported by name."""
        f = call.func
        if isinstance(f, ast.Name):
            return self.imported.get(f.id)
        if isinstance(f, ast.Attribute):
            root, attrs = chain(f)
            if isinstance(root, ast.Name) and root.id in self.aliases:
                return canonical(".".join([self.aliases[root.id], *attrs]))
        return None

    def is_torch_call(self, call: ast.Call) -> bool:
        """A call of torch's (a listed name, or a method of a value such as ``x.new_empty``), not of a
        function the candidate defines, which could look at what it is passed."""
        f = call.func
        if isinstance(f, ast.Name):
            return f.id in self.imported
        return isinstance(f, ast.Attribute)

    def check_device_use(self, stmt: ast.stmt) -> None:
        """Host code may not tell which kind of device runs it: a tensor's ``.device`` only says where an
        allocation goes (``device=x.device``), never a value to compare, format or keep, and an allocation
        with no tensor to copy its device from must say it. Otherwise a kernel can take one path in the
        CPU interpreter, where it is checked, and another on the GPU, or hand a GPU kernel a host buffer."""
        for node in ast.walk(stmt):
            if isinstance(node, ast.Attribute) and node.attr == "device" and isinstance(node.ctx, ast.Load):
                parent = self.parents.get(id(node))
                root, _ = chain(node)
                if isinstance(root, ast.Name) and root.id in self.aliases:
                    continue  # torch.device: the allowlist of names refuses it
                call = self.parents.get(id(parent)) if parent is not None else None
                if not (isinstance(parent, ast.keyword) and parent.arg == "device" and isinstance(call, ast.Call)
                        and self.is_torch_call(call)):
                    self.add(node, f"{ast.unparse(node)} may only be passed as device= to an allocation (code that "
                                   "looks at the device could run differently on the GPU than where it was checked)")
            elif isinstance(node, ast.keyword) and node.arg == "device":
                if not (isinstance(node.value, ast.Attribute) and node.value.attr == "device"):
                    self.add(node.value, f"device={ast.unparse(node.value)}: allocate on the inputs' device "
                                         "(device=x.device), not a device named in the code")
            elif isinstance(node, ast.Call) and self.called_name(node) in DEVICE_ALLOCATIONS:
                if not any(k.arg == "device" for k in node.keywords):
                    self.add(node, f"{ast.unparse(node.func)}(...) without device=: the buffer would be on the CPU "
                                   "(pass device=x.device, or use empty_like / new_empty)")

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
