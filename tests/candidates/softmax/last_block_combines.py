"""Wrong on a GPU, right when programs run in order: each block of a row publishes its max and sum with
atomics, and the row's last block reads them back (atomically, so no race is seen) assuming the others
are done, then writes the whole row. The interpreter runs a row's blocks in order, so they are; a GPU
runs them in any order, and the last block can read the zeros of blocks that have not run."""
import torch
import triton
import triton.language as tl


@triton.jit
def _blocks(x_ptr, y_ptr, m_ptr, s_ptr, n_cols, sx, sy, NB: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    b = tl.program_id(1)
    offs = b * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * sx + offs, mask=offs < n_cols, other=-float("inf"))
    bm = tl.max(x, axis=0)
    tl.atomic_add(m_ptr + row * NB + b, bm)  # onto a zero: publishes it
    tl.atomic_add(s_ptr + row * NB + b, tl.sum(tl.exp(x - bm), axis=0))
    if b == NB - 1:
        m = bm  # its own block is done
        for j in range(NB):
            m = tl.maximum(m, tl.atomic_add(m_ptr + row * NB + j, 0.0))
        s = bm * 0.0
        for j in range(NB):
            s += tl.atomic_add(s_ptr + row * NB + j, 0.0) * tl.exp(tl.atomic_add(m_ptr + row * NB + j, 0.0) - m)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            v = tl.load(x_ptr + row * sx + cols, mask=cols < n_cols, other=0.0)
            tl.store(y_ptr + row * sy + cols, tl.exp(v - m) / s, mask=cols < n_cols)


PARAMS = {"BLOCK": 64}


def launch(x, y, *, BLOCK):
    rows, cols = x.shape
    nb = triton.cdiv(cols, BLOCK)
    m = torch.zeros((rows, nb), device=x.device, dtype=torch.float32)
    s = torch.zeros((rows, nb), device=x.device, dtype=torch.float32)
    _blocks[(rows, nb)](x, y, m, s, cols, x.stride(0), y.stride(0), NB=nb, BLOCK=BLOCK)
