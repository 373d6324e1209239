"""The driver's handle on one evaluation worker subprocess.

The worker gets a scrubbed environment (an allowlist: no API keys or cloud credentials), its own
process group, a temporary HOME, an address-space limit on the CPU, and a channel on dedicated
pipes; its stdout and stderr go to a log file whose tail explains a crash. A request that
outlives its timeout kills the whole process group; the next request starts a fresh worker.

Every request carries a fresh random nonce that its reply must echo, a reply must have the reply's
shape, and each reply is followed by a ping round trip whose answer must come next: a frame the
candidate wrote to the channel itself (malformed, out of turn, or a copy of a reply) ends the worker
and is a ``crash``, never an answer.

A `Worker` is used by one thread at a time (a lock), except `close`, which may come from another thread
while a request is in flight (the local executor closes a hung evaluator from outside): it ends the
worker process, waits for the request to see it die, and only then closes the channel, so a channel's
descriptor is never closed under a reader (and reused by another worker's pipe); a closed worker never
starts again.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo.contracts.verdict import Status
from fitness.sandbox import protocol, scratch, zygote
from fitness.sandbox.forkserver import EXIT_NOISE

if TYPE_CHECKING:
    from evo.contracts.config import EvaluationConfig

PROJECT_ROOT = Path(__file__).resolve().parents[2]
_ENV_ALLOWED = {
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH",
    "PYTHONHASHSEED", "VIRTUAL_ENV",
}
_cache_dir = ""


def triton_cache_dir() -> str:
    """The Triton cache of this driver process's workers: one temporary folder, shared by its workers (so a
    kernel compiled once is not compiled again by the next worker) and removed at exit. Never the user's
    cache (``~/.triton``, ``TRITON_CACHE_DIR``): workers may write it, and a candidate that escaped the lint
    must not be able to plant compiled kernels for later campaigns."""
    global _cache_dir
    if not _cache_dir or not os.path.isdir(_cache_dir):
        _cache_dir = tempfile.mkdtemp(prefix="evo-triton-cache-")
        atexit.register(shutil.rmtree, _cache_dir, True)
    return _cache_dir


def share_triton_cache(name: str) -> str:
    """Make this process's workers use the Triton cache `name` (a campaign's random token), which every
    process of this node that calls this with the same name shares: what a compile-ahead worker compiles,
    the node's GPU worker loads. Still never the user's cache, and a new campaign has a new name."""
    global _cache_dir
    if not name.isalnum():
        raise ValueError(f"a Triton cache name must be alphanumeric, not {name!r}")
    path = os.path.join(tempfile.gettempdir(), f"evo-triton-cache-{name}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    if _cache_dir != path:
        _cache_dir = path
        atexit.register(shutil.rmtree, path, True)
    return path


class WorkerTimeout(Exception):
    """The worker did not answer in time and was killed. `stalled`: it got less than
    `STALLED_CPU_FRACTION` of that time on a CPU, so its machine (overloaded, suspended, the
    process stopped) rather than the candidate kept it from answering."""

    def __init__(self, message: str, *, stalled: bool = False) -> None:
        super().__init__(message)
        self.stalled = stalled


STALLED_CPU_FRACTION = 0.25
CPU_BUDGET_SPENT = 0.95  # the share of a CPU-seconds timeout after which the worker has had its time
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) of a live process and of its descendants, live or waited for; None if
    unknown. A fork-server worker does its work in a child (`fitness.sandbox.forkserver`), whose time
    counts as the worker's."""
    own = _own_cpu(pid)
    if own is None:
        return None
    return own + sum(cpu_seconds(child) or 0.0 for child in _children(pid))


