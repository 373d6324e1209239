"""Stage 2: equivalence with the reference, judged in the driver from what the worker sends back.

For each check case (every check size, several input draws and value distributions): the
reference was computed first, on pristine copies, in float64. The candidate runs in the worker on
fresh guarded buffers; afterwards the driver checks, in order: every guard zone intact (else an
out-of-bounds store: ``unsafe``), every input unchanged (``unsafe``), no output element left with
its poison (``wrong_output``: unwritten), every element within tolerance. The first case of each
size runs twice with different poisons and must agree (state across calls, nondeterminism,
elements written only by chance); in the interpreter the second run, and every bench-size run, takes
the programs in a shuffled order (a result that depends on the order in which programs run). Later
draws of the same size use fresh values, so a candidate that caches by shape or address fails them.
Runs differ in layout as users' calls do (`_layouts`): views inside the guarded storage and tensors of
their own at offset 0, outputs holding NaN, an odd value or zero, so a kernel that branches on a
tensor's offset or on what its output holds meets both sides in the check.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import numpy as np

from evo.contracts import dtypes
from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig
from evo.contracts.task import Case, CaseData, Task
from evo.contracts.verdict import VERIFIED, Evaluation, Status
from fitness.check.compare import Diff, compare, same_bits
from fitness.sandbox import zones as guard
from fitness.sandbox.process import Worker, WorkerDied, WorkerTimeout


@dataclass
class Observed:
    """What a check's runs showed of the candidate's code: the points they reached (probe keys,
    `fitness.check.coverage`), the kernel specializations they launched, each with the first case
    that launched it (`fitness.sandbox.launch_specs`), and the numbers its comparisons held per size."""

    probes: set[int] = field(default_factory=set)
    specs: dict[str, str] = field(default_factory=dict)
    # size (its JSON) -> numbers a kernel's comparison held for every lane there (first seen first) -> the
    # cases (draws) at that size in which it held them
    thresholds: dict[str, dict[float, set[tuple[int, int, str]]]] = field(default_factory=dict)

    def add(self, reply: dict[str, object], case: Case) -> None:
        self.probes.update(int(k) for k in reply.get("probes") or [])  # type: ignore[attr-defined]
        numbers = self.thresholds.setdefault(case.size_json, {})
        for v in reply.get("thresholds") or []:  # type: ignore[attr-defined]
            numbers.setdefault(float(v), set()).add((case.draw, case.seed, case.dist))
        for spec in reply.get("specs") or []:  # type: ignore[attr-defined]
            self.specs.setdefault(json.dumps(spec, sort_keys=True), case.label())

    def held(self) -> dict[str, list[float]]:
        """By size, the numbers a comparison held in more than one case (draw) there, or in the one case
        made there: a number made of the size holds in every case at it, one that a draw's own data gives (a
        row's sum set against a number) in that draw's case only, and placing those would crowd out the rest."""
        out = {}
        for size, numbers in self.thresholds.items():
            cases = set().union(*numbers.values())
            out[size] = [v for v, seen in numbers.items() if len(seen) > 1 or len(cases) == 1]
        return out


@dataclass(frozen=True)
class _Layout:
    """How one run lays out its buffers: the poison outputs hold before the call (`fitness.sandbox.zones`)
    and whether each tensor is a view inside its guarded storage (offset past the guard) or a storage of
    its own at offset 0, as a user's tensor is (`fitness.sandbox.runner.Runner._tensor`)."""

    poison: int
    exact: bool


def _layouts(first_of_size: bool, bench: bool, index: int) -> list[_Layout]:
    """The runs of a case: a size's first case twice (under NaN inside the guards, then under an odd value at
    offset 0: the determinism check); its later cases once, under zero poison, at either offset in turn; a
    bench size once at offset 0 (the profiled and the users' layout). No run can tell a checked call from a
    user's: every layout and poison the check uses is one a user's call may have."""
    if bench:
        return [_Layout(guard.NAN, True)]
    if first_of_size:
        return [_Layout(guard.NAN, False), _Layout(guard.ODD, True)]
    return [_Layout(guard.ZERO, index % 2 == 1)]


