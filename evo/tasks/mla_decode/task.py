"""Multi-head latent attention (MLA) decode, DeepSeek-V2/V3 form with absorbed weights.

One decode step: every batch element (a sequence being generated) has one new query token, and
its heads attend over that sequence's cache of compressed keys/values. Shapes follow the
DeepSeek-V3 config (``config.json`` of deepseek-ai/DeepSeek-V3): 128 attention heads,
``qk_nope_head_dim`` 128, ``qk_rope_head_dim`` 64, ``v_head_dim`` 128, ``kv_lora_rank`` 512.

What the cache holds (DeepSeek's ``inference/model.py``, ``attn_impl = "absorb"``): per token, the
latent ``c_kv`` (512 values, after ``kv_norm``) shared by all heads, and the RoPE part of the key
``k_pe`` (64 values, rotated, also shared by all heads). A head's key is ``[W_UK c_kv ; k_pe]``
and its value ``W_UV c_kv``; absorbing ``W_UK`` into the query (``q_latent = W_UK^T q_nope``, 128 ->
512 per head) and leaving ``W_UV`` for after the attention turns every head into attention
directly over the shared latent cache:

    scores[b, h, t] = (q_latent[b, h] . c_kv[b, t] + q_rope[b, h] . k_pe[b, t]) * SOFTMAX_SCALE
    out[b, h]       = softmax_t(scores[b, h, :lengths[b]]) @ c_kv[b, :lengths[b]]

Inputs (float16 unless noted):
    q_latent  (batch, heads, 512)      the absorbed no-RoPE query
    q_rope    (batch, heads, 64)       the RoPE part of the query (already rotated)
    kv_latent (batch, cache_len, 512)  the latent cache ``c_kv``
    k_rope    (batch, cache_len, 64)   the RoPE key cache ``k_pe``
    lengths   (batch,) int32           valid cache entries per sequence, 1 <= lengths[b] <= cache_len
Output: (batch, heads, 512), in the latent space; the up-projection ``W_UV`` (512 -> v_head_dim
128 per head) and the output projection stay outside the kernel, as in DeepSeek's code and FlashMLA.
Cache rows at or past ``lengths[b]`` hold stale values (other tokens' data): a kernel must not
attend to them. The cache is contiguous per sequence (no paging: a block table would add an
indirection, not a different computation).

Softmax scale: ``1/sqrt(qk_nope_head_dim + qk_rope_head_dim) = 1/sqrt(192)``, times the YaRN
factor ``mscale^2`` with ``mscale = 0.1 * 1.0 * ln(40) + 1`` (DeepSeek-V3 extends its 4K context
with YaRN, ``rope_factor`` 40, ``mscale`` 1.0). DeepSeek's inference code applies the factor
whenever ``max_seq_len`` exceeds the original 4096, which its defaults and every long-context
deployment (vLLM, SGLang via ``mscale_all_dim``) do, so it is applied here: 0.0722 * 1.874 = 0.1352.
The scale is a constant of the model, not an input: candidates hard-code it, as deployed kernels
receive it from the model.

Sizes: the latent widths are fixed at the model's 512 and 64 (the Triton interpreter handles
them in seconds); ``batch``, ``heads`` and ``cache_len`` vary. ``lengths`` are drawn uniformly from
[1, cache_len], except that the first sequence fills the cache and (when batch > 1) the last has
length 1, so every draw exercises a full cache, a single token and lengths that are multiples of
no block size. Check sizes use few heads and short caches; bench sizes are DeepSeek-V3 serving
shapes: all 128 heads on one GPU (data-parallel attention) with 64 sequences of up to 8K tokens,
16 heads per GPU (tensor parallelism over 8) with 128 sequences, and 16 long sequences of up to
32K tokens, where splitting the cache across programs matters most.

FLOPs: per attended (b, h, t), a 512 + 64 long dot product for the score and a 512-wide
multiply-add for the output: ``2 * (512 + 64 + 512) = 2176`` FLOPs, times ``heads`` times the
expected number of attended tokens, ``sum(lengths)`` (``batch * (cache_len + 1) / 2`` for
batch > 1 under the draw above, ``cache_len`` for batch 1). The softmax's exp/max/sum is left out.
Bytes: the least traffic any kernel needs: read the valid part of the cache once (it is shared by
all heads), ``sum(lengths) * (512 + 64) * itemsize``, plus the queries
``batch * heads * 576 * itemsize``, the output ``batch * heads * 512 * itemsize`` and the lengths
(4 bytes each). The cache term dominates; a kernel that reloads the cache for every head moves
``heads`` times as much.

bfloat16 (what DeepSeek-V3 serves in) is not offered: the Triton interpreter's ``tl.dot`` returns
wrong values for bfloat16, so a bfloat16 task could not be checked on a machine without a GPU.
"""

import math

