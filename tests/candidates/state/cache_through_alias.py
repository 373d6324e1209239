"""Cheat: a result cache reached through a local alias of a module-level tuple's list, so that no
statement names the module-level object it changes."""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * sx + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * sy + offs, e / tl.sum(e, axis=0), mask=mask)


PARAMS = {"num_warps": 4}
STORE = ([],)


def _slot():
    return STORE[0]


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols),
                      num_warps=num_warps)
    slot = _slot()
    slot += [torch.empty_like(y)]
