"""The driver's temporary folders for its workers and its zygote, named by the process that made them, and
the removal of those whose maker is gone.

A driver that ends normally removes its workers' folders itself (`fitness.sandbox.process.Worker.close`).
One killed with SIGKILL removes nothing: Ray kills an actor that way, with the processes it started, and a
machine that runs campaigns for weeks would collect a folder per killed worker. Each folder's name holds
its maker's pid namespace and pid (``evo-home-<ns>-<pid>-...``); the first folder a process makes removes
the ones of its user whose maker, in its own pid namespace, no longer runs.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import threading

KINDS = ("home", "log", "zygote")
_NAME = re.compile(rf"^evo-({'|'.join(KINDS)})-(\d+)-(\d+)-")
_swept = False
_guard = threading.Lock()


def folder(kind: str) -> str:
    """A new private folder for `kind` (one of `KINDS`) of this process."""
    if kind not in KINDS:
        raise ValueError(f"a scratch folder is one of {KINDS}, not {kind!r}")
    sweep()
    return tempfile.mkdtemp(prefix=f"evo-{kind}-{_namespace()}-{os.getpid()}-")


def sweep() -> None:
    """Remove, once per process, this user's folders of `KINDS` whose maker is gone."""
    global _swept
    with _guard:
        if _swept:
            return
        _swept = True
    root, ns, uid = tempfile.gettempdir(), _namespace(), os.getuid()
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        m = _NAME.match(name)
        if m is None or int(m.group(2)) != ns or _alive(int(m.group(3))):
            continue
        path = os.path.join(root, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == uid:
            shutil.rmtree(path, ignore_errors=True)  # never follows a link a worker left there


def _namespace() -> int:
    """The inode of this process's pid namespace: a pid means nothing in another one."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
