"""Mean squared error of two tensors to a 0-d result: programs of CHUNK elements each sum their squared
differences into one partial sum (at most PARTS, no atomics), then one program adds them up and divides."""

import torch
import triton
import triton.language as tl


@triton.jit
def _partial(p_ptr, t_ptr, part_ptr, n, chunk, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, chunk, BLOCK):
        offs = pid * chunk + start + tl.arange(0, BLOCK)
        m = offs < n
        d = tl.load(p_ptr + offs, mask=m, other=0.0) - tl.load(t_ptr + offs, mask=m, other=0.0)
        acc += d * d
    tl.store(part_ptr + pid, tl.sum(acc, 0))


@triton.jit
def _finish(part_ptr, out_ptr, n, parts, PARTS: tl.constexpr):
    p = tl.arange(0, PARTS)
    tl.store(out_ptr, tl.sum(tl.load(part_ptr + p, mask=p < parts, other=0.0), 0) / n)


PARAMS = {"BLOCK": 2048, "PARTS": 1024, "num_warps": 8}
SPACE = {"BLOCK": [1024, 2048, 4096], "PARTS": [256, 1024], "num_warps": [4, 8]}


def launch(predictions, targets, out, *, BLOCK, PARTS, num_warps):
    n = predictions.numel()
    chunk = triton.cdiv(triton.cdiv(n, PARTS), BLOCK) * BLOCK
    parts = triton.cdiv(n, chunk)
    partial = torch.empty((parts,), device=predictions.device, dtype=torch.float32)
    _partial[(parts,)](predictions, targets, partial, n, chunk, BLOCK=BLOCK, num_warps=num_warps)
    _finish[(1,)](partial, out, n, parts, PARTS=PARTS)
