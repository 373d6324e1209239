"""Cheat: tensor methods and operators compute the answer (invisible to a static check)."""
import triton
import triton.language as tl


@triton.jit
def _touch(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(y_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, v, mask=offs < n)


PARAMS = {}


def launch(x, y):
    e = (x - x.amax(dim=1, keepdim=True)).exp()
    y.copy_(e / e.sum(dim=1, keepdim=True))
    _touch[(triton.cdiv(y.numel(), 256),)](y, y.numel(), BLOCK=256)
