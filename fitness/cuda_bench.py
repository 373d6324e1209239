"""The CUDA worker's side of timing: bench inputs, the candidate, and the torch baselines.

``bench_setup`` receives the inputs at the bench size once per worker and makes the rotated
copies (copy i holds the float inputs rolled by i * 7919 elements: the same values in other
places, so results differ between copies; integer inputs are shared), the outputs of each copy,
and the L2 flush buffer (4x the device's L2, at least 256 MB). ``bench`` times one subject with
`fitness.timer.measure`: the loaded candidate module (``module``: the candidate or the seed), or
the task's torch reference eager (``torch``) or compiled (``torch_compile``). After timing a
module, its outputs are also compared with the reference computed in float64 on the
GPU, when the task has one, copy by copy: a kernel right at check sizes and wrong at bench sizes
(an index overflow, say) is caught here, and so is one that replays an earlier copy's answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fitness.timer import TimerSettings, measure
from fitness.worker_ops import make_tensor


class CudaEventClock:
    """CUDA events around one repetition; `stop` synchronizes the whole device (every stream)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self._start: Any = None
        self._end: Any = None

    def start(self) -> None:
        self._start = self.torch.cuda.Event(enable_timing=True)
        self._end = self.torch.cuda.Event(enable_timing=True)
        self._start.record()

    def stop(self) -> float:
        self._end.record()
        self.torch.cuda.synchronize()
        return float(self._start.elapsed_time(self._end))


@dataclass
class _State:
    key: str
    inputs: list[list[Any]]
    outputs: list[list[Any]]
    flush: Any
    task: dict[str, Any]
    tolerance: tuple[float, float]
    references: dict[str, Any] = field(default_factory=dict)
    expected64: dict[int, list[Any]] = field(default_factory=dict)


def _rotated(torch: Any, t: Any, i: int) -> Any:
    if i == 0 or not t.is_floating_point() or t.numel() < 2:
        return t
    return torch.roll(t.reshape(-1), shifts=(i * 7919) % t.numel()).reshape(t.shape).contiguous()


def _poison(outputs: list[Any]) -> None:
    """NaN (floats) or 1 (others) everywhere: every repetition must write its outputs again."""
    for t in outputs:
        t.fill_(float("nan") if t.is_floating_point() else 1)


def _as_outputs(result: Any) -> list[Any]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


