"""The LLM's prompt, as a kernel engineer would write it: what the model must compute and to which
tolerance on which value distributions, the target GPU, the parent with its performance and bottleneck
in words, this mutator's last attempts (diffs and outcomes), other mutators' recent failures, and
kernels of other structures as inspirations. Pure text building, no I/O."""

from __future__ import annotations

import ast
import hashlib
import math
import re
from collections.abc import Mapping, Sequence

from evo.contracts.candidate import Candidate
from evo.contracts.mutator_config import LLMConfig
from evo.contracts.records import Individual
from evo.contracts.syntax import parse_module
from evo.contracts.task import Task
from evo.contracts.verdict import Evaluation
from evo.contracts.workload import weighted_shapes_text
from mutators.llm.attempts import Attempt, clip, diverse, params_line, recent, unified_diff
from mutators.llm.bottleneck import NOT_SEARCH_STATE, bottleneck_text, performance_lines

__all__ = ["CONTRACT", "NOT_SEARCH_STATE", "SYSTEM", "build_messages", "clip", "current_kernel", "failure_text",
           "fitness_lines", "kernel_key", "source_with_params", "task_lines"]

CONTRACT = """The candidate contract (a kernel that breaks it is rejected before it runs):
- The answer is one Python module defining at least one @triton.jit kernel and
  `launch(*inputs, *outputs, **params)`, which launches the kernel(s) as kernel[grid](...).
- Inputs are contiguous torch tensors on the device; outputs are pre-allocated by the harness and
  must be written in place (every element). Never allocate or return the outputs.
- PARAMS = {...} gives the default of every meta-parameter that launch takes as a keyword (block
  sizes, num_warps, num_stages); SPACE = {...} (optional) lists values a tuner may try.
- Imports: only triton, triton.language (and triton.language.extra.libdevice), math, typing, torch.
  torch only allocates scratch buffers (on the inputs' device: device=x.device, or empty_like),
  names dtypes, takes views and reads metadata: computing with torch is rejected, and so is asking
  which device runs the code (is_cuda, device.type, data_ptr, printing a tensor, or a pointer cast to
  an integer inside a kernel). No try/except, classes,
  global, with, files, threads, processes, sockets, exec/eval or introspection. No state: nothing
  a call does may outlive it (no attribute assignment, no module-level list, dict or tensor, no
  mutable default); module-level values are numbers, strings and tuples.
- Correctness is checked against the reference in float64 on many sizes (including 1, primes,
  sizes that are not multiples of any block, and sizes near the bench size), several input draws
  and value distributions (zeros, ties, constant rows, tiny and huge values, inf and NaN), with
  guard zones around every buffer: mask every load and store, handle any size. Every line and
  branch of the code must run in the check: the check picks sizes past the thresholds the code
  compares with; code no size reaches is rejected. Outputs and torch.empty scratch start filled
  with garbage (NaN, other values, zeros): never read an element before writing it in the same
  call, or allocate with torch.zeros. Programs run in any order (the check shuffles them): no
  program may assume another has run; only acquire/release atomics order programs. A program
  that loads what it stored itself needs tl.debug_barrier() between the store and the load."""

SYSTEM = f"""You are an expert GPU performance engineer who writes Triton kernels.
You improve a working Triton kernel so that it runs faster while computing exactly what the reference computes.

{CONTRACT}

Reply with either the complete new module in one ```python block, or with edits to the current
kernel in this exact form (each SEARCH text copied exactly from the current kernel, once):
<<<<<<< SEARCH
lines to find
=======
replacement lines
>>>>>>> REPLACE
Say in one or two sentences what you changed and why, then give the code."""


_CURRENT = re.compile(r"## The current kernel\s*```python\n(.*?)\n```", re.DOTALL)


def current_kernel(messages: Sequence[Mapping[str, str]]) -> str:
    """The current kernel a prompt built by `build_messages` shows ("" when there is none)."""
    for m in messages:
        if m.get("role") == "user":
            found = _CURRENT.search(m.get("content", ""))
            if found:
                return found.group(1)
    return ""


def kernel_key(model: str, messages: Sequence[Mapping[str, str]]) -> str:
    """What replay by kernel matches on: the model and the kernel the prompt shows (params included),
    not the failures or inspirations around it."""
    return hashlib.sha256(f"{model}\n{current_kernel(messages)}".encode()).hexdigest()


def source_with_params(candidate: Candidate) -> str:
    """The module with its PARAMS literal showing the params this candidate actually runs with."""
    try:
        tree = parse_module(candidate.source)
    except SyntaxError:
        return candidate.source
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "PARAMS" for t in node.targets):
            try:
                if ast.literal_eval(node.value) == candidate.params:
                    return candidate.source
            except ValueError:
                pass
            lines = candidate.source.split("\n")
            end = node.end_lineno or node.lineno
            return "\n".join([*lines[: node.lineno - 1], f"PARAMS = {candidate.params!r}", *lines[end:]])
    return candidate.source


