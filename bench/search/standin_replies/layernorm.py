"""Hand-written STAND-IN answers for the layer norm seed and its descendants (not a language model's):
whole modules and SEARCH/REPLACE edits, good and bad, the mix of outcomes a model gives (the row kept
in registers, the statistics fused into one pass over memory, the one-pass variance E[x^2] - E[x]^2
that the task's offset rows exist to reject, a division by the block instead of the row length, an
unmasked store, an edit that does not apply, a reply with no code)."""

from bench.search.standin_replies.softmax import BIGGER_BLOCKS  # the two seeds' PARAMS lines are the same

_ROW = '''import triton
import triton.language as tl


@triton.jit
def _layernorm_row(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
VARIANCE
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + offs, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 8}
SPACE = {"num_warps": [4, 8, 16]}


def launch(x, w, b, y, *, num_warps):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    _layernorm_row[(rows,)](x, w, b, y, cols, x.stride(0), 1e-5, BLOCK=block, num_warps=num_warps)
'''
_TWO_PASS_VARIANCE = '''    d = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)'''
_ONE_PASS_VARIANCE = '''    var = tl.sum(x * x, axis=0) / n_cols - mean * mean
    rstd = 1.0 / tl.sqrt(var + eps)'''

ROW_IN_REGISTERS = ("Each row fits in registers at these sizes: load it once, take the mean and the variance of the "
                    "deviations from registers, and write once (one read of x instead of three).\n```python\n"
                    + _ROW.replace("VARIANCE", _TWO_PASS_VARIANCE) + "```")
ONE_PASS_VARIANCE = ("Keep the row in registers and get the variance in the same sweep as the mean, "
                     "var = E[x^2] - E[x]^2, so there is a single reduction chain.\n```python\n"
                     + _ROW.replace("VARIANCE", _ONE_PASS_VARIANCE) + "```")
BY_BLOCK = ROW_IN_REGISTERS.replace("/ n_cols", "/ BLOCK").replace(  # masked lanes are zeros, not elements
    "Each row fits in registers", "Divide by the constexpr block, not a runtime value; each row fits in registers")
UNMASKED = ROW_IN_REGISTERS.replace(
    ".to(y_ptr.dtype.element_ty), mask=mask)", ".to(y_ptr.dtype.element_ty))").replace(
    "Each row fits in registers", "The store mask costs predicates; each row fits in registers")

FUSED_STATISTICS = '''Rows can be longer than registers allow, so keep the chunks but gather both statistics in one
pass: per-lane sums of x - x[0] and of its square (shifting by an element of the row keeps the
difference of squares well conditioned), then normalise in a second pass: two reads of x instead
of three.
```python
import triton
import triton.language as tl


@triton.jit
def _layernorm_two_pass(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride
    y_row = y_ptr + row * stride
    shift = tl.load(x_row).to(tl.float32)
    s1 = tl.zeros((BLOCK,), tl.float32)
    s2 = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < n_cols, other=0.0).to(tl.float32)
        d = tl.where(offs < n_cols, x - shift, 0.0)
        s1 += d
        s2 += d * d
    m1 = tl.sum(s1, axis=0) / n_cols
    mean = shift + m1
    rstd = 1.0 / tl.sqrt(tl.maximum(tl.sum(s2, axis=0) / n_cols - m1 * m1, 0.0) + eps)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + offs, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"BLOCK": 1024, "num_warps": 4}
SPACE = {"BLOCK": [256, 512, 1024, 2048, 4096], "num_warps": [2, 4, 8, 16]}


def launch(x, w, b, y, *, BLOCK, num_warps):
    rows, cols = x.shape
    _layernorm_two_pass[(rows,)](x, w, b, y, cols, x.stride(0), 1e-5, BLOCK=BLOCK, num_warps=num_warps)
```'''
RSQRT = '''One reciprocal square root instead of a square root and a division.
<<<<<<< SEARCH
    rstd = 1.0 / tl.sqrt(acc2 / n_cols + eps)
=======
    rstd = tl.rsqrt(acc2 / n_cols + eps)
>>>>>>> REPLACE'''
NO_CODE = "Layer norm is memory-bound; at this size the kernel is close to the bandwidth limit, I would leave it."
WRONG_EDIT = '''Divide once: multiply by the reciprocal of the column count.
<<<<<<< SEARCH
    mean = acc * (1.0 / n_cols)
=======
    mean = acc * inv_n
>>>>>>> REPLACE'''
REPLIES: tuple[tuple[int, str], ...] = (  # (weight, reply)
    (2, ROW_IN_REGISTERS), (2, FUSED_STATISTICS), (2, ONE_PASS_VARIANCE), (1, RSQRT), (1, BIGGER_BLOCKS),
    (1, BY_BLOCK), (1, UNMASKED), (1, NO_CODE), (1, WRONG_EDIT),
)
