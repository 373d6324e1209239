# kernelbench problem: 083797ef81ebc4d6
"""Mean squared error of two tensors to a 0-d result: a single program walks both in BLOCK-wide chunks
(float32 partial sums per lane), then divides by the count."""

import triton
import triton.language as tl


@triton.jit
def _mse(p_ptr, t_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        d = tl.load(p_ptr + offs, mask=m, other=0.0) - tl.load(t_ptr + offs, mask=m, other=0.0)
        acc += d * d
    tl.store(out_ptr, tl.sum(acc, 0) / n)


PARAMS = {"BLOCK": 256}
SPACE = {"BLOCK": [256, 512, 1024, 2048, 4096]}


def launch(predictions, targets, out, *, BLOCK):
    _mse[(1,)](predictions, targets, out, predictions.numel(), BLOCK=BLOCK)
