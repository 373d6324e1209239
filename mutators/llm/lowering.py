"""The prompt that asks a model for a task's first kernel, written from the reference alone (a task
with no seed kernel), and the follow-up that returns the checker's verdict on a rejected one.
Pure text building, no I/O: the loop is `evo.app.run.lowering`."""

from __future__ import annotations

from evo.contracts.mutator_config import LLMConfig
from evo.contracts.task import Task
from mutators.llm.prompt import CONTRACT, clip, task_lines

SYSTEM = f"""You are an expert GPU performance engineer who writes Triton kernels.
You write a correct Triton kernel for a computation given as a reference in numpy or PyTorch. Correctness
comes first: a simple kernel that matches the reference everywhere is the goal; speed is searched later.

{CONTRACT}

Reply with the complete module in one ```python block, after one or two sentences on its design."""


def signature_lines(task: Task) -> list[str]:
    """What launch receives at the first check size: each input, then each output (dtype, shape)."""
    case = task.cases(draws=1, every_dist=False)[0]
    return [f"At size {case.size}: launch receives {task.case_data(case).launch_words()}, then the PARAMS as "
            "keywords."]


def lowering_messages(task: Task, *, hardware: str, cfg: LLMConfig) -> list[dict[str, str]]:
    sections = [
        "## The reference (what the kernel must compute; evaluated in float64)",
        f"```python\n{clip(task.definition_text(), cfg.source_chars)}\n```",
        *task_lines(task),
        *signature_lines(task),
        f"## Target hardware\n{hardware or 'unspecified'}",
        "## Your task\nWrite the first Triton kernel for this computation: the module with its @triton.jit "
        "kernel(s), PARAMS, SPACE (a few values per meta-parameter worth trying) and launch.",
    ]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(sections)}]


def retry_messages(messages: list[dict[str, str]], reply: str, verdict: str) -> list[dict[str, str]]:
    """The conversation so far, the model's reply and why that kernel was rejected."""
    return [*messages, {"role": "assistant", "content": reply},
            {"role": "user", "content": f"That kernel was rejected:\n{verdict}\nFix it and reply with the complete "
                                        "module in one ```python block."}]
