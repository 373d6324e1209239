"""Wrong: the one-pass variance E[x^2] - E[x]^2 in float32 (cancels when a row's mean is large)."""
import triton
import triton.language as tl


@triton.jit
def _layernorm(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    var = tl.maximum(tl.sum(x * x, axis=0) / n_cols - mean * mean, 0.0)
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + offs, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 4}


def launch(x, w, b, y, *, num_warps):
    rows, cols = x.shape
    _layernorm[(rows,)](x, w, b, y, cols, x.stride(0), 1e-5, BLOCK=triton.next_power_of_2(cols),
                        num_warps=num_warps)
