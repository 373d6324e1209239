"""Attacks on the evaluation worker: with the lint bypassed (an internal hook of `Evaluator`), the layers
below it (the run-time guard and the OS isolation of `fitness.sandbox.isolation`) stop each one, and
the verdict says what was blocked; with the lint on, the same candidates never run."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.verdict import Status
from fitness.check.lint import lint
from fitness.evaluate import Evaluator, IsolationUnavailable
from fitness.sandbox import isolation
from fitness.sandbox.process import triton_cache_dir

from .conftest import ROOT

UNLISTED = "import os\nimport socket\nimport sys\n\nimport msgpack\n"
HONEST = (ROOT / "tests" / "candidates" / "softmax" / "one_pass.py").read_text()


def attack(code: str, *, unlisted: bool = True) -> Candidate:
    """The honest one-pass softmax with `code` at the start of launch; `unlisted`: import modules that only
    the tests below the lint may use (os, socket, sys, msgpack)."""
    body = "".join("    " + line + "\n" for line in code.strip().splitlines())
    imports = (UNLISTED if unlisted else "") + "import typing\n\nimport torch\n"
    source = HONEST.replace("import triton\n", imports + "import triton\n", 1)
    return Candidate.from_source(source.replace("    rows, cols = x.shape\n", "    rows, cols = x.shape\n" + body, 1))


@pytest.fixture(scope="module")
def linted(softmax_task) -> Iterator[Evaluator]:
    settings = EvaluationConfig(timeout_s=60.0, memory_mb=1024, latency=LatencyMode.OFF)
    with Evaluator(softmax_task, settings, device="cpu") as ev:
        yield ev


def blocked(ev: Evaluator, code: str) -> str:
    result = ev.evaluate(attack(code))
    assert result.status is Status.LINT_ERROR, (result.status, result.reason)
    assert "blocked by the worker's isolation" in result.reason, result.reason
    assert result.sandbox == isolation.FULL
    return result.reason


def test_the_worker_reports_full_isolation_here(unlinted):
    sandbox, problems = unlinted.isolation()
    assert (sandbox, problems) == (isolation.FULL, [])
    assert unlinted.evaluate(attack("pass")).ok  # the honest kernel runs inside the sandbox


def test_writing_outside_the_scratch_directory_is_blocked(unlinted, tmp_path):
    target = tmp_path / "escaped.txt"
    reason = blocked(unlinted, f"open({str(target)!r}, 'w').write('x')")
    assert "PermissionError" in reason and not target.exists()


def test_reading_the_project_is_blocked(unlinted):
    blocked(unlinted, f"open({str(ROOT / 'README.md')!r}).read()")
    blocked(unlinted, f"os.listdir({str(ROOT)!r})")


def test_reading_the_users_home_is_blocked(unlinted):
    secret = Path.home() / f".evo-test-secret-{uuid.uuid4().hex}"
    secret.write_text("sk-secret")
    try:
        blocked(unlinted, f"open({str(secret)!r}).read()")
    finally:
        secret.unlink()


def test_a_tcp_connection_to_a_local_server_is_blocked(unlinted):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted: list[object] = []
    server.settimeout(0.5)

    def serve() -> None:
        for _ in range(20):
            try:
                accepted.append(server.accept())
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        reason = blocked(unlinted, f"socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'hi')")
        assert "socket" in reason or "Permission denied" in reason
    finally:
        thread.join(timeout=15)
        server.close()
    assert not accepted


def test_reading_another_processs_environment_is_blocked(unlinted):
    blocked(unlinted, f"open('/proc/{os.getpid()}/environ', 'rb').read()")


def test_signalling_another_process_is_blocked(unlinted):
    blocked(unlinted, f"os.kill({os.getpid()}, 0)")


def test_a_descriptor_the_worker_did_not_inherit_cannot_be_written(unlinted, tmp_path):
    with open(tmp_path / "driver.log", "wb") as f:
        reason = blocked(unlinted, f"os.write({f.fileno()}, b'forged')")
    assert "Bad file descriptor" in reason
    assert (tmp_path / "driver.log").read_bytes() == b""


def test_the_worker_cannot_swap_its_log_for_a_link(unlinted):
    # the driver reads the log's tail into a crash's reason: a log replaced by a link to a secret would carry the
    # secret into the run's history (and an LLM's prompt). The worker's log lives where it cannot write, and a
    # candidate's own output goes to a file without a name (`fitness.sandbox.forkserver`): nothing to replace
    result = unlinted.evaluate(attack("log = os.readlink('/proc/self/fd/1')\nos.unlink(log)\n"
                                      "os.symlink('/etc/shadow', log)"))
    assert result.status is Status.COMPILE_ERROR and "FileNotFoundError" in result.reason, result.reason
    assert "(deleted)" in result.reason


def test_a_shared_triton_cache_is_not_writable(softmax_task, tmp_path, monkeypatch):
    shared = tmp_path / "triton-cache"
    shared.mkdir()
    monkeypatch.setenv("TRITON_CACHE_DIR", str(shared))
    settings = EvaluationConfig(timeout_s=60.0, memory_mb=1024, latency=LatencyMode.OFF)
    with Evaluator(softmax_task, settings, device="cpu", static_lint=False) as ev:
        blocked(ev, f"open({str(shared / 'planted.json')!r}, 'w').write('{{}}')")
        # the worker's cache is the driver's temporary one, whatever the user's environment says
        assert ev.evaluate(attack(f"assert os.environ['TRITON_CACHE_DIR'] == {triton_cache_dir()!r}")).ok
    assert list(shared.iterdir()) == []


def test_a_candidate_that_crashes_its_process_is_a_crash_that_reproduced(unlinted):
    result = unlinted.evaluate(attack("import ctypes\nctypes.string_at(0)"))
    assert result.status is Status.CRASH and "SIGSEGV" in result.reason, result.reason
    assert "reproduced on a fresh worker" in result.reason


@pytest.mark.parametrize("target", ["os.getpid()", "os.getppid()", "0", "-os.getpgid(0)"])
def test_a_candidate_cannot_signal_its_process_the_worker_or_the_group(unlinted, target):
    # a candidate's process is forked from the worker (`fitness.sandbox.forkserver`); it may not end it
    reason = blocked(unlinted, f"os.kill({target}, 9)")
    assert "PermissionError" in reason
    assert unlinted.evaluate(attack("pass")).ok  # the worker lived on


def test_garbage_on_the_protocol_descriptor_is_a_crash(unlinted):
    # every descriptor by number (a candidate's process may not list its /proc/self/fd)
    write_all = ("for fd in range(256):\n"
                 "    try:\n        os.write(fd, b'\\x05\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\xc1garbage')\n"
                 "    except OSError:\n        pass")
    result = unlinted.evaluate(attack(write_all))
    assert result.status is Status.CRASH and "broke the protocol" in result.reason, result.reason
    assert unlinted.evaluate(attack("pass")).ok  # a fresh worker


def test_a_forged_ok_reply_with_the_stolen_nonce_is_a_crash(unlinted):
    # the candidate finds the request (and its nonce) in the worker's frames and writes a complete "ok" reply
    # itself (torch would be stopped by the guard, and the request's input bytes are let go before the launch,
    # so its storages are made up): the genuine reply then arrives where the ping's answer must be
    forge = '''
frame = sys._getframe()
while frame is not None and not ("msg" in frame.f_locals and hasattr(frame.f_locals.get("self"), "fd_out")):
    frame = frame.f_back
msg = frame.f_locals["msg"]
fd = frame.f_locals["self"].fd_out
assert all("data" not in s for s in msg["inputs"])
made_up = [bytes(4096) for s in msg["inputs"]]
payload = msgpack.packb({"ok": True, "seconds": 0.0, "inputs": made_up, "outputs": made_up, "seq": msg["seq"]})
os.write(fd, len(payload).to_bytes(8, "little") + payload)
'''
    result = unlinted.evaluate(attack(forge))
    assert result.status is Status.CRASH and "out of turn" in result.reason, result.reason


def test_torch_through_exec_is_candidate_code(unlinted):
    result = unlinted.evaluate(attack("exec('y.copy_(torch.softmax(x, 1))', {'x': x, 'y': y, 'torch': torch})\n"
                                      "return"))
    assert result.status is Status.LINT_ERROR and "launch called torch" in result.reason, result.reason


def test_torch_in_a_string_annotation_is_candidate_code(unlinted):
    code = ("def f(a: 'y.copy_(torch.softmax(x, 1))'):\n    pass\n"
            "typing.get_type_hints(f, {'x': x, 'y': y, 'torch': torch})\nreturn")
    result = unlinted.evaluate(attack(code))
    assert result.status is Status.LINT_ERROR and "launch called torch" in result.reason, result.reason


@pytest.mark.parametrize("code, words", [
    ("tl.core.builtins.exec('y.fill_(0)')", "tl.core.builtins.exec is not allowed"),
    ("tl.core.builtins.open('/tmp/x', 'w')", "tl.core.builtins.open is not allowed"),
    ("tl.extra.pkgutil.sys.modules['os'].getpid()", "tl.extra.pkgutil.sys.modules"),
    ("typing.sys.modules['os'].getpid()", "typing.sys.modules"),
    ("os.kill(1, 0)", "import of 'os'"),
    ("open('/etc/passwd').read()", "'open'"),
])
def test_the_issues_routes_are_lint_errors_naming_the_chain(linted, code, words):
    result = linted.evaluate(attack(code, unlisted="import of" in words))
    assert result.status is Status.LINT_ERROR and words in result.reason, result.reason


@pytest.mark.parametrize("code", [
    "tl.core.builtins.open('/etc/hostname').read()",
    "tl.extra.pkgutil.sys.modules['os'].listdir('/root')",
    "typing.sys.modules['builtins'].open('/etc/hostname').read()",
])
def test_the_issues_routes_are_blocked_below_the_lint(unlinted, code):
    blocked(unlinted, code)


def test_every_attack_here_is_a_lint_error_with_the_lint_on(linted):
    for code in ("open('/tmp/x', 'w')", "socket.create_connection(('127.0.0.1', 1))", "os.kill(1, 0)",
                 "exec('pass')"):
        assert linted.evaluate(attack(code)).status is Status.LINT_ERROR
    assert not lint(attack("pass").source).ok  # the template's own imports (os, socket, msgpack) are refused
    assert lint(attack("pass", unlisted=False).source).ok  # and nothing else in it is


def test_required_isolation_that_is_missing_is_a_startup_error(softmax_task):
    settings = EvaluationConfig(latency=LatencyMode.OFF, isolation=False, require_isolation=True)
    with Evaluator(softmax_task, settings, device="cpu") as ev:
        with pytest.raises(IsolationUnavailable, match="require_isolation"):
            ev.isolation()


def test_without_isolation_verdicts_say_process(softmax_task):
    settings = EvaluationConfig(latency=LatencyMode.OFF, isolation=False)
    with Evaluator(softmax_task, settings, device="cpu") as ev:
        assert ev.isolation()[0] == isolation.NONE
        assert ev.evaluate(attack("pass")).sandbox == isolation.NONE


def test_a_kernel_without_landlock_reports_what_is_missing():
    """Where Landlock is absent (an old kernel, an LSM list without it), seccomp still holds and the worker says
    what it lacks, which the driver turns into the warning and the verdicts' `sandbox`."""
    scratch = tempfile.mkdtemp(prefix="evo-nolandlock-")
    probe = (
        "from pathlib import Path; from fitness.sandbox import isolation\n"
        "isolation.landlock_abi = lambda: 0\n"
        f"mech, problems = isolation.apply({scratch!r}, Path({str(ROOT)!r}), gpu=False)\n"
        "print(mech); print(problems[0])\n"
        "import socket\n"
        "try:\n    socket.socket()\nexcept PermissionError:\n    print('socket denied')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT)})
    shutil.rmtree(scratch, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    mech, problem, denied = done.stdout.strip().splitlines()
    assert mech == "seccomp" and "Landlock is not available" in problem and denied == "socket denied"


def test_the_isolation_holds_for_an_unprivileged_user():
    """The same mechanism as root and as a plain user (nobody): no privilege is needed."""
    if os.geteuid() != 0:
        pytest.skip("this test switches to the user nobody, which needs root; as a non-root user every test here "
                    "already runs unprivileged")
    scratch = Path(tempfile.mkdtemp(prefix="evo-nobody-"))  # pytest's own folders are root's alone
    os.chmod(scratch, 0o777)
    # the checkout may sit in a folder only its owner can enter: the user gets a copy of what it imports
    # (the standard library alone besides), and of a file of the project it must not read
    project = Path(tempfile.mkdtemp(prefix="evo-project-"))
    for part in ("fitness/__init__.py", "fitness/sandbox/__init__.py", "fitness/sandbox/isolation.py", "README.md"):
        (project / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / part, project / part)
    for d in (project, *[q for q in project.rglob("*") if q.is_dir()]):
        os.chmod(d, 0o755)
    for f in project.rglob("*"):
        if f.is_file():
            os.chmod(f, 0o644)
    probe = (
        "import sys; from pathlib import Path; from fitness.sandbox import isolation\n"
        f"mech, problems = isolation.apply({str(scratch)!r}, Path({str(project)!r}), gpu=False)\n"
        f"Path({str(scratch / 'ok')!r}).write_text('x')\n"
        "blocked = []\n"
        f"for path in ({str(project / 'README.md')!r}, '/etc/hostname'):\n"
        "    try:\n        open(path).read()\n    except PermissionError:\n        blocked.append(path)\n"
        "print(mech, len(blocked), problems)\n"
    )
    python = os.path.realpath(sys.executable)  # the interpreter itself, not the venv's link beside the checkout
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", probe],
                          cwd=project, capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(project)})
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(project, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[:2] == [isolation.FULL, "2"], done.stdout
