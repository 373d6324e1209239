"""The lint refuses state and monkeypatching: what one call of a candidate leaves behind may change a
later call (a counter, a cache: right in the check, wrong in a user's model after its N-th call) or
every later kernel in the process (a reassigned tl.exp). Each route has a refused example and an honest
twin that still passes."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import NativeTask
from evo.contracts.verdict import Status
from fitness.check.lint import lint
from fitness.evaluate import Evaluator

from .conftest import CANDIDATES, ROOT

HEADER = '''import math

import torch
import triton
import triton.language as tl

LIMITS = (1024, 4096)
BLOCK_MIN = 16


@triton.jit
def _k(y_ptr, n, BLOCK: tl.constexpr):
    tl.store(y_ptr, 1.0)


PARAMS = {"BLOCK": 16}
SPACE = {"BLOCK": [16, 32]}
'''


def module(code: str = "pass", top: str = "", signature: str = "x, y, *, BLOCK") -> str:
    """The header, `top` at module level, then launch running `code` before it launches the kernel."""
    body = textwrap.indent(textwrap.dedent(code).strip("\n"), "    ")
    return f"{HEADER}\n{textwrap.dedent(top)}\n\ndef launch({signature}):\n{body}\n    _k[(1,)](y, 1, BLOCK=BLOCK)\n"


def test_the_header_alone_passes():
    result = lint(module())
    assert result.ok, result.reason()


# (route, code in launch, code at module level, launch's signature or None, words the reason must hold)
REFUSED = [
    # monkeypatching and function state: any attribute store, on anything
    ("tl function", "tl.exp = tl.exp2", "", None, "assigning to the attribute tl.exp is not allowed"),
    ("full module path", "triton.language.sum = tl.max", "", None, "the attribute triton.language.sum"),
    ("at module level", "pass", "tl.exp = tl.exp2", None, "assigning to the attribute tl.exp"),
    ("deleted", "del tl.exp", "", None, "deleting the attribute tl.exp"),
    ("function counter", "launch.calls += 1", "", None, "updating the attribute launch.calls"),
    ("jit kernel object", "_k.seen = True", "", None, "the attribute _k.seen"),
    ("through an alias", "f = launch\nf.calls = 1", "", None, "the attribute f.calls"),
    ("loop target", "for tl.exp in (tl.exp2,):\n    pass", "", None, "the attribute tl.exp"),
    ("tensor attribute", "x.seen = 1", "", None, "the attribute x.seen"),
    # item stores, updates and deletions on module-level names and their aliases
    ("module-level item", "LIMITS[0] = 8", "", None, "assigning to an item of LIMITS (LIMITS[0])"),
    ("item update", "LIMITS[0] += 8", "", None, "updating an item of LIMITS"),
    ("item deletion", "del LIMITS[0]", "", None, "deleting an item of LIMITS"),
    ("unpacking target", "LIMITS[0], n = 8, 9", "", None, "an item of LIMITS"),
    ("local alias", "t = LIMITS\nt[0] = 8", "", None, "t may be a module-level object"),
    ("walrus alias", "if (t := LIMITS):\n    t[0] = 8", "", None, "an item of t"),
    ("unpacked alias", "a, b = LIMITS, 1\na[0] = 8", "", None, "an item of a"),
    ("conditional alias", "t = LIMITS if x else ()\nt[0] = 8", "", None, "an item of t"),
    ("container of an alias", "box = [LIMITS]\nbox[0][0] = 8", "", None, "an item of box[0]"),
    ("builtin hands it back", "t = max(LIMITS, LIMITS)\nt[0] = 8", "", None, "an item of t"),
    ("loop over aliases", "for t in (LIMITS,):\n    t[0] = 8", "", None, "an item of t"),
    ("helper returns it", "t = _table()\nt[0] = 8", "def _table():\n    return LIMITS\n", None, "an item of t"),
    ("helper is passed it", "_bump(LIMITS)", "def _bump(c):\n    c[0] += 1\n", None, "updating an item of c"),
    ("lambda is passed it", "bump = lambda c: c.pop()\nbump(LIMITS)", "", None, "c.pop(...) is not allowed"),
    ("comprehension", "[t.clear() for t in (LIMITS,)]", "", None, "t.clear(...) is not allowed"),
    ("item of a kernel", "_k[0] = 1", "", None, "an item of _k"),
    # mutating methods on module-level names and their aliases
    *[(f"method {m}", f"LIMITS.{m}()", "", None, f"LIMITS.{m}(...) is not allowed: it changes its object in place")
      for m in ("append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem", "add",
                "discard", "sort", "reverse", "zero_", "fill_", "copy_")],
    ("method on an alias", "t = LIMITS\nt.append(1)", "", None, "t.append(...) is not allowed"),
    # module-level values are immutable
    ("module-level dict", "pass", "CACHE = {}", None, "a dict in the module-level value of CACHE"),
    ("module-level list", "pass", "CALLS = [0]", None, "a list in the module-level value of CALLS"),
    ("module-level set", "pass", "SEEN = {1}", None, "a set in the module-level value of SEEN"),
    ("set()", "pass", "SEEN = set()", None, "a call of set in the module-level value of SEEN"),
    ("dict()", "pass", "CACHE = dict()", None, "a call of dict"),
    ("list in a tuple", "pass", "T = (1, [2])", None, "a list in the module-level value of T"),
    ("module-level tensor", "pass", "BUF = torch.zeros(4)", None, "a call of torch.zeros in the module-level value"),
    ("an iterator", "pass", "IT = zip((1,), (2,))", None, "a call of zip"),
    ("a helper's result", "pass", "def _make():\n    return 1\n\n\nV = _make()", None, "a call of _make"),
    ("a function object", "pass", "F = launch", None, "the function launch in the module-level value of F"),
    ("a library function", "pass", "E = torch.empty", None, "torch.empty (a function or module, not a value)"),
    ("PARAMS and SPACE as one", "pass", "PARAMS = SPACE = {}", None, "a dict in the module-level value of PARAMS,"),
    ("comprehension value", "pass", "T = tuple([i for i in (1, 2)])", None, "module-level value of T"),
    # mutable defaults: made once, shared by every call
    ("dict default", "pass", "", "x, y, *, BLOCK, cache={}", "a dict in the default of 'cache' of launch"),
    ("list default", "cache[0] += 1", "", "x, y, *, BLOCK, cache=[0]", "updating an item of cache"),
    ("call default", "pass", "", "x, y, *, BLOCK, seen=set()", "a call of set in the default of 'seen'"),
    ("positional default", "pass", "", "x, y, cache=[], *, BLOCK", "a list in the default of 'cache'"),
    ("lambda default", "f = lambda m, c=[]: c\nf(1)", "", None, "a list in the default of 'c' of a lambda"),
    ("nested def default", "def inner(c={}):\n    return c\ninner()", "", None, "the default of 'c' of inner"),
    ("function default", "pass", "", "x, y, *, BLOCK, f=launch", "the function launch in the default of 'f'"),
    # PARAMS and SPACE are the harness's
    ("PARAMS item", 'PARAMS["BLOCK"] = 32', "", None, "PARAMS may not be used in code"),
    ("SPACE alias", 's = SPACE\ns["BLOCK"].append(64)', "", None, "SPACE may not be used in code"),
    ("PARAMS at module level", "pass", "P = PARAMS", None, "PARAMS may not be used in code"),
    ("PARAMS as a default", "pass", "", "x, y, *, BLOCK, p=PARAMS", "PARAMS may not be used in code"),
    # torch.Tensor only in annotations
    ("Tensor constructor", "s = torch.Tensor(4)", "", None, "torch.Tensor may appear only in annotations"),
    ("isinstance", "n = isinstance(x, torch.Tensor)", "", None, "torch.Tensor may appear only in annotations"),
    ("imported by name", "s = Tensor(4)", "from torch import Tensor", None, "Tensor may appear only in annotations"),
    ("module-level alias", "pass", "T = torch.Tensor", None, "torch.Tensor may appear only in annotations"),
]


@pytest.mark.parametrize("route, code, top, signature, words", REFUSED, ids=[r[0] for r in REFUSED])
def test_state_and_monkeypatching_are_refused_naming_the_line(route, code, top, signature, words):
    source = module(code, top, signature or "x, y, *, BLOCK")
    result = lint(source)
    named = [p for p in result.problems if words in p]
    assert named, result.problems
    # the line named is one of the route's own lines (its code, module-level code or launch's signature)
    lines = source.splitlines()
    own: set[int] = set()
    for part in (code, top, f"def launch({signature}):" if signature else ""):
        snippet = textwrap.dedent(part).strip().splitlines()
        if part and part != "pass":
            first = next(i for i, line in enumerate(lines, 1) if line.strip() == snippet[0].strip())
            own.update(range(first, first + len(snippet)))
    assert any(p.startswith(f"line {n}: ") for p in named for n in own), (sorted(own), named)


# (route, code in launch, code at module level, launch's signature or None): what honest kernels write
HONEST = [
    ("local list", "grid = [1, 1]\ngrid[0] = x.shape[0]\ngrid[1] += 1\ndel grid[1]", "", None),
    ("local dict", 'meta = {"BLOCK": BLOCK_MIN}\nmeta["BLOCK"] = BLOCK\ndel meta["BLOCK"]', "", None),
    ("list of constants", "sizes = [BLOCK_MIN, LIMITS[0]]\nsizes[0] = 32", "", None),
    ("local shadows a module name", "LIMITS = [0, 0]\nLIMITS[0] = 1", "", None),
    ("reads of constants", "n = BLOCK_MIN\nn += 1\nfor lim in LIMITS:\n    n = max(n, lim)", "", None),
    ("numeric and string constants", "pass", "A = 4\nB = 'row'\nC = (1, 2.0, 'x')\nD = -A * 2 ** 3", None),
    ("dtype and constexpr constants", "pass", "ACC = tl.float32\nOUT = torch.float16\nONE = tl.constexpr(1)", None),
    ("math constants", "pass", "LOG2E = 1.0 / math.log(2.0)\nPI = math.pi\nN = triton.cdiv(10, 3)", None),
    ("constant defaults", "pass", "", "x, y, *, BLOCK, floor=BLOCK_MIN, name='k', shape=(1, 2), f=None"),
    ("annotations", "pass", "", "x: torch.Tensor, y: torch.Tensor, *, BLOCK: int"),
    ("allocations, changed in place", "p = torch.empty(4, device=x.device)\np.zero_()\nq = x.new_empty(2)\n"
     "q.fill_(0.0)", "", None),
    ("comprehension over constants", "pairs = [(a, a * 2) for a in LIMITS]\npairs[0] = (1, 2)", "", None),
]


@pytest.mark.parametrize("route, code, top, signature", HONEST, ids=[r[0] for r in HONEST])
def test_honest_locals_constants_and_annotations_pass(route, code, top, signature):
    result = lint(module(code, top, signature or "x, y, *, BLOCK"))
    assert result.ok, result.problems


def test_an_alias_is_followed_whatever_order_the_bindings_are_written_in():
    """Each name is bound to the one after it, the last to a module-level object, the first stored into."""
    chain = [f"a{i} = a{i + 1}" for i in range(300)] + ["a300 = LIMITS"]
    result = lint(module("if x:\n    a0[0] = 1\n" + "\n".join(chain)))
    assert any("assigning to an item of a0" in p for p in result.problems), result.problems
    assert lint(module("if x:\n    a0[0] = 1\n" + "\n".join([*chain[:-1], "a300 = [0]"]))).ok


# -- whole candidates (tests/candidates/state) -------------------------------------------------------

STATE = CANDIDATES / "state"
CANDIDATE_FILES = [
    ("patches_tl_exp_in_launch", "line 25: assigning to the attribute tl.exp is not allowed"),
    ("counter_in_default", "line 21: a list in the default of 'calls' of launch"),
    ("counter_on_function", "line 26: assigning to the attribute _count.calls"),
    ("module_tensor_counter", "line 7: a call of torch.zeros in the module-level value of SEEN"),
    ("cache_through_alias", "line 20: a list in the module-level value of STORE"),
    ("host_scratch_tensor", "line 24: torch.Tensor may appear only in annotations"),
]


@pytest.mark.parametrize("name, words", CANDIDATE_FILES, ids=[c[0] for c in CANDIDATE_FILES])
def test_state_candidates_are_refused_by_the_lint(name, words):
    result = lint((STATE / f"{name}.py").read_text())
    assert not result.ok and words in "; ".join(result.problems), result.problems


@pytest.fixture(scope="module")
def checker() -> Iterator[Evaluator]:
    """The evaluator without the latency model: the honest twin needs only the check."""
    task = NativeTask(ROOT / "evo" / "tasks" / "softmax")
    with Evaluator(task, EvaluationConfig(timeout_s=60.0, memory_mb=1024, latency=LatencyMode.OFF),
                   device="cpu") as ev:
        yield ev


@pytest.mark.parametrize("name", ["patches_tl_exp_in_launch", "counter_in_default", "module_tensor_counter"])
def test_the_evaluator_gives_state_a_lint_error_naming_the_line(checker: Evaluator, name: str):
    result = checker.evaluate(Candidate.from_file(STATE / f"{name}.py"))
    assert result.status is Status.LINT_ERROR and result.reason.startswith("line "), result.reason
    assert result.error > 0


def test_the_honest_twin_is_ok(checker: Evaluator):
    result = checker.evaluate(Candidate.from_file(STATE / "honest_locals.py"))
    assert result.status is Status.OK, result.reason
