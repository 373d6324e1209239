"""Row sums: half of each row in a loop over a runtime bound in the kernel, half in a jit helper's."""

import triton
import triton.language as tl


@triton.jit
def _sum_range(acc, row_ptr, lo, hi, BN: tl.constexpr):
    for start in range(lo, hi, BN):
        offs = start + tl.arange(0, BN)
        acc += tl.load(row_ptr + offs, mask=offs < hi, other=0.0)
    return acc


@triton.jit
def _row_sum(x_ptr, y_ptr, n, half, BN: tl.constexpr):
    row_ptr = x_ptr + tl.program_id(0) * n
    acc = tl.zeros([BN], dtype=tl.float32)
    for start in range(half, n, BN):
        offs = start + tl.arange(0, BN)
        acc += tl.load(row_ptr + offs, mask=offs < n, other=0.0)
    acc = _sum_range(acc, row_ptr, 0, half, BN)
    tl.store(y_ptr + tl.program_id(0), tl.sum(acc, axis=0))


PARAMS = {"BN": 64}


def launch(x, y, *, BN):
    rows, n = x.shape
    _row_sum[(rows,)](x, y, n, n // 2, BN=BN)
