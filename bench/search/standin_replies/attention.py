"""Hand-written STAND-IN answers for the attention seed and its descendants (not a language model's):
whole modules and SEARCH/REPLACE edits, good and bad, the mix of outcomes a model gives (the scores
kept out of memory with an online softmax, a two-pass version that recomputes them instead, the mask
skipped on interior blocks; an accumulator never rescaled when the row maximum grows, a softmax
without the max subtraction, an unmasked store, an edit that does not apply, a reply with no code)."""

HEADER = '''import math

import triton
import triton.language as tl

'''
LAUNCH = '''

PARAMS = {"BM": 64, "BN": 64, "num_warps": 4}
SPACE = {"BM": [16, 32, 64, 128], "BN": [16, 32, 64, 128], "num_warps": [2, 4, 8]}


def launch(q, k, v, o, *, BM, BN, num_warps):
    batch, heads, seq, head_dim = q.shape
    block_d = max(16, triton.next_power_of_2(head_dim))
    grid = (triton.cdiv(seq, BM), batch * heads)
    KERNEL[grid](q, k, v, o, seq, head_dim, 1.0 / math.sqrt(head_dim), BM=BM, BN=BN, BLOCK_D=block_d,
                 num_warps=num_warps)
'''
_ONLINE = '''
@triton.jit
def _attention_online(q_ptr, k_ptr, v_ptr, o_ptr, seq, head_dim, scale,
                      BM: tl.constexpr, BN: tl.constexpr, BLOCK_D: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh * seq * head_dim
    rows = start_m * BM + tl.arange(0, BM)
    dims = tl.arange(0, BLOCK_D)
    d_ok = dims[None, :] < head_dim
    q = tl.load(q_ptr + base + rows[:, None] * head_dim + dims[None, :], mask=(rows[:, None] < seq) & d_ok,
                other=0.0)
    m_i = tl.full((BM,), -float("inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, BLOCK_D), tl.float32)
    for start_n in range(0, seq, BN):
        cols = start_n + tl.arange(0, BN)
        kv_mask = (cols[:, None] < seq) & d_ok
        k = tl.load(k_ptr + base + cols[:, None] * head_dim + dims[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        s = tl.where(cols[None, :] < seq, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + cols[:, None] * head_dim + dims[None, :], mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(o_ptr + base + rows[:, None] * head_dim + dims[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=(rows[:, None] < seq) & d_ok)
'''
_ONLINE_MODULE = HEADER + _ONLINE + LAUNCH.replace("KERNEL", "_attention_online")

ONLINE_SOFTMAX = ("The scores make three round trips through a buffer as large as the attention matrix. Keep them "
                  "in registers instead: one pass over K and V with an online softmax (running max and sum, the "
                  "accumulator rescaled when the max grows), FlashAttention's scheme.\n```python\n"
                  + _ONLINE_MODULE + "```")
NO_RESCALE = ("One pass over K and V with a running max and sum; the accumulator needs no correction because the "
              "sum is rescaled.\n```python\n"
              + _ONLINE_MODULE.replace("acc = acc * alpha[:, None] + tl.dot", "acc = acc + tl.dot") + "```")
NO_MAX = ("Softmax is shift-invariant, so the running max is unnecessary: accumulate exp(s) and its row sum in "
          "one pass over K and V.\n```python\n"
          + _ONLINE_MODULE.replace("        m_new = tl.maximum(m_i, tl.max(s, axis=1))\n"
                                   "        alpha = tl.exp(m_i - m_new)\n"
                                   "        p = tl.exp(s - m_new[:, None])\n"
                                   "        l_i = l_i * alpha + tl.sum(p, axis=1)\n",
                                   "        p = tl.exp(s)\n"
                                   "        l_i = l_i + tl.sum(p, axis=1)\n")
          .replace("acc = acc * alpha[:, None] + tl.dot", "acc = acc + tl.dot")
          .replace("        m_i = m_new\n", "") + "```")
UNMASKED = ("The output rows past the sequence are never read, so the store needs no mask; keep the scores in "
            "registers with an online softmax.\n```python\n"
            + _ONLINE_MODULE.replace("acc.to(o_ptr.dtype.element_ty),\n             mask=(rows[:, None] < seq) & d_ok)",
                                     "acc.to(o_ptr.dtype.element_ty))") + "```")

