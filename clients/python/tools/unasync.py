"""Write ``ctxgate_client/_sync_client.py`` from ``_async_client.py``: one method list.

    python clients/python/tools/unasync.py          # rewrite the sync client
    python clients/python/tools/unasync.py --check  # exit 1 if it is stale

The rewrite is textual and ordered: the async client uses only these async constructs, so
every one of them has a sync counterpart here.
"""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ctxgate_client"
SOURCE = PACKAGE / "_async_client.py"
TARGET = PACKAGE / "_sync_client.py"
HEADER = "# Generated from _async_client.py by clients/python/tools/unasync.py: do not edit.\n"
REWRITES = (
    ("AsyncCtxgateClient", "CtxgateClient"),
    ("An async client", "A client"),
    ("httpx.AsyncBaseTransport", "httpx.BaseTransport"),
    ("httpx.AsyncClient", "httpx.Client"),
    ("async def __aenter__", "def __enter__"),
    ("async def __aexit__", "def __exit__"),
    ("async def aclose", "def close"),
    ("await self._http.aclose()", "self._http.close()"),
    ("await self.aclose()", "self.close()"),
    ("async def ", "def "),
    ("await asyncio.sleep(", "time.sleep("),
    ("await ", ""),
    ("import asyncio\n", "import time\n"),
)


def generate() -> str:
    text = SOURCE.read_text(encoding="utf-8")
    for old, new in REWRITES:
        text = text.replace(old, new)
    return HEADER + text


def main(argv: list[str]) -> int:
    fresh = generate()
    if "--check" in argv:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != fresh:
            print(f"{TARGET} is stale: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
