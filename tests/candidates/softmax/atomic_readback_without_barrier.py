"""Wrong on a GPU, right in the interpreter: the row sum is accumulated with atomics into scratch and read
back with a plain load in the same program, no tl.debug_barrier() between; on a GPU the thread that
loads it may run before another thread's atomic has landed."""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, s_ptr, n_cols, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.load(x_ptr + row * sx + offs, mask=offs < n_cols, other=-float("inf")))
    row_max = tl.max(m, axis=0)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        e = tl.exp(tl.load(x_ptr + row * sx + offs, mask=offs < n_cols, other=-float("inf")) - row_max)
        tl.atomic_add(s_ptr + row, tl.sum(e, axis=0))
    total = tl.load(s_ptr + row)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * sx + offs, mask=offs < n_cols, other=0.0)
        tl.store(y_ptr + row * sy + offs, tl.exp(x - row_max) / total, mask=offs < n_cols)


PARAMS = {"BLOCK": 64}


def launch(x, y, *, BLOCK):
    rows, cols = x.shape
    s = torch.zeros(rows, device=x.device, dtype=torch.float32)
    _softmax[(rows,)](x, y, s, cols, x.stride(0), y.stride(0), BLOCK=BLOCK)
