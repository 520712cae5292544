"""``ctxgate serve`` on its embedded stores, stopped as kill, systemd and docker stop do
(issue 19, item 4): SIGTERM drains the request in flight (readiness 503 first), stops
PostgreSQL and Redis and exits 0; a SIGKILLed run's orphans and stale pid files never block
the next start; a second serve on the same data directory fails at once.

Each test runs real ``python -m app.cli serve`` processes on free loopback ports with a
data directory of its own, and signals only the processes it started; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from app.embedded import free_port

START_S = 180.0  # the first start of a process loads the embedding model
STOP_S = 60.0
ADMIN = "test-admin-" + uuid.uuid4().hex
DELAY_S = 1.5  # CTXGATE_SHUTDOWN_DELAY_S: readiness is 503 for this long before the listener closes


class Serve:
    """One ``ctxgate serve`` process on ``data_dir``."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CTXGATE_")}
        env |= {"CTXGATE_DATA_DIR": str(data_dir), "CTXGATE_ADMIN_TOKEN": ADMIN,
                "CTXGATE_SHUTDOWN_DELAY_S": str(DELAY_S), "CTXGATE_DRAIN_TIMEOUT_S": "20",
                "CTXGATE_RETENTION_ENABLED": "false"}
        self.log = data_dir.parent / f"serve-{self.port}.log"
        with self.log.open("wb") as out:
            # Its own session: the test's terminal signals never reach it, only ours do.
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "serve", "--port", str(self.port)],
                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"serve exited {self.proc.returncode}:\n" \
                f"{self.output()}"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            time.sleep(0.2)
        pytest.fail(f"serve did not get ready in {START_S} s:\n{self.output()}")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(STOP_S)


def store_pids(data_dir: Path) -> dict[str, int]:
    """The running stores' pids, from their pid files."""
    out = {}
    for name, path in (("postgres", data_dir / "pg" / "postmaster.pid"),
                       ("redis", data_dir / "redis" / "redis.pid")):
        out[name] = int(path.read_text().split()[0])
    return out


