"""Bench-size tensors: how the driver describes them to a worker (`tensor_specs`) and how the worker
makes them (`make_tensor`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from evo.contracts import dtypes
from evo.contracts.task import BenchCase


def tensor_specs(case: BenchCase) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Worker messages for a bench case: shapes and dtypes, data where the case carries it."""
    ins = []
    for t, shape in zip(case.inputs, case.input_shapes):
        has_data = t.shape == shape and (not dtypes.is_float(t.dtype) or case.has_float_data)
        ins.append({"dtype": t.dtype, "shape": list(shape), "data": t.data.tobytes() if has_data else None})
    outs = [{"dtype": d, "shape": list(s)} for d, s in zip(case.output_dtypes, case.output_shapes)]
    return ins, outs


def make_tensor(torch: Any, spec: dict[str, Any], device: str) -> Any:
    """A tensor of `spec` ({dtype, shape, data?}): the data when given, else zeros (an index computed
    from a float input then stays in bounds, as it would with real data)."""
    from evo.contracts.kernelbench import torch_dtype

    shape = tuple(spec["shape"])
    data = spec.get("data")
    if data is None:
        return torch.zeros(shape, dtype=torch_dtype(spec["dtype"]), device=device)
    arr = np.frombuffer(data, dtype=dtypes.storage_type(spec["dtype"])).copy().reshape(shape)
    t = torch.from_numpy(arr)
    if spec["dtype"] == "bfloat16":
        t = t.view(torch.bfloat16)
    return t.to(device)
