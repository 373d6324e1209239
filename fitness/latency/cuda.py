"""The measured latency source: timing in the CUDA evaluation worker, as ratios to baselines timed
in the same worker session, with a speed-of-light sanity bound.

Per worker session (a replaced worker starts a new one): the bench inputs are sent once
(``bench_setup``), then the baselines are timed together: the task's seed candidate (which the
worker then keeps loaded), torch eager and torch.compile of the task's torch reference (a native
task's ``torch_reference``, a KernelBench ``Model``). Each candidate is then timed interleaved
with every baseline that timed there (`fitness.latency.cuda_bench`, `fitness.latency.timer.measure_interleaved`):
its speedups are ratios of times taken under the same GPU clocks, not against a figure from
minutes before. Every timing op first keeps the GPU busy until its clocks settle (`spin_up`,
longer before the first timed subject of a worker session: an idle GPU is clocked down).

A candidate is rejected when its outputs change during timing or are wrong at the bench size
(``wrong_output``), when its time is below the speed-of-light bound of the device (``unsafe``),
or when it fails on the GPU (``crash``: the worker, whose CUDA context is gone, is replaced).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from evo.contracts.candidate import Candidate
from evo.contracts.config import Baseline, EvaluationConfig
from evo.contracts.gpus import generous_profile, profile_for_device
from evo.contracts.kernelbench import KernelBenchTask
from evo.contracts.native_task import NativeTask
from evo.contracts.task import Task, size_key
from evo.contracts.verdict import LatencySource, Status
from fitness.latency.bench_tensors import tensor_specs
from fitness.latency.result import BenchCheck, LatencyResult, sol_ms, speed_of_light_violation
from fitness.sandbox.process import Worker, WorkerDied, WorkerTimeout

_KINDS = {"crash": Status.CRASH, "compile_error": Status.COMPILE_ERROR, "lint_error": Status.LINT_ERROR,
          "timeout": Status.TIMEOUT, "unsafe": Status.UNSAFE}


class _NeedSetup(Exception):
    """The worker lost the bench inputs (replaced, or set up for another task): start over."""


class _Rejected(Exception):
    def __init__(self, status: Status, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def task_info(task: Task, size: dict[str, Any]) -> dict[str, Any]:
    """What the worker needs to rebuild the task's torch reference."""
    if isinstance(task, KernelBenchTask):
        return {"kind": "kernelbench", "path": str(task.path), "size": size, "dtype": task.dtype,
                "n_forward": task.forward_count(size), "mode": task.mode,
                "scalars": task.scalar_positions(size)}
    if isinstance(task, NativeTask):
        return {"kind": "native", "path": str(task.path), "size": size, "dtype": task.dtype}
    return {"kind": "none"}


