"""Isolation of the evaluation worker by the operating system, under the lint and the run-time guard.

Applied by the worker to itself as its first act, before it imports torch or triton and before any
thread exists (both mechanisms bind the calling thread and what it starts later), with nothing
but unprivileged Linux features, so it works for a normal user and inside a container:

- ``no_new_privs`` (``prctl``): no set-uid program can give the worker more rights.
- **Landlock** (Linux 5.13+, ``CONFIG_SECURITY_LANDLOCK`` and ``landlock`` among the active LSMs): the
  worker may read and execute only what a Python process with torch and triton needs (the
  interpreter's prefix and ``sys.path``, the project's ``evo`` and ``fitness`` packages, system
  libraries, a few files of ``/etc``, its own ``/proc/self`` and ``/sys``), and write only its
  scratch directory, the driver's temporary Triton cache and ``/dev/null``. The user's home, the run
  directory, the rest of the project, other processes' ``/proc`` entries: not reachable. On Landlock
  ABI 4+ TCP bind and connect are denied too, and on ABI 6+ signals and abstract unix sockets are
  scoped to the worker.
- **seccomp** (a BPF filter): no socket can be created (``socket`` fails with EACCES), no io_uring, no
  ``ptrace``/``process_vm_readv``/``process_vm_writev``/``pidfd_*``, and signals only to the worker's
  own process or group (``kill``, ``tgkill``; ``tkill`` denied).
- file descriptors: only the two protocol pipes and the log are inherited (`fitness.sandbox.process`).

`apply` returns the mechanism's name (``"landlock+seccomp"``) or, where a part is missing, what is
missing: the worker reports it in its greeting, the driver records ``sandbox`` in every verdict.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

FULL = "landlock+seccomp"
NONE = "process"

# Landlock (include/uapi/linux/landlock.h)
_SYS_LANDLOCK = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
_RULE_PATH_BENEATH = 1
_CREATE_RULESET_VERSION = 1
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FILE_ONLY = _EXECUTE | _WRITE_FILE | _READ_FILE | (1 << 14)  # rights that apply to a regular file
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1

# seccomp (linux/seccomp.h, linux/filter.h, linux/audit.h)
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_SYSCALLS = {  # name -> number per architecture
    "socket": {"x86_64": 41, "aarch64": 198},
    "io_uring_setup": {"x86_64": 425, "aarch64": 425},
    "ptrace": {"x86_64": 101, "aarch64": 117},
    "process_vm_readv": {"x86_64": 310, "aarch64": 270},
    "process_vm_writev": {"x86_64": 311, "aarch64": 271},
    "pidfd_open": {"x86_64": 434, "aarch64": 434},
    "pidfd_getfd": {"x86_64": 438, "aarch64": 438},
    "pidfd_send_signal": {"x86_64": 424, "aarch64": 424},
    "tkill": {"x86_64": 200, "aarch64": 130},
    "kill": {"x86_64": 62, "aarch64": 129},
    "tgkill": {"x86_64": 234, "aarch64": 131},
    "rt_sigqueueinfo": {"x86_64": 129, "aarch64": 138},
    "rt_tgsigqueueinfo": {"x86_64": 297, "aarch64": 240},
}
_DENIED = ("socket", "io_uring_setup", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_open",
           "pidfd_getfd", "pidfd_send_signal", "tkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
_SIGNALS = ("kill", "tgkill")  # allowed to the worker's own process and group; a candidate's process sends none
_ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
              "/etc/os-release", "/etc/mime.types")
_SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.conf.d", "/etc/alternatives",
                "/sys", "/usr/local/cuda", "/opt/nvidia", "/proc/driver/nvidia")
_DEVICES_RW = ("/dev/null", "/dev/zero", "/dev/full")
_DEVICES_R = ("/dev/urandom", "/dev/random")


@dataclass
class Plan:
    """What the worker may read and execute, and where it may write."""

    read: list[str] = field(default_factory=list)
    write: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)  # read and write, as files (GPU device nodes)


def plan(scratch: str, project_root: Path, *, gpu: bool) -> Plan:
    """The paths a worker with `scratch` as its only writable directory needs."""
    project = project_root.resolve()
    read: list[str] = [str(project / "evo"), str(project / "fitness")]
    for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable)),
              *sys.path}:
        if not p or not os.path.isdir(p):
            continue
        real = Path(p).resolve()
        if real == project:  # the project root itself is on sys.path: only its packages are granted
            continue
        read.append(str(real))
    for var in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH"):
        read += [p for p in os.environ.get(var, "").split(os.pathsep) if p]
    read += [*_SYSTEM_DIRS, *_ETC_FILES, *_DEVICES_R, "/proc/self", "/proc/cpuinfo", "/proc/meminfo",
             "/proc/stat"]
    write = [scratch, *_DEVICES_RW]
    cache = os.environ.get("TRITON_CACHE_DIR")  # the driver's temporary cache (`process.triton_cache_dir`)
    if cache and os.path.isdir(cache):
        write.append(cache)
    devices = []
    if gpu and os.path.isdir("/dev"):
        devices = [f"/dev/{n}" for n in sorted(os.listdir("/dev")) if n.startswith("nvidia")]
    return Plan(read=read, write=write, devices=devices)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _fail(what: str) -> OSError:
    e = ctypes.get_errno()
    return OSError(e, f"{what}: {os.strerror(e)}")


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none)."""
    numbers = _SYS_LANDLOCK.get(platform.machine())
    if numbers is None:
        return 0
    v = int(_libc().syscall(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)))
    return max(v, 0)


