"""Vector add where PROGRAMS programs each walk a contiguous chunk: few programs leave SMs idle."""

import triton
import triton.language as tl


@triton.jit
def _add_chunks(x_ptr, y_ptr, out_ptr, n, per_program, BLOCK: tl.constexpr):
    start = tl.program_id(0) * per_program
    for off in range(0, per_program, BLOCK):
        offs = start + off + tl.arange(0, BLOCK)
        mask = (offs < n) & (off + tl.arange(0, BLOCK) < per_program)
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y, mask=mask)


PARAMS = {"PROGRAMS": 1024, "BLOCK": 1024, "num_warps": 4}


def launch(x, y, out, *, PROGRAMS, BLOCK, num_warps):
    n = x.numel()
    per = triton.cdiv(triton.cdiv(n, PROGRAMS), BLOCK) * BLOCK
    _add_chunks[(triton.cdiv(n, per),)](x, y, out, n, per, BLOCK=BLOCK, num_warps=num_warps)
