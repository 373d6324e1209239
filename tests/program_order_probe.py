"""Run in a subprocess with ``TRITON_INTERPRET=1`` (`tests/test_program_order.py`): the order in which the
interpreter runs a 3-D grid's programs, naturally and under `fitness.sandbox.program_order`, read by
each program taking a ticket from an atomic counter. Prints one JSON line."""

from __future__ import annotations

import json
import os

import torch
import triton
import triton.language as tl

from fitness.sandbox.program_order import program_order

assert os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit
def _ticket(counter_ptr, out_ptr):
    pid = (tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)) * tl.num_programs(2) + tl.program_id(2)
    tl.store(out_ptr + pid, tl.atomic_add(counter_ptr, 1))


def tickets(grid: tuple[int, int, int]) -> list[int]:
    counter = torch.zeros(1, dtype=torch.int32)
    out = torch.full((grid[0] * grid[1] * grid[2],), -1, dtype=torch.int32)
    _ticket[grid](counter, out)
    return [int(v) for v in out.tolist()]


def main() -> None:
    grid = (3, 4, 5)
    result = {"natural": tickets(grid)}
    with program_order("shuffled"):
        result["shuffled"] = tickets(grid)
        result["again"] = tickets(grid)
        result["other_grid"] = tickets((5, 4, 3))
    result["after"] = tickets(grid)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
