"""One process per candidate: the evaluation worker as a fork server.

The worker process imports torch and triton, confines itself (`fitness.sandbox.isolation`) and sets its
limits once; it then runs no candidate code. Each ``load`` forks a fresh child from it, and everything
done with that candidate until the next ``load`` (its check runs, its profile, its compile) happens in
that child, which ends when the next candidate comes. So nothing one candidate does (an attribute of
``triton.language`` reassigned, a module-level container filled, a heap corrupted by an out-of-bounds
store) reaches another candidate or the seed's baseline: each starts from the same pre-imported parent.

The parent reads every request. It answers the ones that involve no candidate itself (``ping``,
``unload``, ``exit`` and those the worker names parent ops, such as the bench inputs every child
inherits), and passes the rest to the live child unchanged; the child answers the driver directly on
the reply channel, then tells the parent it is done. A child that dies before it is done (a signal, an
exit, the file-size limit) is answered for: a ``crash`` reply marked ``died``, with its exit and the
tail of what it printed, which the driver treats as a dead worker (retried once, `fitness.sandbox.process`).

What a child prints goes to a file of its own: past `OUTPUT_CAP` bytes its reply becomes a ``crash``
saying the candidate printed too much, and the file-size limit (`FILE_LIMIT`) stops it writing more
than that to any file. The parent keeps the tail of each child's output in its own log, which the driver
reads to explain a crash.

The parent cannot signal its children (the seccomp filter lets a worker signal only itself and its group),
and a child signals nobody (`confine`: a filter of its own denies every signal, so a candidate cannot end
the worker or another process); the parent needs not: a child is only ever ended between requests, when
it waits for the next one, by closing its request pipe. A child that hangs in a request is the driver's to
kill, with the whole process group, as before.
"""

from __future__ import annotations

import ctypes
import os
import re
import resource
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from fitness.sandbox import protocol
from fitness.sandbox.limits import roomy_address_space

OUTPUT_CAP = 1 << 20  # bytes a candidate's process may print, stdout and stderr together
FILE_LIMIT = 64 << 20  # RLIMIT_FSIZE of a child: no file it writes grows past this
TAIL = 1 << 14  # bytes of a child's output kept in the worker's log
_PR_SET_PDEATHSIG = 1
# nanobind's report of leaked objects when a process with Triton's bindings exits abnormally
EXIT_NOISE = re.compile(r"^(nanobind: |\s*- leaked |\s*- \.\.\. skipped remainder|See https://nanobind)")

Handler = Callable[[dict[str, Any]], dict[str, Any]]
Sender = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


@dataclass
class _Child:
    pid: int
    requests: int  # the parent writes requests here
    done: int  # the child writes each request's nonce here once it answered it
    output: int  # its stdout and stderr: a file without a name, which it cannot swap for a link


