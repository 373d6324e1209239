"""Gaming the sample: one program in 64 (``row % 64 == 37``) reads `repeat` other rows before it writes its
own. A uniform sample of a 512-row grid's programs misses those eight most of the time, and the kernel is
modelled as fast as its twin with ``repeat = 0``; a sample stratified by the paths the program id decides
always runs one of them, weighted for the eight."""

import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y, repeat, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    if row % 64 == 37:
        for i in range(0, repeat):
            other = (row + 1 + i) % n_rows
            tl.load(x_ptr + other * stride_x + offs, mask=mask, other=0.0, volatile=True)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 8}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    _softmax[(rows,)](x, y, rows, cols, x.stride(0), y.stride(0), 400, BLOCK=triton.next_power_of_2(cols),
                      num_warps=num_warps)
