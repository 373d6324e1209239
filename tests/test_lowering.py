"""Start from numpy: a task without a seed kernel gets its first kernel from the LLM (a local fake
OpenAI-compatible server here), each reply checked by the real evaluator and a rejected one sent
back with the checker's verdict; without an `llm` mutator the error says what is needed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from evo.app.run.lowering import LoweringFailed
from evo.app.run.setup import prepare
from evo.contracts.config_file import ConfigError
from evo.contracts.history import MsgpackLog

from .fakes.openai_server import FakeOpenAI, Reply
from .test_export_torch_op import NO_MAX_SOFTMAX

ROOT = Path(__file__).resolve().parent.parent
KEY = "EVO_TEST_LOWERING_KEY"
GOOD = (ROOT / "evo" / "tasks" / "softmax" / "known_better.py").read_text()
SIZES = {"check": [{"rows": 1, "cols": 1}, {"rows": 3, "cols": 17}, {"rows": 5, "cols": 1000}],
         "bench": [{"rows": 64, "cols": 1024}]}


def fenced(source: str) -> str:
    return f"A kernel for the reference.\n```python\n{source}\n```"


def task_without_seed(tmp_path: Path) -> Path:
    folder = tmp_path / "mysoftmax"
    folder.mkdir()
    shutil.copy(ROOT / "evo" / "tasks" / "softmax" / "task.py", folder / "task.py")
    return folder


def config(tmp_path: Path, task: dict, *, llm: dict | None) -> Path:
    mutators: list[dict[str, object]] = [{"kind": "stoke"}]
    if llm is not None:
        mutators.append({"kind": "llm", "api_key_env": KEY, "retries": 0, "mode": "record", **llm})
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump({
        "name": "lowered", "task": task, "evaluation": {"device": "cpu", "timeout_s": 60},
        "islands": {"count": 1, "population": 2, "offspring": 1}, "mutators": mutators,
        "budget": {"generations": 1}, "output_dir": str(tmp_path / "runs")}))
    return path


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY, "fake-key")


def user_messages(server: FakeOpenAI, request: int) -> list[str]:
    return [m["content"] for m in server.received[request].body["messages"] if m["role"] == "user"]


def test_the_first_correct_kernel_the_llm_writes_is_the_seed_and_each_rejection_is_sent_back(tmp_path):
    replies = [Reply("I would use a three-pass kernel."), Reply(fenced(NO_MAX_SOFTMAX)), Reply(fenced(GOOD))]
    with FakeOpenAI(replies) as server:
        cfg = config(tmp_path, {"path": str(task_without_seed(tmp_path)), "sizes": SIZES},
                     llm={"base_url": server.base_url, "lowering_attempts": 3})
        prepared = prepare(str(cfg))
    assert prepared.seed.source.strip() == GOOD.strip()
    run = prepared.store.path
    assert (run / "inputs" / "seed.py").read_text().strip() == GOOD.strip()
    first = user_messages(server, 0)[0]
    assert "## The reference" in first and "def reference(x)" in first
    assert "launch receives 1 input(s) [float32 [1, 1]], then 1 output(s) to write [float32 [1, 1]]" in first
    assert "no ```python block defining launch" in user_messages(server, 1)[-1]
    rejected = user_messages(server, 2)[-1]
    assert rejected.startswith("That kernel was rejected:\n- wrong_output") and "(wide)" in rejected
    [event] = [e for e in MsgpackLog(run / "events.msgpack").read() if e["kind"] == "lowering"]
    assert [a["outcome"] for a in event["attempts"]] == ["no module", "wrong_output", "ok"]
    assert any("the LLM wrote one from the reference (3 attempts" in n for n in prepared.notes)
    assert len((run / "llm_record.jsonl").read_text().splitlines()) == 3  # recorded, so the run replays


def test_a_task_without_seed_and_without_an_llm_mutator_says_what_is_needed(tmp_path):
    cfg = config(tmp_path, {"path": str(task_without_seed(tmp_path)), "sizes": SIZES}, llm=None)
    with pytest.raises(ConfigError, match=r"has no seed kernel: give one .* or add an `llm` mutator"):
        prepare(str(cfg))
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_no_correct_kernel_within_the_attempts_ends_with_the_last_verdict_and_leaves_no_run(tmp_path):
    with FakeOpenAI(responder=lambda body: Reply(fenced(NO_MAX_SOFTMAX))) as server:
        cfg = config(tmp_path, {"path": str(task_without_seed(tmp_path)), "sizes": SIZES},
                     llm={"base_url": server.base_url, "lowering_attempts": 2})
        with pytest.raises(LoweringFailed, match=r"no correct one in 2 attempts .* the last: wrong_output"):
            prepare(str(cfg))
        assert len(server.received) == 2
    assert not any((tmp_path / "runs").iterdir())


def test_a_kernelbench_problem_runs_without_a_hand_written_seed(tmp_path):
    kb = ROOT / "tests" / "kernelbench"
    task = yaml.safe_load((kb / "softmax.yaml").read_text())["task"]
    assert "seed" not in task
    # the problem as a user may have edited it: no seed ships for it (the one for 23_Softmax would be used)
    problem = tmp_path / "my_softmax.py"
    problem.write_text((kb / task["kernelbench"]).read_text().replace("dim=1)", "dim=-1)"))
    task["kernelbench"] = str(problem)
    written = (ROOT / "evo" / "kernelbench_seeds" / "23_Softmax.py").read_text()
    with FakeOpenAI([Reply(fenced(written))]) as server:
        cfg = config(tmp_path, task, llm={"base_url": server.base_url})
        prepared = prepare(str(cfg))
    assert prepared.seed.source.strip() == written.strip()
    assert "class Model(nn.Module)" in user_messages(server, 0)[0]
    assert (prepared.store.path / "inputs" / "seed.py").is_file()
