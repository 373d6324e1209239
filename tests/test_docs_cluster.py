"""The cluster commands of the documentation (docs/how-to/cluster.md) and the README, run as written,
against a local head and two worker nodes with token authentication on.

The commands are read from the page's first block, so the block and the tool cannot drift apart; the
README's short submit is the page's first `ray job submit` with fewer options. Only what a test must
change is changed: HEAD_NODE is 127.0.0.1, the head and each node get their own ports and temp dir (other
Ray heads may run on this machine) and listen on 127.0.0.1, each node declares one GPU (this machine has
none: the evaluator Ray places there checks in the interpreter) and a resource naming it, the config and
the output folder are small and temporary, the home directory (where Ray keeps the token) is temporary,
and the last command, `ray stop`, which would stop every Ray on the machine, stops only this head and its
nodes. Nothing sets RAY_AUTH_MODE=disabled: the client sends the token as a user's would, and the nodes
join with the token the page exports (their home directory has none).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from evo.contracts.history import MsgpackLog

from .conftest import ROOT, SMALL_SOFTMAX, bash_block
from .ray_head import RAY, RayHead, RayNode
from .test_campaign_ray import assert_nothing_evaluated_twice, result_line

pytestmark = pytest.mark.slow

CLUSTER_PAGE = ROOT / "docs" / "how-to" / "cluster.md"
# the page's commands, in order, as (program words) prefixes
SHAPE = [("ray", "get-auth-token", "--generate"), ("ray", "start", "--head"),
         ("export", "RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN=HEAD_TOKEN"), ("ray", "start", "--address=HEAD_NODE:6379"),
         ("export", "RAY_AUTH_MODE=token"), ("ray", "job", "submit"), ("ray", "job", "logs"), ("ray", "job", "stop"),
         ("ray", "job", "submit"), ("ray", "stop")]
NODES = ("node_a", "node_b")  # the worker nodes the page's `ray start --address` starts here


def block_commands(text: str) -> list[list[str]]:
    """The commands of the first bash block of `text`, as words, continuation lines joined."""
    return [words for line in bash_block(text) if (words := shlex.split(line, comments=True))]


def page_commands() -> list[list[str]]:
    return block_commands(CLUSTER_PAGE.read_text())


def test_the_readme_block_is_the_sequence_this_test_runs():
    commands = page_commands()
    assert [tuple(c[: len(s)]) for c, s in zip(commands, SHAPE)] == SHAPE and len(commands) == len(SHAPE)
    first, resumed = commands[5], commands[8]
    assert first[first.index("--") + 1:][:4] == ["python", "-m", "evo", "run"]
    assert "--resume" in resumed and "--working-dir" in first
    # the README's short form is this submit with fewer options: the same address, working dir and command
    short = block_commands((ROOT / "README.md").read_text().split("## On a cluster", 1)[1])
    assert short[0] == ["export", "RAY_AUTH_MODE=token"] and short[1][:3] == ["ray", "job", "submit"]
    for option in ("--address", "--working-dir"):
        assert short[1][short[1].index(option) + 1] == first[first.index(option) + 1]
    assert short[1][short[1].index("--") + 1:][:5] == first[first.index("--") + 1:][:5]


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def finished(run_dir: Path) -> bool:
    summary = run_dir / "summary.json"
    return summary.is_file() and '"status": "finished"' in summary.read_text()


def node_ids(head: RayHead, env: dict[str, str]) -> dict[str, str]:
    """The id of each node of `NODES` (by the resource naming it), asked of the head by a short-lived driver."""
    code = ("import json, ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
            "print(json.dumps({label: n['NodeID'] for n in ray.nodes() if n['Alive'] for label in sys.argv[2:] "
            "if label in n['Resources']}))")
    p = subprocess.run([sys.executable, "-c", code, head.address, *NODES], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


def assert_spread_and_reported(run_dir: Path, ids: dict[str, str]) -> None:
    """One evaluator on each GPU node, each with evaluations: summary.json and the report list the nodes, their
    evaluators and how busy each was; the evaluators check in the interpreter (torch sees no CUDA here) under
    the GPU Ray named to each, isolated inside Ray's actors as anywhere else."""
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished", summary
    assert {n["node"] for n in summary["nodes"]} == set(ids.values()), (summary["nodes"], ids)
    for node in summary["nodes"]:
        [evaluator] = node["evaluators"]
        assert evaluator["evaluations"] > 0 and 0 < evaluator["busy_fraction"] <= 1, summary["nodes"]
    evaluators = summary["evaluators"]
    assert len(evaluators) == 2 and all(len(e["gpu_ids"]) == 1 for e in evaluators), evaluators
    assert all(e["cuda_visible_devices"] == str(e["gpu_ids"][0]) for e in evaluators), evaluators
    assert {e["device"] for e in evaluators} == {"cpu"}
    assert summary["sandbox"] == "landlock+seccomp" and {e["sandbox"] for e in evaluators} == {"landlock+seccomp"}
    records = [r for r in MsgpackLog(run_dir / "history.msgpack").read() if r["kind"] == "evaluation"]
    assert {r["evaluator"] for r in records} == {e["name"] for n in summary["nodes"] for e in n["evaluators"]}
    assert all(r["evaluation"]["device"] == "cpu" for r in records)
    assert {r["evaluation"]["sandbox"] for r in records} == {"landlock+seccomp"}
    assert_nothing_evaluated_twice(records)  # across the stop and the resume too
    report = subprocess.run([sys.executable, "-m", "evo", "report", str(run_dir)], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    md = (run_dir / "report.md").read_text()
    assert "Nodes and evaluators" in md and all(i[:8] in md for i in ids.values()), md[-3000:]


def test_the_cluster_page_commands_work_as_written_with_token_authentication(tmp_path):
    head = RayHead(num_cpus=2, dashboard=True)  # its ports, temp dir and stop(); started below as the page says
    nodes = [RayNode(head, label) for label in NODES]  # their ports, temp dirs and stop(); started as the page says
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in head.env().items() if not k.startswith("RAY_")}
    env["HOME"] = str(home)
    node_env = {**env, "HOME": str(tmp_path / "node-home")}  # a GPU node's shell: no token file there
    (tmp_path / "node-home").mkdir()
    config = tmp_path / "campaign.yaml"
    # no evaluator count: one per GPU of the cluster, the nodes' two
    config.write_text(yaml.safe_dump({
        "name": "readme", "seed": 3, "task": SMALL_SOFTMAX, "evaluation": {"device": "auto", "timeout_s": 60},
        "islands": {"count": 2, "population": 3, "offspring": 2},
        "mutators": [{"kind": "optuna"}, {"kind": "stoke"}], "budget": {"generations": 5},
        "checkpoint_interval": 1}))
    out = tmp_path / "evo-runs"
    names: dict[str, str] = {}

    def literal(cmd: list[str]) -> list[str]:
        words = [w.replace("HEAD_NODE:8265", f"127.0.0.1:{head.ports['dashboard-port']}")
                 .replace("HEAD_NODE:6379", head.address)
                 .replace("configs/cluster.yaml", str(config)).replace("/shared/evo-runs", str(out))
                 .replace("--dashboard-host=0.0.0.0", "--dashboard-host=127.0.0.1") for w in cmd]
        if "NAME-STAMP" in " ".join(words):
            words = [w.replace(f"{out}/NAME-STAMP", str(out / names["run"])) for w in words]
        return [RAY if w == "ray" and i == 0 else w for i, w in enumerate(words)]

    def run(cmd: list[str], timeout: float = 300, where: dict[str, str] = env) -> str:
        p = subprocess.run(cmd, cwd=ROOT, env=where, capture_output=True, text=True, timeout=timeout)
        assert p.returncode == 0, f"{shlex.join(cmd)} failed:\n{(p.stdout + p.stderr)[-4000:]}"
        return p.stdout + p.stderr

    commands = page_commands()
    logs: subprocess.Popen[str] | None = None
    try:
        for i, cmd in enumerate(commands):
            cmd = literal(cmd)
            if cmd[0] == "export" and "RAY_AUTH_TOKEN=HEAD_TOKEN" in cmd:  # on each GPU node
                printed = subprocess.run([RAY, "get-auth-token"], env=env, capture_output=True, text=True, timeout=120)
                token = printed.stdout.strip()  # what it prints on the head
                assert token == (home / ".ray/auth_token").read_text().strip()
                node_env.update(dict(a.replace("HEAD_TOKEN", token).split("=", 1) for a in cmd[1:]))
            elif cmd[0] == "export":
                env.update(dict(a.split("=", 1) for a in cmd[1:]))
            elif cmd[1:3] == ["get-auth-token", "--generate"]:
                run(cmd)
                assert (home / ".ray/auth_token").is_file()
            elif cmd[1:3] == ["start", "--head"]:
                isolation = ["--node-ip-address=127.0.0.1", f"--temp-dir={head.tmp}", "--num-cpus=2",
                             *(f"--{k}={v}" for k, v in head.ports.items())]
                started = run(cmd + isolation, timeout=180)
                assert "Token authentication is enabled" in started  # the head found the page's token
            elif cmd[1] == "start" and cmd[2] == f"--address={head.address}":
                for node in nodes:
                    isolation = ["--node-ip-address=127.0.0.1", f"--temp-dir={node.tmp}", "--num-cpus=1",
                                 "--num-gpus=1", f'--resources={{"{node.label}": 1}}',
                                 *(f"--{k}={v}" for k, v in node.ports.items())]
                    assert "Ray runtime started" in run(cmd + isolation, timeout=300, where=node_env)
            elif cmd[1:3] == ["job", "submit"] and "--resume" not in cmd:
                unauthenticated = {k: v for k, v in env.items() if k != "RAY_AUTH_MODE"}
                p = subprocess.run(cmd, cwd=ROOT, env=unauthenticated, capture_output=True, text=True, timeout=120)
                # without the page's export, Ray's client sends no token: why the page says so
                assert p.returncode != 0 and "Missing authentication token" in p.stdout + p.stderr
                run(cmd)
                wait_for(lambda: any(out.glob("*/checkpoints/gen-000001/driver.msgpack")), 420, "a first checkpoint")
                names["run"] = next(out.iterdir()).name
            elif cmd[1:3] == ["job", "logs"]:
                logs = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True)
            elif cmd[1:3] == ["job", "stop"]:
                run(cmd)
                assert logs is not None
                followed, _ = logs.communicate(timeout=120)  # --follow ends with the job
                assert "island 1 gen" in followed and "run directory" in followed  # plain progress lines
            elif cmd[1:3] == ["job", "submit"]:
                run(cmd)
                wait_for(lambda: finished(out / names["run"]), 600, "the resumed run to finish")
                # what `evo run` prints last reaches the submitter through the job's logs (--follow: to the job's
                # end, which comes after its summary is written)
                job = cmd[cmd.index("--submission-id") + 1]
                result = result_line(run([RAY, "job", "logs", "--address", cmd[cmd.index("--address") + 1], "--follow",
                                          job]))
                assert result["status"] == "finished" and result["run_dir"] == str(out / names["run"]), result
            elif cmd[1:] == ["stop"]:
                assert i == len(commands) - 1
            else:
                pytest.fail(f"a command of the page this test does not know: {shlex.join(cmd)}")
        run_dir = out / names["run"]
        assert b"resume" in (run_dir / "events.msgpack").read_bytes()
        assert list(out.iterdir()) == [run_dir]
        assert_spread_and_reported(run_dir, node_ids(head, env))
    finally:
        if logs is not None and logs.poll() is None:
            logs.kill()
        for node in nodes:  # the page's `ray stop`, for this head and its nodes only
            node.stop()
        head.stop()
    assert not head._own_pids() and not any(node.pids() for node in nodes)
