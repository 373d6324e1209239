"""Runs a kernel whose masks combine a scalar comparison with a block one (``(row < n) & (offs < m)``,
valid on a GPU: the compiler types both i1) in the interpreter, with the project's interpreter fixes
installed as the interpreter worker installs them, or without (``--no-fix``). Prints one JSON line:
the largest error against torch, or the error the run raised. Run as
``TRITON_INTERPRET=1 python -m tests.scalar_mask_probe [--no-fix]``.
"""

from __future__ import annotations

import json

from tests.interp_fix_probe import install_unless_no_fix

ROWS, COLS, BLOCK = 4, 100, 128


def main() -> None:
    install_unless_no_fix()
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(x_ptr, y_ptr, n, m, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        mask = (row < n) & (offs < m)
        x = tl.load(x_ptr + row * m + offs, mask=mask, other=0.0)
        flag = (x > 0.5).to(tl.float32) + (row == 2).to(tl.float32)  # comparisons used as numbers
        tl.store(y_ptr + row * m + offs, x * 2 + flag, mask=mask)

    torch.manual_seed(0)
    x = torch.rand(ROWS, COLS)
    y = torch.zeros_like(x)
    live = ROWS - 1  # the last row is masked off by `row < n`
    try:
        kernel[(ROWS,)](x, y, live, COLS, BLOCK=BLOCK)
    except Exception as e:  # the interpreter's error, reported
        print(json.dumps({"run_error": f"{type(e).__name__}: {e}"}))
        return
    want = x * 2 + (x > 0.5).float() + (torch.arange(ROWS) == 2).float()[:, None]
    want[live:] = 0
    print(json.dumps({"max_error": float((y - want).abs().max())}))


if __name__ == "__main__":
    main()
