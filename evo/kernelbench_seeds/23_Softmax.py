# kernelbench problem: 70035261de714f9d
# kernelbench problem: eec3862e6d415db0
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = -float("inf")
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.max(tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=-float("inf")), 0))
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=-float("inf"))
        s += tl.sum(tl.exp(x - m), 0)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=0.0)
        tl.store(y_ptr + row * n_cols + offs, tl.exp(x - m) / s, mask=offs < n_cols)


PARAMS = {"BLOCK": 256}
SPACE = {"BLOCK": [64, 128, 256, 512, 1024, 2048, 4096]}


def launch(x, y, *, BLOCK):
    _softmax[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK)
