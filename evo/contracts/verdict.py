"""Evaluation outcomes: an explicit status enum and a frozen record, never magic keys in a dict."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import Any


class Status(str, Enum):
    OK = "ok"
    LINT_ERROR = "lint_error"  # breaks the candidate contract (static or at run time)
    COMPILE_ERROR = "compile_error"  # does not import, compile or launch
    WRONG_OUTPUT = "wrong_output"  # outside tolerance, unwritten elements, nondeterministic
    UNSAFE = "unsafe"  # out-of-bounds store, inputs modified, impossible timing
    TIMEOUT = "timeout"
    CRASH = "crash"  # the worker died: segfault, heap corruption, memory limit, CUDA fault


# How far an evaluation went: the first check sizes with one draw (STOKE's chain), every check case
# and the latency at the first bench size (verified there), or that and a full run at every bench size.
QUICK, FULL, VERIFIED = "quick", "full", "verified"


class LatencySource(str, Enum):
    CUDA = "cuda"  # measured with CUDA events
    MODEL = "model"  # estimated by the roofline model, never presented as measured


@dataclass(frozen=True)
class Evaluation:
    """The verdict on one candidate for one task on one device."""

    candidate_id: str
    task_key: str
    device: str
    status: Status
    reason: str = ""
    error: float = math.inf  # graded equivalence error: 0 iff every check passed
    max_error_ratio: float = math.inf  # worst |out - ref| / tolerance
    max_abs_error: float = math.inf
    mismatch_fraction: float = 1.0
    worst_case: str = ""
    cases_checked: int = 0
    level: str = FULL
    check_seconds: float = 0.0
    latency_ms: float | None = None  # at the task's first bench size
    latency_source: LatencySource | None = None  # cuda: measured; model: estimated
    speedups: dict[str, float] = field(default_factory=dict)  # baseline name (seed, torch, torch_compile) -> x
    latency_detail: dict[str, Any] = field(default_factory=dict)  # figures behind the latency (JSON-able)
    roofline_fraction: float | None = None  # speed-of-light time / latency, at most 1
    latency_gpu: str = ""  # the GPU measured on, or the profile modelled
    sandbox: str = ""  # the worker's OS isolation ("landlock+seccomp", a part of it, or "process")
    # infrastructure failures met on the way to this verdict (a worker killed from outside, a stalled
    # machine), each followed by a fresh worker; not the candidate's doing unless it reproduced
    incidents: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def with_(self, **changes: Any) -> Evaluation:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        # field by field, its containers copied one level (dataclasses.asdict deep-copies every figure
        # of latency_detail: most of the ledger's cost per record); the nested figures are only read
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["speedups"], d["latency_detail"] = dict(self.speedups), dict(self.latency_detail)
        d["incidents"] = list(self.incidents)
        d["status"] = self.status.value
        d["latency_source"] = self.latency_source.value if self.latency_source else None
        for k in ("error", "max_error_ratio", "max_abs_error"):
            if isinstance(d[k], float) and not math.isfinite(d[k]):
                d[k] = None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Evaluation:
        d = dict(d)
        d["status"] = Status(d["status"])
        d["latency_source"] = LatencySource(d["latency_source"]) if d.get("latency_source") else None
        for k in ("error", "max_error_ratio", "max_abs_error"):
            if d.get(k) is None:
                d[k] = math.inf
        return cls(**d)
