"""x divided by its Frobenius norm, in two passes over x: programs of CHUNK elements each sum their squares
into one partial sum (at most PARTS of them, no atomics: the result does not depend on the order programs
run in), then programs of BLOCK elements each add the partial sums up and divide."""

import torch
import triton
import triton.language as tl


@triton.jit
def _partial_squares(x_ptr, part_ptr, n, chunk, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, chunk, BLOCK):
        offs = pid * chunk + start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        acc += x * x
    tl.store(part_ptr + pid, tl.sum(acc, 0))


@triton.jit
def _divide(x_ptr, part_ptr, y_ptr, n, parts, BLOCK: tl.constexpr, PARTS: tl.constexpr):
    p = tl.arange(0, PARTS)
    norm = tl.sqrt(tl.sum(tl.load(part_ptr + p, mask=p < parts, other=0.0), 0))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m, other=0.0) / norm, mask=m)


PARAMS = {"BLOCK": 2048, "PARTS": 1024, "num_warps": 8}
SPACE = {"BLOCK": [1024, 2048, 4096], "PARTS": [256, 1024], "num_warps": [4, 8]}


def launch(x, y, *, BLOCK, PARTS, num_warps):
    n = x.numel()
    chunk = triton.cdiv(triton.cdiv(n, PARTS), BLOCK) * BLOCK
    parts = triton.cdiv(n, chunk)
    partial = torch.empty((parts,), device=x.device, dtype=torch.float32)
    _partial_squares[(parts,)](x, partial, n, chunk, BLOCK=BLOCK, num_warps=num_warps)
    _divide[(triton.cdiv(n, BLOCK),)](x, partial, y, n, parts, BLOCK=BLOCK, PARTS=PARTS, num_warps=num_warps)
