"""Honest: local containers built and changed inside launch, module-level constants of every immutable
kind (a number, a tuple, a dtype, a tl.constexpr, a math expression), torch.Tensor in annotations only;
the same kernel on every call."""
import math

import torch
import triton
import triton.language as tl

MIN_BLOCK = 16
WARPS_BY_WIDTH = ((1024, 4), (4096, 8))
ACC = tl.float32
ONE = tl.constexpr(1)
LOG2E = 1.0 / math.log(2.0)


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
SPACE = {"num_warps": [2, 4, 8]}


def _block(cols: int, floor: int = MIN_BLOCK) -> int:
    return max(floor, triton.next_power_of_2(cols))


def launch(x: torch.Tensor, y: torch.Tensor, *, num_warps: int) -> None:
    rows, cols = x.shape
    grid = [1, 1]
    grid[0] = rows
    meta = {"BLOCK": MIN_BLOCK}
    meta["BLOCK"] = _block(cols)
    sizes = [MIN_BLOCK, cols]
    sizes[0] = meta["BLOCK"]
    for limit, warps in WARPS_BY_WIDTH:
        if cols <= limit:
            num_warps = min(num_warps, warps)
    _softmax[(grid[0],)](x, y, cols, x.stride(0), y.stride(0), BLOCK=sizes[0], num_warps=num_warps)
