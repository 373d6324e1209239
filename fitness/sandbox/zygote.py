"""A template process that forks evaluation workers already past their slowest import.

Starting an evaluation worker used to cost about 2 CPU seconds, three quarters of them importing torch;
a campaign starts one per evaluator and again after every hang or crash, and the interpreter and the
compile worker of one evaluator are two. The zygote is one process per driver process that imports
torch and numpy once, runs nothing else, and forks each CPU worker (``python -m fitness.worker ...``)
on request. A forked worker then does what a started one does, from the same point: it takes its own
environment, folder, session and descriptors, confines itself (`fitness.sandbox.isolation`: the fork
leaves it one thread) and only then imports triton, whose `TRITON_INTERPRET` is read at import and
differs between the interpreter and the compile worker. Nothing the zygote imports reads that variable.

What the driver sees is what it saw of a subprocess (`Forked`: a pid, `wait`, `returncode`): the zygote
reaps its children and writes each one's wait status to a pipe the driver handed it for that worker.
The zygote serves one driver over a socket pair and ends when the driver closes it or goes away; its
workers end with it (a worker exits when the process that started it is gone: `fitness.worker`), as
they would with the driver. Where the zygote cannot start or fork, the driver starts the worker as a
plain subprocess (`fitness.sandbox.process`).

A GPU worker is never forked here: CUDA must not be initialized in a process that forks, and the few
GPU workers of a node are not worth the risk.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
from typing import Any, NoReturn

from fitness.sandbox import scratch

PRELOAD = ("numpy", "torch")  # what every worker imports and no worker's environment changes
_STATUS = struct.Struct("<i")
_MAX_MESSAGE = 1 << 20
_MAX_FDS = 16


class ZygoteFailed(RuntimeError):
    """The zygote could not fork a worker (it is gone, or the fork failed): start it another way."""


class Forked:
    """A worker forked by the zygote, as the driver sees a `subprocess.Popen`: `pid`, `wait`, `returncode`
    (negative: the signal that ended it; None while it runs, or where its status is lost with the zygote)."""

    def __init__(self, pid: int, status_fd: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._status_fd = status_fd
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        try:
            return self.wait(0.0)
        except subprocess.TimeoutExpired:
            return None

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code once the worker ended; `subprocess.TimeoutExpired` if it runs past `timeout`."""
        with self._lock:
            if self._status_fd < 0:
                return self.returncode
            ready, _, _ = select.select([self._status_fd], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            data = os.read(self._status_fd, _STATUS.size)
            os.close(self._status_fd)
            self._status_fd = -1
            if len(data) == _STATUS.size:
                self.returncode = os.waitstatus_to_exitcode(_STATUS.unpack(data)[0])
            return self.returncode

    def __del__(self) -> None:
        if self._status_fd >= 0:
            try:
                os.close(self._status_fd)
            except OSError:
                pass


class Zygote:
    """The driver's handle on its zygote: started once, then `spawn` forks workers from it."""

    def __init__(self, env: dict[str, str], startup_timeout: float = 180.0) -> None:
        self._lock = threading.Lock()
        self._driver = os.getpid()
        self._home = scratch.folder("zygote")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fitness.sandbox.zygote", str(theirs.fileno())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**env, "HOME": self._home, "TMPDIR": self._home}, cwd=self._home,
            pass_fds=(theirs.fileno(),), start_new_session=True,
        )
        theirs.close()
        ours.settimeout(startup_timeout)
        try:
            hello = ours.recv(_MAX_MESSAGE)
        except OSError as e:
            self.close()
            raise ZygoteFailed(f"the zygote did not start: {e}") from None
        if json.loads(hello or b"{}").get("ready") is not True:
            self.close()
            raise ZygoteFailed("the zygote did not start")
        ours.settimeout(60.0)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def spawn(self, argv: list[str], env: dict[str, str], cwd: str, log_fd: int, pass_fds: tuple[int, ...]) -> Forked:
        """Fork ``argv`` (``[python, "-m", module, ...]``) with `env` in `cwd`, in a session of its own, with
        stdin from /dev/null, stdout and stderr to `log_fd`, and `pass_fds` at the same numbers."""
        status_r, status_w = os.pipe()
        try:
            request = json.dumps({"argv": argv, "env": env, "cwd": cwd, "fds": list(pass_fds)}).encode()
            with self._lock:
                try:
                    socket.send_fds(self._sock, [request], [log_fd, status_w, *pass_fds])
                    reply = json.loads(self._sock.recv(_MAX_MESSAGE) or b"{}")
                except (OSError, ValueError) as e:
                    raise ZygoteFailed(f"the zygote is gone: {e}") from None
        finally:
            os.close(status_w)
        if not isinstance(reply.get("pid"), int):
            os.close(status_r)
            raise ZygoteFailed(f"the zygote could not fork: {reply.get('error', 'no answer')}")
        return Forked(reply["pid"], status_r)

    def close(self) -> None:
        """End the zygote (its live workers end with it); in a process forked from its driver, only let go of it."""
        self._sock.close()
        if os.getpid() != self._driver:
            return
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self._home, ignore_errors=True)


