"""Wrong on a GPU: the lock of `lock_partial_sums` is taken and let go with ``scope="cta"`` atomics,
atomic only among the threads of one program: two programs can hold it at once. Right in the
interpreter, which runs programs one after another."""

import torch
import triton
import triton.language as tl


@triton.jit
def _group_sums(x_ptr, acc_ptr, lock_ptr, n, GROUPS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    part = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    group = pid % GROUPS
    lock = lock_ptr + group
    count = lock_ptr + GROUPS + group
    row = acc_ptr + group * BLOCK + tl.arange(0, BLOCK)
    while tl.atomic_cas(lock, 0, 1, scope="cta") == 1:
        pass
    if tl.load(count) == 0:  # the first program of the group: nothing to add to yet
        tl.atomic_xchg(count, 1)
    else:
        part += tl.load(row)
    tl.store(row, part)
    tl.debug_barrier()  # every thread's store is done before the lock is let go
    tl.atomic_xchg(lock, 0, scope="cta")


@triton.jit
def _total(acc_ptr, out_ptr, GROUPS: tl.constexpr, BLOCK: tl.constexpr):
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    for g in range(GROUPS):
        s += tl.load(acc_ptr + g * BLOCK + tl.arange(0, BLOCK))
    tl.store(out_ptr, tl.sum(s, axis=0))


PARAMS = {"BLOCK": 1024, "GROUPS": 4, "num_warps": 4}


def launch(x, out, *, BLOCK, GROUPS, num_warps):
    n = x.numel()
    locks = torch.zeros(2 * GROUPS, dtype=torch.int32, device=x.device)
    acc = torch.zeros((GROUPS, BLOCK), dtype=torch.float32, device=x.device)
    _group_sums[(triton.cdiv(n, BLOCK),)](x, acc, locks, n, GROUPS=GROUPS, BLOCK=BLOCK, num_warps=num_warps)
    _total[(1,)](acc, out, GROUPS=GROUPS, BLOCK=BLOCK, num_warps=num_warps)