def _own_cpu(pid: int) -> float | None:
    """User + system time of `pid` and of its children it waited for."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / _CLOCK_TICKS
    except (OSError, IndexError, ValueError):
        return None


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


# failure kinds a reply may carry: a verdict's status, or what a latency op could not do
_KINDS = {s.value for s in Status if s is not Status.OK} | {"need_setup", "model_error", "unavailable"}


def _validate(reply: dict[str, Any], nonce: str) -> str:
    """'' when `reply` is a well-formed answer to the request with `nonce`, else what is wrong."""
    if reply.get("seq") != nonce:
        return "a reply out of turn (its nonce is not the request's)"
    if not isinstance(reply.get("ok"), bool):
        return "a reply without an ok flag"
    if not reply["ok"]:
        if reply.get("kind") not in _KINDS or not isinstance(reply.get("message", ""), str):
            return "a failure reply of unknown kind"
    if not isinstance(reply.get("fatal", False), bool):
        return "a malformed fatal flag"
    return ""


LOG_WINDOW = 1 << 16  # how much of the end of a worker's log `log_tail` reads


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
    env["TRITON_CACHE_DIR"] = triton_cache_dir()
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["OMP_NUM_THREADS"] = "1"
    if compile_only:
        env["CUDA_VISIBLE_DEVICES"] = ""
    elif device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


def zygote_env() -> dict[str, str]:
    """The zygote's environment: what every CPU worker's shares (`scrubbed_env` without the interpreter
    switch, which each worker sets for itself before it imports triton)."""
    env = scrubbed_env("cpu")
    del env["TRITON_INTERPRET"]
    return env


class Worker:
    """One worker subprocess; start() is cheap, readiness is awaited by the first request."""

    def __init__(self, *, device: str = "cpu", memory_mb: int, bench_memory_mb: int = 0, startup_timeout: float = 180.0,
                 compile_only: bool = False, isolation: bool) -> None:
        """`isolation`: confine the worker by the OS (`fitness.sandbox.isolation`; `evaluation.isolation`)."""
        self.device = "cpu" if compile_only else device
        self.compile_only = compile_only
        self.memory_mb = memory_mb
        self.bench_memory_mb = bench_memory_mb  # the cap while bench-size buffers are needed (CPU)
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | zygote.Forked | None = None
        self.ready = False
        self.starts = 0
        self.isolation = isolation
        self.sandbox = ""  # the mechanism the worker reported (`isolation.FULL`, a part of it, or "process")
        self.sandbox_problems: list[str] = []
        self.forks = False  # it runs each candidate in a process of its own (`fitness.sandbox.forkserver`)
        self._home = scratch.folder("home")  # the worker's scratch: HOME, cwd, the only place it writes
        self._logs = scratch.folder("log")  # the driver's: the worker cannot swap its log for a link
        self._log_path = Path(self._logs) / "worker.log"
        self._fds: tuple[int, int] = (-1, -1)
        self._nonce = ""
        self._cpu_at_submit: float | None = None
        self.cpu_budget = self.device == "cpu"  # timeouts in CPU seconds (`_await_answer`): the interpreter's work
        self._lock = threading.RLock()  # held by a request, a start, a kill: the process and its channel
        self._closed = False

    @classmethod
    def evaluating(cls, settings: EvaluationConfig, device: str) -> Worker:
        """An evaluation worker on `device` with the memory caps and isolation of `settings`."""
        return cls(device=device, memory_mb=settings.memory_mb, bench_memory_mb=settings.profile_memory_mb,
                   isolation=settings.isolation)

    @classmethod
    def compiling(cls, settings: EvaluationConfig) -> Worker:
        """A compile worker (no interpreter, no GPU) with the memory cap and isolation of `settings`."""
        return cls(compile_only=True, memory_mb=settings.memory_mb, isolation=settings.isolation)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        with self._lock:
            self._start()

    def _start(self) -> None:
        if self._closed:
            raise WorkerDied("the worker was closed (its evaluator was shut down)")
        if self.proc is not None:
            return
        os.makedirs(self._home, mode=0o700, exist_ok=True)
        os.makedirs(self._logs, mode=0o700, exist_ok=True)
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = scrubbed_env(self.device, compile_only=self.compile_only)
        env["HOME"] = self._home
        env["TMPDIR"] = self._home
        cmd = self._command(to_child_r, from_child_w)
        try:
            with open(self._log_path, "wb") as log:
                self.proc = self._launch(cmd, env, log.fileno(), (to_child_r, from_child_w))
        except BaseException:
            for fd in (to_child_r, to_child_w, from_child_r, from_child_w):
                os.close(fd)
            raise
        os.close(to_child_r)
        os.close(from_child_w)
        self._fds = (to_child_w, from_child_r)
        self.ready = False
        self.starts += 1

    def _launch(self, cmd: list[str], env: dict[str, str], log: int, fds: tuple[int, int]
                ) -> subprocess.Popen[bytes] | zygote.Forked:
        """The worker's process: forked from this process's zygote (`fitness.sandbox.zygote`: torch already
        imported) where it can be, else a subprocess; either way in a session of its own, in its HOME, with
        `env`, its output to `log` and only the channel's `fds` inherited."""
        if zygote.forkable(cmd, self.device):
            template = zygote.shared(zygote_env())
            if template is not None:
                try:
                    return template.spawn(cmd, env, self._home, log, fds)
                except zygote.ZygoteFailed:
                    pass  # a zygote that died is started again for the next worker
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                pass_fds=fds, start_new_session=True, cwd=self._home)

    def _command(self, fd_in: int, fd_out: int) -> list[str]:
        """The worker's command line: it reads requests from `fd_in` and answers on `fd_out`."""
        return [
            sys.executable, "-m", "fitness.worker", "--fd-in", str(fd_in), "--fd-out", str(fd_out),
            "--device", self.device, "--memory-mb", str(self.memory_mb),
            "--bench-memory-mb", str(max(self.bench_memory_mb, self.memory_mb)),
            "--isolation", "on" if self.isolation else "off", *(["--compile-only"] if self.compile_only else []),
        ]

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
        except protocol.ProtocolError as e:
            self.kill()
            raise WorkerDied(f"worker broke the protocol at start: {e}") from None
        if hello.get("op") != "ready":
            self.kill()
            raise WorkerDied("worker sent a bad greeting")
        self.forks = hello.get("forks") is True
        self.sandbox = str(hello.get("sandbox") or "process")
        self.sandbox_problems = [str(p) for p in hello.get("sandbox_problems") or []]
        self.ready = True

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request; WorkerTimeout or WorkerDied leave no worker behind."""
        with self._lock:
            self.submit(message)
            return self.collect(timeout)

    def submit(self, message: dict[str, Any]) -> None:
        """Send a request without waiting for the answer (collect it with `collect`)."""
        with self._lock:
            self._submit(message)

    def _submit(self, message: dict[str, Any]) -> None:
        self._start()
        if not self.ready:
            self._await_ready()
        self._nonce = secrets.token_hex(16)
        self._cpu_at_submit = cpu_seconds(self.proc.pid) if self.proc is not None else None
        try:
            protocol.send(self._fds[0], {**message, "seq": self._nonce})
        except (BrokenPipeError, OSError):
            reason = self._death_reason()
            self.kill()
            raise WorkerDied(reason) from None

    def collect(self, timeout: float) -> dict[str, Any]:
        """The answer to the request sent last, confirmed by a ping round trip (unless it was fatal)."""
        with self._lock:
            reply = self._receive(timeout)
            if reply.get("fatal"):
                if not self.forks:
                    self.kill()
                    return reply
                # the candidate's process ended itself after a fatal failure; the worker that forked it lives
            self._submit({"op": "ping"})
            self._receive(min(timeout, 60.0))
            return reply

    def _await_answer(self, timeout: float) -> float:
        """Wait until the worker starts answering; the wall seconds left to read the answer in. A timeout kills
        the worker (`WorkerTimeout`).

        In the interpreter (`cpu_budget`) `timeout` is the worker's CPU seconds: where the machine's other work
        slows it, the wait grows, up to ``timeout / STALLED_CPU_FRACTION`` of wall time, until the worker has had
        `timeout` seconds on a CPU, so a verdict does not depend on how busy the machine is. A worker that got
        less than `STALLED_CPU_FRACTION` of the time waited is stalled (its machine's fault, not the candidate's).
        On a GPU `timeout` is wall seconds (a worker waiting on its device uses little CPU)."""
        start = time.monotonic()
        cap = timeout / STALLED_CPU_FRACTION if self.cpu_budget else timeout
        wait = timeout
        while not protocol.readable(self._fds[1], start + wait - time.monotonic()):
            waited = time.monotonic() - start
            used = self._cpu_since_submit()
            if used is not None and used < STALLED_CPU_FRACTION * waited:
                self.kill()
                raise WorkerTimeout(f"no answer within {waited:.1f} s, in which the worker ran {used:.1f} s on a CPU "
                                    "(a stalled or overloaded machine)", stalled=True)
            if not self.cpu_budget or used is None or used >= CPU_BUDGET_SPENT * timeout or waited >= cap:
                self.kill()
                on_cpu = f" ({used:.1f} s of them on a CPU)" if self.cpu_budget and used is not None else ""
                raise WorkerTimeout(f"no answer within {waited:.1f} s{on_cpu}")
            wait = min(waited + max(timeout - used, 1.0), cap)  # the CPU seconds it has not had yet
        return max(cap - (time.monotonic() - start), 60.0)

    def _receive(self, timeout: float) -> dict[str, Any]:
        left = self._await_answer(timeout)
        try:
            reply = protocol.receive(self._fds[1], left)
        except protocol.ChannelTimeout:
            self.kill()
            raise WorkerTimeout(f"an answer begun within {timeout:.1f} s did not end") from None
        except protocol.ProtocolError as e:
            self.kill()
            raise WorkerDied(f"the worker broke the protocol (a frame not written by the worker?): {e}") from None
        except (protocol.ChannelClosed, OSError):
            reason = self._death_reason()
            self.kill()
            raise WorkerDied(reason) from None
        problem = _validate(reply, self._nonce)
        if problem:
            self.kill()
            raise WorkerDied(f"the worker broke the protocol (a frame not written by the worker?): {problem}")
        if reply.get("died") is True and not reply["ok"]:
            # a fork-server worker answers for a candidate's process that died: a death, as if the worker's
            raise WorkerDied(str(reply.get("message")))
        return reply

    def _cpu_since_submit(self) -> float | None:
        now = cpu_seconds(self.proc.pid) if self.proc is not None else None
        return None if now is None or self._cpu_at_submit is None else now - self._cpu_at_submit

    def _death_reason(self) -> str:
        code = None
        if self.proc is not None:
            try:
                code = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        tail = self.log_tail()
        if code is None:
            what = "ended, its exit status unknown"
        elif code < 0:
            what = f"killed by signal {signal.Signals(-code).name}"
        else:
            what = f"exited with code {code}"
        return f"worker {what}" + (f"; last output: {tail}" if tail else "")

    def log_tail(self, n: int = 600) -> str:
        """The last `n` characters of the worker's output, without the report of leaked objects that
        Triton's bindings print at exit (it would push the error that ended the worker out of view)."""
        try:
            fd = os.open(self._log_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return ""
        try:
            size = os.fstat(fd).st_size
            os.lseek(fd, max(0, size - LOG_WINDOW), os.SEEK_SET)
            data = os.read(fd, LOG_WINDOW)
        except OSError:
            return ""
        finally:
            os.close(fd)
        lines = [line for line in data.decode(errors="replace").splitlines() if not EXIT_NOISE.match(line)]
        return " | ".join(line.rstrip() for line in lines if line.strip())[-n:]

    def kill(self) -> None:
        with self._lock:
            self._kill()

    def _kill(self) -> None:
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

    def recycle(self) -> None:
        """Discard what the last candidate may have damaged: its own process in a fork-server worker (the
        worker that forks candidates ran none of their code), else the whole worker (`restart`)."""
        with self._lock:
            if self.forks and self.proc is not None and self.ready:
                try:
                    reply = self.request({"op": "unload"}, 60.0)
                except (WorkerTimeout, WorkerDied):
                    pass
                else:
                    if reply.get("ok"):
                        return
            self.restart()

    def restart(self) -> None:
        """Replace the worker process (its state may be damaged); the new one starts importing now. A closed
        worker is only ended."""
        with self._lock:
            self._kill()
            if not self._closed:
                self._start()

    def close(self) -> None:
        """End the worker for good, from any thread. A request in flight in another thread is ended by
        killing the process (that thread sees a dead worker); the channel is closed only after it let go."""
        self._closed = True
        while not self._lock.acquire(timeout=0.5):
            self._signal_kill()
        try:
            if self.proc is not None and self.ready:
                try:
                    protocol.send(self._fds[0], {"op": "exit"})
                    self.proc.wait(timeout=5)
                except Exception:
                    pass
            self._kill()
        finally:
            self._lock.release()
        for path in (self._home, self._logs):  # rmtree does not follow links the worker may have left
            shutil.rmtree(path, ignore_errors=True)

    def _signal_kill(self) -> None:
        """SIGKILL to the worker's process group without the lock (its owner is blocked on the channel)."""
        proc = self.proc
        if proc is not None and proc.returncode is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def __del__(self) -> None:
        try:
            self.kill()
        except Exception:
            pass