import numpy as np

KV_LORA_RANK = 512  # width of the latent cache c_kv
ROPE_DIM = 64  # qk_rope_head_dim
QK_HEAD_DIM = 128 + 64  # qk_nope_head_dim + qk_rope_head_dim: the dimension the scale is based on
YARN_MSCALE = 0.1 * 1.0 * math.log(40.0) + 1.0
SOFTMAX_SCALE = QK_HEAD_DIM**-0.5 * YARN_MSCALE**2

DTYPES = ("float16",)
CHECK_SIZES = [
    {"batch": 1, "heads": 1, "cache_len": 1},
    {"batch": 3, "heads": 2, "cache_len": 37},
    {"batch": 4, "heads": 3, "cache_len": 100},
    {"batch": 2, "heads": 17, "cache_len": 53},
]
BENCH_SIZES = [
    {"batch": 64, "heads": 128, "cache_len": 8192},
    {"batch": 128, "heads": 16, "cache_len": 8192},
    {"batch": 16, "heads": 128, "cache_len": 32768},
]
DISTS = ("normal", "peaked")
# a split-cache kernel (flash-decoding) merges per-split partials and takes a split whose exponential sum
# is not positive for an empty one; a NaN sum is not positive either, so the NaN is dropped where the
# float64 reference propagates it: which of the two a deployment wants is a convention, not this task's
DIST_OPT_OUT = {"inf_nan": "flash-decoding kernels take a split whose sum is not positive (NaN included) for an "
                           "empty one and drop it, where the float64 reference propagates the NaN"}


def draw_lengths(batch, cache_len, rng):
    lengths = rng.integers(1, cache_len + 1, size=batch)
    lengths[0] = cache_len
    if batch > 1:
        lengths[-1] = 1
    return lengths.astype(np.int32)


def inputs(size, dtype, rng, dist):
    batch, heads, cache_len = size["batch"], size["heads"], size["cache_len"]
    q_latent = rng.standard_normal((batch, heads, KV_LORA_RANK))
    q_rope = rng.standard_normal((batch, heads, ROPE_DIM))
    if dist == "peaked":  # scores with a spread of ~13: near one-hot rows, the max subtraction matters
        q_latent, q_rope = q_latent * 4.0, q_rope * 4.0
    kv_latent = rng.standard_normal((batch, cache_len, KV_LORA_RANK))  # after kv_norm: unit scale
    k_rope = rng.standard_normal((batch, cache_len, ROPE_DIM))
    return [q_latent, q_rope, kv_latent, k_rope, draw_lengths(batch, cache_len, rng)]


def reference(q_latent, q_rope, kv_latent, k_rope, lengths):
    batch, heads, _ = q_latent.shape
    out = np.zeros((batch, heads, KV_LORA_RANK))
    for b in range(batch):
        n = lengths[b]
        c_kv, k_pe = kv_latent[b, :n], k_rope[b, :n]  # (n, 512), (n, 64)
        scores = (q_latent[b] @ c_kv.T + q_rope[b] @ k_pe.T) * SOFTMAX_SCALE  # (heads, n)
        p = np.exp(scores - scores.max(axis=-1, keepdims=True))
        p = p / p.sum(axis=-1, keepdims=True)
        out[b] = p @ c_kv
    return out


def torch_reference(q_latent, q_rope, kv_latent, k_rope, lengths):
    import torch

    work = torch.promote_types(q_latent.dtype, torch.float32)  # fp16 scores would be too coarse
    c_kv = kv_latent.to(work)
    scores = torch.einsum("bhc,btc->bht", q_latent.to(work), c_kv)
    scores += torch.einsum("bhr,btr->bht", q_rope.to(work), k_rope.to(work))
    stale = torch.arange(kv_latent.shape[1], device=lengths.device)[None, :] >= lengths[:, None]
    scores = scores.masked_fill(stale[:, None, :], -float("inf")) * SOFTMAX_SCALE
    p = torch.softmax(scores, dim=-1)
    return torch.einsum("bht,btc->bhc", p, c_kv).to(q_latent.dtype)


def expected_tokens(size):
    """The expected sum(lengths) under `draw_lengths`."""
    if size["batch"] == 1:
        return float(size["cache_len"])
    return size["batch"] * (size["cache_len"] + 1) / 2.0


def flops(size):
    return 2.0 * (2 * KV_LORA_RANK + ROPE_DIM) * size["heads"] * expected_tokens(size)


def bytes_moved(size, itemsize):
    batch, heads = size["batch"], size["heads"]
    cache = expected_tokens(size) * (KV_LORA_RANK + ROPE_DIM) * itemsize
    queries = batch * heads * (KV_LORA_RANK + ROPE_DIM) * itemsize
    out = batch * heads * KV_LORA_RANK * itemsize
    return cache + queries + out + 4.0 * batch