def fitness_lines(e: Evaluation, task: Task | None = None) -> list[str]:
    """Latency, speedups and the fraction of the speed of light (`mutators.llm.bottleneck`)."""
    return performance_lines(e, task)


def failure_text(candidate: Candidate | None, e: Evaluation | None, error: str, cfg: LLMConfig) -> str:
    """Why one child failed: the reply problem, or status, reason, worst case and error size."""
    if e is None:
        return f"- your reply could not be applied: {clip(error, cfg.reason_chars)}"
    parts = [f"- {e.status.value}: {clip(e.reason, cfg.reason_chars)}"]
    if e.worst_case:
        parts.append(f"  worst case: {e.worst_case}")
    if math.isfinite(e.max_error_ratio) and e.max_error_ratio > 0:
        parts.append(f"  max error / tolerance: {e.max_error_ratio:.3g}; mismatched elements: "
                     f"{e.mismatch_fraction:.1%}")
    if candidate is not None:
        parts.append(f"  params: {candidate.params}")
    return "\n".join(parts)


def task_lines(task: Task) -> list[str]:
    """Sizes, dtype, the tolerance and the value distributions the checker uses."""
    tol = task.tolerance
    return [
        f"dtype: {task.dtype}; check sizes: {task.check_sizes}; timed on: {weighted_shapes_text(task)}"
        + (f" (the fitness is the weighted geometric mean; workload {task.workload})" if task.workload else ""),
        f"tolerance ({task.dtype}): an output element passes when |out - ref| <= {tol.atol:g} * rms(ref) + "
        f"{tol.rtol:g} * |ref|; NaN must match NaN, an infinity the same infinity; integer outputs exactly",
        f"value distributions: at every check size the inputs are drawn from each of {', '.join(task.dists)} "
        "(the reference's input generator says what each means); outputs must also agree on a second run",
    ]


def _inspiration(s: Individual, current: str, cfg: LLMConfig) -> str:
    lat = f"{s.latency_ms:.4g} ms" if s.latency_ms is not None else "latency not measured"
    source = source_with_params(s.candidate)
    diff = unified_diff(current, source, cfg.source_chars, names=("current", "this kernel"))
    if len(diff) < 0.8 * len(source) and not diff.endswith("(truncated)"):
        return f"{lat}; its differences from the current kernel:\n```diff\n{diff}\n```"
    return f"{lat}:\n```python\n{clip(source, cfg.source_chars)}\n```"


def build_messages(task: Task, parent: Individual, *, failures: Sequence[str], inspirations: Sequence[Individual],
                   hardware: str, cfg: LLMConfig, attempts: Sequence[Attempt] = (),
                   population: Sequence[Individual] = ()) -> list[dict[str, str]]:
    """The chat messages for one rewrite of `parent`: `attempts` are this mutator's own (oldest first),
    `failures` other mutators' recent ones; inspirations are drawn from `inspirations` (the elites) and
    `population`, one per structure."""
    shown = source_with_params(parent.candidate)
    perf = "\n".join(f"- {line}" for line in performance_lines(parent.evaluation, task))
    bottleneck = bottleneck_text(parent.evaluation)
    if bottleneck:
        perf += f"\nWhat bounds it, per launch (roofline model of the target GPU):\n{bottleneck}"
    sections = [
        "## The reference (what the kernel must compute; evaluated in float64)",
        f"```python\n{clip(task.definition_text(), cfg.source_chars)}\n```",
        "\n".join(task_lines(task)),
        f"## Target hardware\n{hardware or 'unspecified'}",
        "## The current kernel", f"```python\n{clip(shown, cfg.source_chars)}\n```",
        f"## Its performance\n{perf}",
    ]
    mine = recent(attempts, cfg.max_attempts_in_prompt)
    if mine:
        sections += ["## Your last attempts (oldest first; diffs against the kernel they started from)",
                     "\n".join(a.text(n) for n, a in enumerate(mine, 1))]
    if failures and cfg.max_failures_in_prompt:
        shown_failures = failures[max(len(failures) - cfg.max_failures_in_prompt, 0):]
        sections += ["## Recent failures on this island (avoid these mistakes)", "\n".join(shown_failures)]
    others, same = diverse(parent, (inspirations, population), cfg.max_inspirations)
    if others:
        sections.append("## Correct kernels of other structures in the population (for inspiration)")
        sections += [_inspiration(s, shown, cfg) for s in others]
    if same:
        sections += ["## The current kernel with other params", "\n".join(params_line(s, parent) for s in same)]
    sections.append("## Your task\nWrite a faster kernel with the same semantics. Keep launch's signature "
                    "(task inputs, then outputs, then keyword meta-parameters listed in PARAMS).")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(sections)}]
