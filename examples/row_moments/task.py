"""Per-row sum and sum of squares of a (rows, cols) matrix: the statistics a normalisation reads first.

A fused layer/RMS/group norm (apex's and many hand-written kernels) starts from exactly these two
sums per row (mean = sum / cols, mean of squares = sum of squares / cols). The result is (rows, 2):
column 0 the sum, column 1 the sum of squares, in float32.

An example of a task outside the library whose naive seed (``seed.py``) has a structure no setting of
its SPACE can change: it reads each row twice, once per sum. STOKE's ``fuse loops`` move makes the two
passes one, which reads the row once (``configs/ablation_search/row_moments.yaml`` compares evolution,
with that move, and random search over the seed's SPACE).

Sizes: rows are tokens, cols the hidden size; the bench is a prefill of 4096 tokens at hidden size 8192
(a 70B-class model): 128 MiB of float32, more than an H100's L2, so the seed's second pass over a row
is served from DRAM unless few rows are in flight (which the modelled latency sees as well).
"""

import numpy as np

DTYPES = ("float32",)
CHECK_SIZES = [
    {"rows": 1, "cols": 1},
    {"rows": 3, "cols": 100},
    {"rows": 5, "cols": 257},
    {"rows": 2, "cols": 1000},
]
BENCH_SIZES = [{"rows": 4096, "cols": 8192}]


def inputs(size, dtype, rng, dist):
    return [rng.standard_normal((size["rows"], size["cols"]))]


def reference(x):
    return np.stack([x.sum(axis=1), (x * x).sum(axis=1)], axis=1)


def torch_reference(x):
    import torch

    return torch.stack([x.sum(dim=1), (x * x).sum(dim=1)], dim=1)


def flops(size):
    return 3.0 * size["rows"] * size["cols"]


def bytes_moved(size, itemsize):
    return (size["rows"] * size["cols"] + 2.0 * size["rows"]) * itemsize
