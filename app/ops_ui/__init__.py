"""The manifest explorer at ``/ops/``: static files shipped in the package, served as they are.

Contract: ``explorer()`` is an ASGI app serving ``static/`` (``index.html`` for ``/``) with
headers that make the page unable to run anything but its own script: a Content-Security-
Policy allowing only same-origin script, style and fetches (no inline script or style, no
plugins, no framing, no ``<base>``), Trusted Types required for DOM sinks (so an
``innerHTML = data`` would throw in the browser instead of parsing data as markup), and
``nosniff`` so a response is never read as a type it was not served as. The page holds no
secret and needs no auth to load; every API call it makes carries the ops key itself.
"""

from __future__ import annotations

from pathlib import Path

from starlette.datastructures import MutableHeaders
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

STATIC = Path(__file__).parent / "static"
CSP = "; ".join((
    "default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self'",
    "connect-src 'self'", "object-src 'none'", "base-uri 'none'", "form-action 'self'",
    "frame-ancestors 'none'", "require-trusted-types-for 'script'", "trusted-types 'none'"))
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",  # frame-ancestors' equivalent for browsers without CSP 2
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",  # revalidate: an upgraded server's page is seen at once
}


class _Hardened:
    """Adds ``HEADERS`` to every response of the wrapped app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, with_headers)


def explorer() -> ASGIApp:
    """The explorer's static files behind the hardening headers (mount at ``/ops``)."""
    return _Hardened(StaticFiles(directory=STATIC, html=True))
