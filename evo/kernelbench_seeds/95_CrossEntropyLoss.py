# kernelbench problem: 653768351342e28a
# kernelbench problem: fcad66fc15cdb914
import torch
import triton
import triton.language as tl


@triton.jit
def _row_loss(p_ptr, t_ptr, loss_ptr, n_classes, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_classes
    p = tl.load(p_ptr + row * n_classes + offs, mask=mask, other=-float("inf"))
    m = tl.max(p, 0)
    lse = m + tl.log(tl.sum(tl.exp(p - m), 0))
    target = tl.load(t_ptr + row)
    picked = tl.sum(tl.where(offs == target, p, 0.0), 0)
    tl.store(loss_ptr + row, lse - picked)


@triton.jit
def _mean(loss_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(loss_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, 0) / n)


PARAMS = {}


def launch(predictions, targets, out):
    rows, n_classes = predictions.shape
    losses = torch.empty(rows, device=predictions.device, dtype=torch.float32)
    _row_loss[(rows,)](predictions, targets, losses, n_classes, BLOCK=triton.next_power_of_2(n_classes))
    _mean[(1,)](losses, out, rows, BLOCK=256)
