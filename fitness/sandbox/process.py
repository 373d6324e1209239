"""The driver's handle on one evaluation worker subprocess.

The worker gets a scrubbed environment (an allowlist: no API keys or cloud credentials), its own
process group, a temporary HOME, an address-space limit on the CPU, and a channel on dedicated
pipes; its stdout and stderr go to a log file whose tail explains a crash. A request that
outlives its timeout kills the whole process group; the next request starts a fresh worker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from fitness.sandbox import protocol

PROJECT_ROOT = Path(__file__).resolve().parents[2]
_ENV_ALLOWED = {
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "TRITON_CACHE_DIR", "TRITON_PTXAS_PATH",
    "TRITON_CUOBJDUMP_PATH", "TRITON_HOME", "PYTHONHASHSEED", "VIRTUAL_ENV",
}


class WorkerTimeout(Exception):
    """The worker did not answer in time and was killed."""


class WorkerDied(Exception):
    """The worker exited (crash, os._exit, fatal CUDA error); `reason` has the log tail."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def scrubbed_env(device: str, *, compile_only: bool = False) -> dict[str, str]:
    """The worker's environment: an allowlist, so no secret leaks into candidate code.

    A compile worker runs Triton's real compiler (no interpreter) and sees no GPU.
    """
    env = {k: v for k, v in os.environ.items() if k in _ENV_ALLOWED}
    env.setdefault("TRITON_CACHE_DIR", str(Path.home() / ".triton" / "cache"))
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["OMP_NUM_THREADS"] = "1"
    if compile_only:
        env["CUDA_VISIBLE_DEVICES"] = ""
    elif device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


class Worker:
    """One worker subprocess; start() is cheap, readiness is awaited by the first request."""

    def __init__(self, *, device: str = "cpu", memory_mb: int, bench_memory_mb: int = 0, startup_timeout: float = 180.0,
                 compile_only: bool = False) -> None:
        self.device = "cpu" if compile_only else device
        self.compile_only = compile_only
        self.memory_mb = memory_mb
        self.bench_memory_mb = bench_memory_mb  # the cap while bench-size buffers are needed (CPU)
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready = False
        self.starts = 0
        self._home = tempfile.mkdtemp(prefix="evo-home-")
        self._log_path = Path(self._home) / "worker.log"
        self._fds: tuple[int, int] = (-1, -1)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        if self.proc is not None:
            return
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = scrubbed_env(self.device, compile_only=self.compile_only)
        env["HOME"] = self._home
        env["TMPDIR"] = self._home
        cmd = [
            sys.executable, "-m", "fitness.worker", "--fd-in", str(to_child_r), "--fd-out",
            str(from_child_w), "--device", self.device, "--memory-mb", str(self.memory_mb),
            "--bench-memory-mb", str(max(self.bench_memory_mb, self.memory_mb)),
            *(["--compile-only"] if self.compile_only else []),
        ]
        with open(self._log_path, "wb") as log:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                pass_fds=(to_child_r, from_child_w), start_new_session=True, cwd=self._home,
            )
        os.close(to_child_r)
        os.close(from_child_w)
        self._fds = (to_child_w, from_child_r)
        self.ready = False
        self.starts += 1

    def _await_ready(self) -> None:
        try:
            hello = protocol.receive(self._fds[1], self.startup_timeout)
        except protocol.ChannelTimeout:
            self.kill()
            raise WorkerDied(f"worker did not start within {self.startup_timeout:.0f} s") from None
        except protocol.ChannelClosed:
            reason = self.log_tail()
            self.kill()
            raise WorkerDied(f"worker failed to start: {reason}") from None
        if hello.get("op") != "ready":
            self.kill()
            raise WorkerDied("worker sent a bad greeting")
        self.ready = True

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request; WorkerTimeout or WorkerDied leave no worker behind."""
        self.submit(message)
        return self.collect(timeout)

    def submit(self, message: dict[str, Any]) -> None:
        """Send a request without waiting for the answer (collect it with `collect`)."""
        self.start()
        if not self.ready:
            self._await_ready()
        try:
            protocol.send(self._fds[0], message)
        except (BrokenPipeError, OSError):
            reason = self._death_reason()
            self.kill()
            raise WorkerDied(reason) from None

    def collect(self, timeout: float) -> dict[str, Any]:
        """The answer to the request sent last."""
        try:
            reply = protocol.receive(self._fds[1], timeout)
        except protocol.ChannelTimeout:
            self.kill()
            raise WorkerTimeout(f"no answer within {timeout:.1f} s") from None
        except (protocol.ChannelClosed, OSError):
            reason = self._death_reason()
            self.kill()
            raise WorkerDied(reason) from None
        if reply.get("fatal"):
            self.kill()
        return reply

    def _death_reason(self) -> str:
        code = None
        if self.proc is not None:
            try:
                code = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        tail = self.log_tail()
        if code is not None and code < 0:
            what = f"killed by signal {signal.Signals(-code).name}"
        else:
            what = f"exited with code {code}"
        return f"worker {what}" + (f"; last output: {tail}" if tail else "")

    def log_tail(self, n: int = 600) -> str:
        try:
            data = self._log_path.read_bytes()[-n:]
        except OSError:
            return ""
        return data.decode(errors="replace").strip().replace("\n", " | ")

    def kill(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for fd in self._fds:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._fds = (-1, -1)
        self.proc = None
        self.ready = False

    def restart(self) -> None:
        """Replace the worker process (its state may be damaged); the new one starts importing now."""
        self.kill()
        self.start()

    def close(self) -> None:
        if self.proc is not None and self.ready:
            try:
                protocol.send(self._fds[0], {"op": "exit"})
                self.proc.wait(timeout=5)
            except Exception:
                pass
        self.kill()

    def __del__(self) -> None:
        try:
            self.kill()
        except Exception:
            pass
