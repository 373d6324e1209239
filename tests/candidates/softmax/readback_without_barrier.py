"""Wrong on a GPU, right in the interpreter: pass 2 stores exp(x - max) into y, pass 3 reads y back to
divide by the sum, with no tl.debug_barrier() between. The interpreter runs a program's lanes together,
so every stored value is there; a GPU runs them on many threads, and Triton orders no global store
before a later load of another thread (nor promises the same thread layout for both), so pass 3 can
read what pass 2 has not yet stored."""
import triton
import triton.language as tl


@triton.jit
def _softmax_readback(x_ptr, y_ptr, n_cols, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.load(x_ptr + row * sx + offs, mask=offs < n_cols, other=-float("inf")))
    row_max = tl.max(m, axis=0)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        e = tl.exp(tl.load(x_ptr + row * sx + offs, mask=offs < n_cols, other=-float("inf")) - row_max)
        tl.store(y_ptr + row * sy + offs, e, mask=offs < n_cols)
        s += e
    total = tl.sum(s, axis=0)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        e = tl.load(y_ptr + row * sy + offs, mask=offs < n_cols, other=0.0)
        tl.store(y_ptr + row * sy + offs, e / total, mask=offs < n_cols)


PARAMS = {"BLOCK": 64}


def launch(x, y, *, BLOCK):
    rows, cols = x.shape
    _softmax_readback[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=BLOCK)
