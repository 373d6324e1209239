"""The LLM's prompt: what the model must compute, the contract, the parent, its fitness, recent
failures, a few elite inspirations and the target hardware. Pure text building, no I/O."""

from __future__ import annotations

import ast
import hashlib
import math
import re
from collections.abc import Mapping, Sequence

from evo.contracts.candidate import Candidate
from evo.contracts.mutator_config import LLMConfig
from evo.contracts.records import Individual
from evo.contracts.task import Task
from evo.contracts.verdict import Evaluation

CONTRACT = """The candidate contract (a kernel that breaks it is rejected before it runs):
- The answer is one Python module defining at least one @triton.jit kernel and
  `launch(*inputs, *outputs, **params)`, which launches the kernel(s) as kernel[grid](...).
- Inputs are contiguous torch tensors on the device; outputs are pre-allocated by the harness and
  must be written in place (every element). Never allocate or return the outputs.
- PARAMS = {...} gives the default of every meta-parameter that launch takes as a keyword (block
  sizes, num_warps, num_stages); SPACE = {...} (optional) lists values a tuner may try.
- Imports: only triton, triton.language (and triton.language.extra.libdevice), math, typing, torch.
  torch only allocates scratch buffers, names dtypes, takes views and reads metadata: computing
  with torch is rejected. No try/except, classes, global, with, files, threads, processes, sockets,
  exec/eval or introspection.
- Correctness is checked against the reference in float64 on many sizes (including 1, primes and
  sizes that are not multiples of any block), several input draws and value distributions, with
  guard zones around every buffer: mask every load and store, handle any size."""

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


def clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 20] + "\n... (truncated)"


def source_with_params(candidate: Candidate) -> str:
    """The module with its PARAMS literal showing the params this candidate actually runs with."""
    try:
        tree = ast.parse(candidate.source)
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


# figures of how the evaluator worked, not of the kernel: what the evaluation cost (wall-clock seconds of
# this machine) and the model's secret sampling seed (drawn per run). Different on every run, so a prompt
# holding them could never be replayed exactly; and the seed is not the LLM's business.
NOT_SEARCH_STATE = frozenset({"model_s", "full_run_s", "full_run_estimate_s", "sample_seed"})


def fitness_lines(e: Evaluation) -> list[str]:
    """Latency, speedups, roofline fraction and static resources, as far as the evaluation has them (never
    how the evaluation itself went: `NOT_SEARCH_STATE`)."""
    if not e.ok:
        return [f"status: {e.status.value}: {e.reason}"]
    out = []
    if e.latency_ms is not None:
        src = f" ({e.latency_source.value})" if e.latency_source else ""
        out.append(f"latency: {e.latency_ms:.4g} ms{src}")
    else:
        out.append("latency: not measured")
    out += [f"speedup over {k}: {v:.3g}x" for k, v in sorted(e.speedups.items())]
    for k, v in sorted(e.latency_detail.items()):
        if isinstance(v, (int, float, str, bool)) and k not in NOT_SEARCH_STATE:
            out.append(f"{k}: {v:.4g}" if isinstance(v, float) else f"{k}: {v}")
    return out


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


def build_messages(task: Task, parent: Individual, *, failures: Sequence[str], inspirations: Sequence[Individual],
                   hardware: str, cfg: LLMConfig) -> list[dict[str, str]]:
    """The chat messages for one rewrite of `parent`."""
    shown = source_with_params(parent.candidate)
    sections = [
        "## The reference (what the kernel must compute; evaluated in float64)",
        f"```python\n{clip(task.definition_text(), cfg.source_chars)}\n```",
        f"dtype: {task.dtype}; check sizes: {task.check_sizes}; timed on: {task.bench_sizes}",
        f"## Target hardware\n{hardware or 'unspecified'}",
        "## The current kernel", f"```python\n{clip(shown, cfg.source_chars)}\n```",
        "Its fitness:\n" + "\n".join(f"- {line}" for line in fitness_lines(parent.evaluation)),
    ]
    if failures and cfg.max_failures_in_prompt:
        shown_failures = failures[max(len(failures) - cfg.max_failures_in_prompt, 0):]
        sections += ["## Recent attempts that failed (avoid these mistakes)", "\n".join(shown_failures)]
    others = [s for s in inspirations if s.candidate.id != parent.candidate.id][: cfg.max_inspirations]
    if others:
        sections.append("## Other correct kernels from the population (for inspiration)")
        for s in others:
            lat = f"{s.latency_ms:.4g} ms" if s.latency_ms is not None else "latency not measured"
            sections.append(f"{lat}:\n```python\n{clip(source_with_params(s.candidate), cfg.source_chars)}\n```")
    sections.append("## Your task\nWrite a faster kernel with the same semantics. Keep launch's signature "
                    "(task inputs, then outputs, then keyword meta-parameters listed in PARAMS).")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(sections)}]
