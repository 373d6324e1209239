"""FlashAttention-style causal attention: one pass over K and V with an online softmax.

One program per (block of BM queries, batch * head). The running row maximum m_i, row sum l_i and the
output accumulator stay in float32 registers; each K/V block is read once, the scores never touch
memory. exp2 with log2(e) folded into the scale; P is cast to the input dtype for the second
matmul, as FlashAttention does. Key blocks that need no mask (fully inside the sequence and, when
causal, fully below the diagonal) run without one; blocks above the diagonal are skipped,
halving the work.
"""

import math

import triton
import triton.language as tl


@triton.jit
def _online_block(acc, m_i, l_i, q, k_ptr, v_ptr, base, rows, dims, lo, hi, seq, head_dim, qk_scale,
                  MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr, BN: tl.constexpr):
    for start_n in range(lo, hi, BN):
        cols = start_n + tl.arange(0, BN)
        kv_mask = dims[None, :] < head_dim
        if MASKED:
            kv_mask = kv_mask & (cols[:, None] < seq)
        k = tl.load(k_ptr + base + cols[:, None] * head_dim + dims[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale  # in log2 units
        if MASKED:
            visible = cols[None, :] < seq
            if IS_CAUSAL:
                visible = visible & (cols[None, :] <= rows[:, None])
            s = tl.where(visible, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + cols[:, None] * head_dim + dims[None, :], mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def _flash_attention(q_ptr, k_ptr, v_ptr, o_ptr, seq, head_dim, qk_scale,
                     IS_CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BLOCK_D: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh * seq * head_dim
    rows = start_m * BM + tl.arange(0, BM)
    dims = tl.arange(0, BLOCK_D)
    out_mask = (rows[:, None] < seq) & (dims[None, :] < head_dim)
    q = tl.load(q_ptr + base + rows[:, None] * head_dim + dims[None, :], mask=out_mask, other=0.0)
    m_i = tl.full((BM,), -float("inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, BLOCK_D), tl.float32)
    if IS_CAUSAL:
        # keys before this query block are visible to all its rows; the diagonal blocks need a mask
        full_end = (start_m * BM) // BN * BN
        hi = tl.minimum((start_m + 1) * BM, seq)
    else:
        full_end = seq // BN * BN
        hi = seq
    acc, m_i, l_i = _online_block(acc, m_i, l_i, q, k_ptr, v_ptr, base, rows, dims, 0, full_end, seq, head_dim,
                              qk_scale, MASKED=False, IS_CAUSAL=IS_CAUSAL, BN=BN)
    acc, m_i, l_i = _online_block(acc, m_i, l_i, q, k_ptr, v_ptr, base, rows, dims, full_end, hi, seq, head_dim,
                              qk_scale, MASKED=True, IS_CAUSAL=IS_CAUSAL, BN=BN)
    acc = acc / l_i[:, None]
    tl.store(o_ptr + base + rows[:, None] * head_dim + dims[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=out_mask)


PARAMS = {"BM": 64, "BN": 64, "num_warps": 4, "num_stages": 2}
SPACE = {"BM": [16, 32, 64, 128], "BN": [16, 32, 64, 128], "num_warps": [2, 4, 8], "num_stages": [1, 2, 3, 4]}


def launch(q, k, v, o, *, BM, BN, num_warps, num_stages):
    batch, heads, seq, head_dim = q.shape
    block_d = max(16, triton.next_power_of_2(head_dim))
    qk_scale = 1.4426950408889634 / math.sqrt(head_dim)  # log2(e) / sqrt(d): exp2 instead of exp
    grid = (triton.cdiv(seq, BM), batch * heads)
    _flash_attention[grid](q, k, v, o, seq, head_dim, qk_scale, IS_CAUSAL=True, BM=BM, BN=BN,
                           BLOCK_D=block_d, num_warps=num_warps, num_stages=num_stages)
