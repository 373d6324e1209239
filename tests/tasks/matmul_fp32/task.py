"""C = A @ B in float32 (a test task): the library's matmul (its inputs, reference and counts) in the
dtype where a GPU's tl.dot defaults to TF32, at sizes the interpreter checks in seconds."""

from evo.tasks.matmul.task import bytes_moved, flops, inputs, reference  # noqa: F401  (the task's functions)

DTYPES = ("float32",)
CHECK_SIZES = [
    {"M": 1, "N": 1, "K": 1},
    {"M": 17, "N": 33, "K": 5},
    {"M": 31, "N": 67, "K": 129},
    {"M": 64, "N": 64, "K": 256},
]
BENCH_SIZES = [{"M": 64, "N": 64, "K": 64}]
DISTS = ("normal", "uniform")
