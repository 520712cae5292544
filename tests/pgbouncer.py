"""A PgBouncer in transaction pooling, started on loopback in front of the embedded test
PostgreSQL (Debian's ``pgbouncer`` package; the caller skips when it is not installed).

The embedded server listens on a Unix socket only, in its data directory (mode 0700, owned
by the user the server runs as): PgBouncer runs as that user too (``-u``; it refuses to run
as root), with its config, auth file, log and pid file in a temp directory of its own. The
process is this test's: stopped by its pid, every wait bounded.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from sqlalchemy.engine import make_url

from app.embedded import free_port

WAIT_S = 10.0
USERS = ("postgres", "ctxgate_app")


def pgbouncer_binary() -> str | None:
    return shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer",) if os.access(p, os.X_OK)), None)


def _server(owner_url: str) -> tuple[Path, int]:
    """The embedded server's socket directory and port (from its socket file's name)."""
    socket_dir = Path(unquote(str(make_url(owner_url).query["host"])))
    sockets = sorted(socket_dir.glob(".s.PGSQL.*[0-9]"))
    if not sockets:
        raise RuntimeError(f"no PostgreSQL socket in {socket_dir}")
    return socket_dir, int(sockets[0].name.rsplit(".", 1)[1])


CONFIG = """\
[databases]
* = host={socket_dir} port={pg_port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {dir}/users.txt
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 500
; asyncpg sends none of these unless told; ctxgate's jit=off must not need one
ignore_startup_parameters = extra_float_digits
server_reset_query =
query_wait_timeout = {query_wait_timeout}
logfile = {dir}/pgbouncer.log
pidfile = {dir}/pgbouncer.pid
"""


@dataclass(frozen=True, slots=True)
class Bouncer:
    address: str  # host:port
    log: Path  # its log file (logins name the user and database)


@contextlib.contextmanager
def pgbouncer(owner_url: str, *, pool_size: int = 3, query_wait_timeout: int = 30
              ) -> Iterator[Bouncer]:
    """A PgBouncer (transaction pooling, ``pool_size`` server connections per database and
    user, clients waiting at most ``query_wait_timeout`` s for one) in front of
    ``owner_url``'s server, for the block."""
    binary = pgbouncer_binary()
    if binary is None:
        raise RuntimeError("pgbouncer is not installed")
    socket_dir, pg_port = _server(owner_url)
    user = pwd.getpwuid(socket_dir.stat().st_uid)
    work = Path(tempfile.mkdtemp(prefix="ctxgate-pgbouncer-", dir="/tmp"))
    port = free_port()
    (work / "users.txt").write_text("".join(f'"{u}" ""\n' for u in USERS))
    (work / "pgbouncer.ini").write_text(CONFIG.format(
        socket_dir=socket_dir, pg_port=pg_port, port=port, dir=work, pool_size=pool_size,
        query_wait_timeout=query_wait_timeout))
    as_root = os.getuid() == 0
    if as_root:  # it reads and writes its directory as the server's user
        for path in (work, *work.iterdir()):
            os.chown(path, user.pw_uid, user.pw_gid)
    proc = subprocess.Popen(
        [binary, *(["-u", user.pw_name] if as_root else []), str(work / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait(port, proc, work)
        yield Bouncer(f"127.0.0.1:{port}", work / "pgbouncer.log")
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGINT)  # SIGINT: a fast shutdown
            try:
                proc.wait(WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(WAIT_S)
        shutil.rmtree(work, ignore_errors=True)


def _wait(port: int, proc: subprocess.Popen[bytes], work: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log = work / "pgbouncer.log"
            raise RuntimeError(f"pgbouncer exited ({proc.returncode}): "
                               f"{log.read_text() if log.exists() else ''}"
                               f"{proc.stderr.read().decode() if proc.stderr else ''}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError("pgbouncer did not start in time")
