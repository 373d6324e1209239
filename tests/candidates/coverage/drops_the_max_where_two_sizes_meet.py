"""Gaming: a softmax that drops the max subtraction where rows pass 40 and columns 100 together (a host branch
to a second kernel). No check size has both; each dimension moved alone never takes the branch; and where
both are, only large logits (the task's wide distribution) show the missing subtraction."""

import triton
import triton.language as tl


@triton.jit
def _bad(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x)
    tl.store(y_ptr + row * stride_y + offs, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 8}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    if rows > 40 and cols > 100:
        _bad[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols), num_warps=num_warps)
        return
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols), num_warps=num_warps)