def _run_message(data: CaseData, run: int, bench: bool, sanitize: bool, layout: _Layout) -> dict[str, object]:
    return {
        "op": "run",
        "run": run,
        "poison": layout.poison,
        "layout": "exact" if layout.exact else "view",
        # in the interpreter: the second run of a size, and a bench-size run, take the programs in a
        # shuffled order (a GPU's is any): a result that depends on it fails (`fitness.sandbox.program_order`)
        "order": "shuffled" if run == 1 or bench else "natural",
        "bench": bench,  # bench-size buffers may use the larger address space; no race maps at this size
        "sanitize": ("bounds" if bench else "races") if sanitize else "off",
        "inputs": [{"dtype": t.dtype, "shape": list(t.shape), "data": t.data.tobytes()} for t in data.inputs],
        "outputs": [{"dtype": d, "shape": list(s)} for d, s in zip(data.output_dtypes, data.output_shapes)],
    }


_KIND = {
    "compile_error": Status.COMPILE_ERROR,
    "lint_error": Status.LINT_ERROR,
    "crash": Status.CRASH,
    "timeout": Status.TIMEOUT,
    "unsafe": Status.UNSAFE,  # the sanitizer: an access out of bounds, or a race between programs
}


class _Judge:
    """Accumulates per-output diffs over cases into one verdict."""

    def __init__(self) -> None:
        self.error_sum = 0.0
        self.outputs = 0
        self.max_ratio = 0.0
        self.max_abs = 0.0
        self.elements = 0
        self.mismatches = 0
        self.worst = ""
        self.first_failure: tuple[Status, str] | None = None

    def fail(self, status: Status, reason: str) -> None:
        if self.first_failure is None:
            self.first_failure = (status, reason)

    def add(self, diff: Diff, label: str) -> None:
        self.error_sum += diff.graded
        self.outputs += 1
        self.elements += diff.elements
        self.mismatches += diff.mismatches
        self.max_abs = max(self.max_abs, diff.max_abs)
        if diff.max_ratio >= self.max_ratio and diff.mismatches:
            self.worst = label
        self.max_ratio = max(self.max_ratio, diff.max_ratio)


def _launch_words(data: CaseData, candidate: Candidate, message: str) -> str:
    """What `launch` is called with, when the failure is a call of `launch` with the wrong arguments."""
    if "TypeError" not in message or "launch()" not in message:
        return ""
    params = ", ".join(sorted(candidate.params)) or "none"
    return f"; launch is called with {data.launch_words()}, then the params as keywords [{params}]"


def _tf32_words(reply: dict[str, object]) -> str:
    """Why a float32 kernel with a dot may be off by 1e-3: it ran in TF32, as the GPU would run it."""
    dots = reply.get("tf32_dots")
    if not isinstance(dots, int) or isinstance(dots, bool) or dots <= 0:
        return ""
    return ("; its tl.dot of float32 blocks ran in TF32, as on a GPU (operands cut to 10 mantissa bits, "
            "about 1e-3 relative error): tl.dot(..., input_precision=\"ieee\") keeps float32 precision")


