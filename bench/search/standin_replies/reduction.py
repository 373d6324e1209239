"""Hand-written STAND-IN answers for the reduction seed (a sum walked by one program) and its descendants
(not a language model's): whole modules and SEARCH/REPLACE edits, good and bad, the mix of outcomes a
model gives. Good: the vector split across many programs whose partial sums are added atomically;
two stages (partial sums, then one program sums them); a bigger block. Wrong: the atomic adds land on
an output that was never zeroed, each program stores its partial over the others' (a race, not a
sum), the loads left unmasked because "the vector is a multiple of the block", an edit that does not
apply, a reply with no code."""

_HEADER = '''import torch
import triton
import triton.language as tl

'''
_ATOMIC = '''
@triton.jit
def _sum_split(x_ptr, out_ptr, n, BLOCK: tl.constexpr, PROGRAMS: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(tl.program_id(0) * BLOCK, n, BLOCK * PROGRAMS):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(acc, axis=0))


PARAMS = {"BLOCK": 1024, "PROGRAMS": 264, "num_warps": 4}
SPACE = {"BLOCK": [512, 1024, 2048, 4096], "PROGRAMS": [132, 264, 528, 1056], "num_warps": [2, 4, 8]}


def launch(x, out, *, BLOCK, PROGRAMS, num_warps):
    out.zero_()
    _sum_split[(PROGRAMS,)](x, out, x.numel(), BLOCK=BLOCK, PROGRAMS=PROGRAMS, num_warps=num_warps)
'''
_ATOMIC_MODULE = _HEADER.replace("import torch\n", "") + _ATOMIC

SPLIT_ATOMIC = ("One program reads the whole vector while the rest of the GPU idles: the sum is one long "
                "dependent chain of loads. Split it: PROGRAMS programs (a multiple of the 132 SMs) each walk a "
                "strided share of the blocks, and add their partial sums into the zeroed output atomically. "
                "Float addition in another order changes the last bits, well within a float32 tolerance."
                "\n```python\n" + _ATOMIC_MODULE + "```")
NOT_ZEROED = ("Split the vector across many programs and add their partial sums into the output atomically."
              "\n```python\n" + _ATOMIC_MODULE.replace("    out.zero_()\n", "") + "```")
RACING_STORES = ("Split the vector across many programs; each writes its sum to the output.\n```python\n"
                 + _ATOMIC_MODULE.replace("tl.atomic_add(out_ptr, tl.sum(acc, axis=0))",
                                          "tl.store(out_ptr, tl.sum(acc, axis=0))") + "```")
UNMASKED = ("Split the vector across many programs with atomic partial sums; the loads need no mask, as the "
            "vector's length is a multiple of the block.\n```python\n"
            + _ATOMIC_MODULE.replace("tl.load(x_ptr + offs, mask=offs < n, other=0.0)", "tl.load(x_ptr + offs)")
            + "```")

TWO_STAGE = ("Sum in two stages with no atomics, so every run gives the same bits: a grid of programs each "
             "reduce CHUNK consecutive elements to a partial sum, then one program adds the partials.\n```python\n"
             + _HEADER + '''
@triton.jit
def _chunk_sums(x_ptr, part_ptr, n, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, CHUNK, BLOCK):
        offs = pid * CHUNK + start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _final_sum(part_ptr, out_ptr, parts, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, parts, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + offs, mask=offs < parts, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


PARAMS = {"CHUNK": 16384, "BLOCK": 1024, "num_warps": 4}
SPACE = {"CHUNK": [4096, 16384, 65536], "BLOCK": [512, 1024, 2048], "num_warps": [2, 4, 8]}


def launch(x, out, *, CHUNK, BLOCK, num_warps):
    n = x.numel()
    parts = triton.cdiv(n, CHUNK)
    partial = torch.empty(parts, dtype=torch.float32, device=x.device)
    _chunk_sums[(parts,)](x, partial, n, CHUNK=CHUNK, BLOCK=BLOCK, num_warps=num_warps)
    _final_sum[(1,)](partial, out, parts, BLOCK=1024, num_warps=4)
''' + "```")

BIGGER_BLOCK = '''Each iteration loads only 256 elements; load 4096 at a time with 8 warps.
<<<<<<< SEARCH
PARAMS = {"BLOCK": 256, "num_warps": 4}
=======
PARAMS = {"BLOCK": 4096, "num_warps": 8}
>>>>>>> REPLACE'''
NO_CODE = "A sum is memory-bound; the kernel already reads each element once and cannot do better."
WRONG_EDIT = '''Accumulate in float64 for accuracy.
<<<<<<< SEARCH
    acc = tl.zeros((BLOCK,), dtype=tl.float16)
=======
    acc = tl.zeros((BLOCK,), dtype=tl.float64)
>>>>>>> REPLACE'''
REPLIES: tuple[tuple[int, str], ...] = (  # (weight, reply)
    (2, SPLIT_ATOMIC), (2, TWO_STAGE), (1, BIGGER_BLOCK), (2, NOT_ZEROED), (1, RACING_STORES), (1, UNMASKED),
    (1, NO_CODE), (1, WRONG_EDIT),
)
