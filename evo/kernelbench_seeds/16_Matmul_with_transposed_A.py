# kernelbench problem: f44b1b5305f84bae
"""C = A.T @ B, A given as (K, M): its element (m, k) is read at k * M + m: (M/BM, N/BN) programs of tl.dot tiles, float32 accumulation in full float32 precision
(input_precision="ieee": TF32 would cut the operands to 10 mantissa bits)."""

import triton
import triton.language as tl


@triton.jit
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak, mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn, mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


PARAMS = {"BM": 32, "BN": 32, "BK": 32}
SPACE = {"BM": [16, 32, 64, 128], "BN": [16, 32, 64, 128], "BK": [16, 32, 64]}


def launch(a, b, c, *, BM, BN, BK):
    K, M = a.shape
    N = b.shape[1]
    _mm[(triton.cdiv(M, BM), triton.cdiv(N, BN))](a, b, c, M, N, K, 1, M, N, 1, BM=BM, BN=BN, BK=BK)
