"""Hand-written STAND-IN answers for the MLA decode seed and its descendants (not a language model's):
whole modules and SEARCH/REPLACE edits, good and bad, the mix of outcomes a model gives (a block of heads
sharing each cache tile through tensor-core dots, alone or with the cache split across programs and a
log-sum-exp combine (flash-decoding's scheme); a PARAMS edit; an accumulator never rescaled, stale cache rows
attended, partials averaged without their weights, an edit that does not apply, a reply with no code)."""

_HEADER = '''import math

import torch
import triton
import triton.language as tl

SOFTMAX_SCALE = 192**-0.5 * (0.1 * math.log(40.0) + 1.0) ** 2

'''
_BLOCKED = '''
@triton.jit
def _mla_head_block(q_ptr, qr_ptr, kv_ptr, kr_ptr, len_ptr, o_ptr, heads, cache_len, scale,
                    D: tl.constexpr, DR: tl.constexpr, BLOCK_H: tl.constexpr, BN: tl.constexpr):
    hb = tl.program_id(0)
    b = tl.program_id(1)
    h = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = h < heads
    d = tl.arange(0, D)
    dr = tl.arange(0, DR)
    q = tl.load(q_ptr + (b * heads + h[:, None]) * D + d[None, :], mask=h_ok[:, None], other=0.0)
    qr = tl.load(qr_ptr + (b * heads + h[:, None]) * DR + dr[None, :], mask=h_ok[:, None], other=0.0)
    n = tl.load(len_ptr + b)
    m_i = tl.full((BLOCK_H,), -float("inf"), tl.float32)
    l_i = tl.zeros((BLOCK_H,), tl.float32)
    acc = tl.zeros((BLOCK_H, D), tl.float32)
    for start in range(0, n, BN):
        t = start + tl.arange(0, BN)
        valid = t < n
        kv = tl.load(kv_ptr + (b * cache_len + t[:, None]) * D + d[None, :], mask=valid[:, None], other=0.0)
        kr = tl.load(kr_ptr + (b * cache_len + t[:, None]) * DR + dr[None, :], mask=valid[:, None], other=0.0)
        s = (tl.dot(q, tl.trans(kv)) + tl.dot(qr, tl.trans(kr))) * scale
        s = tl.where(valid[None, :], s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(kv.dtype), kv)
        m_i = m_new
    tl.store(o_ptr + (b * heads + h[:, None]) * D + d[None, :], (acc / l_i[:, None]).to(o_ptr.dtype.element_ty),
             mask=h_ok[:, None])


PARAMS = {"BLOCK_H": 16, "BN": 32, "num_warps": 4}
SPACE = {"BLOCK_H": [16, 32, 64], "BN": [16, 32, 64], "num_warps": [2, 4, 8]}


def launch(q_latent, q_rope, kv_latent, k_rope, lengths, out, *, BLOCK_H, BN, num_warps):
    batch, heads, d = q_latent.shape
    cache_len = kv_latent.shape[1]
    grid = (triton.cdiv(heads, BLOCK_H), batch)
    _mla_head_block[grid](q_latent, q_rope, kv_latent, k_rope, lengths, out, heads, cache_len, SOFTMAX_SCALE,
                          D=d, DR=q_rope.shape[2], BLOCK_H=BLOCK_H, BN=BN, num_warps=num_warps)
'''
_BLOCKED_MODULE = _HEADER + _BLOCKED

HEAD_BLOCK = ("Every head of a sequence reads the same latent cache, and each program reloads all of it: 128 "
              "times the traffic. Give a program a block of heads instead, so each cache tile is loaded once per "
              "block, and the per-head dot products become tensor-core matmuls.\n```python\n"
              + _BLOCKED_MODULE + "```")
NO_RESCALE = ("Block the heads so each cache tile is loaded once for many heads; the running sum carries the "
              "normalisation, so the accumulator can be added to directly.\n```python\n"
              + _BLOCKED_MODULE.replace("acc = acc * alpha[:, None] + tl.dot", "acc = acc + tl.dot") + "```")
STALE_ROWS = ("Block the heads, and walk the whole cache: a fixed trip count is easier to pipeline than one "
              "that depends on the sequence's length.\n```python\n"
              + _BLOCKED_MODULE.replace("for start in range(0, n, BN)", "for start in range(0, cache_len, BN)")
              .replace("valid = t < n", "valid = t < cache_len") + "```")

