"""The evaluation pipeline: lint, then equivalence, then latency, for one candidate at a time.

`Evaluator` owns one worker subprocess (and, for the latency model, a compile worker). It does not
cache: "evaluate each candidate once" is the job of the one ledger that records evaluations
(`islands.evaluation.EvaluationLedger`). Latency (`fitness.latency.stage`) is measured on CUDA and
modelled elsewhere, for quick evaluations too (the model caches its own figures by candidate id).

Levels: ``quick`` (the first check sizes, one draw: STOKE's chain), ``full`` (every check size,
draw and distribution, the special values and the bench-shaped cases of `evo.contracts.check_cases`;
the latency at the first bench size, verified there) and ``verified``
(``full``, then the candidate runs in full at every bench size and at a size between the check
and bench sizes drawn per bench size (`evo.contracts.odd_sizes`), and its outputs are compared with
the reference: what ``evo eval`` reports and what an island's best must pass). Bench inputs, those
sizes and the programs the model samples come from `secret`, which a candidate cannot know.
"""

from __future__ import annotations

import secrets

from evo.contracts.bench_shaped import CAP_ELEMENTS
from evo.contracts.candidate import Candidate
from evo.contracts.check_cases import chosen_cases, full_cases, unchecked_words, value_cases
from evo.contracts.config import EvaluationConfig
from evo.contracts.gpus import get_profile
from evo.contracts.special_values import Compared
from evo.contracts.task import Case, Task
from evo.contracts.verdict import FULL, QUICK, VERIFIED, Evaluation, Status
from fitness.check.data_values import MAX_APART, MAX_VALUES, compared_values
from fitness.check.equivalence import Observed, bench_check, check_equivalence, odd_check
from fitness.check.gpu_compile import compile_all
from fitness.check.lint import lint
from fitness.check.reach import FIRST, REST, reach
from fitness.latency.stage import LatencyStage
from fitness.sandbox import isolation as os_isolation
from fitness.sandbox.process import Worker


class IsolationUnavailable(RuntimeError):
    """``evaluation.require_isolation`` is set and the worker could not be fully isolated."""


def _lacking(sandbox: str, problems: list[str]) -> str:
    return f"evaluation workers run without full OS isolation (sandbox: {sandbox}): {'; '.join(problems) or 'unknown'}"


def isolation_message(sandbox: str, problems: list[str]) -> str:
    """What a person should read when a worker runs with less than full isolation ('' when it has it)."""
    if sandbox == os_isolation.FULL:
        return ""
    return (f"{_lacking(sandbox, problems)}. Candidate code is still linted and guarded; set "
            "evaluation.require_isolation: true to refuse to run like this")


def detect_device() -> str:
    """'cuda' when torch sees a GPU here, else 'cpu' (the Triton interpreter)."""
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:
        return "cpu"


def lint_verdict(candidate: Candidate, task_key: str, device: str, level: str) -> Evaluation | None:
    """The ``lint_error`` verdict on `candidate` when the static lint rejects it, else None (what both
    the evaluator and a compile-ahead preparer give, word for word)."""
    found = lint(candidate.source)
    if found.ok:
        return None
    return Evaluation(candidate.id, task_key, device, Status.LINT_ERROR, level=level, reason=found.reason())


def device_for(setting: str) -> str:
    """The device a setting (`evaluation.device`: auto, cpu or cuda) means on this machine."""
    return detect_device() if setting == "auto" else setting


