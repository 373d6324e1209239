"""The cluster commands of the documentation (docs/how-to/cluster.md) and the README, run as written,
against a local head with token authentication on.

The commands are read from the page's first block, so the block and the tool cannot drift apart; the
README's short submit is the page's first `ray job submit` with fewer options. Only what a test must
change is changed: HEAD_NODE is 127.0.0.1, the head gets its own ports and temp dir (other Ray heads
may run on this machine) and listens on 127.0.0.1, the config and the output folder are small and
temporary, the home directory (where Ray keeps the token) is temporary, and the last command, `ray
stop`, which would stop every Ray on the machine, stops only this head. Nothing sets
RAY_AUTH_MODE=disabled: the client sends the token as a user's would.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT, SMALL_SOFTMAX, bash_block
from .ray_head import RAY, RayHead

pytestmark = pytest.mark.slow

CLUSTER_PAGE = ROOT / "docs" / "how-to" / "cluster.md"
# the page's commands, in order, as (program words) prefixes
SHAPE = [("ray", "get-auth-token", "--generate"), ("ray", "start", "--head"), ("export", "RAY_AUTH_MODE=token"),
         ("ray", "job", "submit"), ("ray", "job", "logs"), ("ray", "job", "stop"), ("ray", "job", "submit"),
         ("ray", "stop")]


def block_commands(text: str) -> list[list[str]]:
    """The commands of the first bash block of `text`, as words, continuation lines joined."""
    return [words for line in bash_block(text) if (words := shlex.split(line, comments=True))]


def page_commands() -> list[list[str]]:
    return block_commands(CLUSTER_PAGE.read_text())


def test_the_readme_block_is_the_sequence_this_test_runs():
    commands = page_commands()
    assert [tuple(c[: len(s)]) for c, s in zip(commands, SHAPE)] == SHAPE and len(commands) == len(SHAPE)
    first, resumed = commands[3], commands[6]
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


def test_the_cluster_page_commands_work_as_written_with_token_authentication(tmp_path):
    head = RayHead(num_cpus=2, dashboard=True)  # its ports, temp dir and stop(); started below as the page says
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in head.env().items() if not k.startswith("RAY_")}
    env["HOME"] = str(home)
    config = tmp_path / "campaign.yaml"
    config.write_text(yaml.safe_dump({
        "name": "readme", "seed": 3, "task": SMALL_SOFTMAX, "evaluation": {"device": "cpu", "timeout_s": 60},
        "islands": {"count": 1, "population": 2, "offspring": 2}, "evaluators": {"count": 1},
        "mutators": [{"kind": "optuna"}, {"kind": "stoke"}], "budget": {"generations": 5},
        "checkpoint_interval": 1}))
    out = tmp_path / "evo-runs"
    names: dict[str, str] = {}

    def literal(cmd: list[str]) -> list[str]:
        words = [w.replace("HEAD_NODE:8265", f"127.0.0.1:{head.ports['dashboard-port']}")
                 .replace("configs/cluster.yaml", str(config)).replace("/shared/evo-runs", str(out))
                 .replace("--dashboard-host=0.0.0.0", "--dashboard-host=127.0.0.1") for w in cmd]
        if "NAME-STAMP" in " ".join(words):
            words = [w.replace(f"{out}/NAME-STAMP", str(out / names["run"])) for w in words]
        return [RAY if w == "ray" and i == 0 else w for i, w in enumerate(words)]

    def run(cmd: list[str], timeout: float = 300) -> str:
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        assert p.returncode == 0, f"{shlex.join(cmd)} failed:\n{(p.stdout + p.stderr)[-4000:]}"
        return p.stdout + p.stderr

    commands = page_commands()
    logs: subprocess.Popen[str] | None = None
    try:
        for i, cmd in enumerate(commands):
            cmd = literal(cmd)
            if cmd[0] == "export":
                env.update(dict(a.split("=", 1) for a in cmd[1:]))
            elif cmd[1:3] == ["get-auth-token", "--generate"]:
                run(cmd)
                assert (home / ".ray/auth_token").is_file()
            elif cmd[1:3] == ["start", "--head"]:
                isolation = ["--node-ip-address=127.0.0.1", f"--temp-dir={head.tmp}", "--num-cpus=2",
                             *(f"--{k}={v}" for k, v in head.ports.items())]
                started = run(cmd + isolation, timeout=180)
                assert "Token authentication is enabled" in started  # the head found the page's token
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
                assert "island 0 gen" in followed and "run directory" in followed
            elif cmd[1:3] == ["job", "submit"]:
                run(cmd)
                wait_for(lambda: finished(out / names["run"]), 600, "the resumed run to finish")
            elif cmd[1:] == ["stop"]:
                assert i == len(commands) - 1
            else:
                pytest.fail(f"a command of the page this test does not know: {shlex.join(cmd)}")
        events = (out / names["run"] / "events.msgpack").read_bytes()
        assert b"resume" in events
    finally:
        if logs is not None and logs.poll() is None:
            logs.kill()
        head.stop()  # the page's `ray stop`, for this head only
    assert not head._own_pids()
