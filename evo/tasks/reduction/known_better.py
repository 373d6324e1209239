"""Sum in two deterministic stages: many programs each sum a chunk into a partial, then one program
sums the partials (no atomics, so every run gives the same bits)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _partial_sums(x_ptr, part_ptr, n, BLOCK: tl.constexpr, CHUNKS: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c in range(CHUNKS):
        offs = (pid * CHUNKS + c) * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _sum_partials(part_ptr, out_ptr, n_parts, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_parts, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + offs, mask=offs < n_parts, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


PARAMS = {"BLOCK": 4096, "CHUNKS": 8, "num_warps": 8}
SPACE = {"BLOCK": [1024, 2048, 4096], "CHUNKS": [1, 2, 4, 8, 16], "num_warps": [4, 8, 16]}


def launch(x, out, *, BLOCK, CHUNKS, num_warps):
    n = x.numel()
    parts = triton.cdiv(n, BLOCK * CHUNKS)
    partial = torch.empty(parts, dtype=torch.float32, device=x.device)
    _partial_sums[(parts,)](x, partial, n, BLOCK=BLOCK, CHUNKS=CHUNKS, num_warps=num_warps)
    _sum_partials[(1,)](partial, out, parts, BLOCK=1024, num_warps=4)
