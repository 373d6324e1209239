"""Wrong on a GPU, right where it was checked before scratch was poisoned: the row sums are accumulated
with atomics into a ``torch.empty`` buffer the kernel takes as zeros. The buffer is large enough (over 32 MiB, the most a host allocator serves from its heap)
that a host allocator maps fresh, zeroed pages for it every call; a GPU's caching allocator hands back
whatever the last kernel left there."""
import torch
import triton
import triton.language as tl


@triton.jit
def _row_max(x_ptr, m_ptr, n_cols, sx, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.load(x_ptr + row * sx + offs, mask=offs < n_cols, other=-float("inf")))
    tl.store(m_ptr + row, tl.max(m, axis=0))


@triton.jit
def _partial_sums(x_ptr, m_ptr, s_ptr, n_cols, sx, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * sx + offs, mask=offs < n_cols, other=-float("inf"))
    tl.atomic_add(s_ptr + row, tl.sum(tl.exp(x - tl.load(m_ptr + row)), axis=0))


@triton.jit
def _normalise(x_ptr, y_ptr, m_ptr, s_ptr, n_cols, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * sx + offs, mask=mask, other=0.0)
    tl.store(y_ptr + row * sy + offs, tl.exp(x - tl.load(m_ptr + row)) / tl.load(s_ptr + row), mask=mask)


PARAMS = {"BLOCK": 64}


def launch(x, y, *, BLOCK):
    rows, cols = x.shape
    m = torch.empty(rows, device=x.device, dtype=torch.float32)
    s = torch.empty(rows + (1 << 23) + 4096, device=x.device, dtype=torch.float32)
    grid = (rows, triton.cdiv(cols, BLOCK))
    _row_max[(rows,)](x, m, cols, x.stride(0), BLOCK=BLOCK)
    _partial_sums[grid](x, m, s, cols, x.stride(0), BLOCK=BLOCK)
    _normalise[grid](x, y, m, s, cols, x.stride(0), y.stride(0), BLOCK=BLOCK)