class ForkServer:
    """Serves the driver's requests on (`fd_in`, `fd_out`): `parent_ops` in this process, by
    `handle_parent`; everything else in the child of the candidate loaded last, by `handle_child`.
    `send(reply, request)` sends a reply to a request (and returns what it sent)."""

    def __init__(self, fd_in: int, fd_out: int, scratch: str, *, parent_ops: frozenset[str],
                 handle_parent: Handler, handle_child: Handler, send: Sender,
                 confine: Callable[[], None] | None = None) -> None:
        """`confine`: what a child does to itself first (`fitness.sandbox.isolation.confine_candidate_process`
        where the worker is confined)."""
        self.fd_in, self.fd_out, self.scratch = fd_in, fd_out, scratch
        self.confine = confine
        self.parent_ops = parent_ops
        self.handle_parent, self.handle_child, self.send = handle_parent, handle_child, send
        self.child: _Child | None = None
        self.children = 0

    def serve(self) -> None:
        """Answer requests until ``exit`` or the end of the channel."""
        while True:
            try:
                with roomy_address_space():  # this process runs no candidate code: its cap is for the children
                    payload, msg = protocol.receive_frame(self.fd_in)
            except protocol.ChannelClosed:
                self._end_child()
                return
            op = msg.get("op")
            if op == "exit":
                self._end_child()
                return
            if op == "load":
                self._end_child()
                self._start_child(msg)
                del payload
                self._await_child(msg)
            elif op == "ping":
                self.send({"ok": True}, msg)
            elif op == "unload" or op in self.parent_ops:
                if op == "unload":
                    self._end_child()
                del payload
                self.send(self.handle_parent(msg), msg)
            elif self.child is None:
                self.send({"ok": False, "kind": "crash", "message": "no candidate loaded"}, msg)
            else:
                try:
                    protocol.send_frame(self.child.requests, payload)
                except OSError:  # it died since its last answer: the wait below says how
                    pass
                del payload
                self._await_child(msg)

    # -- the child's life -------------------------------------------------------------------------

    def _start_child(self, first: dict[str, Any]) -> None:
        requests_r, requests_w = os.pipe()
        done_r, done_w = os.pipe()
        self.children += 1
        path = os.path.join(self.scratch, f"candidate-{self.children}.out")
        output = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        os.unlink(path)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # what the parent printed must not be printed again by the child
        worker = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(requests_w)
            os.close(done_r)
            os.close(self.fd_in)
            self._child_main(worker, first, requests_r, done_w, output)
        os.close(requests_r)
        os.close(done_w)
        self.child = _Child(pid, requests_w, done_r, output)

    def _child_main(self, worker: int, first: dict[str, Any], requests: int, done: int, output: int) -> NoReturn:
        try:
            _die_with(worker)  # the pid from before the fork: a worker killed since has already left us an orphan
            if self.confine is not None:
                self.confine()
            os.dup2(output, 1)
            os.dup2(output, 2)
            os.close(output)
            resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
            msg = first
            while True:
                reply = _capped(self.handle_child(msg))
                sent = self.send(reply, msg)
                os.write(done, _mark(msg))
                if sent.get("fatal"):
                    os._exit(3)  # the heap or the device may be damaged: the next request gets a fresh child
                try:
                    msg = protocol.receive(requests)
                except protocol.ChannelClosed:
                    os._exit(0)
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(5)

    def _await_child(self, msg: dict[str, Any]) -> None:
        """Wait until the child has answered `msg`; answer for it if it died first."""
        child = self.child
        assert child is not None
        expected = _mark(msg)
        try:
            mark = os.read(child.done, len(expected))
        except OSError:
            mark = b""
        if mark == expected:
            return
        if mark:  # not written by the worker's code: the candidate wrote to the descriptor itself
            self._end_child()
            self.send({"ok": False, "kind": "crash", "died": True,
                       "message": "the candidate's process wrote to the worker's own descriptors"}, msg)
            return
        status = _reap(child.pid, 5.0)
        self.child = None
        reason = f"the candidate's process {_exit_words(status)}"
        printed = os.fstat(child.output).st_size
        if printed > OUTPUT_CAP:
            reason += f" after printing {printed} bytes (an evaluation may print {OUTPUT_CAP} bytes)"
        tail = _keep_tail(child.output)
        self._close(child)
        self.send({"ok": False, "kind": "crash", "died": True,
                   "message": reason + (f"; last output: {tail}" if tail else "")}, msg)

    def _end_child(self) -> None:
        """End the live child, which waits for its next request: closing its pipe ends it."""
        child = self.child
        if child is None:
            return
        self.child = None
        for fd in (child.requests, child.done):
            os.close(fd)
        if _reap(child.pid, 10.0) is None:
            raise SystemExit("worker: a candidate's process did not end when its requests ended")
        _keep_tail(child.output)
        os.close(child.output)

    @staticmethod
    def _close(child: _Child) -> None:
        for fd in (child.requests, child.done, child.output):
            try:
                os.close(fd)
            except OSError:
                pass


def _mark(msg: dict[str, Any]) -> bytes:
    """What a child writes to say it answered `msg`: the request's nonce, which candidate code cannot know."""
    return str(msg.get("seq", "")).encode()[:64] or b"."


def _capped(reply: dict[str, Any]) -> dict[str, Any]:
    """`reply`, or a ``crash`` when the candidate printed more than `OUTPUT_CAP` bytes so far."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the file-size limit: the size below tells
            pass
    printed = os.fstat(1).st_size
    if printed <= OUTPUT_CAP:
        return reply
    return {"ok": False, "kind": "crash",
            "message": f"the candidate printed {printed} bytes (stdout and stderr; an evaluation may print "
                       f"{OUTPUT_CAP} bytes): printing from a kernel or launch floods the log"}


def _die_with(parent: int) -> None:
    """Ask the kernel to kill this process when the worker that forked it (`parent`, its pid taken before the
    fork) ends: a killed worker must not leave a candidate running. A worker that ended between the fork and
    this call sends no signal; the child sees it has another parent and ends itself."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(4)


def _reap(pid: int, timeout: float) -> int | None:
    """The wait status of child `pid` once it ended, None if it did not within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0
        if done:
            return status
        if time.monotonic() > deadline:
            return None
        time.sleep(0.002)


def _exit_words(status: int | None) -> str:
    if status is None:
        return "did not end"
    if os.WIFSIGNALED(status):
        return f"was killed by signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with code {os.WEXITSTATUS(status)}"


def _keep_tail(fd: int) -> str:
    """Append the last `TAIL` bytes of a child's output (file descriptor `fd`) to this process's log and
    return its last lines in one line (what a crash reason quotes)."""
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, TAIL, max(0, size - TAIL))
    except OSError:
        return ""
    if data:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    lines = [line.strip() for line in data.decode(errors="replace").splitlines()
             if line.strip() and not EXIT_NOISE.match(line)]
    return " | ".join(lines)[-600:]
