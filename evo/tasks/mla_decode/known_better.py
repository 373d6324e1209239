"""MLA decode with head blocking and a split cache (flash-decoding), in two kernels.

Stage 1, one program per (sequence, block of BLOCK_H heads, split): all heads attend over the same
latent cache, so a block of heads loads each cache tile once and turns the per-head dot products
into tensor-core matmuls ((BLOCK_H x 576) by (576 x BN) for the scores, (BLOCK_H x BN) by
(BN x 512) for the output). The valid cache of each sequence is cut into NUM_SPLITS chunks
handled by different programs, so a few long sequences still fill the GPU; each writes its
partial output (normalised by its own sum) and log-sum-exp in float32 scratch buffers.
Stage 2, one program per (sequence, head): the partials are merged with weights
exp(lse_i - max lse). Exponentials are base 2, with log2(e) folded into the scale.
"""

import math

import torch
import triton
import triton.language as tl

# 1/sqrt(qk_nope_head_dim + qk_rope_head_dim) times the YaRN mscale^2 of DeepSeek-V3
SOFTMAX_SCALE = 192**-0.5 * (0.1 * math.log(40.0) + 1.0) ** 2
LOG2E = 1.4426950408889634


@triton.jit
def _mla_split(q_ptr, qr_ptr, kv_ptr, kr_ptr, len_ptr, po_ptr, plse_ptr, heads, cache_len, qk_scale,
               D: tl.constexpr, DR: tl.constexpr, BLOCK_H: tl.constexpr, BN: tl.constexpr,
               NUM_SPLITS: tl.constexpr):
    # head blocks vary fastest: the blocks that share a cache chunk run together and meet in L2
    hb = tl.program_id(0)
    split = tl.program_id(1)
    b = tl.program_id(2)
    h = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = h < heads
    d = tl.arange(0, D)
    dr = tl.arange(0, DR)
    q = tl.load(q_ptr + (b * heads + h[:, None]) * D + d[None, :], mask=h_ok[:, None], other=0.0)
    qr = tl.load(qr_ptr + (b * heads + h[:, None]) * DR + dr[None, :], mask=h_ok[:, None], other=0.0)
    n = tl.load(len_ptr + b)
    chunk = tl.cdiv(tl.cdiv(n, NUM_SPLITS), BN) * BN  # a multiple of BN: only the last tile is ragged
    lo = split * chunk
    hi = tl.minimum(lo + chunk, n)
    m_i = tl.full((BLOCK_H,), -float("inf"), tl.float32)
    l_i = tl.zeros((BLOCK_H,), tl.float32)
    acc = tl.zeros((BLOCK_H, D), tl.float32)
    for start in range(lo, hi, BN):
        t = start + tl.arange(0, BN)
        valid = t < hi
        kv = tl.load(kv_ptr + (b * cache_len + t[:, None]) * D + d[None, :], mask=valid[:, None], other=0.0)
        kr = tl.load(kr_ptr + (b * cache_len + t[:, None]) * DR + dr[None, :], mask=valid[:, None], other=0.0)
        s = (tl.dot(q, tl.trans(kv)) + tl.dot(qr, tl.trans(kr))) * qk_scale
        s = tl.where(valid[None, :], s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(kv.dtype), kv)
        m_i = m_new
    # an empty split (a sequence shorter than NUM_SPLITS tiles) leaves l_i = 0: weight 0 in stage 2
    part = tl.where(l_i[:, None] > 0, acc / l_i[:, None], 0.0)
    lse = tl.where(l_i > 0, m_i + tl.math.log2(l_i), -float("inf"))
    row = (b * heads + h) * NUM_SPLITS + split
    tl.store(po_ptr + row[:, None] * D + d[None, :], part, mask=h_ok[:, None])
    tl.store(plse_ptr + row, lse, mask=h_ok)


@triton.jit
def _mla_combine(po_ptr, plse_ptr, o_ptr, heads, D: tl.constexpr, NUM_SPLITS: tl.constexpr,
                 SPLITS_P2: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    sp = tl.arange(0, SPLITS_P2)
    sp_ok = sp < NUM_SPLITS
    d = tl.arange(0, D)
    row = (b * heads + h) * NUM_SPLITS + sp
    lse = tl.load(plse_ptr + row, mask=sp_ok, other=-float("inf"))
    w = tl.math.exp2(lse - tl.max(lse, axis=0))  # split 0 is never empty: the max is finite
    part = tl.load(po_ptr + row[:, None] * D + d[None, :], mask=sp_ok[:, None], other=0.0)
    out = tl.sum(w[:, None] * part, axis=0) / tl.sum(w, axis=0)
    tl.store(o_ptr + (b * heads + h) * D + d, out.to(o_ptr.dtype.element_ty))


PARAMS = {"BLOCK_H": 16, "BN": 32, "NUM_SPLITS": 4, "num_warps": 4, "num_stages": 2}
SPACE = {
    "BLOCK_H": [16, 32, 64],
    "BN": [16, 32, 64],
    "NUM_SPLITS": [1, 2, 4, 8, 16],
    "num_warps": [2, 4, 8],
    "num_stages": [1, 2, 3],
}


def launch(q_latent, q_rope, kv_latent, k_rope, lengths, out, *, BLOCK_H, BN, NUM_SPLITS, num_warps, num_stages):
    batch, heads, d = q_latent.shape
    cache_len = kv_latent.shape[1]
    part_out = torch.empty((batch, heads, NUM_SPLITS, d), dtype=torch.float32, device=q_latent.device)
    part_lse = torch.empty((batch, heads, NUM_SPLITS), dtype=torch.float32, device=q_latent.device)
    grid = (triton.cdiv(heads, BLOCK_H), NUM_SPLITS, batch)
    _mla_split[grid](q_latent, q_rope, kv_latent, k_rope, lengths, part_out, part_lse, heads, cache_len,
                     SOFTMAX_SCALE * LOG2E, D=d, DR=q_rope.shape[2], BLOCK_H=BLOCK_H, BN=BN,
                     NUM_SPLITS=NUM_SPLITS, num_warps=num_warps, num_stages=num_stages)
    _mla_combine[(batch, heads)](part_out, part_lse, out, heads, D=d, NUM_SPLITS=NUM_SPLITS,
                                 SPLITS_P2=triton.next_power_of_2(NUM_SPLITS), num_warps=4)
