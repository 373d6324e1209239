"""Naive MLA decode: one program per (sequence, head), one loop over that sequence's cache.

Each program walks the valid part of the latent cache in blocks of BN tokens with an online
softmax, in float32 vector arithmetic (no tensor cores). Correct, and slow: every head reloads the
whole cache it shares with the other heads (128 times the necessary traffic for DeepSeek-V3), and
a long sequence is walked by a single program.
"""

import math

import triton
import triton.language as tl

# 1/sqrt(qk_nope_head_dim + qk_rope_head_dim) times the YaRN mscale^2 of DeepSeek-V3
SOFTMAX_SCALE = 192**-0.5 * (0.1 * math.log(40.0) + 1.0) ** 2


@triton.jit
def _mla_decode_per_head(q_ptr, qr_ptr, kv_ptr, kr_ptr, len_ptr, o_ptr, heads, cache_len, scale,
                         D: tl.constexpr, DR: tl.constexpr, BN: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    d = tl.arange(0, D)
    dr = tl.arange(0, DR)
    q = tl.load(q_ptr + (b * heads + h) * D + d).to(tl.float32)
    qr = tl.load(qr_ptr + (b * heads + h) * DR + dr).to(tl.float32)
    n = tl.load(len_ptr + b)
    m_i = -float("inf")
    l_i = 0.0
    acc = tl.zeros((D,), tl.float32)
    for start in range(0, n, BN):
        t = start + tl.arange(0, BN)
        valid = t < n
        kv = tl.load(kv_ptr + (b * cache_len + t[:, None]) * D + d[None, :], mask=valid[:, None],
                     other=0.0).to(tl.float32)
        kr = tl.load(kr_ptr + (b * cache_len + t[:, None]) * DR + dr[None, :], mask=valid[:, None],
                     other=0.0).to(tl.float32)
        s = (tl.sum(q[None, :] * kv, axis=1) + tl.sum(qr[None, :] * kr, axis=1)) * scale
        s = tl.where(valid, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * kv, axis=0)
        m_i = m_new
    tl.store(o_ptr + (b * heads + h) * D + d, (acc / l_i).to(o_ptr.dtype.element_ty))


PARAMS = {"BN": 16, "num_warps": 4}
SPACE = {"BN": [16, 32, 64, 128], "num_warps": [1, 2, 4, 8]}


def launch(q_latent, q_rope, kv_latent, k_rope, lengths, out, *, BN, num_warps):
    batch, heads, d = q_latent.shape
    cache_len = kv_latent.shape[1]
    _mla_decode_per_head[(batch, heads)](q_latent, q_rope, kv_latent, k_rope, lengths, out, heads, cache_len,
                                         SOFTMAX_SCALE, D=d, DR=q_rope.shape[2], BN=BN, num_warps=num_warps)
