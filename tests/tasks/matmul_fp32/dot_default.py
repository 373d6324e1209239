"""A float32 matmul with tl.dot at its default precision: TF32 on a GPU, about 1e-3 off; right in an
interpreter that multiplies in full float32. (The test makes its IEEE twin by adding
input_precision="ieee" to the dot.)"""

import triton
import triton.language as tl


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn, mask=(kk[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


PARAMS = {"BM": 32, "BN": 32, "BK": 32, "num_warps": 4}


def launch(a, b, c, *, BM, BN, BK, num_warps):
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    _matmul[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                  BM=BM, BN=BN, BK=BK, num_warps=num_warps)
