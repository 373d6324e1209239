"""Wrong on a GPU, right in the interpreter: the block has twice the lanes of a row, and lanes i and
i + BLOCK store to the same element, the first with exp(x - max) unnormalised, the second with the
softmax. The interpreter keeps the last lane's value; a GPU keeps one of them, which one unspecified."""
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, 2 * BLOCK)
    offs = lanes % BLOCK
    mask = offs < n_cols
    x = tl.load(x_ptr + row * sx + offs, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    total = tl.sum(tl.where(lanes < BLOCK, e, 0.0), axis=0)
    tl.store(y_ptr + row * sy + offs, tl.where(lanes < BLOCK, e, e / total), mask=mask)


PARAMS = {"num_warps": 4}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols),
                      num_warps=num_warps)
