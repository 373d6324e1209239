"""Runs kernels that call libdevice in the interpreter, with the project's interpreter fixes installed as
the interpreter worker installs them, or without (``--no-fix``). Prints one JSON line: per function, the
largest error against numpy/math in float64 relative to the result's scale (or the error it raised), and
the errors a float16 argument and a function without a numpy version raise. Run as
``TRITON_INTERPRET=1 python -m tests.libdevice_probe [--no-fix]``.
"""

from __future__ import annotations

import json
import math

import triton  # the probe runs with TRITON_INTERPRET=1 set before it starts
import triton.language as tl
from triton.language.extra import libdevice

from tests.interp_fix_probe import install_unless_no_fix

N = 64


def main() -> None:
    install_unless_no_fix()
    import numpy as np
    import torch

    @triton.jit
    def unary(x_ptr, out_ptr, N: tl.constexpr):
        i = tl.arange(0, N)
        x = tl.load(x_ptr + i)
        tl.store(out_ptr + 0 * N + i, libdevice.erf(x))
        tl.store(out_ptr + 1 * N + i, libdevice.tanh(x))
        tl.store(out_ptr + 2 * N + i, libdevice.pow(tl.abs(x), 1.5))  # a block and a constant
        tl.store(out_ptr + 3 * N + i, libdevice.fma(x, x, 2.0))
        tl.store(out_ptr + 4 * N + i, libdevice.atan2(x, tl.load(x_ptr)))  # a block and a scalar
        tl.store(out_ptr + 5 * N + i, libdevice.isnan(x / x).to(tl.float32))  # NaN at 0/0
        tl.store(out_ptr + 6 * N + i, libdevice.exp(x).to(tl.float16).to(tl.float32))
        tl.store(out_ptr + 7 * N + i, libdevice.fast_tanhf(x))  # the GPU's tanh.approx: 2^-11 relative

    @triton.jit
    def half(x_ptr, out_ptr, N: tl.constexpr):
        i = tl.arange(0, N)
        tl.store(out_ptr + i, libdevice.erf(tl.load(x_ptr + i).to(tl.float16)).to(tl.float32))

    @triton.jit
    def bits(x_ptr, out_ptr, N: tl.constexpr):
        i = tl.arange(0, N)
        tl.store(out_ptr + i, libdevice.popc(tl.load(x_ptr + i).to(tl.int32)).to(tl.float32))

    torch.manual_seed(0)
    x = torch.randn(N)
    x[3] = 0.0
    out = torch.zeros(8 * N)
    result: dict[str, object] = {}
    try:
        unary[(1,)](x, out, N=N)
    except Exception as e:  # without the fix the stubs return None
        result["error"] = str(e)[:300]
    else:
        v = x.double().numpy()
        want = {
            "erf": np.array([math.erf(t) for t in v]), "tanh": np.tanh(v), "pow": np.abs(v) ** 1.5,
            "fma": v * v + 2.0, "atan2": np.arctan2(v, v[0]),
            "isnan": np.where(v == 0.0, 1.0, 0.0), "exp": np.exp(v).astype(np.float16).astype(np.float64),
        }
        got = out.double().numpy().reshape(8, N)
        for k, (name, w) in enumerate(want.items()):
            result[name] = float(np.max(np.abs(got[k] - w)) / max(1.0, float(np.max(np.abs(w)))))
        exact, nonzero = np.tanh(v), v != 0.0
        result["fast_tanhf_relative"] = float(np.max(np.abs(got[7] - exact)[nonzero] / np.abs(exact[nonzero])))
    for name, kernel in (("float16", half), ("popc", bits)):
        try:
            kernel[(1,)](x, torch.zeros(N), N=N)
            result[name] = "no error"
        except Exception as e:
            result[name] = str(e)[:300]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
