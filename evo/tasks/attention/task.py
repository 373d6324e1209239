"""Attention forward (non-causal): O = softmax(Q K^T / sqrt(d)) V, per batch and head.

q, k, v and the output have shape (batch, heads, seq, head_dim), in float16; a kernel is expected
to keep the softmax statistics (row maximum and sum) and the accumulator in float32, as
FlashAttention does. The scale is the usual 1/sqrt(head_dim). The causal variant (each query sees
only keys at its own position or before) is the separate task ``attention_causal``: causality
changes the kernel's structure (which key blocks a query block visits), so each task has its own
seed, and a search for one cannot drift into the other.

Check sizes are small enough for the Triton interpreter, with sequence lengths that are multiples
of no block size (1, primes, 100) and head_dim 1, 64 and 128. Bench sizes are prefill shapes of
real models: Llama-3-8B (32 heads of 128, 4096 tokens) and GPT-2 small (12 heads of 64, 1024
tokens).

FLOPs: two matmuls of (seq x head_dim) by (head_dim x seq) size per (batch, head), 2 FLOPs per
multiply-add each: ``4 * batch * heads * seq^2 * head_dim`` (the softmax's O(seq^2) exp/max/sum
work is left out, as FlashAttention's papers do).
Bytes: the least traffic any kernel needs: read q, k, v and write o once each,
``4 * batch * heads * seq * head_dim * itemsize``.

bfloat16 is not offered: the Triton interpreter's ``tl.dot`` returns wrong values for bfloat16,
so a bfloat16 task could not be checked on a machine without a GPU.
"""

import numpy as np

DTYPES = ("float16",)
CHECK_SIZES = [
    {"batch": 1, "heads": 1, "seq": 1, "head_dim": 1},
    {"batch": 1, "heads": 2, "seq": 37, "head_dim": 64},
    {"batch": 2, "heads": 1, "seq": 100, "head_dim": 128},
    {"batch": 1, "heads": 1, "seq": 131, "head_dim": 64},
]
BENCH_SIZES = [
    {"batch": 4, "heads": 32, "seq": 4096, "head_dim": 128},
    {"batch": 16, "heads": 12, "seq": 1024, "head_dim": 64},
]
# the fitness is the geometric mean over both prefill shapes, equally weighted: a kernel tuned for the
# long Llama-3-8B prefill alone may be poor at the short, narrow-head GPT-2 one (`Task.fitness_sizes`)
BENCH_WEIGHTS = [1.0, 1.0]
DISTS = ("normal", "wide")
# P is rounded to float16 for the P V matmul (as FlashAttention does): each probability is off by
# up to 2^-11 relative, which puts output elements near zero a few 1e-4 x rms(o) off; the default
# float16 atol (1e-3 x rms) leaves a careful kernel too little margin at 10^5 elements.
TOLERANCE = {"float16": {"atol": 2e-3, "rtol": 4e-3}}


def inputs(size, dtype, rng, dist):
    shape = (size["batch"], size["heads"], size["seq"], size["head_dim"])
    q, k, v = rng.standard_normal(shape), rng.standard_normal(shape), rng.standard_normal(shape)
    if dist == "wide":
        # peaked rows, and a key offset shared by all keys of a head: it shifts every score of a
        # row by the same large amount, which a softmax without the max subtraction overflows on
        q = q * 3.0
        k = k + rng.standard_normal((size["batch"], size["heads"], 1, size["head_dim"])) * 6.0
    return [q, k, v]


def reference(q, k, v):
    out = np.empty(q.shape)
    for b in range(q.shape[0]):  # one (seq, seq) score matrix at a time: bench sizes fit in memory
        for h in range(q.shape[1]):
            scores = q[b, h] @ k[b, h].T / np.sqrt(q.shape[-1])
            p = np.exp(scores - scores.max(axis=-1, keepdims=True))
            out[b, h] = (p / p.sum(axis=-1, keepdims=True)) @ v[b, h]
    return out


def torch_reference(q, k, v):
    import torch

    return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def flops(size):
    return 4.0 * size["batch"] * size["heads"] * size["seq"] ** 2 * size["head_dim"]


def bytes_moved(size, itemsize):
    return 4.0 * size["batch"] * size["heads"] * size["seq"] * size["head_dim"] * itemsize
