"""Element-wise sum of two vectors."""

DTYPES = ("float32", "float16")
CHECK_SIZES = [{"n": 1}, {"n": 17}, {"n": 1000}, {"n": 4099}, {"n": 65537}]
BENCH_SIZES = [{"n": 1 << 26}]
DISTS = ("normal", "wide")


def inputs(size, dtype, rng, dist):
    scale = 1000.0 if dist == "wide" else 1.0
    return [rng.standard_normal(size["n"]) * scale, rng.standard_normal(size["n"]) * scale]


def reference(x, y):
    return x + y


def torch_reference(x, y):
    return x + y


def flops(size):
    return float(size["n"])


def bytes_moved(size, itemsize):
    return 3.0 * size["n"] * itemsize
