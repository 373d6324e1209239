"""How many evaluations per second the one evaluation broker (`islands.broker`) and its history writer
serve, over Ray and over the local executor, with evaluators that answer at once.

    PYTHONPATH=. python bench/infra/broker_throughput.py [--quick] [--counts 1,8,32,64] [--runtimes local,ray]

(about 4 minutes; --quick about 1: 1 and 8 evaluators, one 2-s window each; figures written to
bench/data/broker_throughput.json, or --out)

The real broker (`islands.actors.start_broker`), its real `EvaluationLedger` and msgpack history, and
evaluator actors whose evaluator does no kernel work (`bench.infra.broker_fakes.InstantEvaluator`: an ok
verdict shaped like a real one). The driver keeps `--in-flight` batches of distinct candidates (the
softmax seed with a unique comment) in `evaluate_many`, as islands do; batches are large enough to keep
every evaluator busy. Per configuration: evaluations per second, the broker's CPU seconds per evaluation
(over Ray: the broker actor's process, found among this driver's descendants by its title
``ray::EvaluationBroker`` and read from /proc; locally: the broker's thread, from its thread CPU
clock), the history's bytes per evaluation. Where the time goes: a profile of the broker's thread in
the local executor, timings of its parts (a record's msgpack, the ledger's record, the pickles a Ray
call carries, a bare Ray actor call from an async actor), a one-evaluator sweep of queue depths (what
waiting candidates cost), and what one broker serves (`capacity`). Everything shares this machine's
cores: evaluators, Ray's own processes and the driver compete with the broker, so the rates are what
this machine does; the broker's CPU per evaluation is what bounds one broker on a cluster.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pickle
import platform
import pstats
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.infra.broker_fakes import Caller, Echo, instant_evaluator, instant_verdict
from evo.app.run import ray_auth
from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, TaskConfig
from evo.contracts.history import MsgpackLog, pack
from evo.contracts.native_task import TASK_LIBRARY
from evo.contracts.records import Individual, Proposal
from evo.contracts.task_files import TaskFiles
from islands.actors import start_broker
from islands.broker import BrokerSpec
from islands.evaluation import Answer, EvaluationLedger
from islands.evaluator_actor import EvaluatorSpec
from islands.local_runtime import LocalRuntime
from islands.ray_runtime import RayRuntime
from islands.runtime import Runtime

OUT = ROOT / "bench" / "data" / "broker_throughput.json"
TASK_FILES = TaskFiles.collect(TaskConfig(name="softmax"), TASK_LIBRARY)
TASK_KEY = TASK_FILES.build(check_forward=False).key
SEED = Candidate.from_source((TASK_LIBRARY / "softmax" / "seed.py").read_text())


def candidates(tag: str, start: int, n: int) -> list[Proposal]:
    return [Proposal(Candidate(f"{SEED.source}\n# broker bench {tag} {i}\n", dict(SEED.params)), "bench")
            for i in range(start, start + n)]


def processes() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, command line, CPU seconds), from /proc (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            line = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (name) ": state, ppid, ...
        out[int(entry)] = (int(fields[1]), line, (int(fields[11]) + int(fields[12])) / tick)
    return out


class CpuProbe:
    """CPU seconds of the broker, the evaluators, the driver and the rest of the runtime, read twice."""

    def __init__(self, rt: Runtime) -> None:
        self.ray = rt.name == "ray"

    def read(self) -> dict[str, float]:
        if not self.ray:  # the broker and each evaluator are threads of this process
            out = {"broker": 0.0, "evaluators": 0.0, "process": time.process_time()}
            for t in threading.enumerate():
                if t.ident is None or not (t.name == "broker" or t.name.startswith("evaluator-")):
                    continue
                seconds = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
                out["broker" if t.name == "broker" else "evaluators"] += seconds
            return out
        table = processes()
        out = {"broker": 0.0, "evaluators": 0.0, "driver": time.process_time(), "ray": 0.0}
        mine, grew = {os.getpid()}, True
        while grew:  # Ray's processes are this driver's descendants (its raylet's workers)
            more = {pid for pid, (parent, _, _) in table.items() if parent in mine} - mine
            mine |= more
            grew = bool(more)
        for pid in mine - {os.getpid()}:
            _, line, seconds = table[pid]
            part = "broker" if "EvaluationBroker" in line else "evaluators" if "EvaluatorActor" in line else "ray"
            out[part] += seconds
        return out


def wait_all_started(rt: Runtime, broker: Any, count: int, deadline_s: float = 600.0) -> float:
    """Seconds until all `count` evaluators have started (the broker's start, wait_started, begin)."""
    t0 = time.monotonic()
    rt.get(broker.start.remote(), timeout=120)
    known = 0
    while True:
        infos, placement = rt.get(broker.wait_started.remote(30.0, known), timeout=120)
        known = len(infos)
        if placement["waiting"] == 0 and known >= count:
            break
        if time.monotonic() - t0 > deadline_s:
            raise RuntimeError(f"{known} of {count} evaluators started in {deadline_s} s: {placement}")
    rt.get(broker.begin.remote(), timeout=120)
    return time.monotonic() - t0


def feed(rt: Runtime, broker: Any, tag: str, batch: int, in_flight: int, seconds: float) -> tuple[int, float]:
    """(fresh evaluations, wall seconds): `in_flight` batches in the broker at a time, new ones for `seconds`."""
    made, fresh = 0, 0
    pending: list[Any] = []
    t0 = time.perf_counter()
    while pending or made == 0:
        while len(pending) < in_flight and (made == 0 or time.perf_counter() - t0 < seconds):
            pending.append(broker.evaluate_many.remote(candidates(tag, made, batch), "full"))
            made += batch
        done = rt.wait_one(pending, timeout=300)
        if done is None:
            raise RuntimeError("no batch came back within 300 s")
        pending.remove(done)
        answers: list[Answer] = rt.get(done, timeout=60)
        fresh += sum(a.fresh for a in answers)
    return fresh, time.perf_counter() - t0


def stop_profile(profile: cProfile.Profile, stopped: threading.Event) -> None:
    profile.disable()
    stopped.set()


def measure(rt: Runtime, count: int, args: argparse.Namespace, *, batch: int = 0, repeats: int = 0,
            profile: cProfile.Profile | None = None) -> dict[str, Any]:
    """One broker with `count` evaluators: the best of `repeats` windows of `args.seconds` (one when profiled)."""
    batch = batch or max(args.batch, -(-2 * count // args.in_flight))  # two candidates per evaluator in flight
    repeats = 1 if profile is not None else repeats or args.repeats
    windows = []
    with tempfile.TemporaryDirectory() as tmp:
        history = Path(tmp) / "history.msgpack"
        spec = BrokerSpec(EvaluatorSpec(TASK_FILES, EvaluationConfig(device="cpu"), factory=instant_evaluator),
                          count, args.cpus_per_evaluator, 0.0, TASK_KEY, str(history), actor_timeout_s=120.0)
        broker = start_broker(spec, rt)
        try:
            start_s = wait_all_started(rt, broker, count)
            feed(rt, broker, f"{rt.name}-{count}-{batch}-warm", batch, args.in_flight, 0.0)  # first calls
            probe = CpuProbe(rt)
            for r in range(repeats):
                if profile is not None:  # the broker's thread (local executor): enabled and disabled on it
                    broker._loop.call_soon_threadsafe(profile.enable)
                before = probe.read()
                n, wall = feed(rt, broker, f"{rt.name}-{count}-{batch}-{r}", batch, args.in_flight, args.seconds)
                after = probe.read()
                if profile is not None:
                    stopped = threading.Event()
                    broker._loop.call_soon_threadsafe(stop_profile, profile, stopped)
                    stopped.wait(10)
                windows.append((n / wall, n, wall, before, after))
            stats = rt.get(broker.get_stats.remote(), timeout=60)
            size = history.stat().st_size
        finally:
            rt.get(broker.shutdown.remote(), timeout=120)
            rt.kill(broker)
    rate, n, wall, before, after = max(windows, key=lambda w: w[0])
    cpu = {k: round((after[k] - before[k]) / n * 1e6, 1) for k in after}  # microseconds per evaluation
    return {"runtime": rt.name, "evaluators": count, "batch": batch, "in_flight": args.in_flight,
            "evaluations": n, "seconds": round(wall, 2), "per_s": round(rate, 1),
            "per_s_windows": [round(w[0], 1) for w in windows],
            "broker_cpu_us_per_eval": cpu["broker"], "cpu_us_per_eval": cpu,
            "broker_cpu_fraction": round((after["broker"] - before["broker"]) / wall, 2),
            "history_bytes_per_eval": round(size / stats.evaluations, 1), "start_s": round(start_s, 1),
            "batched_fraction": round(stats.batched / max(1, stats.evaluations), 3),
            "load_average_after": round(os.getloadavg()[0], 2)}


def per_call_us(fn: Callable[[], Any], n: int = 2000) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - t0)
    return round(best / n * 1e6, 2)


def parts_in_process() -> dict[str, float]:
    """Microseconds of one evaluation's parts that run in the broker's process, outside Ray."""
    [proposal] = candidates("parts", 0, 1)
    c = proposal.candidate
    assert c is not None
    verdict = instant_verdict(c.id, TASK_KEY, "cpu", "full")
    ind = Individual(proposal, verdict, seconds=0.001, evaluator="evaluator-0", time=time.time())
    record = {"kind": "evaluation", **ind.to_dict()}
    answer = Answer(ind, True)
    verdict_bytes, proposal_bytes = pickle.dumps((verdict, 0.001, 0.0), 5), pickle.dumps(proposal, 5)
    with tempfile.TemporaryDirectory() as tmp:
        log = MsgpackLog(Path(tmp) / "log.msgpack")
        ledger = EvaluationLedger(TASK_KEY, device="cpu", history=MsgpackLog(Path(tmp) / "ledger.msgpack"))
        many = iter(candidates("ledger", 0, 3 * 2000))
        parts = {
            "candidate_id_hash": per_call_us(lambda: c.id),
            "evaluation_to_dict": per_call_us(verdict.to_dict),
            "individual_init": per_call_us(lambda: Individual(proposal, verdict, seconds=0.001)),
            "record_to_dict": per_call_us(ind.to_dict),
            "msgpack_pack_record": per_call_us(lambda: pack(record)),
            "history_append": per_call_us(lambda: log.append(record)),
            "ledger_record": per_call_us(lambda: ledger.record(next(many), (verdict, 0.001, "evaluator-0"))),
            "pickle_candidate_in": per_call_us(lambda: pickle.dumps((c, "full"), protocol=5)),
            "unpickle_verdict_out": per_call_us(lambda: pickle.loads(verdict_bytes)),
            "unpickle_proposal_in": per_call_us(lambda: pickle.loads(proposal_bytes)),
            "pickle_answer_out": per_call_us(lambda: pickle.dumps(answer, protocol=5)),
        }
    parts["record_bytes"] = len(pack(record))
    parts["candidate_source_bytes"] = len(c.source.encode())
    return parts


def ray_calls(n: int) -> dict[str, float]:
    """A bare Ray actor call from an async actor (as the broker makes one per evaluation): the caller's
    process CPU and the wall time per call, with no arguments, with an evaluator's (Candidate in, verdict
    out) and with 8 candidates in one call, one call at a time and eight at a time."""
    import ray

    rt = RayRuntime()
    echoes = [rt.actor(Echo, num_cpus=0.01) for _ in range(8)]
    caller = rt.actor(Caller, echoes, num_cpus=0.01)
    eight = [p.candidate for p in candidates("ray-calls", 0, 8) if p.candidate is not None]
    out: dict[str, float] = {}
    payloads: list[tuple[str, Candidate | list[Candidate] | None]] = [
        ("empty", None), ("evaluator_call", eight[0]), ("evaluator_call_of_8", eight)]
    for name, payload in payloads:
        ray.get(caller.calls.remote(200, 8, payload))  # warm
        for lanes in (1, 8):
            calls = n if name != "evaluator_call_of_8" else n // 8
            wall, cpu = ray.get(caller.calls.remote(calls, lanes, payload))
            out[f"{name}_x{lanes}_cpu_us"] = round(cpu / calls * 1e6, 1)
            out[f"{name}_x{lanes}_wall_us"] = round(wall / calls * 1e6, 1)
    for actor in [caller, *echoes]:
        rt.kill(actor)
    return out


# (label, file suffix, function): cumulative CPU of these in the broker thread's profile
PROFILED = [("EvaluationLedger.record", "islands/evaluation.py", "record"),
            ("  Individual.to_dict", "contracts/records.py", "to_dict"),
            ("    Evaluation.to_dict", "contracts/verdict.py", "to_dict"),
            ("  MsgpackLog.append (pack, open, write)", "contracts/history.py", "append"),
            ("  Individual.__init__ (DEAP fitness)", "contracts/records.py", "__init__"),
            ("Candidate.id (sha256, once per object)", "contracts/candidate.py", "id"),
            ("IdleActors.get", "islands/broker.py", "get")]


def profile_breakdown(profile: cProfile.Profile, evaluations: int) -> dict[str, Any]:
    """The broker thread's CPU per evaluation (microseconds, inflated by the profiler): in all, in the parts
    of `PROFILED`, and its top functions by own time."""
    entries = pstats.Stats(profile).stats.items()  # type: ignore[attr-defined]
    total = sum(tottime for _, (_, _, tottime, _, _) in entries)
    parts = {}
    for label, suffix, func in PROFILED:
        cum = sum(cumtime for (path, _, name), (_, _, _, cumtime, _) in entries
                  if path.endswith(suffix) and name == func)
        calls = sum(ncalls for (path, _, name), (_, ncalls, _, _, _) in entries
                    if path.endswith(suffix) and name == func)
        parts[label] = [round(cum / evaluations * 1e6, 1), round(calls / evaluations, 2)]
    top = sorted(((f"{Path(path).name}:{line}({name})", ncalls, tottime) for (path, line, name),
                  (_, ncalls, tottime, _, _) in entries), key=lambda r: -r[2])[:10]
    return {"total_us": round(total / evaluations * 1e6, 1), "parts_us_and_calls_per_eval": parts,
            "top_own_us": [[name, round(calls / evaluations, 2), round(t / evaluations * 1e6, 1)]
                           for name, calls, t in top]}


def ray_estimate(run: dict[str, Any], parts: dict[str, float], calls: dict[str, float]) -> dict[str, float]:
    """The Ray broker's CPU per evaluation split into what the microbenchmarks say its parts cost."""
    est = {"evaluator_call": calls["evaluator_call_x8_cpu_us"],
           "evaluate_many_share": round(calls["empty_x8_cpu_us"] / run["batch"] + parts["unpickle_proposal_in"]
                                        + parts["pickle_answer_out"], 1),
           "ledger_record": parts["ledger_record"]}
    est["rest (asyncio, broker logic, Ray's other threads)"] = round(run["broker_cpu_us_per_eval"] - sum(est.values()),
                                                                     1)
    return est


def capacity(ray_runs: list[dict[str, Any]], calls: dict[str, float]) -> dict[str, Any]:
    """What one broker serves, from its mean CPU per evaluation over Ray (c) and a Ray round trip (L):
    saturation at 1/c; u = rate x c at most 5% gives 0.05/c; a GPU doing r evaluations a second idles
    r (L + c / (1 - u)) of its time (M/M/1 queueing at the broker), which stays under 5% up to
    u = 1 - c / (0.05 / r - L)."""
    c = sum(r["broker_cpu_us_per_eval"] for r in ray_runs) / len(ray_runs) / 1e6
    latency = calls["evaluator_call_x8_wall_us"] / 1e6
    out: dict[str, Any] = {"broker_cpu_s_per_eval": round(c, 5), "ray_round_trip_s": round(latency, 5),
                           "saturation_per_s": round(1 / c), "at_u_5pc_per_s": round(0.05 / c, 1)}
    for r in (0.1, 1.0, 10.0):
        room = 0.05 / r - latency
        u = max(0.0, 1 - c / room) if room > 0 else 0.0
        out[f"gpu_idle_5pc_at_{r:g}_evals_per_gpu_s"] = {"u_max": round(u, 3), "cluster_per_s": round(u / c),
                                                           "gpus": int(u / c / r),
                                                           "gpu_idle_at_u_5pc": round(r * (latency + c / 0.95), 4)}
    return out


def table(rows: list[dict[str, Any]]) -> None:
    print(f"{'runtime':<7} {'evals':>5} {'batch':>5} {'eval/s':>7} {'broker CPU us/eval':>18} {'broker busy':>11} "
          f"{'history B/eval':>14} {'rode along':>10}  other CPU us/eval")
    for r in rows:
        other = ", ".join(f"{k} {v:.0f}" for k, v in r["cpu_us_per_eval"].items() if k != "broker")
        print(f"{r['runtime']:<7} {r['evaluators']:>5} {r['batch']:>5} {r['per_s']:>7.0f} "
              f"{r['broker_cpu_us_per_eval']:>18.0f} {r['broker_cpu_fraction']:>11.2f} "
              f"{r['history_bytes_per_eval']:>14.0f} {r['batched_fraction']:>10.0%}  {other}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 s windows, 1 and 8 evaluators, one window each")
    ap.add_argument("--counts", default="1,8,32,64")
    ap.add_argument("--runtimes", default="local,ray")
    ap.add_argument("--seconds", type=float, default=4.0, help="seconds of one measured window")
    ap.add_argument("--repeats", type=int, default=2, help="windows per configuration (the best is kept)")
    ap.add_argument("--batch", type=int, default=4, help="candidates per evaluate_many (an island's offspring)")
    ap.add_argument("--in-flight", type=int, default=8, help="batches in the broker at a time (islands)")
    ap.add_argument("--cpus-per-evaluator", type=float, default=0.01)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.repeats, args.counts = 2.0, 1, "1,8"
    counts = [int(x) for x in args.counts.split(",")]
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
                    "note": "every process shares these cores (evaluators, Ray, the driver), and another job (a "
                            "test suite) may have been running on the machine at the same time"},
        "settings": {"seconds": args.seconds, "repeats": args.repeats, "batch_min": args.batch,
                     "in_flight": args.in_flight, "cpus_per_evaluator": args.cpus_per_evaluator},
        "parts_us": parts_in_process(), "runs": []}
    print("parts of one evaluation in the broker's process (us):")
    for k, v in results["parts_us"].items():
        print(f"  {k:<36} {v:>9}")
    if "local" in args.runtimes:
        rt = LocalRuntime()
        for count in counts:
            results["runs"].append(measure(rt, count, args))
            table(results["runs"][-1:])
        # the same broker with one evaluator and more candidates waiting for it (8, 32, 128)
        results["local_depth"] = [measure(rt, 1, args, batch=b, repeats=1) for b in (1, 4, 16)]
        print("local, one evaluator, deeper queues (outstanding = batch x in-flight):")
        table(results["local_depth"])
        profile = cProfile.Profile(time.thread_time)  # CPU of the thread it runs on, not wall time
        profiled = measure(rt, 8, args, profile=profile)
        results["local_profile"] = {"evaluators": 8, "per_s_under_profile": profiled["per_s"],
                                    **profile_breakdown(profile, profiled["evaluations"])}
        print(f"local broker thread under cProfile (8 evaluators), CPU us per evaluation, profiler-inflated: "
              f"{results['local_profile']['total_us']} in all; cumulative, calls per evaluation:")
        for label, (us, calls) in results["local_profile"]["parts_us_and_calls_per_eval"].items():
            print(f"  {label:<48} {us:>8} {calls:>6}")
        for name, calls, own in results["local_profile"]["top_own_us"]:
            print(f"    own: {name:<60} {calls:>6} {own:>8}")
    if "ray" in args.runtimes:
        import logging

        import ray

        ray_auth.use_private_token()
        ray.init(address="local", num_cpus=max(2, os.cpu_count() or 1), include_dashboard=False,
                 runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}}, logging_level=logging.WARNING,
                 log_to_driver=False)  # 64 actors on 2 cores: the raylet's "many workers" warnings
        try:
            results["ray_calls"] = calls = ray_calls(1000 if args.quick else 3000)
            print("a bare Ray actor call from an async actor (us per call):")
            for k, v in calls.items():
                print(f"  {k:<36} {v:>9}")
            for count in counts:
                run = measure(RayRuntime(), count, args)
                run["broker_cpu_estimate_us"] = ray_estimate(run, results["parts_us"], calls)
                results["runs"].append(run)
                table([run])
                print("  broker CPU per evaluation by part (us):", run["broker_cpu_estimate_us"])
            ray_runs = [r for r in results["runs"] if r["runtime"] == "ray"]
            if ray_runs:
                results["capacity"] = capacity(ray_runs, calls)
                print("one broker's capacity (see `capacity`):", json.dumps(results["capacity"], indent=1))
        finally:
            ray.shutdown()
            ray_auth.restore()
    results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print()
    table(results["runs"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
