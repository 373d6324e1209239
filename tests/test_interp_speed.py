"""The interpreter's patching of `triton.language`, done once (`fitness.sandbox.interp_speed`): the same
attributes wrapped in the same order before a launch and a helper call, modules it did not list walked as
before, helper calls inside a launch that re-patch nothing skipped, kernels calling jit helpers still right;
check runs without the overflow checks that assert nothing."""

from __future__ import annotations

import functools
from typing import Any

from .test_interp_compat import probe


@functools.cache
def installed() -> dict[str, Any]:
    """The probe's figures with the install (one subprocess for the tests below)."""
    return probe(module="tests.interp_speed_probe")


def test_the_listed_walk_wraps_what_tritons_walk_wraps_and_kernels_still_run():
    out = installed()
    assert out["installed"] and out["again"], out
    for fn in ("helper", "kernel"):
        assert out["before"][fn], fn  # the interpreter wraps something: the comparison below means something
        assert out["after"][fn] == out["before"][fn], fn
    assert out["walked_in_full"] == 0, out  # the listed walk did the work
    assert out["kernel_error"] < 1e-5, out
    assert out["unlisted_wrapped"], out
    # a launch patches in full, and so does its first helper of each language module; the other 31 helper
    # calls of the loop re-patched nothing, and the second launch patched again after the first's undo
    shipped = probe("--as-shipped", module="tests.interp_speed_probe")
    assert min(shipped["launches"]) >= 32 and shipped["loop_error"] < 1e-4, shipped
    assert 2 <= min(out["launches"]) and max(out["launches"]) <= 3 and out["loop_error"] < 1e-4, out
    print(f"_patch_lang per helper call: {out['ms_before']:.3f} ms -> {out['ms_after']:.3f} ms")


def test_a_check_run_skips_the_overflow_checks_that_assert_nothing_and_computes_the_same():
    # the interpreter's options leave debug off, so Triton's 64-bit recomputation of each 32-bit index sum ends
    # in a device_assert that returns at once: inside `without_dead_overflow_checks` it is not computed (the
    # casts a launch makes drop), the kernel's output is the same, and the options are put back afterwards;
    # in debug mode, where the assertion would fire, nothing changes
    out = installed()["overflow"]
    on, off, again = out["casts"]
    assert on > 0 and off < on and again == on, out
    assert out["inside"] is False and out["restored"] and out["debug_kept"] and out["same"], out
