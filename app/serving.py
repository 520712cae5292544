"""How ``ctxgate serve`` stops: readiness first, then the listener, then in-flight requests.

On the first SIGTERM or SIGINT the app's ``/readyz`` answers 503 (``draining``) while the
server keeps taking requests for ``shutdown_delay_s``, so a balancer polling readiness moves
traffic away before connections are refused; then uvicorn closes the listener, lets requests
in flight finish for at most ``drain_timeout_s`` (then cancels them), and runs the app's
shutdown. A second signal skips the delay; a second SIGINT also skips the drain (uvicorn's
force exit). The embedded stores are stopped after this returns (app/cli.py).
"""

from __future__ import annotations

import time
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI

from app.api.routes.health import mark_draining


class DrainingServer(uvicorn.Server):
    """uvicorn's server with a readiness-first delay before its graceful shutdown."""

    def __init__(self, config: uvicorn.Config, app: FastAPI, *, delay_s: float) -> None:
        super().__init__(config)
        self.app = app
        self.delay_s = delay_s
        self._exit_at: float | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._exit_at is None and not self.should_exit:
            mark_draining(self.app)
            if self.delay_s > 0:
                # Remembered like uvicorn does, so that the signal is raised again once the
                # server is down (app/cli.py turns that SIGTERM into a clean exit).
                self._captured_signals.append(sig)
                self._exit_at = time.monotonic() + self.delay_s
                return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        if self._exit_at is not None and time.monotonic() >= self._exit_at:
            self.should_exit = True
        return await super().on_tick(counter)


def serve(app: FastAPI, *, delay_s: float, **options: Any) -> None:
    """Serve ``app`` with uvicorn's ``options`` until a signal, then stop as the module says
    (``timeout_graceful_shutdown`` bounds the drain)."""
    DrainingServer(uvicorn.Config(app, **options), app, delay_s=delay_s).run()