def _landlock(p: Plan, abi: int) -> None:
    libc = _libc()
    create, add, restrict = _SYS_LANDLOCK[platform.machine()]
    handled = (1 << 13) - 1
    if abi >= 2:
        handled |= 1 << 13  # refer
    if abi >= 3:
        handled |= 1 << 14  # truncate
    attr = struct.pack("<Q", handled)
    if abi >= 4:
        attr += struct.pack("<Q", _NET_BIND_TCP | _NET_CONNECT_TCP)
    if abi >= 6:
        attr += struct.pack("<Q", _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL)
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = int(libc.syscall(create, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)))
    if fd < 0:
        raise _fail("landlock_create_ruleset")
    try:
        rules = [(path, _READ) for path in p.read] + [(path, handled) for path in p.write]
        rules += [(path, _READ_FILE | _WRITE_FILE) for path in p.devices]
        for path, access in rules:
            try:
                target = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # absent here: nothing to grant
            try:
                if not os.path.isdir(path):
                    access &= _FILE_ONLY
                rule = ctypes.create_string_buffer(struct.pack("<Qi", access & handled, target), 12)
                if libc.syscall(add, ctypes.c_int(fd), ctypes.c_int(_RULE_PATH_BENEATH), rule, ctypes.c_uint32(0)) != 0:
                    raise _fail(f"landlock_add_rule({path})")
            finally:
                os.close(target)
        if libc.syscall(restrict, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            raise _fail("landlock_restrict_self")
    finally:
        os.close(fd)


def _seccomp_program(arch: str, pid: int) -> list[tuple[int, int, int, int]]:
    """BPF: deny the listed calls (EACCES for socket, EPERM otherwise), signals only to `pid`'s own
    process or group, any other architecture (x32, i386 entry points) denied."""
    deny_eperm = _RET_ERRNO | errno.EPERM
    prog: list[tuple[int, int, int, int]] = [(_LD_W_ABS, 0, 0, 4)]  # arch
    prog.append((_JEQ_K, 1, 0, _ARCH[arch]))
    prog.append((_RET_K, 0, 0, deny_eperm))
    prog.append((_LD_W_ABS, 0, 0, 0))  # syscall number
    if arch == "x86_64":
        prog.append((_JGE_K, 0, 1, 0x40000000))  # the x32 ABI
        prog.append((_RET_K, 0, 0, deny_eperm))
    for name in _DENIED:
        ret = _RET_ERRNO | (errno.EACCES if name == "socket" else errno.EPERM)
        prog.append((_JEQ_K, 0, 1, _SYSCALLS[name][arch]))
        prog.append((_RET_K, 0, 0, ret))
    own = {pid & 0xFFFFFFFF, (-pid) & 0xFFFFFFFF, 0}
    for name in _SIGNALS:
        allowed = sorted(own) if name == "kill" else [pid]
        prog.append((_JEQ_K, 0, 3 + len(allowed), _SYSCALLS[name][arch]))
        prog.append((_LD_W_ABS, 0, 0, 16))  # the low word of args[0]
        for i, value in enumerate(allowed):
            prog.append((_JEQ_K, len(allowed) - i, 0, value))
        prog.append((_RET_K, 0, 0, deny_eperm))
        prog.append((_RET_K, 0, 0, _RET_ALLOW))
    prog.append((_RET_K, 0, 0, _RET_ALLOW))
    return prog


def _no_signals_program(arch: str) -> list[tuple[int, int, int, int]]:
    """BPF, on top of the worker's: no signal to any process (a candidate's process may not signal the
    worker that forked it, its group, or another candidate's)."""
    deny_eperm = _RET_ERRNO | errno.EPERM
    prog: list[tuple[int, int, int, int]] = [(_LD_W_ABS, 0, 0, 0)]  # syscall number (the arch is checked below)
    for name in _SIGNALS:
        prog.append((_JEQ_K, 0, 1, _SYSCALLS[name][arch]))
        prog.append((_RET_K, 0, 0, deny_eperm))
    prog.append((_RET_K, 0, 0, _RET_ALLOW))
    return prog


def confine_candidate_process() -> None:
    """Confine a candidate's process forked from a confined worker (`fitness.sandbox.forkserver`) further:
    it inherits the worker's Landlock and seccomp, whose signal rules name the worker's own process; here
    it loses signals altogether. Raises OSError where seccomp fails (the caller, confined or not, decides)."""
    _install(_no_signals_program(platform.machine()))


def _seccomp(arch: str) -> None:
    _install(_seccomp_program(arch, os.getpid()))


def _install(prog: list[tuple[int, int, int, int]]) -> None:
    raw = b"".join(struct.pack("<HBBI", code, jt, jf, k) for code, jt, jf, k in prog)
    filt = ctypes.create_string_buffer(raw, len(raw))
    fprog = struct.pack("<HxxxxxxQ", len(prog), ctypes.addressof(filt))
    fbuf = ctypes.create_string_buffer(fprog, len(fprog))
    if _libc().prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, fbuf, 0, 0) != 0:
        raise _fail("seccomp")


