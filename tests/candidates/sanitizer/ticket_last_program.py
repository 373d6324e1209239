"""Honest: a one-launch sum in which the last program to finish adds up the others' partial sums (the
"threadfence reduction"). Each program stores its partial, waits for all its threads (a barrier),
then takes a ticket from a counter with an acquire-release ``atomic_add``; the program that takes the
last ticket has acquired every release before it, so it reads every partial: ``ok``. Which program is
last is not its id: programs run in any order."""

import torch
import triton
import triton.language as tl


@triton.jit
def _sum(x_ptr, part_ptr, count_ptr, out_ptr, n, PROGRAMS: tl.constexpr, BLOCK: tl.constexpr,
         PBLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(part_ptr + pid, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))
    tl.debug_barrier()
    ticket = tl.atomic_add(count_ptr, 1)
    if ticket == PROGRAMS - 1:
        p = tl.arange(0, PBLOCK)
        tl.store(out_ptr, tl.sum(tl.load(part_ptr + p, mask=p < PROGRAMS, other=0.0), axis=0))


PARAMS = {"BLOCK": 1024, "num_warps": 4}


def launch(x, out, *, BLOCK, num_warps):
    n = x.numel()
    programs = triton.cdiv(n, BLOCK)
    part = torch.empty(programs, dtype=torch.float32, device=x.device)
    count = torch.zeros(1, dtype=torch.int32, device=x.device)
    _sum[(programs,)](x, part, count, out, n, PROGRAMS=programs, BLOCK=BLOCK,
                      PBLOCK=triton.next_power_of_2(programs), num_warps=num_warps)
