# kernelbench problem: b1f89f3fe1512f79
"""RMS normalisation over dim 1 (features) of a (batch, features, d1, d2) tensor with eps 1e-5, the
problem's default: one program per (batch, block of d1 x d2 positions) walks the features twice (the
mean square, then the division)."""

import triton
import triton.language as tl


@triton.jit
def _rms(x_ptr, y_ptr, F, S, eps, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < S
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for f in range(0, F):
        x = tl.load(x_ptr + b * F * S + f * S + cols, mask=m, other=0.0)
        acc += x * x
    rms = tl.sqrt(acc / F + eps)
    for f in range(0, F):
        x = tl.load(x_ptr + b * F * S + f * S + cols, mask=m, other=0.0)
        tl.store(y_ptr + b * F * S + f * S + cols, x / rms, mask=m)


PARAMS = {"BLOCK": 32, "num_warps": 1}
SPACE = {"BLOCK": [32, 64, 128, 256, 512, 1024], "num_warps": [1, 2, 4, 8]}


def launch(x, y, *, BLOCK, num_warps):
    B, F, D1, D2 = x.shape
    S = D1 * D2
    _rms[(B, triton.cdiv(S, BLOCK))](x, y, F, S, 1e-5, BLOCK=BLOCK, num_warps=num_warps)