class CudaLatency:
    """Measured latency of candidates for one task, in `worker` (a CUDA evaluation worker)."""

    def __init__(self, task: Task, settings: EvaluationConfig, *, worker: Worker, secret: int = 0,
                 bench_check: BenchCheck | None = None, index: int = 0) -> None:
        """`secret` draws the bench inputs; `bench_check(candidate, case)` runs a candidate in full at the
        bench size when the worker could not compare its outputs with a torch reference there."""
        self.task = task
        self.settings = settings
        self.worker = worker
        self.secret = secret
        self.bench_check = bench_check
        self.index = index  # which bench size this instance times
        self.size = dict(task.bench_sizes[index])
        self.key = f"{task.key}:{size_key(self.size)}"
        self._setup_session = -1
        self._baseline_session = -1
        self._spun_session = -1
        self.device_name = ""
        self.baselines_ms: dict[str, float] = {}  # timed at the start of the worker session
        self.baseline_notes: dict[str, str] = {}
        self.adjacent: list[str] = []  # baselines timed alongside each candidate

    @property
    def _session(self) -> int:
        return self.worker.starts

    def _request(self, msg: dict[str, Any], what: str) -> dict[str, Any]:
        try:
            reply = self.worker.request(msg, self.settings.latency_timeout_s)
        except WorkerTimeout as e:
            raise _Rejected(Status.TIMEOUT, f"{what} did not finish: {e} (worker replaced)") from None
        except WorkerDied as e:
            raise _Rejected(Status.CRASH, f"{what}: {e.reason}") from None
        if reply.get("kind") == "need_setup":  # the worker was replaced or set up for another task
            self._setup_session = -1
            raise _NeedSetup(what)
        return reply

    def _setup(self) -> None:
        case = self.task.bench_case(self.size, data=True, draw=self.task.bench_cases(self.secret)[self.index])
        ins, outs = tensor_specs(case)
        out_dtype = case.output_dtypes[0] if case.output_dtypes else self.task.dtype
        tol = self.task.tolerance_for(out_dtype)
        reply = self._request({"op": "bench_setup", "key": self.key, "inputs": ins, "outputs": outs,
                               "copies": self.settings.timer.copies, "task": task_info(self.task, self.size),
                               "tolerance": [tol.atol, tol.rtol]}, "setting up bench inputs")
        if not reply.get("ok"):
            raise _Rejected(Status.CRASH, f"bench setup failed: {reply.get('message')}")
        self.device_name = str(reply.get("device_name", ""))
        self._setup_session = self._session
        self._baseline_session = -1

    def _spin_up(self) -> dict[str, Any]:
        """The spin-up of the next timing op: the long one once per worker session."""
        if self._spun_session != self._session:
            self._spun_session = self._session
            return self.settings.spin_up_first.model_dump()
        return self.settings.spin_up.model_dump()

    def _time_module(self, candidate: Candidate, level: str, what: str, *, with_: list[str],
                     keep_as: str | None = None) -> dict[str, Any]:
        reply = self._request({"op": "load", "source": candidate.source, "params": candidate.params,
                               "name": candidate.id}, f"loading {what}")
        if not reply.get("ok"):
            raise _Rejected(_KINDS.get(str(reply.get("kind")), Status.CRASH), str(reply.get("message")))
        timer = self.settings.quick_timer if level == "quick" else self.settings.timer
        reply = self._request({"op": "bench", "key": self.key, "which": "module", "timer": timer.model_dump(),
                               "with": with_, "keep_as": keep_as, "spin_up": self._spin_up()}, f"timing {what}")
        if not reply.get("ok"):
            status = _KINDS.get(str(reply.get("kind")), Status.CRASH)
            message = str(reply.get("message"))
            if status is Status.CRASH and "illegal" in message:
                message = f"illegal memory access at bench size {self.size} (worker replaced): {message}"
            raise _Rejected(status, message)
        return reply

    def _baselines(self) -> None:
        """Time the baselines of this worker session together; the seed stays loaded in the worker."""
        if self._baseline_session == self._session:
            return
        self.baselines_ms, self.baseline_notes, self.adjacent = {}, {}, []
        wanted = [b.value for b in self.settings.baselines]
        torch_names = [b for b in wanted if b != Baseline.SEED.value]
        if Baseline.SEED.value in wanted and self.task.seed_source is not None:
            try:
                r = self._time_module(Candidate.from_source(self.task.seed_source), "full", "the seed",
                                      with_=torch_names, keep_as="seed")
            except _Rejected as e:
                self.baseline_notes["seed"] = f"{e.status.value}: {e.reason}"
            else:
                self.baselines_ms["seed"] = float(r["timing"]["median_ms"])
                self.baselines_ms.update({k: float(t["median_ms"]) for k, t in r.get("baselines", {}).items()})
                self.baseline_notes.update(r.get("baseline_errors", {}))
                torch_names = []
        for name in torch_names:  # no seed to time them with: one at a time
            reply = self._request({"op": "bench", "key": self.key, "which": name,
                                   "timer": self.settings.timer.model_dump(), "spin_up": self._spin_up()},
                                  f"timing the {name} baseline")
            if reply.get("ok"):
                self.baselines_ms[name] = float(reply["timing"]["median_ms"])
            else:
                self.baseline_notes[name] = str(reply.get("message"))
        self.adjacent = [b for b in wanted if b in self.baselines_ms]
        self._baseline_session = self._session

    def _timed(self, candidate: Candidate, level: str) -> dict[str, Any]:
        """The candidate's bench reply, baselines set up first; once more if the worker lost them."""
        lost = 0
        while True:
            try:
                if self._setup_session != self._session:
                    self._setup()
                self._baselines()
                return self._time_module(candidate, level, "the candidate", with_=self.adjacent)
            except _NeedSetup as e:
                lost += 1
                if lost == 3:
                    raise _Rejected(Status.CRASH, f"{e}: the worker keeps losing its bench inputs") from None

    def measure(self, candidate: Candidate, level: str = "full") -> LatencyResult:
        try:
            reply = self._timed(candidate, level)
        except _Rejected as e:
            return LatencyResult(e.status, e.reason, source=LatencySource.CUDA, gpu=self.device_name)
        timing = reply["timing"]
        latency = float(timing["median_ms"])
        adjacent = {k: float(t["median_ms"]) for k, t in reply.get("baselines", {}).items()}
        notes = {**self.baseline_notes, **reply.get("baseline_errors", {})}
        gpu = profile_for_device(self.device_name) or generous_profile()
        sol = sol_ms(self.task, self.size, gpu)
        sol_bound = sol_ms(self.task, self.size, gpu, bound=True)
        detail: dict[str, Any] = {
            "gpu": self.device_name, "size": self.size, "median_ms": latency, "min_ms": timing["min_ms"],
            "max_ms": timing["max_ms"], "reps": timing["reps"], "copies": timing["copies"],
            "baselines_ms": adjacent, "session_baselines_ms": dict(self.baselines_ms),
            "spin_up": reply.get("spin_up"),
        }
        if notes:
            detail["baseline_errors"] = notes
        if sol is not None:
            detail["sol_ms"] = sol
            detail["sol_bound_ms"] = sol_bound
        if reply.get("bench_error_ratio") is not None:
            detail["bench_error_ratio"] = reply["bench_error_ratio"]
        if reply.get("bench_reference_error"):  # the torch reference failed there: checked in full instead
            detail["bench_reference_error"] = str(reply["bench_reference_error"])
        result = LatencyResult(
            source=LatencySource.CUDA, latency_ms=latency, detail=detail, gpu=self.device_name,
            speedups={k: v / latency for k, v in adjacent.items() if latency > 0},
            roofline_fraction=None if sol is None or latency <= 0 else min(sol / latency, 1.0),
        )
        ratio = reply.get("bench_error_ratio")
        if timing.get("recheck_failure"):
            return replace(result, status=Status.WRONG_OUTPUT,
                           reason=f"outputs changed while timed: {timing['recheck_failure']}")
        if ratio is not None and ratio > 1.0:
            return replace(result, status=Status.WRONG_OUTPUT,
                           reason=f"wrong at bench size {self.size}: error {ratio:.3g}x the tolerance against "
                                  "the float64 torch reference")
        if ratio is None:  # no torch reference compared the outputs there: check them in full
            if self.bench_check is None:
                return LatencyResult(reason="latency unavailable: the outputs at the bench size could not be "
                                            "compared with a reference", gpu=self.device_name)
            full = self.bench_check(candidate, self.task.bench_cases(self.secret)[self.index])
            if not full.ok:
                return replace(result, status=full.status, reason=f"at bench size {self.size}: {full.reason}")
        violation = speed_of_light_violation(latency, sol_bound)
        if violation:
            return replace(result, status=Status.UNSAFE, reason=violation)
        return result

    def close(self) -> None:
        pass
