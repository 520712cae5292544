"""The client's package: the sync client is generated from the async one and current, and
both expose the same methods."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

from ctxgate_client import AsyncCtxgateClient, CtxgateClient

ROOT = Path(__file__).resolve().parents[2]


def test_the_sync_client_is_generated_from_the_async_one() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "clients/python/tools/unasync.py"),
                             "--check"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_both_clients_have_the_same_methods_and_signatures() -> None:
    def methods(cls: type) -> dict[str, str]:
        return {name: str(inspect.signature(fn)) for name, fn in vars(cls).items()
                if callable(fn) and not name.startswith("_")}

    sync, async_ = methods(CtxgateClient), methods(AsyncCtxgateClient)
    assert set(sync) - {"close"} == set(async_) - {"aclose"}
    assert all(inspect.iscoroutinefunction(getattr(AsyncCtxgateClient, n)) for n in async_)
    assert {n: s for n, s in sync.items() if n != "close"} == {
        n: s for n, s in async_.items() if n != "aclose"}
