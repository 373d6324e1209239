# kernelbench problem: a3512b2d8704e7c6
"""C = A @ B for A (M, K) and B (K, 1): one program per BM rows walks K in BK-wide chunks, multiplying and
summing on the vector units (float32 throughout)."""

import triton
import triton.language as tl


@triton.jit
def _mv(a_ptr, b_ptr, c_ptr, M, K, BM: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    acc = tl.zeros((BM,), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk, mask=rk < K, other=0.0)
        acc += tl.sum(a * b[None, :], 1)
    tl.store(c_ptr + rm, acc, mask=rm < M)


PARAMS = {"BM": 4, "BK": 64, "num_warps": 1}
SPACE = {"BM": [1, 2, 4, 8, 16], "BK": [64, 128, 256, 512, 1024, 2048], "num_warps": [1, 2, 4, 8]}


def launch(a, b, c, *, BM, BK, num_warps):
    M, K = a.shape
    _mv[(triton.cdiv(M, BM),)](a, b, c, M, K, BM=BM, BK=BK, num_warps=num_warps)
