"""Naive matmul: small 16x16x16 tiles, fp32 accumulator, no grouping, one warp."""

import triton
import triton.language as tl


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    c = acc.to(tl.float16)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, c, mask=(rm[:, None] < M) & (rn[None, :] < N))


PARAMS = {"BM": 16, "BN": 16, "BK": 16, "num_warps": 1, "num_stages": 1}
SPACE = {
    "BM": [16, 32, 64, 128, 256],
    "BN": [16, 32, 64, 128, 256],
    "BK": [16, 32, 64, 128],
    "num_warps": [1, 2, 4, 8],
    "num_stages": [1, 2, 3, 4, 5],
}


def launch(a, b, c, *, BM, BN, BK, num_warps, num_stages):
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    _matmul[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                  c.stride(0), c.stride(1), BM=BM, BN=BN, BK=BK, num_warps=num_warps, num_stages=num_stages)
