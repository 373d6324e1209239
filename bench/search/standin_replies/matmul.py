"""Hand-written STAND-IN answers for the matmul seed and its descendants (not a language model's): whole
modules and SEARCH/REPLACE edits, good and bad, the mix of outcomes a model gives. Good: tensor-core
sized tiles with the output tiles visited in groups of rows, so that the programs running at once
share their A and B tiles in L2 (Triton's tutorial's swizzle), at 128 x 256 x 64 (at 4096^3 the
interpreter verifies those in full within the default 900 s, which smaller tiles exceed); bigger
tiles and a deeper pipeline as a params edit. Wrong: the accumulator kept in float16, the loads
along K left unmasked ("K is a multiple of the block"), a grouping that takes every group of tile
rows as full (tiles never written where the last group is short and there is more than one column
of tiles: right at every check size and at 4096, caught by the verification's size between them when
the drawn size has both), an edit that does not apply, a reply with no code."""

_GROUPED = '''import triton
import triton.language as tl


@triton.jit
def _matmul_grouped(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows
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
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


PARAMS = {"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 4}
SPACE = {
    "BM": [64, 128, 256],
    "BN": [64, 128, 256],
    "BK": [32, 64, 128],
    "GROUP_M": [4, 8, 16],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4, 5],
}


def launch(a, b, c, *, BM, BN, BK, GROUP_M, num_warps, num_stages):
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    _matmul_grouped[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                          c.stride(0), c.stride(1), BM=BM, BN=BN, BK=BK, GROUP_M=GROUP_M, num_warps=num_warps,
                          num_stages=num_stages)
'''

GROUPED = ("16 x 16 x 16 tiles with one warp cannot feed the tensor cores, and the row-major order of the "
           "tiles makes every wave of programs read all of B from DRAM. Use 128 x 256 x 64 tiles with 8 warps "
           "and a 4-stage pipeline, and visit the output tiles in groups of GROUP_M rows: the programs running "
           "at once then share their A rows and B columns in L2.\n```python\n" + _GROUPED + "```")
FP16_ACCUMULATOR = ("Grouped 128 x 256 tiles; accumulate in float16, which halves the accumulator's registers "
                    "and lets a deeper pipeline fit.\n```python\n"
                    + _GROUPED.replace("acc = tl.zeros((BM, BN), dtype=tl.float32)",
                                       "acc = tl.zeros((BM, BN), dtype=tl.float16)")
                    .replace("acc += tl.dot(a, b)", "acc += tl.dot(a, b, out_dtype=tl.float16)") + "```")
K_UNMASKED = ("Grouped 128 x 256 tiles; K is a multiple of the block in every real layer, so the loads along K "
              "need no mask.\n```python\n"
              + _GROUPED.replace("mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)",
                                 "mask=rm[:, None] < M, other=0.0)")
              .replace("mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)",
                       "mask=rn[None, :] < N, other=0.0)") + "```")
GROUP_COUNT = ("Grouped 128 x 256 tiles, so that programs running at once share A and B in L2.\n```python\n"
               + _GROUPED.replace("    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)\n",
                                  "    group_rows = GROUP_M\n") + "```")
BIGGER_TILES = '''The tiles are far too small for tensor cores; 128 x 128 x 64 with 8 warps and 3 stages.
<<<<<<< SEARCH
PARAMS = {"BM": 16, "BN": 16, "BK": 16, "num_warps": 1, "num_stages": 1}
=======
PARAMS = {"BM": 128, "BN": 128, "BK": 64, "num_warps": 8, "num_stages": 3}
>>>>>>> REPLACE'''
NO_CODE = "A 4096^3 matmul is compute-bound; cuBLAS is the right tool and no Triton change will beat it."
WRONG_EDIT = '''Convert the accumulator once, outside the store.
<<<<<<< SEARCH
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
=======
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16), mask=(rm[:, None] < M))
>>>>>>> REPLACE'''
REPLIES: tuple[tuple[int, str], ...] = (  # (weight, reply)
    (3, GROUPED), (1, BIGGER_TILES), (1, FP16_ACCUMULATOR), (1, K_UNMASKED), (1, GROUP_COUNT), (1, NO_CODE),
    (1, WRONG_EDIT),
)
