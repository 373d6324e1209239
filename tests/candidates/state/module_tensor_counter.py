"""Cheat: a module-level tensor that a kernel counts calls in (atomically), so a later call can branch
on how many came before."""
import torch
import triton
import triton.language as tl

SEEN = torch.zeros(1, dtype=torch.int32)


@triton.jit
def _count(seen_ptr):
    tl.atomic_add(seen_ptr, 1)


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


def launch(x, y, *, num_warps):
    _count[(1,)](SEEN)
    rows, cols = x.shape
    _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols),
                      num_warps=num_warps)
