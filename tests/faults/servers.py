"""Store processes a fault test owns: started on loopback, killed by pid, restarted in place.

The suite's shared PostgreSQL and Redis are never touched: each test kills only what it
started here, and every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

from app.adapters.postgres.migrate import upgrade
from app.embedded import EmbeddedPostgres, free_port, redis_binary

WAIT_S = 10.0


class OwnRedis:
    """A redis-server on a fixed loopback port that survives kill/restart cycles."""

    def __init__(self) -> None:
        self.port = free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self._proc = subprocess.Popen(
            [redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.port), 0.2):
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start in time")

    def kill(self) -> None:
        assert self._proc is not None
        os.kill(self._proc.pid, signal.SIGKILL)
        self._proc.wait(WAIT_S)

    def pause(self) -> None:
        """SIGSTOP: a hung server. Connections stay open and every command times out; the
        data survives, as it does in a real network partition."""
        assert self._proc is not None
        os.kill(self._proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self._proc is not None
        os.kill(self._proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self.resume()  # a stopped process would not act on the kill until continued
            self._proc.kill()
            self._proc.wait(WAIT_S)


class OwnPostgres:
    """An embedded PostgreSQL (migrated) in a temp dir of its own."""

    def __init__(self) -> None:
        self.pgdata = Path(tempfile.mkdtemp(prefix="ctxgate-fault-", dir="/tmp")) / "pg"
        self.server = EmbeddedPostgres(self.pgdata)
        self.url = ""

    def start(self) -> str:
        self.url = self.server.start()
        return self.url

    def migrate(self) -> None:
        upgrade(self.url, app_role="ctxgate_app", app_password=None)

    def kill(self) -> None:
        """SIGKILL the postmaster, as a crash or an OOM kill would, and wait for its
        backends (they exit on the postmaster's death)."""
        pid = int((self.pgdata / "postmaster.pid").read_text().split()[0])
        procs = [psutil.Process(pid), *psutil.Process(pid).children()]
        os.kill(pid, signal.SIGKILL)
        psutil.wait_procs(procs, timeout=WAIT_S)

    def restart(self) -> None:
        """Start again after a kill: the dead postmaster's pid file is cleared on start."""
        self.server.stop()
        self.start()

    def stop(self) -> None:
        self.server.stop()
