"""Interpreter fixes: older Triton interpreters under recent numpy (loops over runtime scalars must still
run and profile), masks built from a scalar comparison (valid on a GPU) must run, and a float32 dot
must be as inexact as the GPU's TF32.

On the GPU machine (Triton 3.6, numpy 2.5) the latency model failed for every kernel with a loop
over a runtime bound, in the kernel or in a jit helper: Triton 3.6's ``tensor.__index__`` calls
``int()`` on the one-element array holding the scalar, an error since numpy 2.4. The probe
(`tests.old_interpreter_probe`, in a subprocess: the interpreter is set up at import) installs
that ``__index__`` into the interpreter here, whatever Triton is installed, and turns numpy's
deprecation warnings into errors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import NativeTask
from evo.contracts.verdict import Status
from fitness.evaluate import Evaluator
from fitness.sandbox.float_bits import keep_mantissa_bits
from fitness.sandbox.interp_compat import scalar_index, tf32_truncate

from .conftest import ROOT

ROWS, COLS = 6, 1000  # as in the probe


def probe(*flags: str, module: str = "tests.old_interpreter_probe") -> dict[str, Any]:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", module, *flags], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_scalar_index_takes_one_element_arrays_of_any_rank():
    assert scalar_index(np.array([5], dtype=np.int32)) == 5
    assert scalar_index(np.array([[7]], dtype=np.int64)) == 7
    assert scalar_index(np.array(3)) == 3
    with pytest.raises(TypeError, match=r"shape \(2,\)"):
        scalar_index(np.array([1, 2]))


def test_kernel_and_jit_helper_loops_run_and_profile_under_an_old_interpreter():
    out = probe()
    assert "run_error" not in out and "profile_error" not in out, out
    assert out["max_error"] == 0.0
    (launch,) = out["launches"]
    x = next(b for b in launch["buffers"] if b["name"] == "x_ptr")
    # both loops were sampled and extrapolated: every row read about once
    assert x["unique"] == pytest.approx(ROWS * COLS * 4, rel=0.1)


def test_the_probe_reproduces_the_failure_it_guards_against():
    """Without the fix the emulated interpreter fails as the GPU machine's did; the profiler's own
    loop sampling does not depend on the interpreter's ``__index__``."""
    out = probe("--no-fix")
    assert "only 0-dimensional arrays" in out.get("run_error", "") or "DeprecationWarning" in out.get("run_error", "")
    assert "profile_error" not in out, out


def test_a_scalar_comparison_anded_with_a_block_one_is_a_boolean_mask_as_on_the_gpu():
    """`(row < n) & (offs < m)`: the interpreter alone rejects the mask (its comparison of two int32
    scalars is tagged int32, and the splat makes it so); with the fix the kernel runs and matches torch,
    comparisons used as numbers included."""
    fixed = probe(module="tests.scalar_mask_probe")
    assert fixed == {"max_error": 0.0}, fixed
    broken = probe("--no-fix", module="tests.scalar_mask_probe")
    assert "mask has unsupported dtype" in broken.get("run_error", ""), broken


def test_tf32_truncation_keeps_ten_mantissa_bits_and_special_values():
    x = np.array([1.0 + 2.0**-10, 1.0 + 2.0**-11, -3.0 - 2.0**-12, np.inf, -np.inf, np.nan, 0.0], dtype=np.float32)
    out = tf32_truncate(x)
    assert out[0] == np.float32(1.0 + 2.0**-10)  # the 10th mantissa bit is kept
    assert out[1] == 1.0 and out[2] == -3.0  # lower ones are dropped, toward zero
    assert np.isposinf(out[3]) and np.isneginf(out[4]) and np.isnan(out[5]) and out[6] == 0.0


def test_keeping_mantissa_bits_truncates_to_the_count_asked_and_refuses_an_impossible_one():
    x = np.array([1.0 + 2.0**-11 + 2.0**-12, -(1.0 + 2.0**-11 + 2.0**-12)], dtype=np.float32)
    assert list(keep_mantissa_bits(x, 11)) == [1.0 + 2.0**-11, -(1.0 + 2.0**-11)]
    assert list(keep_mantissa_bits(x, 12)) == list(x) and list(keep_mantissa_bits(x, 23)) == list(x)
    assert list(keep_mantissa_bits(x, 0)) == [1.0, -1.0]
    for bad in (-1, 24):
        with pytest.raises(ValueError, match=r"within 0\.\.23"):
            keep_mantissa_bits(x, bad)


