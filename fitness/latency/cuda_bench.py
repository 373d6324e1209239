"""The CUDA worker's side of timing: bench inputs, the candidate, and the torch baselines.

``bench_setup`` receives the inputs at the bench size once per worker and makes the rotated
copies (copy i holds the float inputs rolled by i * 7919 elements: the same values in other
places, so results differ between copies; integer inputs are shared), the outputs of each copy,
the L2 flush buffer (4x the device's L2, at least 256 MB) and the operands of the spin-up work.

``bench`` times one subject (``which``): the loaded candidate module (``module``: the candidate or
the seed), or the task's torch reference eager (``torch``) or compiled (``torch_compile``); and,
interleaved with it (`fitness.latency.timer.measure_interleaved`), the baselines named in ``with``:
``torch``, ``torch_compile`` or a module kept earlier (``keep_as``: the module just timed stays
loaded under that name, writing to outputs of its own, for later ``with``). ``spin_up`` (the
settings of `fitness.latency.timer.spin_up`), when given, keeps the GPU busy with matmuls first, until
its clocks have settled. After timing a module, its outputs are also compared with the
reference computed in float64 on the GPU, when the task has one, copy by copy: a kernel right at
check sizes and wrong at bench sizes (an index overflow, say) is caught here, and so is one that
replays an earlier copy's answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from evo.contracts.config import SpinUpConfig, TimerConfig
from evo.contracts.task import one_line
from fitness.latency.bench_tensors import make_tensor
from fitness.latency.timer import CudaEventClock, Subject, measure_interleaved, spin_up


@dataclass(frozen=True)
class _Kept:
    """A module kept as a baseline: what `launch` needs, and outputs of its own."""

    module: Any
    params: dict[str, Any]
    filename: str
    outputs: list[Any]


@dataclass
class _State:
    key: str
    inputs: list[list[Any]]
    outputs: list[list[Any]]
    flush: Any
    task: dict[str, Any]
    tolerance: tuple[float, float]
    spin: tuple[Any, Any, Any]
    references: dict[str, Any] = field(default_factory=dict)
    expected64: dict[int, list[Any]] = field(default_factory=dict)
    kept: dict[str, _Kept] = field(default_factory=dict)


_SPIN_N = 4096  # spin-up work: matmuls of this size, 8 per chunk (about 2 ms on an H100 at full clocks)


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
        from evo.contracts.kernelbench import torch_dtype

        self.state = _State(
            key=msg["key"],
            inputs=[[_rotated(torch, t, i) for t in base] for i in range(copies)],
            outputs=[[torch.empty(tuple(s["shape"]), dtype=torch_dtype(s["dtype"]), device=self.device)
                      for s in msg["outputs"]] for _ in range(copies)],
            flush=torch.empty(max(4 * l2, 256 * 1024 * 1024), dtype=torch.int8, device=self.device),
            task=dict(msg["task"]),
            tolerance=(float(msg["tolerance"][0]), float(msg["tolerance"][1])),
            spin=tuple(torch.randn(_SPIN_N, _SPIN_N, device=self.device, dtype=torch.float16) for _ in range(3)),
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
            from evo.contracts.native_task import NativeTask

            fn = NativeTask(t["path"], dtype=t["dtype"]).torch_reference
            if fn is None:
                raise LookupError("the task defines no torch_reference")
        else:
            from evo.contracts.kernelbench import KernelBenchTask, float64_default, torch_dtype

            mode = str(t.get("mode", "train"))  # as the CPU check runs it (`KernelBenchTask.mode`)
            kb = KernelBenchTask(t["path"], check_sizes=[t["size"]], bench_sizes=[t["size"]], dtype=t["dtype"],
                                 redraw_params=False, mode=mode)
            ns = kb.namespace(t["size"])
            model = ns["Model"](*ns["get_init_inputs"]())
            n_forward = int(t["n_forward"])
            state = dict(zip(model.state_dict().keys(), st.inputs[0][n_forward:]))
            model.load_state_dict(state)
            model = model.to(self.device, dtype=torch.float64 if float64 else torch_dtype(t["dtype"]))
            model.train(mode == "train")

            scalars = frozenset(int(i) for i in t.get("scalars", []))  # numbers of get_inputs(), as numbers

            def fn(*tensors: Any, model: Any = model, n: int = n_forward) -> Any:
                with torch.no_grad():
                    return model(*(x.item() if i in scalars else x for i, x in enumerate(tensors[:n])))

            if float64:  # as on the CPU: tensors the forward makes (torch.eye(n)) are float64 too
                plain = fn

                def fn(*tensors: Any) -> Any:
                    with float64_default():
                        return plain(*tensors)

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
    def _busy(self) -> None:
        """One chunk of spin-up work: matmuls, whose time follows the SM clock."""
        assert self.state is not None
        a, b, c = self.state.spin
        for _ in range(8):
            self.torch.mm(a, b, out=c)

    def _module_subject(self) -> Subject:
        """The loaded module, on each copy's own outputs, re-checked after timing."""
        from fitness.sandbox.torch_guard import CandidateGuard

        st, torch, runner = self.state, self.torch, self.runner
        assert st is not None
        if runner.module is None:
            raise LookupError("no candidate loaded")
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

        return Subject("module", run, lambda i: _poison(st.outputs[i]), remember, recheck)

    def _baseline_subject(self, name: str, *, optional: bool) -> Subject:
        """A torch reference (``torch``, ``torch_compile``) or a kept module; LookupError if unknown."""
        from fitness.sandbox.torch_guard import CandidateGuard

        st, torch = self.state, self.torch
        assert st is not None
        kept = st.kept.get(name)
        if kept is not None:
            def run_kept(i: int, k: _Kept = kept) -> None:
                with CandidateGuard(k.filename):
                    k.module.launch(*st.inputs[i], *k.outputs, **k.params)

            def poison_kept(i: int, k: _Kept = kept) -> None:
                _poison(k.outputs)

            return Subject(name, run_kept, poison_kept, optional=optional)
        if name not in ("torch", "torch_compile"):
            raise LookupError(f"no baseline {name!r} kept in this worker session")
        fn = self._reference(name == "torch_compile")
        inputs = st.inputs

        def run_ref(i: int) -> None:
            with torch.no_grad():
                fn(*inputs[i])

        return Subject(name, run_ref, optional=optional)

    def bench(self, msg: dict[str, Any]) -> dict[str, Any]:
        st, torch, runner = self.state, self.torch, self.runner
        if st is None or st.key != msg["key"]:
            return {"ok": False, "kind": "need_setup", "message": "bench inputs not set up"}
        settings = TimerConfig(**{**msg.get("timer", {}), "copies": len(st.inputs)})
        clock = CudaEventClock(torch)
        which = msg["which"]
        try:
            main = self._module_subject() if which == "module" else self._baseline_subject(which, optional=False)
        except LookupError as e:
            if which == "module":
                return {"ok": False, "kind": "crash", "message": str(e)}
            return {"ok": False, "kind": "unavailable", "message": str(e)}
        errors: dict[str, str] = {}
        baselines = []
        for name in msg.get("with", []):
            try:
                baselines.append(self._baseline_subject(name, optional=True))
            except Exception as e:
                errors[name] = f"{name} baseline failed: {type(e).__name__}: {e}"
        try:
            spun = spin_up(self._busy, clock=clock, settings=SpinUpConfig(**msg["spin_up"])) \
                if msg.get("spin_up") is not None else None
            session = measure_interleaved([main, *baselines], clock=clock, flush=st.flush.zero_, settings=settings)
            torch.cuda.synchronize()
        except BaseException as e:
            if which == "module" or isinstance(e, (SystemExit, KeyboardInterrupt)) or "illegal memory access" in str(e):
                return dict(runner.failure(e))
            return {"ok": False, "kind": "unavailable", "message": f"{which} baseline failed: {type(e).__name__}: {e}"}
        errors.update({n: f"{n} baseline failed: {m}" for n, m in session.errors.items()})
        reply: dict[str, Any] = {
            "ok": True, "timing": session.timings[main.name].to_dict(),
            "baselines": {n: t.to_dict() for n, t in session.timings.items() if n != main.name},
            "baseline_errors": errors, "spin_up": None if spun is None else spun.to_dict(),
        }
        if which != "module":
            return reply
        ratio = None
        try:  # every copy's outputs against its own reference: no answer can be replayed
            ratio = max(self._error_ratio(st.outputs[i], self._expected64(i)) for i in range(len(st.inputs)))
        except LookupError:
            pass
        except Exception as e:
            if "CUDA" in str(e):
                return dict(runner.failure(e))
            # the driver checks the outputs in full instead; the reason travels with the verdict
            reply["bench_reference_error"] = one_line(e)
        reply["bench_error_ratio"] = ratio
        if msg.get("keep_as"):
            st.kept[str(msg["keep_as"])] = _Kept(runner.module, dict(runner.params), runner.filename or "",
                                                 [torch.empty_like(o) for o in st.outputs[0]])
        return reply