class BenchOps:
    """``bench_setup`` and ``bench`` for one CUDA worker."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.torch = runner.torch
        self.device = runner.device
        self.state: _State | None = None

    def handle(self, op: str, msg: dict[str, Any]) -> dict[str, Any]:
        if self.runner.device != "cuda":
            return {"ok": False, "kind": "model_error", "message": f"{op} needs a CUDA worker"}
        if op == "bench_setup":
            return self.setup(msg)
        return self.bench(msg)

    def setup(self, msg: dict[str, Any]) -> dict[str, Any]:
        torch = self.torch
        self.state = None
        torch.cuda.empty_cache()
        base = [make_tensor(torch, s, self.device) for s in msg["inputs"]]
        per_copy = sum(t.numel() * t.element_size() for t in base) + sum(
            math.prod(s["shape"]) * 8 for s in msg["outputs"])
        free, _ = torch.cuda.mem_get_info()
        copies = max(1, min(int(msg.get("copies", 4)), int(0.25 * free // max(per_copy, 1))))
        props = torch.cuda.get_device_properties(0)
        l2 = int(getattr(props, "L2_cache_size", 0) or 64 * 1024 * 1024)
        from evo.kernelbench import torch_dtype

        self.state = _State(
            key=msg["key"],
            inputs=[[_rotated(torch, t, i) for t in base] for i in range(copies)],
            outputs=[[torch.empty(tuple(s["shape"]), dtype=torch_dtype(s["dtype"]), device=self.device)
                      for s in msg["outputs"]] for _ in range(copies)],
            flush=torch.empty(max(4 * l2, 256 * 1024 * 1024), dtype=torch.int8, device=self.device),
            task=dict(msg["task"]),
            tolerance=(float(msg["tolerance"][0]), float(msg["tolerance"][1])),
        )
        torch.cuda.synchronize()
        return {"ok": True, "device_name": torch.cuda.get_device_name(0), "l2_bytes": l2, "copies": copies,
                "sms": int(props.multi_processor_count)}

    # -- the torch reference ----------------------------------------------------------------------
    def _reference(self, compiled: bool, float64: bool = False) -> Any:
        st = self.state
        assert st is not None
        name = ("compiled" if compiled else "eager") + ("64" if float64 else "")
        if name in st.references:
            return st.references[name]
        torch = self.torch
        t = st.task
        fn: Any
        if t["kind"] not in ("native", "kernelbench"):
            raise LookupError("the task has no torch reference")
        if t["kind"] == "native":
            from evo.native_task import NativeTask

            fn = NativeTask(t["path"], dtype=t["dtype"]).torch_reference
            if fn is None:
                raise LookupError("the task defines no torch_reference")
        else:
            from evo.kernelbench import KernelBenchTask, torch_dtype

            kb = KernelBenchTask(t["path"], check_sizes=[t["size"]], bench_sizes=[t["size"]], dtype=t["dtype"])
            ns = kb.namespace(t["size"])
            model = ns["Model"](*ns["get_init_inputs"]())
            n_forward = int(t["n_forward"])
            state = dict(zip(model.state_dict().keys(), st.inputs[0][n_forward:]))
            model.load_state_dict(state)
            model = model.to(self.device, dtype=torch.float64 if float64 else torch_dtype(t["dtype"])).eval()

            def fn(*tensors: Any, model: Any = model, n: int = n_forward) -> Any:
                with torch.no_grad():
                    return model(*tensors[:n])

        if compiled:
            fn = torch.compile(fn)
        st.references[name] = fn
        return fn

    def _expected64(self, copy: int) -> list[Any]:
        st = self.state
        assert st is not None
        if copy not in st.expected64:
            fn = self._reference(False, float64=True)
            args = [x.double() if x.is_floating_point() else x for x in st.inputs[copy]]
            with self.torch.no_grad():
                st.expected64[copy] = [o.double() for o in _as_outputs(fn(*args))]
        return st.expected64[copy]

    def _error_ratio(self, outs: list[Any], expected: list[Any]) -> float:
        atol, rtol = self.state.tolerance if self.state else (0.0, 0.0)
        worst = 0.0
        for o, e in zip(outs, expected):
            o64 = o.double().reshape(e.shape)
            rms = float(e.pow(2).mean().sqrt()) if e.numel() else 0.0
            tol = atol * rms + rtol * e.abs()
            diff = (o64 - e).abs()
            same = (o64 == e) | (o64.isnan() & e.isnan())
            ratio = (diff / tol.clamp_min(1e-300)).masked_fill(same, 0.0)
            worst = max(worst, float(ratio.nan_to_num(nan=math.inf).max()) if ratio.numel() else 0.0)
        return worst

    # -- timing ------------------------------------------------------------------------------------
    def bench(self, msg: dict[str, Any]) -> dict[str, Any]:
        from fitness.worker_guard import CandidateGuard

        st, torch, runner = self.state, self.torch, self.runner
        if st is None or st.key != msg["key"]:
            return {"ok": False, "kind": "need_setup", "message": "bench inputs not set up"}
        settings = TimerSettings(**{**msg.get("timer", {}), "copies": len(st.inputs)})
        clock = CudaEventClock(torch)
        which = msg["which"]
        if which == "module":
            if runner.module is None:
                return {"ok": False, "kind": "crash", "message": "no candidate loaded"}
            module, params, filename = runner.module, runner.params, runner.filename or ""
            remembered: dict[int, list[Any]] = {}

            def run(i: int) -> None:
                with CandidateGuard(filename):
                    module.launch(*st.inputs[i], *st.outputs[i], **params)

            def remember(i: int) -> None:
                torch.cuda.synchronize()
                remembered[i] = [o.clone() for o in st.outputs[i]]

            def recheck(i: int) -> str | None:
                for k, (now, before) in enumerate(zip(st.outputs[i], remembered[i])):
                    if not torch.equal(now, before):
                        r = self._error_ratio([now], [before.double()])
                        if r > 1.0:
                            return f"output {k} after timing differs from the untimed run ({r:.3g}x the tolerance)"
                return None

            try:
                timing = measure(run, clock=clock, flush=st.flush.zero_,
                                 prepare=lambda i: _poison(st.outputs[i]),
                                 remember=remember, recheck=recheck, settings=settings)
                torch.cuda.synchronize()
            except BaseException as e:
                return dict(runner.failure(e))
            ratio = None
            try:  # every copy's outputs against its own reference: no answer can be replayed
                ratio = max(self._error_ratio(st.outputs[i], self._expected64(i)) for i in range(len(st.inputs)))
            except LookupError:
                pass
            except Exception as e:
                if "CUDA" in str(e):
                    return dict(runner.failure(e))
            return {"ok": True, "timing": timing.to_dict(), "bench_error_ratio": ratio}
        try:
            fn = self._reference(which == "torch_compile")
            inputs = st.inputs

            def run_ref(i: int) -> None:
                with torch.no_grad():
                    fn(*inputs[i])

            timing = measure(run_ref, clock=clock, flush=st.flush.zero_, settings=settings)
        except LookupError as e:
            return {"ok": False, "kind": "unavailable", "message": str(e)}
        except BaseException as e:
            if isinstance(e, (SystemExit, KeyboardInterrupt)):
                raise
            if "illegal memory access" in str(e):
                return dict(runner.failure(e))
            return {"ok": False, "kind": "unavailable", "message": f"{which} baseline failed: {type(e).__name__}: {e}"}
        return {"ok": True, "timing": timing.to_dict()}
