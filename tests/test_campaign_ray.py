"""Campaigns on a real local Ray (a head this module starts on 127.0.0.1 and stops), with the driver
in the test process: the run directory, a killed island actor, killed and hung evaluators.

Mutators and latency are fakes (`tests.islands_fakes`); lint, equivalence, workers, actors, the
broker, checkpoints and the run directory are real.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from evo.app.run.campaign import Campaign
from evo.app.run.progress import PlainLog
from evo.app.run.setup import CampaignHooks, prepare
from evo.app.run.signals import terminate_as_interrupt
from evo.app.run.store import RunStore
from evo.contracts.history import MsgpackLog, unpack

from .campaign_job import FAKE_HOOKS
from .conftest import ROOT, SMALL_SOFTMAX
from .islands_fakes import fake_latency_ms, fault_evaluator_factory, fault_mutator_factory, stalling_evaluator_factory
from .ray_head import RayHead, joined_head

pytestmark = pytest.mark.slow


LLM_KEY_ENV = "EVO_TEST_LLM_KEY"  # the fake server takes any key; the island actors need one set


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[RayHead]:
    with joined_head(env={LLM_KEY_ENV: "fake-key"}) as head:
        yield head


def write_config(tmp_path: Path, **overrides: object) -> Path:
    cfg = {
        "name": "test", "seed": 5, "task": SMALL_SOFTMAX,
        "evaluation": {"device": "cpu", "timeout_s": 30},
        "islands": {"count": 2, "population": 3, "offspring": 2, "migration": {"interval": 1, "top_k": 1}},
        "evaluators": {"count": 2},
        "mutators": [{"kind": "optuna"}, {"kind": "stoke"}],
        "budget": {"generations": 2},
        "output_dir": str(tmp_path / "runs"),
    }
    cfg.update(overrides)
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def campaign(config: Path, hooks: CampaignHooks = FAKE_HOOKS) -> tuple[Campaign, io.StringIO]:
    out = io.StringIO()
    return Campaign(prepare(str(config), hooks=hooks), hooks, PlainLog(out)), out


def result_line(output: str) -> dict:
    """The JSON line `evo run` prints last."""
    lines = [ln for ln in output.splitlines() if ln.startswith('{"status"')]
    assert lines, output[-3000:]
    return json.loads(lines[-1])


def history(run_dir: Path) -> list[dict]:
    return [r for r in MsgpackLog(run_dir / "history.msgpack").read() if r["kind"] == "evaluation"]


def events(run_dir: Path, kind: str) -> list[dict]:
    return [e for e in MsgpackLog(run_dir / "events.msgpack").read() if e["kind"] == kind]


def assert_nothing_evaluated_twice(records: list[dict]) -> None:
    twice = [k for k, n in Counter((r["candidate"]["id"], r["evaluation"]["level"]) for r in records).items() if n > 1]
    assert not twice, f"evaluated more than once: {twice}"


def test_a_campaign_finds_the_faster_kernel_and_writes_a_run_directory_with_a_standalone_best_kernel(ray_cluster,
                                                                                                         tmp_path):
    c, out = campaign(write_config(tmp_path))
    summary = c.run()
    run_dir = Path(summary["run_dir"])
    assert summary["status"] == "finished" and summary["generation"] == 2, out.getvalue()
    assert {p.name for p in run_dir.iterdir()} >= {"config.yaml", "run.json", "history.msgpack", "events.msgpack",
                                                   "checkpoints", "best_kernel.py", "summary.json"}
    assert json.loads((run_dir / "summary.json").read_text()) == json.loads(json.dumps(summary))
    best = summary["best"]
    assert best["speedup_over_seed"] > 1.0 and best["latency_source"] == "model"
    assert summary["seed"]["latency_ms"] == pytest.approx(9.0)  # fake_latency_ms of the seed
    records = history(run_dir)
    assert_nothing_evaluated_twice(records)
    assert summary["evaluations"] == len(records) and summary["cache_hits"] > 0  # islands share the cache
    for r in records:
        o = r["origin"]
        assert {"parents", "mutator", "island", "generation"} <= set(o) and r["evaluation"]["status"]
        assert o["mutator"] == "seed" or o["parents"]
    assert events(run_dir, "migration") and "island 1 gen 2" in out.getvalue()
    cps = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert cps == ["gen-000001", "gen-000002"]
    state = unpack((run_dir / "checkpoints" / "gen-000002" / "island-00.msgpack").read_bytes())
    assert state["generation"] == 2 and state["population"]
    assert "api_key" not in (run_dir / "config.yaml").read_text()
    assert_runs_with_triton_alone(run_dir / "best_kernel.py", best["params"])


def assert_runs_with_triton_alone(kernel: Path, params: dict) -> None:
    """`kernel` (a run's best_kernel.py) runs in a bare interpreter with Triton and torch alone, and is right."""
    script = textwrap.dedent(f"""
        import importlib.util, numpy as np, torch
        spec = importlib.util.spec_from_file_location("best", {str(kernel)!r})
        m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
        x = torch.randn(5, 300)
        y = torch.empty_like(x)
        m.kernel(x, y)
        ref = np.exp(x.numpy() - x.numpy().max(1, keepdims=True)); ref /= ref.sum(1, keepdims=True)
        assert np.allclose(y.numpy(), ref, atol=1e-6), abs(y.numpy() - ref).max()
        print("params", m.PARAMS)
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd="/tmp",
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert f"params {params}" in p.stdout


OOM_MESSAGE = (
    "Task was killed due to the node running low on memory.\nMemory on the node (IP: 127.0.0.1, ID: 953e) where "
    "the task (actor ID: 05f1, name=IslandActor.__init__, pid=4242, memory used=0.31GB) was running was "
    "22.81GB / 23.99GB (0.950817), which exceeds the memory usage threshold of 0.95. Ray killed this worker "
    "because it was the most recently scheduled task.\nRefer to the documentation on how to address the out of "
    "memory issue: https://docs.ray.io/en/latest/ray-observability/user-guides/debug-apps/debug-memory.html.")


def test_killed_island_actors_are_restored_from_their_checkpoints_and_an_oom_kill_says_out_of_memory(ray_cluster,
                                                                                                    tmp_path):
    """Island 0's actor is SIGKILLed in generation 3 and restored from its checkpoint; then island 1's, as
    Ray's memory monitor kills a worker: its caller gets an OutOfMemoryError, not a RayActorError, the actor
    is as dead, and its island is restored too (the run failed outright, with Ray's closing advice as its
    reason). One campaign for both: each restore is an event of its own."""
    import ray
    from ray.exceptions import OutOfMemoryError, RayActorError

    c, out = campaign(write_config(tmp_path, budget={"generations": 3}))
    c.start()
    c.advance()
    c.advance()
    os.kill(ray.get(c.actors[0].pid.remote()), signal.SIGKILL)
    c.advance()
    run_dir = c.store.path
    [restored] = events(run_dir, "island_restored")
    assert restored["island"] == 0 and restored["from_generation"] == 1
    assert "island 0 died" in out.getvalue() and c.rows[0].restored == 1
    assert [r.generation for r in c.rows] == [2, 2]
    cp = RunStore.open(run_dir).latest_checkpoint()
    assert cp is not None and unpack(cp.islands[0])["generation"] == 2
    real_get = c.rt.get

    def get_as_after_an_oom_kill(refs: object, timeout: float | None = None) -> object:
        try:
            return real_get(refs, timeout)
        except RayActorError:
            raise OutOfMemoryError(OOM_MESSAGE) from None

    c.rt.get = get_as_after_an_oom_kill  # type: ignore[method-assign]
    os.kill(ray.get(c.actors[1].pid.remote()), signal.SIGKILL)
    c.advance()
    c.finish("finished", "test")
    first, oom = events(run_dir, "island_restored")
    assert first == restored and oom["island"] == 1 and "out of memory: Task was killed due to the node running " \
        "low on memory. (node memory 22.81GB / 23.99GB in use)" in oom["error"], oom
    assert "island 1 died (out of memory" in out.getvalue() and c.rows[1].restored == 1
    assert_nothing_evaluated_twice(history(run_dir))  # the restored islands' redo came from the cache


def advance_until_the_faults(c: Campaign) -> tuple[list[dict], dict[str, dict]]:
    """Generations until the fault mutator has fired (it does when first chosen, weights 1:1), then
    finish; the history (nothing evaluated twice) and the fault candidates' verdicts by note."""
    while not any(r["origin"]["mutator"] == "faults" for r in history(c.store.path)):
        assert c.generation < 8, "the fault mutator was never chosen"
        c.advance()
    c.finish("finished", "test")
    records = history(c.store.path)
    assert_nothing_evaluated_twice(records)
    return records, {r["origin"]["note"]: r["evaluation"] for r in records if r["origin"]["mutator"] == "faults"}


def test_hung_crashing_and_killed_evaluators_give_verdicts_and_are_replaced(ray_cluster, tmp_path):
    """A hanging kernel times out in its worker, a wild store is unsafe (caught before it crashes the
    worker), an evaluator actor that hangs is killed and replaced, twice (then it is the candidate's
    timeout), and evaluator actors killed from outside are replaced without blaming a candidate."""
    import ray

    config = write_config(tmp_path, evaluation={"device": "cpu", "timeout_s": 6},
                          evaluators={"count": 2, "actor_timeout_s": 25},
                          islands={"count": 1, "population": 2, "offspring": 1}, budget={"generations": 3})
    hooks = CampaignHooks(mutator_factory=fault_mutator_factory, evaluator_factory=fault_evaluator_factory)
    c, out = campaign(config, hooks)
    c.start()
    c.advance()  # generation 0: the seed and draws from its SPACE
    for e in ray.get(c.broker.get_stats.remote()).evaluators:
        os.kill(e.pid, signal.SIGKILL)  # both, so the next evaluation meets a dead actor for sure
    records, by_note = advance_until_the_faults(c)
    assert by_note["hang"]["status"] == "timeout" and "killed and replaced" in by_note["hang"]["reason"]
    assert by_note["segfault"]["status"] == "unsafe"
    assert by_note["actor-hang"]["status"] == "timeout" and "did not answer" in by_note["actor-hang"]["reason"]
    assert len(by_note["actor-hang"]["incidents"]) == 2  # tried once more on a fresh evaluator: it reproduced
    # a candidate that met a killed evaluator ran on another one; the death is listed, not its verdict
    met = [r["evaluation"] for r in records if any("died during" in i for i in r["evaluation"]["incidents"])]
    assert met and all(e["status"] != "crash" for e in met)
    assert by_note["faster"]["status"] == "ok"
    # the killed evaluators were replaced and their next candidates evaluated, not blamed
    assert not [r for r in records if "evaluator actors died" in r["evaluation"]["reason"]]
    replaced = events(c.store.path, "evaluator_replaced")
    assert len(replaced) >= 3  # the hung actor, and both killed ones
    assert c.summary["best"]["latency_ms"] == pytest.approx(fake_latency_ms_of_faster())
    assert "replaced by" in out.getvalue()


def test_llm_requests_that_fail_are_counted_and_said_in_the_progress_lines_and_the_summary(ray_cluster, tmp_path,
                                                                                 monkeypatch):
    """The real LLM mutator in island actors, against a fake OpenAI-compatible server that is down for its
    first requests, then answers: the campaign goes on, each failed request is counted (progress line and
    summary.json) and named by its endpoint in events; the prompts it sent name the campaign's target GPU
    (a100 here) with its SM count, bandwidth and L2."""
    from evo.contracts.gpus import get_profile
    from mutators.factory import build_mutator

    from .fakes.openai_server import FakeOpenAI, Reply
    from .islands_fakes import fake_evaluator_factory

    monkeypatch.setenv(LLM_KEY_ENV, "fake-key")
    down = [Reply("unavailable", status=503) for _ in range(2)]
    with FakeOpenAI([*down], responder=lambda body: Reply("no code in this reply")) as server:
        config = write_config(tmp_path, evaluation={"device": "cpu", "timeout_s": 30, "target_gpu": "a100"},
                              islands={"count": 1, "population": 2, "offspring": 2},
                              mutators=[{"kind": "llm", "base_url": server.base_url, "api_key_env": LLM_KEY_ENV,
                                         "retries": 0, "model": "down-model"}],
                              budget={"generations": 2})
        hooks = CampaignHooks(mutator_factory=build_mutator, evaluator_factory=fake_evaluator_factory)
        c, out = campaign(config, hooks)
        summary = c.run()
        url = server.base_url
        prompts = [m["content"] for r in server.received for m in r.body["messages"] if m["role"] == "user"]
    assert summary["status"] == "finished"
    a100 = get_profile("a100")
    for prompt in prompts:  # those that failed and those answered
        hardware = prompt.split("## Target hardware", 1)[1].split("##", 1)[0]
        assert a100.description in hardware and "108 SMs" in hardware and "2.04 TB/s" in hardware
        assert "L2 40 MB" in hardware and "modelled" in hardware
        assert "unspecified" not in hardware
    assert len(prompts) >= 3
    assert summary["proposal_failures"]["llm_request_failed"] == 2
    assert summary["proposal_failures"]["no_candidate"] >= 1  # the replies after it came back had no code
    assert "llm_request_failed=2" in out.getvalue()
    failed = [e for e in events(Path(summary["run_dir"]), "proposal_failed") if "LLM request failed" in e["error"]]
    assert len(failed) == 2 and all(url in e["error"] and "down-model" in e["error"] for e in failed)
    # and the progress says why, once per distinct reason, not only how many
    said = [line for line in out.getvalue().splitlines() if "llm proposal failed: LLM request failed" in line]
    assert said and len(said) == len({line.split("failed: ", 1)[1] for line in said}), said
    assert url in said[0] and "down-model" in said[0], said


def test_exact_replay_of_a_recorded_campaign_reproduces_its_history(ray_cluster, tmp_path, monkeypatch):
    """A campaign recorded against an LLM server, then the same campaign replayed from the record with
    `replay_match: exact` and no server: the same prompts, so the same candidates with the same verdicts,
    and no replay miss. The mutator choice is `fixed` (seeded draws by weight): ucb1 and thompson
    weigh rewards by measured seconds, which differ between any two runs."""
    import hashlib

    from evo.app.report.data import load_run
    from evo.app.report.stats import llm_usage
    from mutators.factory import build_mutator

    from .fakes.openai_server import FakeOpenAI, Reply
    from .islands_fakes import fake_evaluator_factory

    good = (ROOT / "tests/candidates/softmax/one_pass.py").read_text()

    def responder(body: dict) -> Reply:  # a distinct kernel for each distinct prompt
        tag = hashlib.sha256(json.dumps(body["messages"]).encode()).hexdigest()[:12]
        return Reply(f"```python\n{good}\n# variant {tag}\n```", prompt_tokens=100, completion_tokens=50)

    monkeypatch.setenv(LLM_KEY_ENV, "fake-key")
    record = tmp_path / "llm.jsonl"
    hooks = CampaignHooks(mutator_factory=build_mutator, evaluator_factory=fake_evaluator_factory)

    def run(mode: str, base_url: str, out: str) -> Path:
        llm = {"kind": "llm", "base_url": base_url, "api_key_env": LLM_KEY_ENV, "retries": 0, "mode": mode,
               "record_path": str(record), "replay_match": "exact", "price_in_per_mtok": 1.0, "weight": 3.0}
        config = write_config(tmp_path, islands={"count": 1, "population": 2, "offspring": 2},
                              evaluators={"count": 1}, mutators=[llm, {"kind": "optuna"}],
                              selection={"policy": "fixed"}, budget={"generations": 3},
                              output_dir=str(tmp_path / out))
        summary = campaign(config, hooks)[0].run()
        assert summary["status"] == "finished"
        return Path(summary["run_dir"])

    with FakeOpenAI(responder=responder) as server:
        recorded = run("record", server.base_url, "recorded")
        url = server.base_url
    replayed = run("replay", url, "replayed")  # the server is gone

    def key(run_dir: Path) -> list[tuple]:
        return [(r["origin"]["generation"], r["origin"]["mutator"], r["candidate"]["id"], r["evaluation"]["status"])
                for r in history(run_dir)]

    llm_made = [k for k in key(recorded) if k[1] == "llm"]
    assert len({k[2] for k in llm_made}) >= 2  # the LLM's kernels were part of the search
    assert sorted(key(replayed)) == sorted(key(recorded))
    usage = llm_usage(load_run(replayed))
    before = llm_usage(load_run(recorded))
    assert usage is not None and before is not None and usage.replay_misses == 0
    assert usage.spent_usd == pytest.approx(before.spent_usd) and usage.requests == before.requests


def fake_latency_ms_of_faster() -> float:
    from evo.contracts.candidate import Candidate

    from .islands_fakes import FASTER_SOFTMAX

    return fake_latency_ms(Candidate.from_source(FASTER_SOFTMAX))


def test_sigterm_ends_a_campaign_interrupted_with_its_summary_written(ray_cluster, tmp_path):
    """`ray job stop`, schedulers and `kill` send SIGTERM: a campaign in the main thread (`evo run`) ends
    `interrupted` at once, its summary and stop event written and resumable, where it died as it stood
    (or, under Ray's own handler, ended `failed`). Its evaluations take two minutes here: only the
    signal can end it this soon."""
    with terminate_as_interrupt():  # the handler the campaign installs, to tell when it is in place
        ours = signal.getsignal(signal.SIGTERM)
    config = write_config(tmp_path, islands={"count": 1, "population": 1, "offspring": 1},
                          evaluators={"count": 1}, budget={"generations": 3})
    c, out = campaign(config, CampaignHooks(evaluator_factory=stalling_evaluator_factory))
    sent: list[float] = []

    def terminate() -> None:
        deadline = time.monotonic() + 120
        while signal.getsignal(signal.SIGTERM) is not ours and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate, daemon=True).start()
    summary = c.run()
    assert sent and time.monotonic() - sent[0] < 60, out.getvalue()
    assert summary["status"] == "interrupted", summary
    assert summary["stop_reason"].startswith("terminated (SIGTERM) during generation 0"), summary["stop_reason"]
    assert [e["status"] for e in events(c.store.path, "stop")] == ["interrupted"]
    assert json.loads((c.store.path / "summary.json").read_text())["status"] == "interrupted"
    assert signal.getsignal(signal.SIGTERM) is not ours  # put back
