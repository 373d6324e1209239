"""Run by `tests.test_zygote` as a worker would be (forked by `fitness.sandbox.zygote`): writes what it was
given (environment, folder, session, descriptors, modules already imported, argv) as JSON to the descriptor
named by ``--out``, then exits with ``--code`` or hangs with ``--hang``, or raises with ``--raise``."""

from __future__ import annotations

import json
import os
import sys
import time


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def main() -> None:
    args = sys.argv[1:]
    out = int(args[args.index("--out") + 1])
    fds = sorted(n for n in map(int, os.listdir("/proc/self/fd")) if _open(n))  # not the listing's own
    report = {
        "argv": sys.argv, "env": dict(os.environ), "cwd": os.getcwd(), "path0": sys.path[0], "pid": os.getpid(),
        "sid": os.getsid(0), "ppid": os.getppid(), "stdin": os.readlink("/proc/self/fd/0"), "fds": fds,
        "torch": "torch" in sys.modules, "triton": "triton" in sys.modules, "name": __name__,
    }
    with os.fdopen(out, "w") as f:
        f.write(json.dumps(report))
    print("probe printed this")
    if "--raise" in args:
        raise RuntimeError("the probe's own error")
    if "--hang" in args:
        while True:
            time.sleep(1.0)
    raise SystemExit(int(args[args.index("--code") + 1]) if "--code" in args else 0)


if __name__ == "__main__":
    main()
