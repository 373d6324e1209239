"""`evo check`: is a task usable? The seed passes and the reference is not degenerate.

Degenerate references make the equivalence contract meaningless: an output that does not depend
on the inputs, is constant, is zero (or near it) everywhere, is NaN everywhere, or (for tasks with
parameters) does not depend on the parameters is matched by kernels that compute nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evo.contracts.candidate import Candidate
from evo.contracts.kernelbench import KernelBenchTask
from evo.contracts.task import CaseData, Task


@dataclass(frozen=True)
class Finding:
    name: str
    ok: bool
    detail: str


def _values(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def reference_findings(task: Task) -> list[Finding]:
    """Checks of the reference alone (no candidate involved)."""
    out: list[Finding] = []
    cases = task.cases(draws=2)
    by_size: dict[str, list[CaseData]] = {}
    for c in cases:
        by_size.setdefault(c.size_json, []).append(task.case_data(c))
    depends, varies, nonzero, finite = [], [], [], []
    for size, datas in by_size.items():
        a, b = datas[0], datas[-1]
        for i, (ea, eb) in enumerate(zip(a.expected, b.expected)):
            va, vb = _values(ea), _values(eb)
            if np.isnan(va).all():
                finite.append(f"output {i} is NaN everywhere at {size}")
            if len(datas) > 1 and va.shape == vb.shape and np.array_equal(va, vb, equal_nan=True):
                depends.append(f"output {i} identical for two input draws at {size}")
            if va.size > 1 and np.nanmax(va) == np.nanmin(va):
                varies.append(f"output {i} constant at {size}")
            scale = max(1.0, max(float(np.nanmax(np.abs(_values(t.data.astype(np.float64)))))
                                 if t.data.size else 0.0 for t in a.inputs))
            if va.size and float(np.nanmax(np.abs(va))) <= 1e-6 * scale:
                nonzero.append(f"output {i} is ~0 everywhere at {size}")
    n_sizes = len(by_size)
    # a softmax over one column is always 1: a size may be degenerate, the task must not be
    varying = n_sizes - len(depends)
    out.append(Finding("output depends on the inputs", varying > 0,
                       f"differs across draws at {varying} of {n_sizes} sizes" if varying
                       else f"same output for different inputs at every size: {'; '.join(depends)}"))
    out.append(Finding("output is not constant", len(varies) < n_sizes,
                       "; ".join(varies) if len(varies) >= n_sizes else "varies"))
    out.append(Finding("output is not ~0 everywhere", len(nonzero) < n_sizes,
                       "; ".join(nonzero) if len(nonzero) >= n_sizes else "non-zero"))
    out.append(Finding("output is not NaN everywhere", len(finite) < n_sizes,
                       "; ".join(finite) if len(finite) >= n_sizes else "finite values"))
    if isinstance(task, KernelBenchTask):
        out.append(_params_matter(task))
    return out


def _params_matter(task: KernelBenchTask) -> Finding:
    case = task.cases(draws=1, every_dist=False)[-1]
    size = case.size
    model, inputs = task.model_and_inputs(size, case.seed, case.dist)
    n_params = len(model.state_dict())
    float_params = [t for t in inputs[len(inputs) - n_params :] if t.data.dtype.kind in "fu"]
    if not float_params:
        return Finding("parameters matter", True, "the model has no float parameters")
    other, _ = task.model_and_inputs(size, case.seed, case.dist, param_seed=case.seed + 1)

    args = task.reference_args(inputs[: len(inputs) - n_params], size)
    a, b = task.reference_outputs(model, args, size)[0], task.reference_outputs(other, args, size)[0]
    same = bool(np.array_equal(a, b, equal_nan=True))
    return Finding("parameters matter", not same,
                   "output unchanged when the parameters are redrawn" if same else f"{n_params} state tensors")


def seed_candidate(task: Task) -> Candidate | None:
    return Candidate.from_source(task.seed_source) if task.seed_source else None