_SPLIT = '''
@triton.jit
def _mla_split(q_ptr, qr_ptr, kv_ptr, kr_ptr, len_ptr, po_ptr, plse_ptr, heads, cache_len, scale,
               D: tl.constexpr, DR: tl.constexpr, BLOCK_H: tl.constexpr, BN: tl.constexpr,
               NUM_SPLITS: tl.constexpr):
    hb = tl.program_id(0)
    b = tl.program_id(1)
    split = tl.program_id(2)
    h = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = h < heads
    d = tl.arange(0, D)
    dr = tl.arange(0, DR)
    q = tl.load(q_ptr + (b * heads + h[:, None]) * D + d[None, :], mask=h_ok[:, None], other=0.0)
    qr = tl.load(qr_ptr + (b * heads + h[:, None]) * DR + dr[None, :], mask=h_ok[:, None], other=0.0)
    n = tl.load(len_ptr + b)
    chunk = tl.cdiv(tl.cdiv(n, NUM_SPLITS), BN) * BN
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
        s = (tl.dot(q, tl.trans(kv)) + tl.dot(qr, tl.trans(kr))) * scale
        s = tl.where(valid[None, :], s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(kv.dtype), kv)
        m_i = m_new
    # a split past the sequence's end is empty: weight 0 in the combine
    part = tl.where(l_i[:, None] > 0, acc / l_i[:, None], 0.0)
    lse = tl.where(l_i > 0, m_i + tl.log(l_i), -float("inf"))
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
    w = tl.exp(lse - tl.max(lse, axis=0))
    part = tl.load(po_ptr + row[:, None] * D + d[None, :], mask=sp_ok[:, None], other=0.0)
    out = tl.sum(w[:, None] * part, axis=0) / tl.sum(w, axis=0)
    tl.store(o_ptr + (b * heads + h) * D + d, out.to(o_ptr.dtype.element_ty))


PARAMS = {"BLOCK_H": 16, "BN": 32, "NUM_SPLITS": 4, "num_warps": 4}
SPACE = {"BLOCK_H": [16, 32, 64], "BN": [16, 32, 64], "NUM_SPLITS": [1, 2, 4, 8, 16], "num_warps": [2, 4, 8]}


def launch(q_latent, q_rope, kv_latent, k_rope, lengths, out, *, BLOCK_H, BN, NUM_SPLITS, num_warps):
    batch, heads, d = q_latent.shape
    cache_len = kv_latent.shape[1]
    part_out = torch.empty((batch, heads, NUM_SPLITS, d), dtype=torch.float32, device=q_latent.device)
    part_lse = torch.empty((batch, heads, NUM_SPLITS), dtype=torch.float32, device=q_latent.device)
    grid = (triton.cdiv(heads, BLOCK_H), batch, NUM_SPLITS)
    _mla_split[grid](q_latent, q_rope, kv_latent, k_rope, lengths, part_out, part_lse, heads, cache_len,
                     SOFTMAX_SCALE, D=d, DR=q_rope.shape[2], BLOCK_H=BLOCK_H, BN=BN, NUM_SPLITS=NUM_SPLITS,
                     num_warps=num_warps)
    _mla_combine[(batch, heads)](part_out, part_lse, out, heads, D=d, NUM_SPLITS=NUM_SPLITS,
                                 SPLITS_P2=triton.next_power_of_2(NUM_SPLITS), num_warps=4)
'''
_SPLIT_MODULE = _HEADER + _SPLIT

SPLIT_KV = ("Two problems: every head reloads the cache it shares with the other heads, and a long sequence is "
            "walked by one program. Give a program a block of heads (each cache tile loaded once per block, the dot "
            "products on tensor cores) and a slice of the cache: NUM_SPLITS programs per sequence, each with its own "
            "online softmax, their partial outputs merged by log-sum-exp in a second kernel (flash-decoding)."
            "\n```python\n"
            + _SPLIT_MODULE + "```")
UNWEIGHTED_COMBINE = ("Block the heads and split the cache across programs; each partial output is already "
                      "normalised, so the combine can average them.\n```python\n"
                      + _SPLIT_MODULE.replace("w = tl.exp(lse - tl.max(lse, axis=0))",
                                              "w = tl.where(lse > -float(\"inf\"), 1.0, 0.0)") + "```")

BIGGER_TILES = '''16 cache rows per iteration leave the loop overhead dominant; load 64 at a time with fewer warps.
<<<<<<< SEARCH
PARAMS = {"BN": 16, "num_warps": 4}
=======
PARAMS = {"BN": 64, "num_warps": 2}
>>>>>>> REPLACE'''
NO_CODE = ("MLA decode is bound by reading the latent cache; at one query token per sequence there is nothing "
           "for tensor cores to do, so the kernel is near its roofline as it stands.")
WRONG_EDIT = '''Precompute the scaled query once so the loop multiplies fewer values.
<<<<<<< SEARCH
    q_scaled = tl.load(q_ptr + b * D + d)
=======
    q_scaled = tl.load(q_ptr + b * D + d) * scale
>>>>>>> REPLACE'''
REPLIES: tuple[tuple[int, str], ...] = (  # (weight, reply)
    (2, HEAD_BLOCK), (2, SPLIT_KV), (2, NO_RESCALE), (1, STALE_ROWS), (1, UNWEIGHTED_COMBINE), (1, BIGGER_TILES),
    (1, NO_CODE), (1, WRONG_EDIT),
)
