# kernelbench problem: cf7304051be388d5
# kernelbench problem: abc5d0d978def3e4
import triton
import triton.language as tl


@triton.jit
def _ln(x_ptr, w_ptr, b_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = 0.0
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.sum(tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0), 0)
    mean = acc / n
    acc2 = 0.0
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        d = tl.where(offs < n, tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0) - mean, 0.0)
        acc2 += tl.sum(d * d, 0)
    rstd = 1.0 / tl.sqrt(acc2 / n + eps)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0)
        tl.store(y_ptr + row * n + offs, (x - mean) * rstd * w + b, mask=mask)


PARAMS = {"BLOCK": 128}
SPACE = {"BLOCK": [64, 128, 256, 512, 1024, 2048, 4096]}


def launch(x, weight, bias, y, *, BLOCK):
    rows = x.shape[0]
    _ln[(rows,)](x, weight, bias, y, x.numel() // rows, 1e-5, BLOCK=BLOCK)