def running(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def wait_gone(pids: list[int]) -> list[int]:
    """The pids still running after a bounded wait (their stop takes a moment)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(running(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if running(p)]


def stop_leftovers(data_dir: Path) -> None:
    """Teardown after a failed test: end the stores this test's serve left (ours alone,
    found by their pid files and data directory)."""
    with contextlib.suppress(FileNotFoundError, ValueError):
        pids = store_pids(data_dir)
        for name, sig in (("postgres", signal.SIGINT), ("redis", signal.SIGTERM)):
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pids[name])
                if str(data_dir) in " ".join(proc.cmdline()) or \
                        Path(proc.cwd()).is_relative_to(data_dir):
                    proc.send_signal(sig)


@pytest.fixture
def data_dir() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="ctxgate-serve-", dir="/tmp"))
    yield base / "data"
    stop_leftovers(base / "data")


@pytest.fixture
def serve(data_dir: Path) -> Iterator[Serve]:
    """A started, ready serve; killed at teardown if the test left it running."""
    first = Serve(data_dir)
    try:
        first.wait_ready()
        yield first
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
            first.proc.wait(STOP_S)


def runtime_key(base_url: str) -> str:
    r = httpx.post(f"{base_url}/v1/admin/keys", headers={"Authorization": f"Bearer {ADMIN}"},
                   json={"tenant_id": "acme", "role": "runtime",
                         "max_data_level": "internal"}, timeout=30)
    assert r.status_code == 201, r.text
    return str(r.json()["api_key"])


def append_body(text: str) -> bytes:
    return json.dumps({"user_id": "alice", "events": [
        {"type": "message", "role": "user", "content": text}]}).encode()


def append(base_url: str, key: str, text: str) -> None:
    r = httpx.post(f"{base_url}/v1/sessions/s1/events", content=append_body(text),
                   headers={"Authorization": f"Bearer {key}",
                            "Content-Type": "application/json"}, timeout=30)
    assert r.status_code == 201, r.text


def read_response(conn: socket.socket) -> str:
    """Everything the server sends until it closes the connection."""
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks).decode()


def events(base_url: str, key: str) -> list[str]:
    r = httpx.get(f"{base_url}/v1/sessions/s1/events", params={"user_id": "alice"},
                  headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 200, r.text
    return [e["content"] for e in r.json()["events"]]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_drains_the_request_in_flight_then_stops_the_stores(
        serve: Serve, sig: int) -> None:
    key = runtime_key(serve.url)
    stores = store_pids(serve.data_dir)
    body = append_body("appended while the server was told to stop")
    # A request in flight when the signal comes: its body arrives in two parts, the second
    # only after the signal (the server is then waiting for it inside the app).
    conn = socket.create_connection(("127.0.0.1", serve.port), timeout=30)
    conn.sendall(b"POST /v1/sessions/s1/events HTTP/1.1\r\nHost: t\r\n"
                 b"Authorization: Bearer " + key.encode() + b"\r\n"
                 b"Content-Type: application/json\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body[:10])
    time.sleep(0.5)
    serve.proc.send_signal(sig)
    signalled = time.monotonic()

    ready = httpx.get(f"{serve.url}/readyz", timeout=5)  # still listening: the delay
    while ready.status_code == 200 and time.monotonic() - signalled < DELAY_S / 2:
        ready = httpx.get(f"{serve.url}/readyz", timeout=5)  # the signal is on its way
    assert (ready.status_code, ready.json()["status"]) == (503, "draining")
    while time.monotonic() - signalled < DELAY_S + 1.0:
        time.sleep(0.1)
    with pytest.raises(httpx.ConnectError):  # the listener is closed: no new requests
        httpx.get(f"{serve.url}/healthz", timeout=5)
    assert serve.proc.poll() is None, "exited with a request still in flight"

    conn.sendall(body[10:])
    response = read_response(conn)
    conn.close()
    assert response.startswith("HTTP/1.1 201"), response
    assert "connection: close" in response.lower()  # no keep-alive while draining

    assert serve.proc.wait(STOP_S) == 0, serve.output()
    assert wait_gone(list(stores.values())) == [], f"store processes left: {stores}"
    assert not (serve.data_dir / "pg" / "postmaster.pid").exists()
    assert not (serve.data_dir / "redis" / "redis.pid").exists()


def test_a_second_serve_on_the_same_directory_fails_fast(serve: Serve) -> None:
    second = Serve(serve.data_dir)
    assert second.proc.wait(30) != 0
    assert "in use by another ctxgate process" in second.output()
    assert f"pid {serve.proc.pid}" in second.output()
    assert httpx.get(f"{serve.url}/readyz", timeout=5).status_code == 200  # untouched

    # `ctxgate keys create` beside it shares its PostgreSQL and, leaving, does not stop it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXGATE_")}
    created = subprocess.run(
        [sys.executable, "-m", "app.cli", "keys", "create", "--tenant", "acme", "--role",
         "runtime", "--quiet"], env=env | {"CTXGATE_DATA_DIR": str(serve.data_dir)},
        capture_output=True, text=True, timeout=120, check=False)
    assert created.returncode == 0, created.stderr
    append(serve.url, created.stdout.strip(), "with a key made beside the server")
    stores = store_pids(serve.data_dir)
    assert serve.stop() == 0, serve.output()
    assert wait_gone(list(stores.values())) == []  # the last user out stopped it


def test_sigkill_then_start_again_on_the_same_directory(serve: Serve) -> None:
    key = runtime_key(serve.url)
    append(serve.url, key, "before")
    orphans = store_pids(serve.data_dir)
    assert serve.stop(signal.SIGKILL) == -signal.SIGKILL
    assert all(running(p) for p in orphans.values())  # what a kill -9 leaves behind

    again = Serve(serve.data_dir)
    try:
        again.wait_ready()
        assert events(again.url, key) == ["before"]  # the same data, the key still valid
        assert not running(orphans["redis"])  # never two Redis on one append-only file
        now = store_pids(again.data_dir)
        assert again.stop() == 0, again.output()
    finally:
        if again.proc.poll() is None:
            again.proc.kill()
    assert wait_gone([*orphans.values(), *now.values()]) == []


def test_stale_pid_files_of_dead_or_foreign_processes_do_not_block_a_start(
        serve: Serve) -> None:
    key = runtime_key(serve.url)
    append(serve.url, key, "acknowledged before the crash")
    stores = store_pids(serve.data_dir)
    postmaster = psutil.Process(stores["postgres"])
    backends = postmaster.children()
    assert serve.stop(signal.SIGKILL) == -signal.SIGKILL
    for pid in stores.values():  # the machine lost power, say: every process died at once
        os.kill(pid, signal.SIGKILL)
    psutil.wait_procs([postmaster, *backends], timeout=10)
    assert wait_gone(list(stores.values())) == []
    # The pid files stay; now their pids belong to someone else.
    foreign = subprocess.Popen(["sleep", "120"])
    try:
        for path in (serve.data_dir / "pg" / "postmaster.pid",
                     serve.data_dir / "redis" / "redis.pid"):
            lines = path.read_text().splitlines()
            path.write_text("\n".join([str(foreign.pid), *lines[1:]]) + "\n")

        again = Serve(serve.data_dir)
        try:
            again.wait_ready()
            assert events(again.url, key) == ["acknowledged before the crash"]
            assert again.stop() == 0, again.output()
        finally:
            if again.proc.poll() is None:
                again.proc.kill()
        assert foreign.poll() is None  # not ours: never signalled
    finally:
        foreign.kill()
        foreign.wait(10)


def test_sigterm_while_starting_stops_what_was_started(data_dir: Path) -> None:
    starting = Serve(data_dir)
    try:
        redis_pid = data_dir / "redis" / "redis.pid"
        deadline = time.monotonic() + START_S
        while not redis_pid.exists():  # both stores up; migrating or loading the model now
            assert starting.proc.poll() is None, starting.output()
            assert time.monotonic() < deadline, starting.output()
            time.sleep(0.05)
        stores = store_pids(data_dir)
        assert starting.stop() == 0, starting.output()
    finally:
        if starting.proc.poll() is None:
            starting.proc.kill()
    assert wait_gone(list(stores.values())) == []
