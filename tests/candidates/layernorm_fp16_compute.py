"""Cheat: a float32 layer norm computed in fp16 (two-pass, otherwise like the known-better kernel)."""
import triton
import triton.language as tl


@triton.jit
def _layernorm(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=0.0).to(tl.float16)
    mean = (tl.sum(x.to(tl.float32), axis=0) / n_cols).to(tl.float16)
    d = tl.where(mask, x - mean, 0.0).to(tl.float16)
    rstd = (1.0 / tl.sqrt(tl.sum((d * d).to(tl.float32), axis=0) / n_cols + eps)).to(tl.float16)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float16)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float16)
    y = (d * rstd * w + b).to(tl.float16)
    tl.store(y_ptr + row * stride + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 4}


def launch(x, w, b, y, *, num_warps):
    rows, cols = x.shape
    _layernorm[(rows,)](x, w, b, y, cols, x.stride(0), 1e-5, BLOCK=triton.next_power_of_2(cols),
                        num_warps=num_warps)