def _inspect_run(data: CaseData, reply: dict[str, object], poison: int, judge: _Judge, label: str,
                 outputs_first: list[np.ndarray] | None, task: Task) -> list[np.ndarray]:
    """Check one run's storages; returns the outputs (storage type) for the determinism check."""
    for i, (t, storage) in enumerate(zip(data.inputs, reply["inputs"])):  # type: ignore[call-overload]
        if not guard.guards_intact(storage, t.dtype, t.shape):
            judge.fail(Status.UNSAFE, f"out-of-bounds store: the guard zone around input {i} changed ({label})")
        _, body, _ = guard.split(storage, t.dtype, t.shape)
        if body.tobytes() != t.data.tobytes():
            changed = int((~same_bits(body, t.data)).sum())
            judge.fail(Status.UNSAFE, f"input {i} was modified ({changed} elements changed, {label})")
    outs = []
    for i, (dtype, shape, storage) in enumerate(
        zip(data.output_dtypes, data.output_shapes, reply["outputs"])  # type: ignore[call-overload]
    ):
        if not guard.guards_intact(storage, dtype, shape):
            judge.fail(Status.UNSAFE, f"out-of-bounds store: the guard zone around output {i} changed ({label})")
        _, body, _ = guard.split(storage, dtype, shape)
        outs.append(body)
        unwritten = 0
        if body.size and poison != guard.ZERO:  # zero is a value outputs hold: the comparison judges those
            filled = guard.filled(body.shape, dtype, poison)
            expected = np.asarray(dtypes.cast(data.expected[i], dtype)).reshape(body.shape)
            unwritten = int((same_bits(body, filled) & ~same_bits(expected, filled)).sum())
        if unwritten:
            judge.fail(Status.WRONG_OUTPUT,
                       f"output {i}: {unwritten} of {body.size} elements were never written: they still hold "
                       f"the poison outputs are filled with before each call (not stored to, or only added to "
                       f"without being set first) ({label})")
        diff = compare(body, dtype, data.expected[i], task.tolerance_for(dtype))
        judge.add(diff, label)
        if not diff.ok:
            judge.fail(Status.WRONG_OUTPUT, f"output {i} wrong at {label}: {diff.describe()}{_tf32_words(reply)}")
        if outputs_first is not None:
            again = compare(body, dtype, dtypes.to_float64(outputs_first[i], dtype) if dtypes.is_float(dtype)
                            else outputs_first[i], task.tolerance_for(dtype))
            if not again.ok:
                judge.fail(Status.WRONG_OUTPUT,
                           f"output {i}: a second run on the same inputs disagrees with the first ({label}): "
                           f"{again.describe()}")
    return outs


def check_equivalence(
    worker: Worker,
    task: Task,
    candidate: Candidate,
    cases: list[Case],
    base: Evaluation,
    *,
    timeout: float,
    stop_on_failure: bool = True,
    bench: bool = False,
    sanitize: bool,
    retries: int = 1,
    observed: Observed | None = None,
) -> Evaluation:
    """Run `candidate` on every case in `worker` and judge the results here: `base` with the
    equivalence verdict and its error figures. A worker that may be damaged (a timeout, a crash, an
    out-of-bounds store) is replaced before this returns. `bench`: the cases are bench sizes (one
    run each: the determinism check belongs to check sizes; the sanitizer checks bounds only).
    `sanitize`: run the interpreter's race and bounds sanitizer (off only to measure its cost).
    `observed`: record what the runs show of the candidate's code there (the interpreter's probes and the
    specializations launched: `Observed`).

    A worker that dies (a signal, an exit, a broken protocol) may have been killed from outside (an
    operator, the OOM killer, a node going away), and one that times out while it got little CPU
    time was stalled by its machine rather than slowed by the candidate: the check runs again on a
    fresh worker, up to `retries` times, and only a failure that reproduces is the candidate's
    ``crash`` or ``timeout``. The verdict lists these incidents (`Evaluation.incidents`). Verdicts are
    cached per candidate, so a failure that is not the candidate's must not become its status."""
    incidents: list[str] = []
    while True:
        before = len(incidents)
        ev = _check_once(worker, task, candidate, cases, base, timeout=timeout, stop_on_failure=stop_on_failure,
                         bench=bench, sanitize=sanitize, incidents=incidents, observed=observed)
        if len(incidents) == before:  # this attempt's worker lived and was not stalled
            if incidents:
                ev = ev.with_(reason=f"{ev.reason} (after an infrastructure failure, not reproduced on a fresh "
                                     f"worker: {incidents[0][:200]})", incidents=incidents)
            return ev
        if len(incidents) > retries:
            return ev.with_(reason=f"{ev.reason} (reproduced on a fresh worker)", incidents=incidents)


