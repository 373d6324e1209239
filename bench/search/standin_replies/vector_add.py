"""Hand-written STAND-IN answers for the vector_add seed and its descendants (not a language model's): the
control task's answers. An element-wise add is memory-bound at every block size, so no answer can be
faster than the sweep's best by more than the model's noise; the correct ones restructure the loop (a
persistent grid, several blocks per program, wider blocks), the wrong ones make the mistakes a model makes
here (an add in half precision, an unmasked tail), and two give no usable kernel."""

GRID_STRIDE = '''Launch a fixed number of persistent programs that stride over the vector, so the launch does not
create hundreds of thousands of tiny programs.
```python
import triton
import triton.language as tl


@triton.jit
def _add_persistent(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    step = tl.num_programs(0) * BLOCK
    for start in range(tl.program_id(0) * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y, mask=mask)


PARAMS = {"BLOCK": 1024, "PROGRAMS": 528, "num_warps": 4}
SPACE = {"BLOCK": [512, 1024, 2048, 4096], "PROGRAMS": [132, 264, 528, 1056, 2112], "num_warps": [2, 4, 8]}


def launch(x, y, out, *, BLOCK, PROGRAMS, num_warps):
    n = x.numel()
    grid = (max(1, min(PROGRAMS, triton.cdiv(n, BLOCK))),)
    _add_persistent[grid](x, y, out, n, BLOCK=BLOCK, num_warps=num_warps)
```'''

UNROLLED = '''Give each program several consecutive blocks (unrolled at compile time), so more loads are in flight
per program.
```python
import triton
import triton.language as tl


@triton.jit
def _add_unrolled(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    base = tl.program_id(0) * BLOCK * UNROLL
    for i in tl.static_range(UNROLL):
        offs = base + i * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y, mask=mask)


PARAMS = {"BLOCK": 1024, "UNROLL": 4, "num_warps": 4}
SPACE = {"BLOCK": [256, 512, 1024, 2048], "UNROLL": [1, 2, 4, 8], "num_warps": [2, 4, 8]}


def launch(x, y, out, *, BLOCK, UNROLL, num_warps):
    n = x.numel()
    _add_unrolled[(triton.cdiv(n, BLOCK * UNROLL),)](x, y, out, n, BLOCK=BLOCK, UNROLL=UNROLL,
                                                     num_warps=num_warps)
```'''

WIDE_BLOCKS = '''Blocks wider than the SPACE allowed, with the warps to match.
```python
import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


PARAMS = {"BLOCK": 8192, "num_warps": 16}
SPACE = {"BLOCK": [2048, 4096, 8192, 16384], "num_warps": [4, 8, 16]}


def launch(x, y, out, *, BLOCK, num_warps):
    n = x.numel()
    _add[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, num_warps=num_warps)
```'''

HALF_PRECISION = '''Add in half precision: half the register traffic.
<<<<<<< SEARCH
    tl.store(out_ptr + offs, x + y, mask=mask)
=======
    tl.store(out_ptr + offs, (x.to(tl.float16) + y.to(tl.float16)).to(out_ptr.dtype.element_ty), mask=mask)
>>>>>>> REPLACE'''  # float32 inputs lose their low bits: wrong beyond float32's tolerance

UNMASKED = '''The mask costs a compare per element; the vector is a multiple of the block at the bench size.
<<<<<<< SEARCH
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)
=======
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, x + y)
>>>>>>> REPLACE'''  # the check sizes are not: the tail's loads and stores leave the tensors

NO_CODE = ("An element-wise add moves three words per addition; it is bound by DRAM bandwidth at any block "
           "size, so there is nothing to gain from the kernel itself. I would leave it.")
WRONG_EDIT = '''Compute the offsets once per program.
<<<<<<< SEARCH
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
=======
    offsets = tl.multiple_of(pid * BLOCK_SIZE, BLOCK_SIZE) + tl.arange(0, BLOCK_SIZE)
>>>>>>> REPLACE'''
REPLIES: tuple[tuple[int, str], ...] = (  # (weight, reply)
    (2, GRID_STRIDE), (2, UNROLLED), (1, WIDE_BLOCKS), (1, HALF_PRECISION), (1, UNMASKED), (1, NO_CODE),
    (1, WRONG_EDIT),
)