def test_a_float32_dot_at_the_default_precision_has_the_tf32_error_of_a_gpu_and_a_bfloat16_dot_is_right():
    """`tl.dot` of float32 blocks: TF32 on the GPU by default. The interpreter alone multiplies in full
    float32; with the fix its result is the product of TF32 operands, and `input_precision="ieee"`
    stays exact. Of bfloat16 blocks: the interpreter alone multiplies their bits as integers; with the fix,
    the values, exactly."""
    fixed = probe(module="tests.tf32_dot_probe")
    assert fixed["default_vs_tf32"] < 1e-6 and fixed["default_vs_exact"] > 1e-4, fixed
    assert fixed["bf16_vs_exact"] < 1e-6, fixed  # bfloat16 operands multiplied as numbers, not as their bits
    assert fixed["ieee_vs_exact"] < 1e-6, fixed
    unfixed = probe("--no-fix", module="tests.tf32_dot_probe")
    assert unfixed["default_vs_exact"] < 1e-6 and unfixed["default_vs_tf32"] > 1e-4, unfixed
    assert unfixed["bf16_vs_exact"] > 1.0, unfixed  # the interpreter alone multiplies the uint16 bits


def test_a_float32_matmul_in_tf32_is_wrong_where_its_task_wants_float32():
    """Through the checker: the same matmul with the default precision fails the float32 tolerance, as it
    would on a GPU, and the verdict says that its dot ran in TF32 and how to keep float32; with
    `input_precision="ieee"` it passes, and an IEEE kernel wrong for another reason gets no such words."""
    folder = ROOT / "tests" / "tasks" / "matmul_fp32"
    settings = EvaluationConfig(timeout_s=120.0, latency=LatencyMode.OFF)
    default = (folder / "dot_default.py").read_text()
    exact = default.replace("tl.dot(a, b)", 'tl.dot(a, b, input_precision="ieee")')
    off = exact.replace("tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc,",
                        "tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc * 1.01,")
    assert default != exact != off
    with Evaluator(NativeTask(folder), settings, device="cpu") as ev:
        tf32 = ev.evaluate(Candidate.from_source(default))
        ieee = ev.evaluate(Candidate.from_source(exact))
        wrong = ev.evaluate(Candidate.from_source(off))
    assert tf32.status is Status.WRONG_OUTPUT and "outside tolerance" in tf32.reason, tf32.reason
    assert "ran in TF32" in tf32.reason and 'input_precision="ieee"' in tf32.reason, tf32.reason
    assert ieee.status is Status.OK, ieee.reason
    assert wrong.status is Status.WRONG_OUTPUT and "outside tolerance" in wrong.reason, wrong.reason
    assert "TF32" not in wrong.reason, wrong.reason


def test_libdevice_float_math_runs_in_the_interpreter_as_on_a_gpu():
    """libdevice's functions are stubs the GPU compiler replaces; the interpreter alone returns None from
    every call. With the fix: erf, tanh, pow, fma, atan2 within float32 rounding of float64 numpy, isnan an
    int32 flag, on blocks, scalars and constants; fast_tanhf as inexact as the GPU's approximation; a
    float16 argument refused as the GPU compiler refuses it, and a function without a numpy version named
    in its error."""
    fixed = probe(module="tests.libdevice_probe")
    for name in ("erf", "tanh", "pow", "fma", "atan2", "isnan", "exp"):
        assert fixed[name] < 1e-6, fixed
    assert "takes float32 or float64 values, not fp16" in fixed["float16"], fixed
    # fast_tanhf is the GPU's tanh.approx.f32: as inexact here as there (2^-11), not exact
    assert 2.0 ** -14 < fixed["fast_tanhf_relative"] <= 2.0 ** -11, fixed
    assert "libdevice.popc is not available in the Triton interpreter" in fixed["popc"], fixed
    unfixed = probe("--no-fix", module="tests.libdevice_probe")
    assert "None" in unfixed["error"], unfixed
