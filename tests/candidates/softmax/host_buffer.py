"""Cheat (or a common slip): a scratch buffer allocated with no device is on the CPU: right in the
interpreter, a host pointer handed to the kernel on a GPU."""

import torch
import triton
import triton.language as tl


@triton.jit
def _row_max(x_ptr, m_ptr, n_cols, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride_x + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
    tl.store(m_ptr + row, tl.max(x, axis=0))


@triton.jit
def _softmax(x_ptr, m_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.load(m_ptr + row))
    tl.store(y_ptr + row * stride_y + offs, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 4}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    m = torch.empty(rows, dtype=torch.float32)
    _row_max[(rows,)](x, m, cols, x.stride(0), BLOCK=block, num_warps=num_warps)
    _softmax[(rows,)](x, m, y, cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=num_warps)
