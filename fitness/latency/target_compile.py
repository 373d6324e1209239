"""Static resources of a candidate's kernels on the target GPU, without a GPU.

Runs in the compile worker: Triton's real compiler, no interpreter (``TRITON_INTERPRET`` unset;
under it ``@triton.jit`` gives an interpreted function the compiler rejects), no GPU visible. It
compiles exactly the specializations the interpreted run launched (`interp_profile.compile_spec`:
kernel, argument types, constants, divisibility, num_warps, num_stages) with
``triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", arch, 32))``,
without calling the candidate's ``launch`` again, and reads the cubin with the ``cuobjdump
-res-usage`` bundled with Triton: registers per thread, stack (spills) per thread, shared memory per
program. The pipelining depth of the kernel's loops is read from the compiled TTGIR (the number of
buffers of each multi-buffered copy into shared memory), not from the launch's ``num_stages``: a
loop's own ``tl.range(num_stages=...)`` or a load the pipeliner cannot handle decides it.

Any kernel that does not compile for the target is a ``compile_error``: the model never runs on
resources it assumed.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from typing import Any

from fitness.latency.counts import KernelResources

_RES = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")
_BUFFERS = re.compile(r"ttg\.local_alloc\s*:\s*\(\)\s*->\s*!ttg\.memdesc<(\d+)x")


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


def pipeline_depth(ttgir: str) -> int:
    """The smallest number of buffers of any multi-buffered copy into shared memory (the pipelining
    depth of the least pipelined loop), 1 when nothing is pipelined."""
    if "async_copy_global_to_local" not in ttgir and "async_tma_copy" not in ttgir:
        return 1
    depths = [int(d) for d in _BUFFERS.findall(ttgir)]
    return min(depths) if depths else 1


def _decode(v: Any) -> Any:
    if isinstance(v, dict) and "dtype" in v:
        import triton.language as tl

        return getattr(tl, str(v["dtype"]))
    if isinstance(v, dict):
        raise ValueError(f"a constant the compile cannot rebuild: {v.get('repr')}")
    return v


def _compile(fn: Any, spec: dict[str, Any], arch: int, *, resources: bool = True) -> KernelResources | None:
    """The kernel `fn` compiled for `spec` on sm_`arch`, and its resources (None without `resources`)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    constexprs = {(int(i),): _decode(v) for i, v in spec["constexprs"]}
    attrs = {(int(i),): [list(a) for a in a_list] for i, a_list in spec["attrs"]}
    opts = {"num_warps": 4, "num_stages": 3, **spec["options"]}
    kernel = triton.compile(ASTSource(fn, dict(spec["signature"]), constexprs, attrs),
                            target=GPUTarget("cuda", arch, 32), options=opts)
    cubin = kernel.asm.get("cubin")
    if not cubin:
        raise ToolMissing("the compiler produced no cubin")
    if not resources:
        return None
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
    depth = pipeline_depth(str(kernel.asm.get("ttgir", "")))
    return KernelResources(fn.__name__, int(opts["num_warps"]), regs, spill, max(shared, static_shared), depth)


def compile_op(runner: Any, msg: dict[str, Any]) -> dict[str, Any]:
    """The ``compile`` worker op: the resources of every specialization in ``msg["specs"]``, compiled
    from the loaded candidate's kernels (found by name among its module-level functions). With
    ``resources: false`` only whether each compiles (no resources read). A failure names the kernel and
    carries the failing spec's ``index``."""
    from fitness.sandbox.runner import describe_exception

    if runner.module is None:
        return {"ok": False, "kind": "crash", "message": "no candidate loaded"}
    arch = int(msg.get("arch", 90))
    resources = bool(msg.get("resources", True))
    kernels = []
    for index, spec in enumerate(msg["specs"]):
        name = str(spec["kernel"])
        fn = getattr(runner.module, name, None)
        if fn is None or not hasattr(fn, "params"):
            return {"ok": False, "kind": "compile_error", "index": index,
                    "message": f"kernel {name} is not a module-level @triton.jit function: it cannot be compiled "
                               "for the target"}
        try:
            compiled = _compile(fn, spec, arch, resources=resources)
        except ToolMissing as e:
            return {"ok": False, "kind": "compile_error", "index": index,
                    "message": f"kernel {name}: resources unreadable: {e}"}
        except (SystemExit, KeyboardInterrupt, MemoryError):
            raise
        except BaseException as e:
            why = describe_exception(e, runner.filename)
            return {"ok": False, "kind": "compile_error", "index": index,
                    "message": f"kernel {name} does not compile for sm_{arch}: {why}"}
        if compiled is not None:
            kernels.append(compiled.to_dict())
    return {"ok": True, "kernels": kernels}
