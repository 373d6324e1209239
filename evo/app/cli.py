"""Command line: ``python -m evo {run,eval,check,ablate,report,export} ...``.

Exit codes: 0 success, 1 the candidate or task was rejected, 2 a usage or config error (a message
naming the problem, no traceback).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evo.contracts.candidate import Candidate, CandidateError, params_problems
from evo.contracts.config import Config, LatencyMode
from evo.contracts.config_file import ConfigError, load_config, read_text
from evo.contracts.task import Task, TaskError


class UsageError(Exception):
    """Bad command-line input: reported in one line, exit status 2."""


def say(msg: str) -> None:
    print(f"evo: {msg}", file=sys.stderr, flush=True)


def _load(config_path: str) -> tuple[Config, Task]:
    from evo.contracts.task_loader import build_task

    cfg = load_config(config_path)
    return cfg, build_task(cfg.task, Path(config_path).resolve().parent)


def _read_candidate(path: str, params_json: str | None) -> Candidate:
    p = Path(path)
    params = None
    if params_json:
        try:
            params = json.loads(params_json)
        except json.JSONDecodeError as e:
            raise UsageError(f"--params is not valid JSON: {e}") from None
        if not isinstance(params, dict):
            raise UsageError("--params must be a JSON object, e.g. '{\"BLOCK\": 256}'")
    source = read_text(p, "candidate file")
    problems = params_problems(source, params or {})
    if problems:
        raise UsageError("--params: " + "; ".join(problems))
    return Candidate.from_source(source, params)


def verdict(evaluation: Any, task: Task, secret: int | None = None) -> dict[str, Any]:
    d = evaluation.to_dict()
    d["task"] = task.name
    d.pop("task_key", None)
    if secret is not None:
        d["secret"] = str(secret)  # `evo eval --secret` draws the same bench inputs and samples again
    return d


def cmd_eval(args: argparse.Namespace) -> int:
    from evo.contracts.verdict import QUICK, VERIFIED, Evaluation, Status
    from fitness.evaluate import Evaluator, IsolationUnavailable, isolation_message

    cfg, task = _load(args.config)
    candidate = _read_candidate(args.candidate, args.params)
    level = QUICK if args.quick else str(args.level)
    secret = args.secret if args.secret is not None else secrets.randbits(63)
    start = time.monotonic()
    try:
        with Evaluator(task, cfg.evaluation, device=args.device, secret=secret) as ev:
            warning = isolation_message(*ev.isolation())
            if warning:
                say(f"warning: {warning}")
            say(f"checking candidate {candidate.id} on {task.name} ({ev.device}, {len(ev.cases(level))} cases"
                + (f", then in full at {len(task.bench_sizes)} bench size(s))" if level == VERIFIED else ")"))
            result = ev.evaluate(candidate, level=level)
    except IsolationUnavailable as e:
        raise UsageError(str(e)) from None
    except Exception as e:  # the evaluator never ends in a traceback: a failure is a verdict
        result = Evaluation(candidate.id, task.key, args.device or cfg.evaluation.device, Status.CRASH,
                            reason=f"the evaluator failed: {type(e).__name__}: {str(e)[:400]}", level=level)
    say(f"{result.status.value}: {result.reason} ({time.monotonic() - start:.2f} s)")
    if result.latency_ms is not None:
        ups = ", ".join(f"{v:.2f}x vs {k}" for k, v in result.speedups.items())
        say(f"latency {result.latency_ms * 1e3:.1f} us ({result.latency_source.value if result.latency_source else '?'}"
            f", {result.latency_gpu}){': ' + ups if ups else ''}")
    print(json.dumps(verdict(result, task, secret)))
    return 0 if result.ok else 1


def cmd_check(args: argparse.Namespace) -> int:
    from evo.app.check import Finding, reference_findings, seed_candidate
    from evo.contracts.kernelbench import KernelBenchTask
    from fitness.evaluate import Evaluator

    cfg, task = _load(args.config)
    mode = ""
    if isinstance(task, KernelBenchTask) and task.mode_layers():
        mode = f"; Model in {task.mode} mode, which its {', '.join(task.mode_layers())} depend on"
    say(f"checking task {task.name} ({task.dtype}, {len(task.check_sizes)} check sizes{mode})")
    findings = reference_findings(task)
    seed = seed_candidate(task)
    if seed is None:
        findings.append(Finding("seed candidate passes", False, "the task has no seed candidate"))
    else:
        with Evaluator(task, cfg.evaluation, device=args.device) as ev:
            r = ev.evaluate(seed)
        findings.append(Finding("seed candidate passes", r.ok, f"{r.status.value}: {r.reason}"))
        if r.ok and cfg.evaluation.latency is not LatencyMode.OFF:
            measured = r.latency_ms is not None
            findings.append(Finding("seed latency at the bench size", measured,
                                    f"{r.latency_ms:.4g} ms ({r.latency_source.value if r.latency_source else ''})"
                                    if measured else "a campaign could not rank candidates: see the reason above"))
    for f in findings:
        print(f"  [{'ok' if f.ok else 'FAIL'}] {f.name}: {f.detail}")
    ok = all(f.ok for f in findings)
    print(json.dumps({"task": task.name, "ok": ok, "findings": [f.__dict__ for f in findings]}))
    return 0 if ok else 1


def cmd_init(args: argparse.Namespace) -> int:
    from evo.app.init import InitError, run_command, write_kernelbench, write_numpy
    from fitness.evaluate import device_for

    dest = Path(args.name)
    try:
        if args.kernelbench:
            config, seeded = write_kernelbench(dest, Path(args.kernelbench), device_for(args.device or "auto"))
        else:
            config, seeded = write_numpy(dest), True
    except InitError as e:
        raise UsageError(str(e)) from None
    written = ", ".join(sorted(p.name for p in config.parent.iterdir()))
    say(f"wrote {config.parent}/: {written}; checking them as `evo check {config}` does")
    status = cmd_check(argparse.Namespace(config=str(config), device=args.device))
    if status != 0:
        if not seeded:
            say("no seed kernel ships for this problem: the config's llm mutator writes the first one (its key in "
                "OPENAI_API_KEY), or write a kernel to seed.py and add `seed: seed.py` under task:")
        else:
            say(f"the check failed: fix what it says in {config.parent}, then run `evo check {config}`")
    say(f"start the campaign with:\n{run_command(config)}")
    return status


def cmd_tasks(args: argparse.Namespace) -> int:
    from evo.app.task_list import task_lines

    try:
        lines = task_lines(args.names)
    except ValueError as e:
        say(f"tasks: {e}")
        return 2
    print("\n".join(lines))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from evo.app.run.campaign import Campaign
    from evo.app.run.executor import choose
    from evo.app.run.progress import make_display
    from evo.app.run.setup import CampaignHooks, prepare

    if not args.config and not args.resume:
        raise UsageError("give a config file, or --resume RUN_DIR")
    hooks = getattr(args, "hooks", None) or CampaignHooks()
    executor = choose(args.executor)
    prepared = prepare(args.config, resume=args.resume, output=args.output, hooks=hooks)
    summary = Campaign(prepared, hooks, make_display(), executor).run()
    best = summary.get("best") or {}
    fast = best.get("speedup_over_seed")
    gain = f"{fast:.2f}x the seed ({best.get('latency_source')})" if fast else "speedup unknown (no latency measured)"
    say(f"best kernel {best.get('id')}: {gain}; {summary['evaluations']} evaluations in {summary['wall_time_s']:.0f} s")
    print(json.dumps({k: summary[k] for k in ("status", "stop_reason", "run_dir", "evaluations")} |
                     {"best_speedup": best.get("speedup_over_seed"), "best_id": best.get("id")}))
    return 0 if summary["status"] == "finished" else 1


def cmd_report(args: argparse.Namespace) -> int:
    from evo.app.report.page import write_run_report

    html, md = write_run_report(args.run_dir)
    say(f"report written: {html} (self-contained) and {md}")
    print(json.dumps({"html": str(html), "markdown": str(md)}))
    return 0


def cmd_ablate(args: argparse.Namespace) -> int:
    from evo.app.ablation.config import load_ablation
    from evo.app.ablation.report import write_ablation_report
    from evo.app.ablation.runner import AblationRunner, AblationState, RunStatus, preflight
    from evo.app.run.setup import CampaignHooks

    hooks = getattr(args, "hooks", None) or CampaignHooks()
    ablation = load_ablation(args.ablation)
    directory = ablation.directory(args.output)
    selected = ablation.select(args.variant or (), args.seed or ())
    interrupted = False
    if args.report_only:
        state = AblationState.load(directory, ablation)
    else:
        preflight(ablation, hooks, sorted({r.variant for r in selected}))
        runner = AblationRunner(ablation, directory, hooks=hooks, only=selected)
        state = runner.run()  # a second Ctrl-C raises KeyboardInterrupt: exit status 130
        interrupted = runner.stopping
    written = write_ablation_report(ablation, directory, state)
    print(written.tables_markdown)
    say(f"results: {written.markdown}, {written.csv}, {written.html}")
    say("figures: " + (", ".join(str(f) for f in written.figures) or "none (no run to plot yet)"))
    statuses = {state.runs[r.key].status for r in selected}
    if interrupted:
        return 130
    return 0 if statuses <= {RunStatus.FINISHED} else 1


def cmd_export(args: argparse.Namespace) -> int:
    from evo.app.export.command import export
    from evo.app.export.shapes import ShapeRuleError
    from evo.app.export.torch_op import ExportError

    try:
        done = export(args.run_dir, args.kind, name=args.name, output=args.output)
    except (ExportError, ShapeRuleError) as e:
        raise UsageError(str(e)) from e
    for line in done.lines:
        say(line)
    print(json.dumps({"files": [str(f) for f in done.files]}))
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="evo", description="Evolutionary search for fast, equivalent Triton kernels")
    sub = ap.add_subparsers(dest="command", required=True)
    e = sub.add_parser("eval", help="evaluate one candidate against the config's task")
    e.add_argument("config")
    e.add_argument("--candidate", required=True, help="candidate module (.py)")
    e.add_argument("--params", help="JSON object overriding the candidate's PARAMS")
    e.add_argument("--device", choices=["cpu", "cuda"], help="override the config's evaluation.device")
    e.add_argument("--level", choices=["quick", "full", "verified"], default="verified",
                   help="quick: the first check sizes, one draw; full: every check case and the latency, its "
                   "bench-size outputs verified by sampled programs; verified (default): full, then a full run "
                   "at every bench size (minutes in the interpreter at GPU-sized bench sizes)")
    e.add_argument("--quick", action="store_true", help="shorthand for --level quick")
    e.add_argument("--secret", type=int, help="the secret of an earlier verdict: the same bench inputs and samples")
    e.set_defaults(func=cmd_eval)
    c = sub.add_parser("check", help="validate a task: the seed passes, the reference is not degenerate")
    c.add_argument("config")
    c.add_argument("--device", choices=["cpu", "cuda"])
    c.set_defaults(func=cmd_check)
    i = sub.add_parser("init", help="write a task, seed kernel and config to start from (--numpy) or a config for a "
                       "KernelBench problem (--kernelbench FILE), check them and print the command that runs them")
    i.add_argument("name", help="the folder to write (new or empty); its name names the campaign")
    form = i.add_mutually_exclusive_group(required=True)
    form.add_argument("--numpy", action="store_true", help="a computation in numpy (an RMS-norm template to edit)")
    form.add_argument("--kernelbench", metavar="FILE",
                      help="a KernelBench problem file (sizes chosen for this machine; the seed when one ships for it)")
    i.add_argument("--device", choices=["cpu", "cuda"], help="the machine the sizes are for (default: this one)")
    i.set_defaults(func=cmd_init)
    t = sub.add_parser("tasks", help="the library's tasks: dtypes, bench sizes and named workloads (task.workload)")
    t.add_argument("names", nargs="*", help="only these tasks")
    t.set_defaults(func=cmd_tasks)
    r = sub.add_parser("run", help="run a campaign: islands on Ray (RAY_ADDRESS, else a local Ray), or --executor "
                       "local")
    r.add_argument("config", nargs="?", help="campaign config (optional with --resume)")
    r.add_argument("--resume", metavar="RUN_DIR", help="continue a stopped or killed campaign")
    r.add_argument("--output", metavar="DIR", help="where run directories go (overrides output_dir)")
    r.add_argument("--executor", choices=["ray", "local"],
                   help="ray (default where Ray is installed): islands and evaluators are Ray actors; local: all "
                   "on this machine without Ray (islands in this process, each evaluator a worker subprocess)")
    r.set_defaults(func=cmd_run)
    a = sub.add_parser("ablate", help="run every variant x seed of an ablation file, then tables and figures")
    a.add_argument("ablation", help="ablation file (see configs/ablation_mutators.yaml)")
    a.add_argument("--output", metavar="DIR", help="where the ablation directory goes (overrides output_dir)")
    a.add_argument("--report-only", action="store_true", help="write the results of the runs finished so far; "
                   "run nothing")
    a.add_argument("--variant", action="append", metavar="NAME",
                   help="run only this variant (repeatable); the results still cover every finished run")
    a.add_argument("--seed", action="append", type=int, metavar="N",
                   help="run only this seed of the file's seeds (repeatable)")
    a.set_defaults(func=cmd_ablate)
    rep = sub.add_parser("report", help="write a run directory's report (report.html, self-contained; report.md)")
    rep.add_argument("run_dir")
    rep.set_defaults(func=cmd_report)
    x = sub.add_parser("export", help="write a run's best kernel as a PyTorch operator or a Triton autotune table")
    x.add_argument("run_dir")
    x.add_argument("--as", dest="kind", required=True, choices=["torch-op", "autotune"],
                   help="torch-op: a module registering the kernel with torch.library.custom_op, and its test; "
                   "autotune: the best structure with @triton.autotune over the fastest configs measured")
    x.add_argument("--name", help="the operator's name, NAMESPACE::OP (torch-op)")
    x.add_argument("--output", metavar="FILE",
                   help="the module to write (default RUN_DIR/export/torch_op.py or autotune.py)")
    x.set_defaults(func=cmd_export)
    return ap


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def main(argv: list[str] | None = None, *, hooks: Any = None) -> int:
    """The command line; `hooks` (a `CampaignHooks`) swaps what `run` builds mutators and evaluators with."""
    from evo.app.run.setup import CampaignError
    from evo.app.run.signals import is_termination
    from evo.app.run.store import RunStoreError

    args = build_parser().parse_args(argv)
    args.hooks = hooks
    try:
        return int(args.func(args))
    except (ConfigError, TaskError, CandidateError, UsageError, CampaignError, RunStoreError) as e:
        print(f"evo {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        if is_termination(e):
            print(f"evo {args.command}: terminated (SIGTERM)", file=sys.stderr)
            return 143
        print(f"evo {args.command}: interrupted", file=sys.stderr)
        return 130
