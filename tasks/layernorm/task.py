"""Layer normalisation over the last axis of a (rows, cols) matrix, with weight and bias."""

import numpy as np

DTYPES = ("float32", "float16")
EPS = 1e-5
CHECK_SIZES = [
    {"rows": 1, "cols": 1},
    {"rows": 3, "cols": 19},
    {"rows": 5, "cols": 257},
    {"rows": 4, "cols": 1000},
    {"rows": 2, "cols": 3001},
]
BENCH_SIZES = [{"rows": 4096, "cols": 8192}]
DISTS = ("normal", "offset")


def inputs(size, dtype, rng, dist):
    rows, cols = size["rows"], size["cols"]
    x = rng.standard_normal((rows, cols))
    if dist == "offset":  # a large mean: the one-pass E[x^2] - E[x]^2 variance loses precision
        x = x + rng.uniform(-200, 200, size=(rows, 1))
    w = rng.uniform(0.5, 1.5, cols)
    b = rng.standard_normal(cols) * 0.1
    return [x, w, b]


def reference(x, w, b):
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * w + b


def torch_reference(x, w, b):
    import torch

    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, EPS)


def flops(size):
    return 8.0 * size["rows"] * size["cols"]


def bytes_moved(size, itemsize):
    return (2.0 * size["rows"] * size["cols"] + 2.0 * size["cols"]) * itemsize
