"""A Ray head started by a test on 127.0.0.1 (free ports, its own temp dir) and always stopped.

`ray stop` would stop every Ray on the machine, other tests' included; this stops only what it
started: the process group of its `ray start --block`, then anything still running from its temp dir.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

VENV_BIN = Path(__file__).resolve().parent.parent / ".venv" / "bin"
RAY = shutil.which("ray", path=f"{VENV_BIN}:{os.environ.get('PATH', '')}") or "ray"
PORTS = ("port", "dashboard-port", "node-manager-port", "object-manager-port", "dashboard-agent-listen-port",
         "dashboard-agent-grpc-port", "runtime-env-agent-port", "metrics-export-port")


def free_ports(n: int) -> list[int]:
    """`n` distinct free ports (all held open while choosing, so none is handed out twice)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


START_ATTEMPTS = 3  # starts with fresh ports after a port was taken under Ray's feet, or a start that timed out
STARTUP_TIMED_OUT = "The current node timed out during startup"  # what `ray start` says when its raylet was late


def port_taken(log: Path, tmp: str) -> bool:
    """Whether a process of the Ray started with output `log` and temp dir `tmp` (its processes' logs) could
    not bind a port it was given: free when chosen, taken (by another test's Ray, say) before Ray bound it."""
    for path in (log, *Path(tmp).glob("session_*/logs/*.err"), *Path(tmp).glob("session_*/logs/*.out")):
        try:
            if "Address already in use" in path.read_text(errors="replace"):
                return True
        except OSError:
            continue
    return False


class _Starting(Protocol):
    options: list[str]  # the `ray start --block` command but its ports
    ports: dict[str, int]  # its ports, by option name
    log: Path
    tmp: str
    proc: subprocess.Popen[bytes] | None

    def kill(self) -> None: ...

    def stop(self) -> None: ...


def start_ray(ray: _Starting, env: dict[str, str], up: Callable[[], bool], what: str,
              timeout: float) -> subprocess.Popen[bytes]:
    """`ray.options` with `ray.ports` (a `ray start --block`) started and waited on until `up()`; killed and
    started again on fresh ports when a port was taken under Ray's feet or Ray's own startup wait ran out;
    stopped, with a RuntimeError quoting its output, otherwise."""
    for attempt in range(START_ATTEMPTS):
        cmd = [*ray.options, *(f"--{name}={port}" for name, port in ray.ports.items())]
        with open(ray.log, "wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        ray.proc = proc  # (what kill() and stop() end)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:  # (it ends when a process of it fails)
                tail = ray.log.read_text(errors="replace")[-3000:]
                if (port_taken(ray.log, ray.tmp) or STARTUP_TIMED_OUT in tail) and attempt + 1 < START_ATTEMPTS:
                    # another process took a port between choosing it and Ray binding it, or the machine was too
                    # busy for the raylet to register within Ray's own startup wait (seen once at a suite's start)
                    break
                ray.stop()
                raise RuntimeError(f"{what} failed: {tail}")
            if up():
                return proc
            time.sleep(0.5)
        else:
            tail = ray.log.read_text(errors="replace")[-3000:]
            ray.stop()
            raise RuntimeError(f"{what}: not up within {timeout:.0f} s: {tail}")
        ray.kill()
        ray.ports = dict(zip(ray.ports, free_ports(len(ray.ports))))
    raise AssertionError("unreachable")


def processes_naming(*marks: bytes) -> list[int]:
    """The processes whose command line holds one of `marks` (a temp dir, a port)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmdline = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if any(m in cmdline for m in marks):
                out.append(int(d.name))
    return out


def kill_at_once(proc: subprocess.Popen[bytes] | None, pids: list[int]) -> None:
    """SIGKILL to the process group of `proc` (a `ray start --block`) and to `pids`; then reap `proc`."""
    if proc is not None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if proc is not None:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


class RayHead:
    def __init__(self, *, num_cpus: int = 2, num_gpus: int = 0, dashboard: bool = True, token: str = "",
                 system: dict[str, str] | None = None) -> None:
        self.token = token  # token authentication on, with this token (RAY_AUTH_TOKEN), when given
        self.system = system or {}  # Ray system settings for the head (RAY_<name> variables)
        self.tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths are length-limited
        self.ports = dict(zip(PORTS, free_ports(len(PORTS))))
        self.options = [
            RAY, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--num-cpus={num_cpus}",
            f"--num-gpus={num_gpus}", "--disable-usage-stats", f"--temp-dir={self.tmp}",
            f"--include-dashboard={'true' if dashboard else 'false'}", "--dashboard-host=127.0.0.1",
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(self.tmp) / "head.log"
        self.dashboard = dashboard

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.ports['port']}"

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['dashboard-port']}"

    def env(self) -> dict[str, str]:
        """An environment whose `python` is this project's interpreter."""
        env = dict(os.environ)
        env["PATH"] = f"{Path(RAY).parent}:{env.get('PATH', '')}"
        env.pop("RAY_ADDRESS", None)
        if self.token:  # as every node of a cluster with token authentication, and its drivers
            env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=self.token)
        else:
            env["RAY_AUTH_MODE"] = "disabled"  # no token file written to (or read from) the home directory
        return env

    def start(self, timeout: float = 300.0) -> RayHead:
        self.proc = start_ray(self, {**self.env(), **self.system}, self._up, "ray start", timeout)
        return self

    def _up(self) -> bool:
        if self.dashboard:
            try:
                headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
                urllib.request.urlopen(urllib.request.Request(f"{self.dashboard_url}/api/version", headers=headers),
                                       timeout=2)
                return True
            except OSError:
                return False
        return "Ray runtime started" in self.log.read_text(errors="replace")

    def _own_pids(self) -> list[int]:
        """Processes still running from this head's temp dir (Ray names it in their command lines)."""
        return processes_naming(self.tmp.encode())

    def kill(self) -> None:
        """The head's machine gone at once: SIGKILL to every process of it (GCS, raylet, dashboard, workers)."""
        kill_at_once(self.proc, self._own_pids())

    def stop(self) -> None:
        if self.proc is not None:
            for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 10.0)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # whatever the group still holds
            except ProcessLookupError:
                pass
        for pid in self._own_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> RayHead:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


