"""The real app served by uvicorn on a loopback port, in a thread with its own event loop,
owning its Container as ``ctxgate serve`` does: for tests that must talk HTTP over a socket
exactly as a runtime would (the client, the schema fuzzer)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn

from app.main import create_app
from app.settings import Settings

START_S = 180  # the first start loads the embedding model


@contextlib.contextmanager
def live_server(settings: Settings) -> Iterator[str]:
    """The server's base URL while the block runs; stopped (bounded) after it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(settings), log_level="warning",
                                           ws="none", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_S
    while not server.started:
        assert thread.is_alive(), "the server thread died while starting"
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
