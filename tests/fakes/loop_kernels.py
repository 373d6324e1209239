"""Kernels with sites for STOKE's loop moves (`fuse loops`, `hoist invariant`) and the tasks they compute."""

from pathlib import Path

ROW_MOMENTS = Path(__file__).resolve().parent.parent.parent / "examples" / "row_moments"
_SECOND = "    squares = 0.0\n    for start in range(0, n_cols, BLOCK):\n        offs = start + "

# the shipped example's two passes over each row that do not depend on each other (its sum, then its sum of
# squares), the second loop's variable renamed so a fusion must also carry the first's over
ROW_STATS = (ROW_MOMENTS / "seed.py").read_text().replace(
    _SECOND, _SECOND.replace("for start", "for begin").replace("= start", "= begin"))
assert "for begin" in ROW_STATS
ROW_STATS_TASK = (ROW_MOMENTS / "task.py").read_text()

# each program scales ROWS rows by one weight vector: the weights and their mask are the same every row
SCALE_ROWS = '''import triton
import triton.language as tl


@triton.jit
def _scale_rows(x_ptr, w_ptr, y_ptr, n_rows, n_cols, stride, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    first = tl.program_id(0) * ROWS
    cols = tl.arange(0, BLOCK)
    for r in range(0, ROWS):
        row = first + r
        inside = (cols < n_cols) & (row < n_rows)  # a block & a scalar comparison (see fitness.sandbox.interp_compat)
        col_ok = cols < n_cols
        w = tl.load(w_ptr + cols, mask=col_ok, other=0.0)
        x = tl.load(x_ptr + row * stride + cols, mask=inside, other=0.0)
        tl.store(y_ptr + row * stride + cols, x * w + tl.load(w_ptr + cols, mask=col_ok, other=0.0), mask=inside)


PARAMS = {"ROWS": 4, "BLOCK": 512, "num_warps": 1}
SPACE = {"ROWS": [1, 4], "BLOCK": [512]}


def launch(x, w, y, *, ROWS, BLOCK, num_warps):
    rows = x.shape[0]
    _scale_rows[((rows + ROWS - 1) // ROWS,)](x, w, y, rows, x.shape[1], x.stride(0), ROWS=ROWS, BLOCK=BLOCK,
                                              num_warps=num_warps)
'''
SCALE_ROWS_TASK = '''import numpy as np

DTYPES = ("float32",)
CHECK_SIZES = [{"rows": 1, "cols": 1}, {"rows": 7, "cols": 100}, {"rows": 9, "cols": 300}]
BENCH_SIZES = [{"rows": 8, "cols": 512}]


def inputs(size, dtype, rng, dist):
    return [rng.standard_normal((size["rows"], size["cols"])), rng.standard_normal(size["cols"])]


def reference(x, w):
    return x * w + w
'''
