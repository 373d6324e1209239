"""LayerNorm over the last three dimensions of a (batch, features, d1, d2) tensor, eps 1e-5, with many
programs per row (a row here is 4M elements and there are only 16 of them: one program per row leaves most
SMs idle): programs of CHUNK elements sum their part of a row; then each takes the row's mean from those
partial sums and sums its squared deviations; then each takes the row's variance from those and normalizes
its part. Two partial-sum passes, not a sum of squares: no cancellation when the mean dwarfs the spread."""

import torch
import triton
import triton.language as tl


@triton.jit
def _partial_sums(x_ptr, s_ptr, n, chunk, chunks, BLOCK: tl.constexpr):
    row, c = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, chunk, BLOCK):
        offs = c * chunk + start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
    tl.store(s_ptr + row * chunks + c, tl.sum(acc, 0))


@triton.jit
def _row_total(p_ptr, row, chunks, CHUNKS: tl.constexpr):
    k = tl.arange(0, CHUNKS)
    return tl.sum(tl.load(p_ptr + row * chunks + k, mask=k < chunks, other=0.0), 0)


@triton.jit
def _partial_squares(x_ptr, s_ptr, q_ptr, n, chunk, chunks, BLOCK: tl.constexpr, CHUNKS: tl.constexpr):
    row, c = tl.program_id(0), tl.program_id(1)
    mean = _row_total(s_ptr, row, chunks, CHUNKS) / n
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, chunk, BLOCK):
        offs = c * chunk + start + tl.arange(0, BLOCK)
        m = offs < n
        d = tl.where(m, tl.load(x_ptr + row * n + offs, mask=m, other=0.0) - mean, 0.0)
        acc += d * d
    tl.store(q_ptr + row * chunks + c, tl.sum(acc, 0))


@triton.jit
def _normalize(x_ptr, w_ptr, b_ptr, y_ptr, s_ptr, q_ptr, n, chunk, chunks, eps, BLOCK: tl.constexpr,
               CHUNKS: tl.constexpr):
    row, c = tl.program_id(0), tl.program_id(1)
    mean = _row_total(s_ptr, row, chunks, CHUNKS) / n
    rstd = 1.0 / tl.sqrt(_row_total(q_ptr, row, chunks, CHUNKS) / n + eps)
    for start in range(0, chunk, BLOCK):
        offs = c * chunk + start + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + row * n + offs, mask=m, other=0.0)
        w = tl.load(w_ptr + offs, mask=m, other=0.0)
        b = tl.load(b_ptr + offs, mask=m, other=0.0)
        tl.store(y_ptr + row * n + offs, (x - mean) * rstd * w + b, mask=m)


PARAMS = {"BLOCK": 1024, "CHUNKS": 128, "num_warps": 4}
SPACE = {"BLOCK": [512, 1024, 2048], "CHUNKS": [64, 128, 256], "num_warps": [4, 8]}


def launch(x, weight, bias, y, *, BLOCK, CHUNKS, num_warps):
    rows = x.shape[0]
    n = x.numel() // rows
    chunk = triton.cdiv(triton.cdiv(n, CHUNKS), BLOCK) * BLOCK
    chunks = triton.cdiv(n, chunk)
    s = torch.empty((rows, chunks), device=x.device, dtype=torch.float32)
    q = torch.empty((rows, chunks), device=x.device, dtype=torch.float32)
    grid = (rows, chunks)
    _partial_sums[grid](x, s, n, chunk, chunks, BLOCK=BLOCK, num_warps=num_warps)
    _partial_squares[grid](x, s, q, n, chunk, chunks, BLOCK=BLOCK, CHUNKS=CHUNKS, num_warps=num_warps)
    _normalize[grid](x, weight, bias, y, s, q, n, chunk, chunks, 1e-5, BLOCK=BLOCK, CHUNKS=CHUNKS,
                     num_warps=num_warps)