def apply(scratch: str, project_root: Path, *, gpu: bool) -> tuple[str, list[str]]:
    """Confine the calling process; returns (mechanism, problems). The mechanism is `FULL` when both
    parts hold, the part that holds, or `NONE`; `problems` say what is missing and why."""
    problems: list[str] = []
    parts: list[str] = []
    if sys.platform != "linux":
        return NONE, [f"no OS isolation on {sys.platform} (Linux only)"]
    arch = platform.machine()
    if arch not in _ARCH:
        return NONE, [f"no OS isolation on {arch} (x86_64 and aarch64 only)"]
    if _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return NONE, [str(_fail("prctl(PR_SET_NO_NEW_PRIVS)"))]
    threads = len(os.listdir("/proc/self/task"))
    if threads > 1:
        problems.append(f"{threads - 1} thread(s) started before the isolation are not confined")
    abi = landlock_abi()
    if abi <= 0:
        problems.append("Landlock is not available (Linux 5.13+ with landlock among the active LSMs): "
                        "the worker can read and write what the user can")
    else:
        try:
            _landlock(plan(scratch, project_root, gpu=gpu), abi)
            parts.append("landlock")
        except OSError as e:
            problems.append(f"Landlock failed: {e}")
    try:
        _seccomp(arch)
        parts.append("seccomp")
    except OSError as e:
        problems.append(f"seccomp failed: {e}: the worker can open network connections")
    return ("+".join(parts) or NONE), problems
