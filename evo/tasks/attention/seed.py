"""Naive attention: per query block, the scores are written out in full, then read back twice.

One program per (batch * head, block of BM queries). Pass 1 computes S = Q K^T * scale block by
block, stores it in a float32 scratch buffer and tracks the row maximum; pass 2 reads S back for the
row sums of exp; pass 3 reads it again, normalises and accumulates P V. Correct, and slow: the
scores make three round trips through memory, and the (batch * heads, seq, seq) scratch buffer is
as large as the attention matrix itself.
"""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _attention_materialized(q_ptr, k_ptr, v_ptr, o_ptr, s_ptr, seq, head_dim, scale,
                            IS_CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                            BLOCK_D: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh * seq * head_dim  # q, k, v, o are contiguous (batch, heads, seq, head_dim)
    s_base = bh.to(tl.int64) * seq * seq  # the scratch buffer passes 2^31 elements at bench sizes
    rows = start_m * BM + tl.arange(0, BM)
    dims = tl.arange(0, BLOCK_D)
    row_ok = rows < seq
    q = tl.load(q_ptr + base + rows[:, None] * head_dim + dims[None, :],
                mask=row_ok[:, None] & (dims[None, :] < head_dim), other=0.0)
    # pass 1: scores into the scratch buffer, and the row maximum
    m_i = tl.full((BM,), -float("inf"), tl.float32)
    for start_n in range(0, seq, BN):
        cols = start_n + tl.arange(0, BN)
        k = tl.load(k_ptr + base + cols[:, None] * head_dim + dims[None, :],
                    mask=(cols[:, None] < seq) & (dims[None, :] < head_dim), other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        visible = cols[None, :] < seq
        if IS_CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None])
        s = tl.where(visible, s, -float("inf"))
        tl.store(s_ptr + s_base + rows[:, None] * seq + cols[None, :], s,
                 mask=row_ok[:, None] & (cols[None, :] < seq))
        m_i = tl.maximum(m_i, tl.max(s, axis=1))
    # the passes below read scores other threads of this program stored: make them visible
    tl.debug_barrier()
    # pass 2: the row sums of exp(s - m_i)
    l_i = tl.zeros((BM,), tl.float32)
    for start_n in range(0, seq, BN):
        cols = start_n + tl.arange(0, BN)
        s = tl.load(s_ptr + s_base + rows[:, None] * seq + cols[None, :],
                    mask=row_ok[:, None] & (cols[None, :] < seq), other=-float("inf"))
        l_i += tl.sum(tl.exp(s - m_i[:, None]), axis=1)
    # pass 3: normalised probabilities times V
    acc = tl.zeros((BM, BLOCK_D), tl.float32)
    for start_n in range(0, seq, BN):
        cols = start_n + tl.arange(0, BN)
        s = tl.load(s_ptr + s_base + rows[:, None] * seq + cols[None, :],
                    mask=row_ok[:, None] & (cols[None, :] < seq), other=-float("inf"))
        p = tl.exp(s - m_i[:, None]) / l_i[:, None]
        v = tl.load(v_ptr + base + cols[:, None] * head_dim + dims[None, :],
                    mask=(cols[:, None] < seq) & (dims[None, :] < head_dim), other=0.0)
        acc += tl.dot(p.to(v.dtype), v)
    tl.store(o_ptr + base + rows[:, None] * head_dim + dims[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=row_ok[:, None] & (dims[None, :] < head_dim))


PARAMS = {"BM": 16, "BN": 16, "num_warps": 4}
SPACE = {"BM": [16, 32, 64, 128], "BN": [16, 32, 64, 128], "num_warps": [1, 2, 4, 8]}


def launch(q, k, v, o, *, BM, BN, num_warps):
    batch, heads, seq, head_dim = q.shape
    scores = torch.empty((batch * heads, seq, seq), dtype=torch.float32, device=q.device)
    block_d = max(16, triton.next_power_of_2(head_dim))
    grid = (triton.cdiv(seq, BM), batch * heads)
    _attention_materialized[grid](q, k, v, o, scores, seq, head_dim, 1.0 / math.sqrt(head_dim),
                                  IS_CAUSAL=False, BM=BM, BN=BN, BLOCK_D=block_d, num_warps=num_warps)