_STARTED_IN = os.getcwd()
_zygote: Zygote | None = None
_failed = False  # it could not start in this process: workers start as subprocesses
_owner = os.getpid()  # the process `_zygote` serves
_guard = threading.Lock()


def forkable(argv: list[str], device: str) -> bool:
    """Whether a worker with this command line can come from the zygote: a CPU worker of this Python,
    run as a module (``-m``)."""
    return device == "cpu" and len(argv) > 2 and argv[0] == sys.executable and argv[1] == "-m" \
        and os.environ.get("EVO_WORKER_ZYGOTE", "1") != "0"


def shared(env: dict[str, str]) -> Zygote | None:
    """This process's zygote, started with `env` on first use and again after it died; None where it
    could not start (workers then start as plain subprocesses)."""
    global _zygote, _failed, _owner
    with _guard:
        if _owner != os.getpid():  # a process forked from the driver shares its zygote's socket: not its own
            _zygote, _failed, _owner = None, False, os.getpid()
        if _zygote is not None and not _zygote.alive():
            _zygote.close()
            _zygote = None
        if _zygote is None and not _failed:
            try:
                _zygote = Zygote(env)
            except (OSError, ZygoteFailed):
                _failed = True
                return None
            atexit.register(_zygote.close)
        return _zygote


# -- the zygote process ---------------------------------------------------------------------------------


def _serve(sock: socket.socket) -> None:
    parent = os.getppid()
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    statuses: dict[int, int] = {}  # pid -> the pipe its wait status goes to
    sock.sendall(json.dumps({"ready": True}).encode())
    while True:
        try:
            ready, _, _ = select.select([sock.fileno(), wake_r], [], [], 1.0)
        except InterruptedError:
            ready = []
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        _reap(statuses)
        if os.getppid() != parent:
            return  # the driver is gone
        if sock.fileno() in ready:
            try:
                message, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, _MAX_FDS)
            except OSError:
                return
            if not message:
                return  # the driver closed its end
            sock.sendall(json.dumps(_fork(message, fds, statuses, (sock.fileno(), wake_r, wake_w))).encode())


def _reap(statuses: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = statuses.pop(pid, -1)
        if fd >= 0:
            try:
                os.write(fd, _STATUS.pack(status))
            except OSError:
                pass
            os.close(fd)


def _fork(message: bytes, fds: list[int], statuses: dict[int, int], own: tuple[int, ...]) -> dict[str, Any]:
    try:
        request = json.loads(message)
        if len(fds) != 2 + len(request["fds"]):
            raise ValueError("descriptors missing")
    except (ValueError, KeyError, TypeError) as e:
        for fd in fds:
            os.close(fd)
        return {"error": f"a malformed request: {e}"}
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    try:
        pid = os.fork()
    except OSError as e:
        for fd in fds:
            os.close(fd)
        return {"error": f"fork failed: {e}"}
    if pid == 0:
        _become(request, fds, own)
    statuses[pid] = fds[1]
    for fd in (fds[0], *fds[2:]):
        os.close(fd)
    return {"pid": pid}


def _become(request: dict[str, Any], fds: list[int], own: tuple[int, ...]) -> NoReturn:
    """In the forked child: take the worker's session, descriptors, folder and environment, then run its module."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        log, status, *passed = fds
        targets = [int(n) for n in request["fds"]]
        for fd in (status, *own):
            os.close(fd)
        floor = max([log, *passed, *targets, 2]) + 1  # out of the way of the numbers they must end up at
        moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, floor) for fd in (log, *passed)]
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(moved[0], 1)
        os.dup2(moved[0], 2)
        for fd, target in zip(moved[1:], targets):
            os.dup2(fd, target, inheritable=True)
        keep = {0, 1, 2, *targets}
        for name in os.listdir("/proc/self/fd"):
            if int(name) not in keep:
                try:
                    os.close(int(name))
                except OSError:
                    pass
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # TMPDIR is the worker's own
        argv = [str(a) for a in request["argv"]]
        sys.argv = [argv[2], *argv[3:]]
        sys.path = [request["cwd"] if p in ("", _STARTED_IN) else p for p in sys.path]  # what `-m` puts first
        if "random" in sys.modules:
            sys.modules["random"].seed()
        import runpy

        try:
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, int | None):
                print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    for name in PRELOAD:
        __import__(name)
    if "triton" in sys.modules:  # its interpreter switch is read at import, and workers differ in it
        raise SystemExit("zygote: triton was imported before a worker's environment was known")
    try:
        _serve(sock)
    finally:
        if os.path.basename(_STARTED_IN).startswith("evo-zygote-"):  # its folder, whether or not the driver could
            shutil.rmtree(_STARTED_IN, ignore_errors=True)


if __name__ == "__main__":
    main()
