"""A ctxgate server on this machine for tools that drive the HTTP API (``ctxgate bench``,
``ctxgate eval``): fresh embedded stores, migrated, and ``ctxgate serve`` as a subprocess on a
free loopback port, all removed afterwards.

The server is a real process, not an in-process app: what is measured or evaluated is what a
runtime would call, workers and background jobs included.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from app.embedded import EmbeddedStores, free_port

READY_TIMEOUT_S = 60.0


@contextlib.contextmanager
def local_stores(owner_url: str | None = None, redis_url: str | None = None,
                 prefix: str = "ctxgate-local-") -> Iterator[tuple[str, str]]:
    """The given stores, or embedded PostgreSQL 18 (pgvector) and Redis-compatible stores
    under a fresh directory in /tmp, migrated; yields (owner URL, Redis URL)."""
    if owner_url and redis_url:
        yield owner_url, redis_url
        return
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        with EmbeddedStores(base, persist_redis=False) as urls:
            from app.adapters.postgres.migrate import upgrade

            upgrade(urls.database_url, app_role="ctxgate_app", app_password=None)
            yield urls.database_url, urls.redis_url
    finally:
        shutil.rmtree(base, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class LocalServer:
    base_url: str
    pid: int
    admin_token: str  # the platform admin token it was started with (creates keys)


@contextlib.contextmanager
def local_server(owner_url: str, redis_url: str, redis_prefix: str, workers: int,
                 extra_env: dict[str, str] | None = None) -> Iterator[LocalServer]:
    """``ctxgate serve`` on the given stores until ``/readyz`` answers 200; stopped after."""
    port = free_port()
    logdir = Path(tempfile.mkdtemp(prefix="ctxgate-local-server-", dir="/tmp"))
    token = secrets.token_urlsafe(24)
    env = {**os.environ, "CTXGATE_DATABASE_URL": owner_url, "CTXGATE_REDIS_URL": redis_url,
           "CTXGATE_REDIS_PREFIX": redis_prefix, "CTXGATE_DATA_DIR": str(logdir),
           "CTXGATE_ADMIN_TOKEN": token, **(extra_env or {})}
    log = (logdir / "server.log").open("wb")
    proc = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--workers",
         str(workers)],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited: {(logdir / 'server.log').read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(base + "/readyz", timeout=1.0).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not become ready in {READY_TIMEOUT_S:.0f} s")
            time.sleep(0.1)
        yield LocalServer(base_url=base, pid=proc.pid, admin_token=token)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        shutil.rmtree(logdir, ignore_errors=True)
