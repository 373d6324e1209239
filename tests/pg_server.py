"""A PostgreSQL server started by a test on 127.0.0.1 (a free port, its own temp dir) and always stopped.

The binaries are Debian's (`/usr/lib/postgresql/*/bin`, installed by scripts/test_services.sh) or
any on PATH. initdb and postgres refuse to run as root, so under root the server runs as the
`postgres` system user the Debian package creates (`nobody` without it) in a temp dir it owns;
otherwise as the current user. Connections over TCP need a password (scram-sha-256), as on a
cluster's database host, so a test can prove libpq finds it in PGPASSWORD or a pgpass file.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .ray_head import free_ports

SUPERUSER = "postgres"
# Passwords over TCP, as on a cluster's database host; the superuser over the Unix socket only.
HBA = "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n"


def bindir() -> Path | None:
    """The newest PostgreSQL server binaries found, None when there are none."""
    found = sorted((p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "postgres").is_file()),
                   key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if found:
        return found[-1]
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path and (Path(on_path).parent / "initdb").is_file() else None


def missing() -> str | None:
    """Why no server can be started here, None when one can."""
    if bindir() is None:
        return ("PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin or PATH); "
                "scripts/test_services.sh installs Debian's `postgresql` when run as root")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without `runuser`: cannot start postgres as another user"
    return None


@dataclass(frozen=True)
class PgServer:
    bin: Path
    socket_dir: Path
    port: int
    run_as: list[str]  # command prefix: runuser under root, nothing otherwise
    password: str  # of every role `create_database` makes

    def url(self, database: str, *, user: str, password: bool = False, driver: str = "") -> str:
        """A `postgresql[+driver]://` URL to 127.0.0.1, with the password only when asked for."""
        auth = f"{user}:{self.password}" if password else user
        scheme = f"postgresql+{driver}" if driver else "postgresql"
        return f"{scheme}://{auth}@127.0.0.1:{self.port}/{database}"

    def psql(self, *sql: str, database: str = "postgres") -> str:
        cmd = [str(self.bin / "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", str(self.socket_dir),
               "-p", str(self.port), "-U", SUPERUSER, "-d", database]
        for s in sql:
            cmd += ["-c", s]
        return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60).stdout

    def create_database(self, name: str, *, user: str) -> None:
        """A new role `user` (LOGIN, password `self.password`) and a database `name` it owns."""
        self.psql(f"CREATE ROLE {user} LOGIN PASSWORD '{self.password}'", f"CREATE DATABASE {name} OWNER {user}")


def _runner() -> tuple[list[str], int, int]:
    """The command prefix that drops root, and the uid and gid the server's files belong to."""
    if os.geteuid() != 0:
        return [], os.geteuid(), os.getegid()
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        user = pwd.getpwnam("nobody")
    return ["runuser", "-u", user.pw_name, "--"], user.pw_uid, user.pw_gid


def _wait_ready(server: PgServer, proc: subprocess.Popen[bytes], log: Path) -> None:
    ready = [*server.run_as, str(server.bin / "pg_isready"), "-q", "-h", str(server.socket_dir), "-p", str(server.port)]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if subprocess.run(ready, cwd=server.socket_dir, capture_output=True, timeout=30).returncode == 0:
            return
        time.sleep(0.1)
    raise RuntimeError(f"postgres did not start ({proc.poll()}): {log.read_text(errors='replace')[-2000:]}")


@contextmanager
def postgres_server() -> Iterator[PgServer]:
    """Starts a server (initdb, then postgres as a child) and always stops it and removes its directory."""
    bin_ = bindir()
    assert bin_ is not None, missing()
    run_as, uid, gid = _runner()
    tmp = Path(tempfile.mkdtemp(prefix="pg", dir="/tmp"))  # short: a Unix socket path is length-limited
    os.chown(tmp, uid, gid)
    data, log = tmp / "data", tmp / "server.log"
    proc: subprocess.Popen[bytes] | None = None
    try:
        # -N: no fsync; a test's cluster need not survive a power cut
        init = [*run_as, str(bin_ / "initdb"), "-D", str(data), "-U", SUPERUSER, "-E", "UTF8", "--locale=C", "-N"]
        p = subprocess.run(init, cwd=tmp, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise RuntimeError(f"initdb failed ({p.returncode}): {p.stdout}{p.stderr}")
        hba = tmp / "pg_hba.conf"
        hba.write_text(HBA)
        os.chown(hba, uid, gid)
        (port,) = free_ports(1)
        server = PgServer(bin_, tmp, port, run_as, secrets.token_hex(12))
        # A child, not pg_ctl's daemon: its exit is reaped here (a container's init may not reap).
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [*run_as, str(bin_ / "postgres"), "-D", str(data), "-p", str(port), "-k", str(tmp),
                 "-c", "listen_addresses=127.0.0.1", "-c", f"hba_file={hba}", "-c", "fsync=off",
                 "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=50"],
                cwd=tmp, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        _wait_ready(server, proc, log)
        yield server
    finally:
        if proc is not None:
            # fast: disconnects clients (a test's leftover engines) instead of waiting for them
            stop = [*run_as, str(bin_ / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "-t", "30", "stop"]
            subprocess.run(stop, cwd=tmp, capture_output=True, timeout=60)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
