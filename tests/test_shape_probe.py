"""Shape probes (evo.contracts.shape_probe): a task's input generator run for shapes only costs no memory
at bench sizes, and the shapes it gives are the real draw's."""

from __future__ import annotations

import numpy as np

from evo.contracts.native_task import TASK_LIBRARY, NativeTask, library_tasks
from evo.contracts.shape_probe import Constant, ShapeProbe


def bytes_spanned(a: np.ndarray) -> int:
    """Bytes of memory `a`'s elements lie in."""
    low, high = np.lib.array_utils.byte_bounds(a)
    return high - low


def test_element_wise_arithmetic_on_a_probe_draw_keeps_one_element_of_memory():
    rng = ShapeProbe(np.random.default_rng(0))
    x = (rng.standard_normal((1 << 20, 1 << 20)) * 1000.0 + 1).astype(np.float16)  # 2 TiB if it were real
    assert isinstance(x, Constant) and x.shape == (1 << 20, 1 << 20) and x.dtype == np.float16
    assert x.strides == (0, 0) and bytes_spanned(x) == 2
    y = np.exp(rng.uniform(0, 1, size=(3, 1)) - rng.normal(0, 1, size=(1, 4)))
    assert isinstance(y, Constant) and y.shape == (3, 4) and np.all(np.asarray(y) == 1.0)


def test_anything_else_is_computed_as_numpy_computes_it():
    rng = ShapeProbe(np.random.default_rng(0))
    z = rng.standard_normal((3, 5))
    assert z.sum(axis=1).shape == (3,) and np.concatenate([z, z]).shape == (6, 5)
    real = np.arange(15.0).reshape(3, 5)
    mixed = z + real  # a real operand: a real result
    assert type(mixed) is np.ndarray and mixed.strides != (0, 0) and np.array_equal(mixed, real)
    assert rng.integers(0, 10, size=4).shape == (4,)  # integer draws are the generator's own
    joined = np.concatenate([z[0], z[0] + 1])  # numpy's copy of two constants is no constant
    assert list(joined.astype(np.int64)) == [0] * 5 + [1] * 5


def test_probed_shapes_are_the_drawn_shapes_for_every_library_task():
    for name in library_tasks():
        task = NativeTask(TASK_LIBRARY / name)
        size = task.check_sizes[-1]
        probed = task.bench_case(size, data=False)
        drawn = task.bench_case(size, data=True)
        assert probed.input_shapes == drawn.input_shapes, name
        assert [t.dtype for t in probed.inputs] == [t.dtype for t in drawn.inputs], name