def _check_once(
    worker: Worker,
    task: Task,
    candidate: Candidate,
    cases: list[Case],
    base: Evaluation,
    *,
    timeout: float,
    stop_on_failure: bool,
    bench: bool,
    sanitize: bool,
    incidents: list[str],
    observed: Observed | None,
) -> Evaluation:
    """One attempt of `check_equivalence`; a worker death or stall is appended to `incidents`."""
    start = time.monotonic()
    judge = _Judge()
    checked = 0

    def result(status: Status, reason: str, recycle: bool = False) -> Evaluation:
        if recycle:
            worker.recycle()
        frac = judge.mismatches / judge.elements if judge.elements else (0.0 if status is Status.OK else 1.0)
        graded = judge.error_sum / judge.outputs if judge.outputs else float("inf")
        if status is not Status.OK and graded == 0.0:
            graded = float("inf") if status is not Status.WRONG_OUTPUT else 1.0
        return base.with_(
            status=status, reason=reason, error=graded if status is not Status.OK else 0.0,
            max_error_ratio=judge.max_ratio if judge.outputs and checked else float("inf"),
            max_abs_error=judge.max_abs if judge.outputs else float("inf"),
            mismatch_fraction=frac, worst_case=judge.worst, cases_checked=checked,
            check_seconds=time.monotonic() - start,
        )

    try:
        reply = worker.request(
            {"op": "load", "source": candidate.source, "params": candidate.params, "name": candidate.id,
             "coverage": observed is not None},
            timeout,
        )
        if not reply.get("ok"):
            return result(_KIND.get(str(reply.get("kind")), Status.CRASH), str(reply.get("message")),
                          bool(reply.get("fatal")))
        seen_sizes: set[str] = set()
        for index, case in enumerate(cases):
            data = task.case_data(case)
            layouts = _layouts(case.size_json not in seen_sizes, bench, index)
            seen_sizes.add(case.size_json)
            first: list[np.ndarray] | None = None
            for run, layout in enumerate(layouts):
                reply = worker.request(_run_message(data, run, bench, sanitize, layout), timeout)
                if not reply.get("ok"):
                    status = _KIND.get(str(reply.get("kind")), Status.CRASH)
                    message = f"{reply.get('message')}{_launch_words(data, candidate, str(reply.get('message')))}"
                    return result(status, f"{message} ({case.label()})", bool(reply.get("fatal")))
                label = case.label() + ("; its programs run in a shuffled order, as a GPU may run them"
                                        if reply.get("order") == "shuffled" else "")
                first = _inspect_run(data, reply, layout.poison, judge, label, first, task)
                if observed is not None:
                    observed.add(reply, case)
            checked += 1
            if judge.first_failure is not None and (
                stop_on_failure or judge.first_failure[0] is Status.UNSAFE
            ):
                break
    except WorkerTimeout as e:
        if e.stalled:
            incidents.append(str(e))
        return result(Status.TIMEOUT, f"candidate did not finish: {e} (worker killed and replaced)", True)
    except WorkerDied as e:
        incidents.append(e.reason)
        return result(Status.CRASH, e.reason, True)
    if judge.first_failure is not None:
        status, reason = judge.first_failure
        return result(status, reason, status is Status.UNSAFE)
    return result(Status.OK, f"matches the reference on {checked} cases")


def bench_check(worker: Worker, task: Task, candidate: Candidate, case: Case, settings: EvaluationConfig,
                device: str, observed: Observed | None = None) -> Evaluation:
    """`candidate` run in full at a bench size in `worker`, its outputs compared with the reference
    (a ``verified``-level verdict, within ``settings.verify_timeout_s``)."""
    base = Evaluation(candidate.id, task.key, device, Status.CRASH, level=VERIFIED)
    return check_equivalence(worker, task, candidate, [case], base, timeout=settings.verify_timeout_s,
                             bench=True, sanitize=settings.sanitize, observed=observed)


def odd_check(worker: Worker, task: Task, candidate: Candidate, case: Case, settings: EvaluationConfig,
              device: str, observed: Observed | None = None) -> Evaluation:
    """`candidate` run in full at one of `Task.odd_cases` (a size between the check and bench sizes),
    checked like a check size (two runs under different poison, the race sanitizer on) within
    ``settings.verify_timeout_s``: a ``verified``-level verdict."""
    base = Evaluation(candidate.id, task.key, device, Status.CRASH, level=VERIFIED)
    return check_equivalence(worker, task, candidate, [case], base, timeout=settings.verify_timeout_s,
                             sanitize=settings.sanitize, observed=observed)
