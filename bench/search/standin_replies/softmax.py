"""Hand-written STAND-IN answers for the softmax seed and its descendants (not a language model's):
whole modules and SEARCH/REPLACE edits, good and bad, the mix of outcomes a model gives (a faster
kernel, a subtle NaN bug, an unmasked store, a missing max subtraction, an edit that does not apply,
a reply with no code)."""

ONE_PASS = '''Each row fits in one block at these sizes, so I load it once, keep it in registers and write it once
(one read and one write instead of three reads).
```python
import triton
import triton.language as tl


@triton.jit
def _softmax_row(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 8}
SPACE = {"num_warps": [4, 8, 16]}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    _softmax_row[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=num_warps)
```'''

_ONLINE = '''import triton
import triton.language as tl


@triton.jit
def _softmax_online(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(tl.where(m_new == -float("inf"), 0.0, m - m_new)) + EXP_TERM
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(tl.where(m == -float("inf"), -float("inf"), m - row_max)), axis=0)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(y_row + offs, (tl.exp(x - row_max) / total).to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"BLOCK": 512, "num_warps": 4}
SPACE = {"BLOCK": [128, 256, 512, 1024, 2048], "num_warps": [2, 4, 8]}


def launch(x, y, *, BLOCK, num_warps):
    rows, cols = x.shape
    _softmax_online[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=BLOCK, num_warps=num_warps)
'''

ONLINE_OK = ("An online softmax keeps a running maximum and a rescaled sum, so the max and sum passes become one: "
             "two passes over the row instead of three.\n```python\n"
             + _ONLINE.replace("EXP_TERM", 'tl.exp(tl.where(m_new == -float("inf"), -float("inf"), x - m_new))')
             + "```")
ONLINE_NAN = ("Fuse the maximum and the sum into one online pass (running max, rescaled sum).\n```python\n"
              + _ONLINE.replace("EXP_TERM", "tl.exp(x - m_new)") + "```")  # masked lanes: exp(-inf - -inf) = NaN
EXP2 = '''exp2 maps to the hardware's ex2 instruction; scale by log2(e) first.
<<<<<<< SEARCH
        s += tl.sum(tl.exp(x - m), axis=0)
=======
        s += tl.sum(tl.exp2((x - m) * 1.4426950408889634), axis=0)
>>>>>>> REPLACE
<<<<<<< SEARCH
        y = tl.exp(x - m) / s
=======
        y = tl.exp2((x - m) * 1.4426950408889634) / s
>>>>>>> REPLACE'''
BIGGER_BLOCKS = '''Larger chunks mean fewer loop iterations per row.
<<<<<<< SEARCH
PARAMS = {"BLOCK": 128, "num_warps": 4}
=======
PARAMS = {"BLOCK": 1024, "num_warps": 8}
>>>>>>> REPLACE'''
NO_MAX = ONE_PASS.replace("tl.exp(x - tl.max(x, axis=0))", "tl.exp(x)").replace(
    "Each row fits in one block", "Skip the max subtraction (softmax is shift-invariant); each row fits in one block")
UNMASKED = ONE_PASS.replace(", y.to(y_ptr.dtype.element_ty), mask=mask)", ", y.to(y_ptr.dtype.element_ty))").replace(
    "Each row fits in one block", "The store mask is redundant; each row fits in one block")
NO_CODE = "Softmax is memory-bound here; the kernel is already close to optimal, I would keep it as it is."
WRONG_EDIT = '''Accumulate in registers across the loop.
<<<<<<< SEARCH
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
=======
    acc = tl.zeros((BLOCK,), dtype=tl.float16)
>>>>>>> REPLACE'''
REPLIES: tuple[tuple[int, str], ...] = (  # (weight, reply)
    (2, ONE_PASS), (2, ONLINE_OK), (2, ONLINE_NAN), (2, EXP2), (1, BIGGER_BLOCKS), (1, NO_MAX), (1, UNMASKED),
    (1, NO_CODE), (1, WRONG_EDIT),
)
