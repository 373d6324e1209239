"""The sum of all elements of a vector, as a 0-d result."""

import numpy as np

DTYPES = ("float32",)
CHECK_SIZES = [{"n": 1}, {"n": 7}, {"n": 1000}, {"n": 4097}, {"n": 100003}]
BENCH_SIZES = [{"n": 1 << 26}]
DISTS = ("normal", "positive")


def inputs(size, dtype, rng, dist):
    if dist == "positive":
        return [rng.uniform(0.0, 2.0, size["n"])]
    return [rng.standard_normal(size["n"])]


def reference(x):
    return np.asarray(x.sum())


def torch_reference(x):
    return x.sum()


def flops(size):
    return float(size["n"])


def bytes_moved(size, itemsize):
    return float(size["n"] + 1) * itemsize
