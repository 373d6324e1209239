"""The interpreter's patching of `triton.language`, done once (`fitness.sandbox.interp_speed`): the same
attributes wrapped in the same order before a launch and a helper call, modules it did not list walked as
before, helper calls inside a launch that re-patch nothing skipped, kernels calling jit helpers still right."""

from __future__ import annotations

from .test_interp_compat import probe


def test_the_listed_walk_wraps_what_tritons_walk_wraps_and_kernels_still_run():
    out = probe(module="tests.interp_speed_probe")
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