NODE_PORTS = ("node-manager-port", "object-manager-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
              "runtime-env-agent-port", "metrics-export-port")


class RayNode:
    """A worker node joined to a head (``ray start --address``): its own raylet, ports and temp dir, its
    declared CPUs and GPUs and a custom resource named `label` (so a test can tell where actors ran).
    `kill()` ends it as a machine disappears: every process of the node killed at once, no goodbye."""

    def __init__(self, head: RayHead, label: str, *, num_cpus: int = 1, num_gpus: int = 0,
                 env: dict[str, str] | None = None) -> None:
        self.head, self.label = head, label
        self.tmp = tempfile.mkdtemp(prefix="rn", dir="/tmp")
        self.ports = dict(zip(NODE_PORTS, free_ports(len(NODE_PORTS))))
        self.options = [
            RAY, "start", f"--address={head.address}", "--block", "--node-ip-address=127.0.0.1",
            f"--num-cpus={num_cpus}", f"--num-gpus={num_gpus}", f'--resources={{"{label}": 1}}',
            "--disable-usage-stats", f"--temp-dir={self.tmp}",
        ]
        self.env = env if env is not None else head.env()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(self.tmp) / "node.log"

    def start(self, timeout: float = 300.0) -> RayNode:
        self.proc = start_ray(self, self.env, self._up, f"ray start (node {self.label})", timeout)
        return self

    def _up(self) -> bool:
        return "Ray runtime started" in self.log.read_text(errors="replace")

    def pids(self) -> list[int]:
        """The node's processes: its `ray start`'s group and whatever runs from its temp dir or on its
        node-manager port (the raylet, its workers)."""
        return processes_naming(self.tmp.encode(), f"--node_manager_port={self.ports['node-manager-port']}".encode())

    def kill(self) -> None:
        """SIGKILL to every process of the node, at once."""
        kill_at_once(self.proc, self.pids())

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)


@contextmanager
def joined_head(*, num_cpus: int = 2, env: dict[str, str] | None = None) -> Iterator[RayHead]:
    """A head started here with this process joined to it as a driver; left and stopped afterwards.
    `env`: variables every actor of the driver sees (as a cluster gives its nodes an API key)."""
    import logging

    import ray

    head = RayHead(num_cpus=num_cpus, dashboard=False).start()
    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # as the head
    try:
        env_vars = {"PYTHONPATH": str(VENV_BIN.parent.parent), **(env or {})}
        ray.init(address=head.address, runtime_env={"env_vars": env_vars}, logging_level=logging.WARNING)
        yield head
    finally:
        ray.shutdown()
        head.stop()
        if saved is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved
