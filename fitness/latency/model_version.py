"""Which latency model produced a modelled figure: a short hash of the files that decide it.

A modelled latency depends on the roofline model, the GPU profiles, the bench inputs, the interpreter-side
counting and sampling, the resource figures of the cross-compile, the speed-of-light bound and Triton
itself. Two figures are comparable only
when one model made both, so every modelled verdict records `model_version()` in its detail, a run's
speedups compare only figures of the seed's version, `--resume` refuses a run whose seed another model
version timed, and the ablation and search tables say which version their rows come from. The version
is derived, not maintained by hand: any edit of those files (a comment too) is a new version, which errs
on the side of not comparing.
"""

from __future__ import annotations

import functools
import hashlib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
MODEL_FILES = (
    "evo/contracts/gpus.py",
    "fitness/check/bound_names.py",
    "fitness/check/change_points.py",
    "fitness/latency/bench_tensors.py",
    "fitness/latency/counts.py",
    "fitness/latency/interp_hooks.py",
    "fitness/latency/interp_profile.py",
    "fitness/latency/interp_wrap.py",
    "fitness/latency/model.py",
    "fitness/latency/ops.py",
    "fitness/latency/paths.py",
    "fitness/latency/result.py",
    "fitness/latency/roofline.py",
    "fitness/latency/sampling.py",
    "fitness/latency/shapes.py",
    "fitness/latency/target_compile.py",
)
KEY = "model_version"  # its key in a modelled verdict's latency detail
UNRECORDED = "unrecorded"  # how tables and reports name the version of a figure from before versions were kept


@functools.cache
def model_version() -> str:
    """12 hex digits naming the model files' contents and the Triton version."""
    h = hashlib.sha256()
    for name in MODEL_FILES:
        h.update(name.encode() + b"\0" + (ROOT / name).read_bytes() + b"\0")
    try:
        h.update(metadata.version("triton").encode())
    except metadata.PackageNotFoundError:
        h.update(b"no triton")
    return h.hexdigest()[:12]


def version_of(detail: object) -> str:
    """The model version a verdict's latency detail records ("" for one from before versions were kept)."""
    return str(detail.get(KEY) or "") if isinstance(detail, dict) else ""
