"""What a campaign leaves for people: the best kernel as a standalone module, and its summary."""

from __future__ import annotations

from typing import Any

from evo.contracts.records import Individual, speedup
from fitness.latency.model_version import version_of


def standalone_kernel(best: Individual, *, campaign: str, task: str, seed_latency_ms: float | None) -> str:
    """The best candidate's module with its tuned params baked in: importing it needs only triton
    (and torch for the tensors); `kernel(*inputs, *outputs)` runs it with those params."""
    ev = best.evaluation
    if best.latency_ms is not None:
        source = ev.latency_source.value if ev.latency_source else "unknown source"
        fast = speedup(seed_latency_ms, best.latency_ms)
        perf = f"latency {best.latency_ms:.4g} ms ({source})" + (f", {fast:.2f}x the seed" if fast else "")
    else:
        perf = "latency not measured (no latency stage ran)"
    origin = best.proposal
    lineage = f"found by {origin.mutator or 'seed'} on island {origin.island}, generation {origin.generation}"
    params = ",\n".join(f"    {k!r}: {v!r}" for k, v in sorted(best.candidate.params.items()))
    return (
        f"{best.candidate.source.rstrip()}\n\n\n"
        f"# ---- evo: the best kernel of campaign {campaign!r} on task {task!r} ----\n"
        f"# candidate {best.id}: passed the equivalence check ({ev.reason}); {perf};\n"
        f"# {lineage}.\n"
        f"# The tuned meta-parameters replace the defaults above.\n"
        f"PARAMS = {{\n{params}\n}}\n\n\n"
        "def kernel(*tensors):\n"
        '    """Run the kernel with the tuned params: task inputs first, then the pre-allocated outputs."""\n'
        "    launch(*tensors, **PARAMS)\n"
    )


def individual_summary(ind: Individual | None, seed_latency_ms: float | None) -> dict[str, Any] | None:
    if ind is None:
        return None
    ev = ind.evaluation
    return {
        "id": ind.id,
        "params": dict(ind.candidate.params),
        "status": ev.status.value,
        "latency_ms": ind.latency_ms,
        "latency_source": ev.latency_source.value if ev.latency_source else None,
        "latency_gpu": ev.latency_gpu,
        "model_version": version_of(ev.latency_detail) or None,  # the latency model's, where modelled
        "speedup_over_seed": speedup(seed_latency_ms, ind.latency_ms),
        "speedups": dict(ev.speedups),
        "shapes": list(ev.latency_detail.get("shapes", [])),  # per bench size, when the fitness covers several
        "mutator": ind.proposal.mutator,
        "island": ind.proposal.island,
        "generation": ind.proposal.generation,
        "parents": list(ind.proposal.parents),
    }
