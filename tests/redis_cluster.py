"""A real 3-master Redis Cluster on loopback, for the Redis-touching tests.

Three ``redis-server --cluster-enabled yes`` processes on free ports, joined by
``redis-cli --cluster create`` (no replicas), no persistence; stopped by pid afterwards. Every
wait is bounded.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from app.embedded import free_port, redis_binary

NODES = 3
WAIT_S = 30.0


def _wait_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"redis-server exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError("redis-server did not start in time")


def _cluster_ok(port: int) -> bool:
    out = subprocess.run(
        [shutil.which("redis-cli") or "redis-cli", "-p", str(port), "cluster", "info"],
        capture_output=True, text=True, timeout=5, check=False).stdout
    return "cluster_state:ok" in out


@contextlib.contextmanager
def redis_cluster() -> Iterator[str]:
    """``redis+cluster://127.0.0.1:<port>`` of one node while the cluster runs."""
    base = Path(tempfile.mkdtemp(prefix="ctxgate-cluster-", dir="/tmp"))
    ports = [free_port() for _ in range(NODES)]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for port in ports:
            node = base / str(port)
            node.mkdir()
            procs.append(subprocess.Popen(
                [redis_binary(), "--port", str(port), "--bind", "127.0.0.1",
                 # The bus port defaults to port + 10000, past 65535 for a high free port.
                 "--cluster-enabled", "yes", "--cluster-port", str(free_port()),
                 "--cluster-config-file", "nodes.conf",
                 "--dir", str(node), "--save", "", "--appendonly", "no"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            _wait_port(port, procs[-1])
        subprocess.run(
            [shutil.which("redis-cli") or "redis-cli", "--cluster", "create",
             *(f"127.0.0.1:{p}" for p in ports), "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True, timeout=WAIT_S, check=True)
        deadline = time.monotonic() + WAIT_S
        while not all(_cluster_ok(p) for p in ports):
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster did not converge in time")
            time.sleep(0.1)
        yield f"redis+cluster://127.0.0.1:{ports[0]}"
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(base, ignore_errors=True)
