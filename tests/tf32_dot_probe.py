"""Runs ``tl.dot`` of two float32 blocks in the interpreter at its default precision (TF32 on a GPU)
and with ``input_precision="ieee"``, with the project's interpreter fixes installed as the interpreter
worker installs them, or without (``--no-fix``). Prints one JSON line: each result's largest error
against float64 torch, relative to the largest product sum, and against the same product of operands
truncated to TF32; and a dot of two bfloat16 blocks against float64 (bf16_vs_exact). Run as
``TRITON_INTERPRET=1 python -m tests.tf32_dot_probe [--no-fix]``.
"""

from __future__ import annotations

import json

from tests.interp_fix_probe import install_unless_no_fix

N = 32


def main() -> None:
    install_unless_no_fix()
    import torch
    import triton
    import triton.language as tl

    from fitness.sandbox.interp_compat import tf32_truncate

    @triton.jit
    def kernel(a_ptr, b_ptr, c_ptr, d_ptr, N: tl.constexpr):
        i = tl.arange(0, N)
        a = tl.load(a_ptr + i[:, None] * N + i[None, :])
        b = tl.load(b_ptr + i[:, None] * N + i[None, :])
        tl.store(c_ptr + i[:, None] * N + i[None, :], tl.dot(a, b))
        tl.store(d_ptr + i[:, None] * N + i[None, :], tl.dot(a, b, input_precision="ieee"))

    @triton.jit
    def bf16_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
        i = tl.arange(0, N)
        a = tl.load(a_ptr + i[:, None] * N + i[None, :])
        b = tl.load(b_ptr + i[:, None] * N + i[None, :])
        tl.store(c_ptr + i[:, None] * N + i[None, :], tl.dot(a, b))

    torch.manual_seed(0)
    a, b = torch.randn(N, N), torch.randn(N, N)
    c, d = torch.zeros(N, N), torch.zeros(N, N)
    kernel[(1,)](a, b, c, d, N=N)
    exact = a.double() @ b.double()
    ta = torch.from_numpy(tf32_truncate(a.numpy())).double()
    tb = torch.from_numpy(tf32_truncate(b.numpy())).double()
    scale = float(exact.abs().max())

    def err(x: torch.Tensor, want: torch.Tensor) -> float:
        return float((x.double() - want).abs().max()) / scale

    ha, hb, hc = a.to(torch.bfloat16), b.to(torch.bfloat16), torch.zeros(N, N)
    bf16_kernel[(1,)](ha, hb, hc, N=N)
    bf16_exact = ha.double() @ hb.double()  # the products of bfloat16 values are exact in float32
    print(json.dumps({"default_vs_exact": err(c, exact), "default_vs_tf32": err(c, ta @ tb),
                      "ieee_vs_exact": err(d, exact), "bf16_vs_exact": err(hc, bf16_exact)}))


if __name__ == "__main__":
    main()
