# kernelbench problem: 1d9357095026ecd7
"""Reverse cumulative sum (each element plus all after it) along dim 1 of a (batch, n) tensor: one program per row walks it in BLOCK-wide chunks from the last chunk to the first,
each chunk scanned with tl.cumsum and offset by the sum of the chunks before it."""

import triton
import triton.language as tl


@triton.jit
def _scan(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    carry = 0.0
    chunks = tl.cdiv(n, BLOCK)
    for c in range(0, chunks):
        start = (chunks - 1 - c) * BLOCK
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + row * n + offs, mask=m, other=0.0)
        tl.store(y_ptr + row * n + offs, tl.cumsum(x, 0, reverse=True) + carry, mask=m)
        carry += tl.sum(x, 0)


PARAMS = {"BLOCK": 64}
SPACE = {"BLOCK": [64, 128, 256, 512, 1024, 2048, 4096]}


def launch(x, y, *, BLOCK):
    _scan[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK)
