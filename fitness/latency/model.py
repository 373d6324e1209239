"""The modelled latency source: counts from the interpreter, resources from a cross-compile, and the
roofline model of the target GPU (`fitness.latency.roofline`), cached by candidate id.

One model run of a candidate, at one of the task's bench sizes (`index`, the first by default):

1. the interpreter worker (on a machine without CUDA, the evaluation worker itself) loads the
   candidate afresh (a process of its own: no state carried from the check's calls) and runs ``launch``
   on inputs drawn like the check's (real values, from a secret seed the candidate cannot know; sent
   once per worker session) and on poisoned outputs, tensors at offset 0 as users' are (and as some
   check runs are), interpreting a random sample of programs (`fitness.latency.interp_profile`);
2. the output elements those programs stored are compared with the float64 reference of those
   inputs (computed once per evaluator): a wrong one is ``wrong_output`` at the bench size. The timed
   run is the checked run: when the sample leaves nothing to compare (outputs updated atomically, or
   computed from another launch's partial results) or stores too little of the outputs to be
   representative, the same run is profiled again with every program and loop in full and every output
   element compared (within ``evaluation.verify_timeout_s``); no other run stands in for it, and a
   candidate whose run is estimated past that limit is a ``timeout``, not timed;
3. a compile worker (no interpreter, no GPU) compiles exactly the specializations that ran; a kernel
   that does not compile is a ``compile_error``, one that does not fit the target too;
4. the roofline estimate, plus one memset launch per tensor `launch` zeroes or fills with torch
   (`fitness.latency.roofline.fill_seconds`); a time below the task's speed-of-light bound is
   ``unsafe``, as on CUDA.

The detail lists the sampling seed (to reproduce the verdict), what was compared, and what the model
does not represent (cache modifiers...). The speedup over the seed is the seed's modelled latency
over the candidate's.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import numpy as np

from evo.contracts import dtypes
from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig
from evo.contracts.gpus import get_profile
from evo.contracts.task import Case, CaseData, Task
from evo.contracts.verdict import LatencySource, Status
from fitness.check.compare import compare
from fitness.latency.counts import KernelResources, LaunchCounts
from fitness.latency.model_version import KEY as MODEL_VERSION_KEY
from fitness.latency.model_version import model_version
from fitness.latency.result import LatencyResult, sol_ms, speed_of_light_violation
from fitness.latency.roofline import DoesNotFit, estimate, fill_seconds
from fitness.sandbox.process import Worker, WorkerDied, WorkerTimeout

_KINDS = {"unsafe": Status.UNSAFE, "crash": Status.CRASH, "lint_error": Status.LINT_ERROR,
          "compile_error": Status.COMPILE_ERROR, "timeout": Status.TIMEOUT}
_MAX_LAUNCHES_IN_DETAIL = 8
MIN_COVERAGE = 0.5  # below this share of the outputs' elements, a sample is not representative

def sample_seed(secret: int) -> int:
    """The sampling seed of a run's model runs: unknown without the secret, and the same for every
    candidate of the run (common random numbers). Two kernels of one run are interpreted on the
    programs at the same grid positions, so where programs do unequal work (MLA's sequences of
    different lengths, causal attention's rows) the difference between their estimates is the
    kernels', not the draws': a search cannot pick an equivalent kernel that drew cheap programs
    (with a draw per candidate, identical kernels were modelled up to 14% apart at MLA's
    `small-batch` workload)."""
    return int.from_bytes(hashlib.sha256(f"{secret}:program-sample".encode()).digest()[:8], "little")


class ModelLatency:
    """Modelled latency of candidates for one task (see the module docstring)."""

    def __init__(self, task: Task, settings: EvaluationConfig, *, interp_worker: Worker | None,
                 compile_worker: Worker | None = None, secret: int = 0, index: int = 0) -> None:
        """Workers passed in are shared (and left open by `close`); missing ones are started here."""
        self.task = task
        self.settings = settings
        self.secret = secret
        self.gpu = get_profile(settings.target_gpu)
        self.index = index  # which bench size this instance models
        self.size = dict(task.bench_sizes[index])
        self._own = [w is None for w in (interp_worker, compile_worker)]
        self.interp = interp_worker or Worker.evaluating(settings, "cpu")
        self.compiler = compile_worker or Worker.compiling(settings)
        self.compiler.start()
        self.interp.start()
        self.cache: dict[str, LatencyResult] = {}
        self._setup_session = -1
        self._seed_ms: float | None = None
        self._seed_done = False

    @property
    def case(self) -> Case:
        return self.task.bench_cases(self.secret)[self.index]

    def data(self) -> CaseData:
        """Inputs and float64 reference at the bench size (computed once per task object)."""
        return self.task.case_data(self.case)

    def measure(self, candidate: Candidate, level: str = "full") -> LatencyResult:
        """The modelled latency (the level does not matter: the model is cached by candidate id)."""
        result = self._cached(candidate)
        seed = self._seed_latency()
        if result.latency_ms and seed:
            result = result.with_speedups(seed=seed / result.latency_ms)
        return result

    def _cached(self, candidate: Candidate) -> LatencyResult:
        if candidate.id not in self.cache:
            self.cache[candidate.id] = self._model(candidate)
        return self.cache[candidate.id]

    def _seed_latency(self) -> float | None:
        if not self._seed_done:
            self._seed_done = True
            if self.task.seed_source is not None:
                self._seed_ms = self._cached(Candidate.from_source(self.task.seed_source)).latency_ms
        return self._seed_ms

    def _failed(self, kind: str, message: str) -> LatencyResult:
        if kind in _KINDS:
            return LatencyResult(_KINDS[kind], f"latency model: {message}", source=LatencySource.MODEL,
                                 gpu=self.gpu.name)
        return LatencyResult(reason=f"latency unavailable: {message}", source=None, gpu=self.gpu.name,
                             detail={"error": message})

    # -- one model run --------------------------------------------------------------------------

    def _profile(self, candidate: Candidate, seed: int, *, every_program: bool = False) -> dict[str, Any]:
        """The interpreter worker's profile reply (setting up the bench inputs when the worker lacks them);
        `every_program`: every program and loop in full (within ``verify_timeout_s``), every output compared."""
        timeout = self.settings.verify_timeout_s if every_program else self.settings.latency_timeout_s
        data = self.data()
        key = f"{self.task.key}:{self.case.size_json}:{self.case.seed}"
        settings = {"inner_samples": self.settings.profile_samples, "loop_full": self.settings.profile_full_loop,
                    "full_programs": self.settings.profile_full_programs,
                    "full_iterations": self.settings.profile_full_iterations,
                    "sms": self.gpu.sms, "max_blocks_per_sm": self.gpu.max_blocks_per_sm,
                    "max_warps_per_sm": self.gpu.max_warps_per_sm, "every_program": every_program}
        if every_program:
            settings.update(loop_full=1 << 62, full_iterations=1 << 62)
        load = {"op": "load", "source": candidate.source, "params": candidate.params, "name": candidate.id}
        reply: dict[str, Any] = {}
        for _ in range(2):
            # the bench inputs first: a fork-server worker keeps them in the process each candidate's is forked from
            if self._setup_session != self.interp.starts:
                inputs = [{"dtype": t.dtype, "shape": list(t.shape), "data": t.data.tobytes()} for t in data.inputs]
                outputs = [{"dtype": d, "shape": list(s)} for d, s in zip(data.output_dtypes, data.output_shapes)]
                reply = self.interp.request({"op": "profile_setup", "key": key, "inputs": inputs,
                                             "outputs": outputs}, timeout)
                if not reply.get("ok"):
                    return reply
                self._setup_session = self.interp.starts
            reply = self.interp.request(load, timeout)  # a fresh process: no state carried from the check's calls
            if not reply.get("ok"):
                return reply
            reply = self.interp.request({"op": "profile", "key": key, "seed": seed, "settings": settings}, timeout)
            if reply.get("kind") != "need_setup":
                return reply
            self._setup_session = -1  # the worker was replaced: set up again
        return reply

    def _compare(self, reply: dict[str, Any]) -> tuple[int, str | None]:
        """(elements compared, the reason they are wrong or None) for the sampled programs' outputs."""
        data = self.data()
        compared = 0
        for i, (raw_idx, raw_values) in enumerate(reply["verified"]):
            idx = np.frombuffer(raw_idx, dtype=np.int64)
            if not idx.size:
                continue
            dtype = data.output_dtypes[i]
            values = np.frombuffer(raw_values, dtype=dtypes.storage_type(dtype))
            expected = np.asarray(data.expected[i]).reshape(-1)[idx]
            diff = compare(values, dtype, expected, self.task.tolerance_for(dtype))
            compared += int(idx.size)
            if not diff.ok:
                where = ""
                if diff.first_bad is not None:
                    flat = int(idx[diff.first_bad[0]])
                    shape = data.output_shapes[i]
                    where = f" (first at index {list(np.unravel_index(flat, shape)) if shape else []})"
                return compared, (f"output {i} wrong at bench size {self.size} in the elements the sampled programs "
                                  f"stored: {diff.describe()}{where}")
        return compared, None

    def _model(self, candidate: Candidate) -> LatencyResult:
        started = time.monotonic()
        seed = sample_seed(self.secret)
        timeout = self.settings.latency_timeout_s
        try:
            self.data()
        except Exception as e:
            return self._failed("model_error", f"no bench case at {self.size}: {type(e).__name__}: {e}")
        try:
            reply = self._profile(candidate, seed)
        except WorkerTimeout as e:
            return self._failed("timeout", f"profiling at bench size {self.size} did not finish: {e}")
        except WorkerDied as e:
            return self._failed("crash", f"profiling at bench size {self.size} crashed the worker: {e.reason}")
        if not reply.get("ok"):
            return self._failed(str(reply.get("kind")), str(reply.get("message")))
        compared, wrong = self._compare(reply)
        if wrong:
            return LatencyResult(Status.WRONG_OUTPUT, wrong, source=LatencySource.MODEL, gpu=self.gpu.name)
        coverage = float(reply.get("coverage", 0.0))
        estimate_s = float(reply.get("full_run_s", 0.0))
        verification: dict[str, Any] = {"elements_compared": compared, "programs_run": reply["programs_run"],
                                        "output_coverage": round(coverage, 3), "full_run": False,
                                        "full_run_estimate_s": round(estimate_s, 1)}
        if not compared or coverage < MIN_COVERAGE:
            # the timed run must be a checked run: the same run again, every program in full, every output
            # compared (not another run standing in for it)
            why = ("the sampled programs stored no output element computed in full" if not compared else
                   f"the sampled launches store {coverage:.0%} of the outputs' elements")
            if estimate_s > self.settings.verify_timeout_s:
                return LatencyResult(Status.TIMEOUT, (
                    f"latency model: outputs not verifiable at bench size {self.size}: {why}, and profiling "
                    f"every program would take about {estimate_s:.0f} CPU seconds in the interpreter "
                    f"(evaluation.verify_timeout_s is {self.settings.verify_timeout_s:.0f} s): a kernel whose "
                    "timed run cannot be checked is not timed; bench at smaller sizes on a CPU, or run on a GPU"),
                    source=LatencySource.MODEL, gpu=self.gpu.name)
            try:
                reply = self._profile(candidate, seed, every_program=True)
            except WorkerTimeout as e:
                return self._failed("timeout", f"profiling every program at bench size {self.size} did not "
                                               f"finish: {e}")
            except WorkerDied as e:
                return self._failed("crash", f"profiling every program at bench size {self.size} crashed the "
                                             f"worker: {e.reason}")
            if not reply.get("ok"):
                return self._failed(str(reply.get("kind")), str(reply.get("message")))
            compared, wrong = self._compare(reply)
            if wrong:
                return LatencyResult(Status.WRONG_OUTPUT, wrong.replace("the sampled programs", "its programs"),
                                     source=LatencySource.MODEL, gpu=self.gpu.name)
            verification.update(full_run=True, elements_compared=compared, programs_run=reply["programs_run"],
                                output_coverage=1.0, why_every_program=why)
        try:
            resources = self._compile(candidate, reply["specs"], timeout)
        except _CompileFailed as e:
            return LatencyResult(e.status, f"latency model: {e}", source=LatencySource.MODEL, gpu=self.gpu.name)
        launches = [LaunchCounts.from_dict(d) for d in reply["launches"]]
        try:
            est = estimate(launches, [resources[c.spec] for c in launches], self.gpu)
        except DoesNotFit as e:
            return LatencyResult(Status.COMPILE_ERROR, f"does not fit on {self.gpu.description}: {e}",
                                 source=LatencySource.MODEL, gpu=self.gpu.name)
        return self._result(est, launches, reply, verification, seed, started)

    def _result(self, est: Any, launches: list[LaunchCounts], reply: dict[str, Any], verification: dict[str, Any],
                seed: int, started: float) -> LatencyResult:
        fills = [int(b) for b in reply.get("fills", [])]
        fill_s = fill_seconds(fills, self.gpu)
        latency_ms = (est.seconds + fill_s) * 1e3
        sol = sol_ms(self.task, self.size, self.gpu)
        detail: dict[str, Any] = {
            "gpu": self.gpu.name, MODEL_VERSION_KEY: model_version(), "size": self.size,
            "model_s": round(time.monotonic() - started, 3),
            "dram_bytes": round(est.dram_bytes), "flops": round(est.flops), "sample_seed": str(seed),
            "verification": verification,
            "launches": [{**e.to_dict(), "grid": list(c.grid), "sampled_programs": c.sampled_programs}
                         for e, c in list(zip(est.launches, launches))[:_MAX_LAUNCHES_IN_DETAIL]],
        }
        notes = []
        if len(launches) > _MAX_LAUNCHES_IN_DETAIL:
            notes.append(f"{len(launches)} distinct launches; the first {_MAX_LAUNCHES_IN_DETAIL} are shown")
        if fills:
            detail["host_fills"] = {"count": len(fills), "bytes": sum(fills),
                                    "ms": round(fill_s * 1e3, 6)}
        if reply.get("notes"):
            detail["data_dependent"] = list(reply["notes"])
        if reply.get("unmodelled"):
            detail["unmodelled"] = list(reply["unmodelled"])
        if sol is not None:
            detail["sol_ms"] = sol
        if notes:
            detail["notes"] = notes
        result = LatencyResult(
            latency_ms=latency_ms, source=LatencySource.MODEL, detail=detail, gpu=self.gpu.name,
            roofline_fraction=None if sol is None or latency_ms <= 0 else min(sol / latency_ms, 1.0),
        )
        violation = speed_of_light_violation(latency_ms, sol_ms(self.task, self.size, self.gpu, bound=True),
                                             what="modelled")
        if violation:
            return LatencyResult(Status.UNSAFE, violation, latency_ms, LatencySource.MODEL, detail=detail,
                                 gpu=self.gpu.name)
        return result

    def _compile(self, candidate: Candidate, specs: list[dict[str, Any]], timeout: float) -> list[KernelResources]:
        """The resources of every specialization that ran, compiled for the target."""
        load = {"op": "load", "source": candidate.source, "params": candidate.params, "name": candidate.id}
        try:
            reply = self.compiler.request(load, timeout)
            if reply.get("ok"):
                reply = self.compiler.request({"op": "compile", "specs": specs, "arch": self.gpu.arch}, timeout)
        except WorkerTimeout as e:
            raise _CompileFailed(Status.COMPILE_ERROR, f"the compile for {self.gpu.name} did not finish: {e}") from None
        except WorkerDied as e:
            raise _CompileFailed(Status.CRASH, f"the compile worker died: {e.reason}") from None
        if not reply.get("ok"):
            raise _CompileFailed(_KINDS.get(str(reply.get("kind")), Status.COMPILE_ERROR), str(reply.get("message")))
        return [KernelResources.from_dict(k) for k in reply["kernels"]]

    def close(self) -> None:
        for own, w in zip(self._own, (self.interp, self.compiler)):
            if own:
                w.close()


class _CompileFailed(Exception):
    def __init__(self, status: Status, reason: str) -> None:
        super().__init__(reason)
        self.status = status
