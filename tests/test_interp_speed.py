"""The interpreter's per-call walk of Triton's builtins, listed once (`fitness.sandbox.interp_speed`): the
same attributes wrapped in the same order before a launch and a helper call, kernels calling jit helpers
still right, modules it did not list walked as before."""

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
    print(f"_patch_lang per helper call: {out['ms_before']:.3f} ms -> {out['ms_after']:.3f} ms")