class Evaluator:
    """Checks candidates against one task on one device, with the settings of a config's
    ``evaluation:`` section. `quick` checks use the first `quick_sizes` check sizes, one draw."""

    def __init__(self, task: Task, settings: EvaluationConfig, *, device: str | None = None,
                 worker: Worker | None = None, compiler: Worker | None = None, secret: int | None = None,
                 static_lint: bool = True) -> None:
        """`worker`: share an evaluation worker of `device` between evaluators (left open by `close`);
        `compiler`: likewise a compile worker (``Worker(compile_only=True)``), the latency model's and the
        verification's. Shared workers serve one evaluator at a time; each candidate still runs in a process
        of its own (`fitness.sandbox.forkserver`).
        `secret`: the run's secret (a campaign keeps one; default: a new random one).
        `static_lint`: an internal test hook; False skips the lint so that tests prove the layers below it
        (the run-time guard, the worker's isolation). Never set from a config."""
        self.task = task
        self.settings = settings
        self.secret = secrets.randbits(63) if secret is None else secret
        wanted = device or settings.device
        self.device = detect_device() if wanted == "auto" else wanted
        self.static_lint = static_lint
        self._own_worker = worker is None
        self.worker = worker or Worker.evaluating(settings, self.device)
        self.worker.start()  # overlap the worker's imports with the caller's work
        self.latency = LatencyStage(task, settings, device=self.device, worker=self.worker, compiler=compiler,
                                    secret=self.secret, bench_check=self._bench_check)
        self._own_compiler: Worker | None = None

    def isolation(self) -> tuple[str, list[str]]:
        """The worker's OS isolation (waits for the worker to start): its mechanism and what it lacks.
        Raises `IsolationUnavailable` when the settings require full isolation and it lacks a part."""
        if not self.worker.ready:
            self.worker.request({"op": "ping"}, self.worker.startup_timeout)
        sandbox, problems = self.worker.sandbox, list(self.worker.sandbox_problems)
        if self.settings.require_isolation and sandbox != os_isolation.FULL:
            raise IsolationUnavailable(f"{_lacking(sandbox, problems)} (evaluation.require_isolation is true)")
        return sandbox, problems

    def cases(self, level: str) -> list[Case]:
        if level == QUICK:
            return self.task.cases(self.task.check_sizes[: self.settings.quick_sizes], draws=1, every_dist=False)
        return full_cases(self.task, draws=self.settings.draws)

    def evaluate(self, candidate: Candidate, *, level: str = FULL) -> Evaluation:
        """The verdict on `candidate` at `level`. Never raises: a failure of the evaluator itself is a
        ``crash`` verdict that says so."""
        base = Evaluation(candidate.id, self.task.key, self.device, Status.LINT_ERROR, level=level)
        try:
            return self._evaluate(candidate, level, base).with_(sandbox=self.worker.sandbox)
        except Exception as e:  # the evaluator never dies on a candidate: every failure is a verdict
            self.worker.restart()
            return base.with_(status=Status.CRASH, sandbox=self.worker.sandbox,
                              reason=f"the evaluator failed on this candidate: {type(e).__name__}: {str(e)[:400]}")

    def _evaluate(self, candidate: Candidate, level: str, base: Evaluation) -> Evaluation:
        rejected = lint_verdict(candidate, self.task.key, self.device, level) if self.static_lint else None
        if rejected is not None:
            return rejected
        check_level = FULL if level == VERIFIED else level
        cases = self.cases(check_level)
        # every line must run in a full check; the probes that tell need the interpreter
        observed = Observed() if check_level == FULL and self.device == "cpu" else None
        ev = check_equivalence(self.worker, self.task, candidate, cases, base,
                               timeout=self.settings.timeout_s, stop_on_failure=level != QUICK,
                               sanitize=self.settings.sanitize, observed=observed)
        compared = compared_values(candidate) if check_level == FULL else None
        if ev.ok and compared is not None:
            ev = self._values(candidate, ev, base, observed, compared)
        if ev.ok and observed is not None and compared is not None:
            values = compared  # a size the check chooses runs every distribution and the values (`chosen_cases`)
            ev = reach(candidate, self.task, ev, observed, lambda size, seen, which: check_equivalence(
                self.worker, self.task, candidate, _which(chosen_cases(self.task, size, values, seen.held()), which),
                base,
                timeout=self.settings.timeout_s, sanitize=self.settings.sanitize, observed=seen))
        if ev.ok and check_level == FULL:  # what the check left out (special values opted out of) is said
            ev = ev.with_(reason=f"{ev.reason}{unchecked_words(self.task, cases)}")
        if ev.ok and self.latency.enabled:
            ev = self.latency.measure(candidate, level=check_level).apply(ev)
        if ev.ok and level == VERIFIED:
            ev = self._verify(candidate, ev, observed)
        return ev

    def _values(self, candidate: Candidate, ev: Evaluation, base: Evaluation, observed: Observed | None,
                compared: Compared) -> Evaluation:
        """`ev` (a passing full check) after the cases that hold the input values the candidate's kernels
        compare with, or at which their data less a number is zero (`fitness.check.data_values`): a failure
        there is the verdict."""
        if compared.unplaced:
            return ev.with_(status=Status.UNSAFE, reason=(
                f"its kernels compare their data with (or subtract from it) {compared.unplaced} more values than "
                f"the check places ({MAX_VALUES} values and {MAX_APART} differences): a path that turns on one of "
                f"the values left out would go unchecked"))
        held = observed.held() if observed is not None else {}
        cases = value_cases(self.task, compared, draws=self.settings.draws, held=held)
        if not cases:
            return ev
        r = check_equivalence(self.worker, self.task, candidate, cases, base, timeout=self.settings.timeout_s,
                              sanitize=self.settings.sanitize, observed=observed)
        shown = ", ".join([*(f"{v:.8g}" for v in compared.values[:6]), *(f"a difference of {d:.8g}" for d in
                                                                          compared.apart[:3])])
        shown += ", ..." if len(compared.values) > 6 or len(compared.apart) > 3 else ""
        if any(v not in compared.values for numbers in held.values() for v in numbers):
            shown = f"{shown}; and numbers its comparisons held in the check" if shown else (
                "numbers its comparisons held in the check")
        if not r.ok:
            return _failed(ev, r, f"on inputs holding values its code compares with or subtracts ({shown})")
        return ev.with_(reason=f"{ev.reason} and on {len(cases)} cases holding the values its code compares "
                               f"with or subtracts ({shown})")

    def _verify(self, candidate: Candidate, ev: Evaluation, observed: Observed | None) -> Evaluation:
        """`ev` after a full run at every bench size, and at sizes drawn between the check and bench sizes, under
        each of the task's distributions (`Task.every_dist`). The model's own full run (first bench size) is
        not repeated; in the interpreter, a run the model estimates to exceed ``verify_timeout_s`` is
        not started: a ``timeout`` that says so (the candidate is not verified, so not ``ok``). Then every
        kernel specialization the check's runs launched (`observed`) must compile for the target GPU."""
        verification = ev.latency_detail.get("verification") or {}
        limit = self.settings.verify_timeout_s
        bench = self.task.bench_cases(self.secret)
        timed = bench[:1]  # the model ran (and estimated) the first bench size's
        for case in self.task.every_dist(bench):
            if case in timed and verification.get("full_run"):
                continue
            estimate = float(verification.get("full_run_estimate_s") or 0.0) if (
                timed and case.size_json == timed[0].size_json) else 0.0
            if self.device == "cpu" and estimate > limit:
                return ev.with_(status=Status.TIMEOUT, reason=(
                    f"not verified at bench size {case.size_json}: a full run in the interpreter would take "
                    f"about {estimate:.0f} CPU seconds (evaluation.verify_timeout_s is {limit:.0f} s); bench at "
                    f"smaller sizes on a CPU, or verify on a GPU"))
            full = bench_check(self.worker, self.task, candidate, case, self.settings, self.device, observed)
            if not full.ok:
                return _failed(ev, full, f"at bench size {case.size_json}")
        odd, skipped = self._odd_cases()
        for case in odd:
            # past the bench-shaped budget, race maps (16 bytes per byte) would not fit: run it as a bench size
            small = self.task.buffer_sizes(case.size)[0] <= CAP_ELEMENTS
            full = (odd_check if small else bench_check)(self.worker, self.task, candidate, case, self.settings,
                                                         self.device, observed)
            if not full.ok:
                return _failed(ev, full, f"at size {case.size_json}, between the check and bench sizes (drawn "
                                         f"for this verification)")
        between = f" and {len({c.size_json for c in odd})} size(s) between the check and bench sizes" if odd else ""
        unrun = f" (the task's reference does not run at {', '.join(skipped)})" if skipped else ""
        compiled = ""
        if observed is not None and observed.specs:
            arch = get_profile(self.settings.target_gpu).arch
            refused = compile_all(self._compiler(), candidate, observed, arch=arch,
                                  timeout=self.settings.latency_timeout_s)
            if refused is not None:
                return ev.with_(status=refused[0], reason=refused[1])
            compiled = f"; all {len(observed.specs)} kernel specializations the check ran compile for the GPU"
        dists = f", each under the task's {len(self.task.dists)} distributions" if len(self.task.dists) > 1 else ""
        return ev.with_(reason=f"{ev.reason}; verified in full at {len(self.task.bench_sizes)} bench size(s)"
                               f"{between}{dists}{unrun}{compiled}")

    def _compiler(self) -> Worker:
        """A compile worker (no interpreter, no GPU): the latency model's or the shared one, else one of this
        evaluator's."""
        shared = self.latency.compile_worker()
        if shared is not None:
            return shared
        if self._own_compiler is None:
            self._own_compiler = Worker.compiling(self.settings)
        return self._own_compiler

    def _odd_cases(self) -> tuple[list[Case], list[str]]:
        """`Task.odd_cases` of this run's secret whose reference runs, and the sizes of those that do not
        (a task may accept only some sizes: that is no candidate's failure)."""
        runnable, skipped = [], []
        for case in self.task.every_dist(self.task.odd_cases(self.secret)):
            try:
                self.task.case_data(case)
            except Exception:  # the reference's own limits, not the candidate's
                skipped.append(case.size_json)
                continue
            runnable.append(case)
        return runnable, skipped

    def _bench_check(self, candidate: Candidate, case: Case) -> Evaluation:
        """`candidate` run in full at a bench size, its outputs compared with the reference."""
        return bench_check(self.worker, self.task, candidate, case, self.settings, self.device)

    def compile_seconds(self) -> float:
        """Seconds this evaluator's worker has spent in Triton's compiler (on a GPU; 0 in the interpreter,
        which compiles nothing). Cumulative over the worker's life: a restarted worker starts again at 0."""
        if self.device == "cpu" or not self.worker.ready:
            return 0.0
        try:
            reply = self.worker.request({"op": "compile_seconds"}, 30.0)
        except Exception:
            return 0.0
        return float(reply.get("seconds", 0.0)) if reply.get("ok") else 0.0

    def close(self) -> None:
        self.latency.close()
        if self._own_compiler is not None:
            self._own_compiler.close()
        if self._own_worker:
            self.worker.close()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _failed(ev: Evaluation, full: Evaluation, where: str) -> Evaluation:
    """`ev` failed by the full run `full` (its status and error figures), the reason saying where."""
    return ev.with_(status=full.status, reason=f"{where}: {full.reason}", error=full.error,
                    max_error_ratio=full.max_error_ratio, max_abs_error=full.max_abs_error,
                    mismatch_fraction=full.mismatch_fraction, worst_case=full.worst_case)


def _which(cases: list[Case], which: str) -> list[Case]:
    """A chosen size's cases (`chosen_cases`): the first (a draw of the task's first distribution), the rest, or all
    (`fitness.check.reach`)."""
    return cases[:1] if which == FIRST else cases[1:] if which == REST else cases
