"""A tiny local HTTP server for adapter contract tests (OpenAI-compatible fakes).

Subclass ``JsonHandler`` with a ``do_POST`` that calls ``self.send_json(status, doc)``; pass
the class to ``serve`` to get a base URL on an ephemeral loopback port.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JsonHandler(BaseHTTPRequestHandler):
    def send_json(self, status: int, doc: Any) -> None:
        """``doc=None`` sends a non-JSON body, for the malformed-response cases."""
        raw = b"<html>oops" if doc is None else json.dumps(doc).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
        except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
            pass

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass


@contextlib.contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