_TWO_PASS = '''
@triton.jit
def _attention_two_pass(q_ptr, k_ptr, v_ptr, o_ptr, seq, head_dim, scale,
                        BM: tl.constexpr, BN: tl.constexpr, BLOCK_D: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh * seq * head_dim
    rows = start_m * BM + tl.arange(0, BM)
    dims = tl.arange(0, BLOCK_D)
    d_ok = dims[None, :] < head_dim
    q = tl.load(q_ptr + base + rows[:, None] * head_dim + dims[None, :], mask=(rows[:, None] < seq) & d_ok,
                other=0.0)
    # pass 1: the row max and the row sum of exp, online; the scores are recomputed, never stored
    m_i = tl.full((BM,), -float("inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    for start_n in range(0, seq, BN):
        cols = start_n + tl.arange(0, BN)
        k = tl.load(k_ptr + base + cols[:, None] * head_dim + dims[None, :], mask=(cols[:, None] < seq) & d_ok,
                    other=0.0)
        s = tl.where(cols[None, :] < seq, tl.dot(q, tl.trans(k)) * scale, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        l_i = l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(s - m_new[:, None]), axis=1)
        m_i = m_new
    # pass 2: the normalised probabilities times V
    acc = tl.zeros((BM, BLOCK_D), tl.float32)
    for start_n in range(0, seq, BN):
        cols = start_n + tl.arange(0, BN)
        kv_mask = (cols[:, None] < seq) & d_ok
        k = tl.load(k_ptr + base + cols[:, None] * head_dim + dims[None, :], mask=kv_mask, other=0.0)
        s = tl.where(cols[None, :] < seq, tl.dot(q, tl.trans(k)) * scale, -float("inf"))
        p = tl.exp(s - m_i[:, None]) / l_i[:, None]
        v = tl.load(v_ptr + base + cols[:, None] * head_dim + dims[None, :], mask=kv_mask, other=0.0)
        acc += tl.dot(p.to(v.dtype), v)
    tl.store(o_ptr + base + rows[:, None] * head_dim + dims[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=(rows[:, None] < seq) & d_ok)
'''
TWO_PASS = ("Drop the scratch buffer: compute the row statistics in a first pass over K, then recompute the scores "
            "in a second pass and accumulate P V. Twice the QK^T FLOPs, but no score traffic.\n```python\n"
            + HEADER + _TWO_PASS + LAUNCH.replace("KERNEL", "_attention_two_pass") + "```")

_INTERIOR = '''
@triton.jit
def _kv_blocks(acc, m_i, l_i, q, k_ptr, v_ptr, base, dims, lo, hi, seq, head_dim, qk_scale,
               MASKED: tl.constexpr, BN: tl.constexpr):
    for start_n in range(lo, hi, BN):
        cols = start_n + tl.arange(0, BN)
        kv_mask = dims[None, :] < head_dim
        if MASKED:
            kv_mask = kv_mask & (cols[:, None] < seq)
        k = tl.load(k_ptr + base + cols[:, None] * head_dim + dims[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        if MASKED:
            s = tl.where(cols[None, :] < seq, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + cols[:, None] * head_dim + dims[None, :], mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def _attention_online(q_ptr, k_ptr, v_ptr, o_ptr, seq, head_dim, scale,
                      BM: tl.constexpr, BN: tl.constexpr, BLOCK_D: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh * seq * head_dim
    rows = start_m * BM + tl.arange(0, BM)
    dims = tl.arange(0, BLOCK_D)
    out_mask = (rows[:, None] < seq) & (dims[None, :] < head_dim)
    q = tl.load(q_ptr + base + rows[:, None] * head_dim + dims[None, :], mask=out_mask, other=0.0)
    qk_scale = scale * 1.4426950408889634  # log2(e): exp2 instead of exp
    m_i = tl.full((BM,), -float("inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, BLOCK_D), tl.float32)
    full_end = seq // BN * BN
    acc, m_i, l_i = _kv_blocks(acc, m_i, l_i, q, k_ptr, v_ptr, base, dims, 0, full_end, seq, head_dim, qk_scale,
                               MASKED=False, BN=BN)
    acc, m_i, l_i = _kv_blocks(acc, m_i, l_i, q, k_ptr, v_ptr, base, dims, full_end, seq, seq, head_dim, qk_scale,
                               MASKED=True, BN=BN)
    acc = acc / l_i[:, None]
    tl.store(o_ptr + base + rows[:, None] * head_dim + dims[None, :], acc.to(o_ptr.dtype.element_ty), mask=out_mask)
'''
INTERIOR_UNMASKED = ("Online softmax, and only the last key block (the sequence's tail) needs a mask: run the full "
                     "blocks without one, and use exp2 with log2(e) folded into the scale.\n```python\n"
                     + HEADER + _INTERIOR + LAUNCH.replace("KERNEL", "_attention_online") + "```")

BIGGER_TILES = '''16 x 16 tiles are too small for tensor cores; use 64 x 64.
<<<<<<< SEARCH
PARAMS = {"BM": 16, "BN": 16, "num_warps": 4}
=======
PARAMS = {"BM": 64, "BN": 64, "num_warps": 4}
>>>>>>> REPLACE'''
NO_CODE = "Attention at these sizes is compute-bound on the two matmuls; the kernel is reasonable as it stands."
WRONG_EDIT = '''Fold the scale into Q once instead of scaling every score block.
<<<<<<< SEARCH
    q = tl.load(q_ptr + base + rows[:, None] * head_dim + dims[None, :]) * scale
=======
    q = (tl.load(q_ptr + base + rows[:, None] * head_dim + dims[None, :]) * scale).to(tl.float16)
>>>>>>> REPLACE'''
REPLIES: tuple[tuple[int, str], ...] = (  # (weight, reply)
    (2, ONLINE_SOFTMAX), (2, TWO_PASS), (1, INTERIOR_UNMASKED), (2, NO_RESCALE), (1, NO_MAX), (1, UNMASKED),
    (1, BIGGER_TILES), (1, NO_CODE), (1, WRONG_EDIT),
)
