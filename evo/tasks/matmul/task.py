"""C = A @ B with fp16 inputs, fp32 accumulation and an fp16 result."""

DTYPES = ("float16",)
CHECK_SIZES = [
    {"M": 1, "N": 1, "K": 1},
    {"M": 17, "N": 33, "K": 5},
    {"M": 64, "N": 48, "K": 80},
    {"M": 31, "N": 67, "K": 129},
    {"M": 128, "N": 128, "K": 64},
]
BENCH_SIZES = [{"M": 4096, "N": 4096, "K": 4096}]
DISTS = ("normal", "uniform")


def inputs(size, dtype, rng, dist):
    shape_a, shape_b = (size["M"], size["K"]), (size["K"], size["N"])
    if dist == "uniform":
        return [rng.uniform(-2, 2, shape_a), rng.uniform(-2, 2, shape_b)]
    return [rng.standard_normal(shape_a), rng.standard_normal(shape_b)]


def reference(a, b):
    return a @ b


def torch_reference(a, b):
    return a @ b


def flops(size):
    return 2.0 * size["M"] * size["N"] * size["K"]


def bytes_moved(size, itemsize):
    m, n, k = size["M"], size["N"], size["K"]
    return float(m * k + k * n + m * n) * itemsize
