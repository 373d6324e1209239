"""Static resources of a candidate's kernels on the target GPU, without a GPU.

Runs in the compile worker: Triton's real compiler, no interpreter (``TRITON_INTERPRET`` unset;
under it ``@triton.jit`` gives an interpreted function the compiler rejects), no GPU visible.
``launch`` is called on *meta* tensors of the bench shapes with ``JITFunction.run`` replaced by
a recorder, so nothing executes and nothing is allocated; each distinct launch (kernel,
specialisation, constants, num_warps, num_stages) is then compiled with
``triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", arch, 32))``
and its cubin read with the ``cuobjdump -res-usage`` bundled with Triton: registers per thread,
stack (spills) per thread, shared memory per program.

Specialisation follows Triton's launcher: an integer argument equal to 1 becomes a constant,
integers and pointers divisible by 16 get ``tt.divisibility = 16`` (meta tensors count as
aligned, as fresh CUDA allocations are), unless the kernel opts out with ``do_not_specialize``.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from typing import Any

from fitness.latency.counts import KernelResources

_RES = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")
_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


class ToolMissing(RuntimeError):
    """A compiler tool (ptxas, cuobjdump) is not available here: resources cannot be read."""


def cuobjdump_path() -> str:
    import triton

    path = os.environ.get("TRITON_CUOBJDUMP_PATH") or os.path.join(
        os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not os.path.isfile(path):
        raise ToolMissing(f"cuobjdump not found at {path}")
    return path


def parse_res_usage(text: str) -> tuple[int, int, int]:
    """(registers, spill bytes per thread, static shared bytes) from ``cuobjdump -res-usage``."""
    m = _RES.search(text)
    if m is None:
        raise ToolMissing(f"cuobjdump printed no resource usage: {text[:200]!r}")
    reg, stack, shared, local = (int(g) for g in m.groups())
    return reg, stack + local, shared


def _specialize(fn: Any, bound: dict[str, Any]) -> tuple[dict[str, str], dict[tuple[int], Any], dict[tuple[int], Any]]:
    from triton.runtime.jit import mangle_type

    signature: dict[str, str] = {}
    constexprs: dict[tuple[int], Any] = {}
    attrs: dict[tuple[int], Any] = {}
    for i, p in enumerate(fn.params):
        v = bound[p.name]
        no_spec = bool(getattr(p, "do_not_specialize", False))
        no_align = bool(getattr(p, "do_not_specialize_on_alignment", False))
        if p.is_constexpr or v is None or (isinstance(v, int) and not isinstance(v, bool) and v == 1
                                           and not no_spec):
            signature[p.name] = "constexpr"
            constexprs[(i,)] = v
            continue
        signature[p.name] = mangle_type(v)
        aligned = False
        if hasattr(v, "data_ptr"):
            aligned = v.data_ptr() % 16 == 0 and not no_align
        elif isinstance(v, int) and not isinstance(v, bool):
            aligned = v % 16 == 0 and not no_spec
        if aligned:
            attrs[(i,)] = [["tt.divisibility", 16]]
    return signature, constexprs, attrs


class _Recorder:
    """Replaces ``JITFunction.run`` while ``launch`` runs on meta tensors: records, runs nothing."""

    def __init__(self) -> None:
        self.launches: list[tuple[Any, dict[str, Any], dict[str, Any], Any]] = []

    def __enter__(self) -> _Recorder:
        from triton.runtime.jit import JITFunction

        rec = self
        self._cls, self._old = JITFunction, JITFunction.run

        def run(fn: Any, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> None:
            import inspect

            options = {k: v for k, v in kwargs.items() if k in _OPTIONS}
            sig = inspect.signature(fn.fn)
            b = sig.bind(*args, **{k: v for k, v in kwargs.items() if k in sig.parameters})
            b.apply_defaults()
            rec.launches.append((fn, dict(b.arguments), options, grid))

        JITFunction.run = run
        return self

    def __exit__(self, *exc: object) -> None:
        self._cls.run = self._old


def _compile(fn: Any, bound: dict[str, Any], options: dict[str, Any], arch: int) -> KernelResources:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature, constexprs, attrs = _specialize(fn, bound)
    opts = {"num_warps": 4, "num_stages": 3, **options}
    kernel = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", arch, 32),
                            options=opts)
    cubin = kernel.asm.get("cubin")
    if not cubin:
        raise ToolMissing("the compiler produced no cubin")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        try:
            out = subprocess.run([cuobjdump_path(), "-res-usage", f.name], capture_output=True, text=True,
                                 timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ToolMissing(f"cuobjdump failed: {e}") from e
    regs, spill, static_shared = parse_res_usage(out.stdout)
    shared = int(getattr(kernel.metadata, "shared", 0) or 0)
    return KernelResources(fn.__name__, int(opts["num_warps"]), regs, spill, max(shared, static_shared))


def compile_op(runner: Any, msg: dict[str, Any]) -> dict[str, Any]:
    """The ``compile`` worker op: resources of every launch of the loaded candidate (None if repeated)."""
    from evo.contracts.kernelbench import torch_dtype
    from fitness.sandbox.runner import describe_exception
    from fitness.sandbox.torch_guard import CandidateGuard

    if runner.module is None:
        return {"ok": False, "kind": "crash", "message": "no candidate loaded"}
    torch = runner.torch
    meta = [torch.empty(tuple(s["shape"]), dtype=torch_dtype(s["dtype"]), device="meta")
            for s in [*msg["inputs"], *msg["outputs"]]]
    try:
        with CandidateGuard(runner.filename or ""), _Recorder() as rec:
            runner.module.launch(*meta, **runner.params)
    except BaseException as e:
        failure = runner.failure(e)
        if failure["kind"] in ("crash", "lint_error"):
            return failure
        return {"ok": False, "kind": "model_error", "message": f"launch on meta tensors failed: {failure['message']}"}
    arch = int(msg.get("arch", 90))
    done: dict[str, dict[str, Any]] = {}
    kernels = []
    for fn, bound, options, _grid in rec.launches:
        key = repr((fn.__name__, {k: (tuple(v.shape), str(v.dtype)) if hasattr(v, "shape") else v
                                  for k, v in bound.items()}, sorted(options.items())))
        if key not in done:
            try:
                done[key] = _compile(fn, bound, options, arch).to_dict()
            except ToolMissing as e:
                return {"ok": False, "kind": "model_error", "message": str(e)}
            except RuntimeError as e:
                if "ptxas" in str(e) and ("find" in str(e) or "not found" in str(e)):
                    return {"ok": False, "kind": "model_error", "message": f"no ptxas: {e}"}
                return {"ok": False, "kind": "compile_error",
                        "message": f"kernel {fn.__name__} does not compile for sm_{arch}: "
                                   f"{describe_exception(e, runner.filename)}"}
            except BaseException as e:
                if isinstance(e, (SystemExit, KeyboardInterrupt, MemoryError)):
                    raise
                return {"ok": False, "kind": "compile_error",
                        "message": f"kernel {fn.__name__} does not compile for sm_{arch}: "
                                   f"{describe_exception(e, runner.filename)}"}
        kernels.append(done[key])
    return {"ok": True, "kernels": kernels}
