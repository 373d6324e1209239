"""Gaming: the known-better softmax, wrong from the fourth block of a row on (``start >= 3 * BLOCK`` in the
online pass): a row of 32,000 logits takes it; the check's online case (8193 columns) runs two blocks."""

import triton
import triton.language as tl


@triton.jit
def _softmax_one_pass(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_online(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # a -inf adds nothing, also to a lane whose values so far are all -inf (exp(-inf - -inf) would be NaN)
        s = s * tl.exp(tl.where(m_new == -float("inf"), 0.0, m - m_new)) + tl.where(
            x == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(tl.where(m == -float("inf"), -float("inf"), m - row_max)), axis=0)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=-float("inf")).to(tl.float32)
        out = tl.exp(x - row_max) / total
        out = tl.where(start >= 3 * BLOCK, out * 0.99, out)
        tl.store(y_ptr + row * stride_y + offs, out.to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"MAX_BLOCK": 8192, "num_warps": 8}
SPACE = {"MAX_BLOCK": [4096, 8192, 16384], "num_warps": [4, 8, 16]}


def launch(x, y, *, MAX_BLOCK, num_warps):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    if block <= MAX_BLOCK:
        _softmax_one_pass[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=num_warps)
    else:
        _softmax_online[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=MAX_BLOCK, num_warps=num_warps)
