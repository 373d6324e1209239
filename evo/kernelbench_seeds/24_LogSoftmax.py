# kernelbench problem: 200902e0cebe872b
"""LogSoftmax over dim 1 of a (batch, dim) tensor: one program per row, three passes over it in BLOCK-wide
chunks (the max, the sum of exp(x - max), then x - max - log(sum))."""

import triton
import triton.language as tl


@triton.jit
def _log_softmax(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = -float("inf")
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.max(tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=-float("inf")), 0))
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=-float("inf"))
        s += tl.sum(tl.exp(x - m), 0)
    log_s = tl.log(s)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=0.0)
        tl.store(y_ptr + row * n_cols + offs, x - m - log_s, mask=offs < n_cols)


PARAMS = {"BLOCK": 256}
SPACE = {"BLOCK": [64, 128, 256, 512, 1024, 2048, 4096]}


def launch(x, y, *, BLOCK):
    _log_softmax[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK)
