"""Client fixtures: the real app served by uvicorn on a loopback port, on the real stores.

The server (``tests.live_server``) owns its Container as `ctxgate serve` does, so the client
talks HTTP over a socket exactly as a runtime would. ``ctx`` makes a
client for a key, once sync and once async: the sync client sits behind awaitable methods
(each call in a worker thread), so one scenario drives both.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, cast

import pytest
from ctxgate_client import AsyncCtxgateClient, CtxgateClient
from ctxgate_client.models import Role

from app.settings import Settings
from tests.live_server import live_server

ADMIN_TOKEN = "client-test-admin-" + uuid.uuid4().hex[:8]
Connect = Callable[..., AsyncCtxgateClient]


@pytest.fixture(scope="module")
def live_url(pg_owner_url: str, redis_url: str) -> Iterator[str]:
    settings = Settings(database_url=pg_owner_url, redis_url=redis_url,
                        redis_prefix=f"ctxgate-client-{uuid.uuid4().hex[:8]}",
                        admin_token=ADMIN_TOKEN)
    with live_server(settings) as url:
        yield url


class SyncAsAsync:
    """The sync client behind awaitable methods: the same scenario exercises both."""

    def __init__(self, client: CtxgateClient) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self._client, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return call


@pytest.fixture(params=["sync", "async"])
async def connect(request: pytest.FixtureRequest, live_url: str
                  ) -> AsyncIterator[Connect]:
    """``connect(api_key, **options)``: a client of the live server (sync or async)."""
    opened: list[CtxgateClient | AsyncCtxgateClient] = []

    def make(api_key: str | None, **options: Any) -> AsyncCtxgateClient:
        options.setdefault("base_url", live_url)
        if request.param == "sync":
            sync = CtxgateClient(api_key=api_key, **options)
            opened.append(sync)
            return cast(AsyncCtxgateClient, SyncAsAsync(sync))
        client = AsyncCtxgateClient(api_key=api_key, **options)
        opened.append(client)
        return client

    yield make
    for c in opened:
        if isinstance(c, CtxgateClient):
            c.close()
        else:
            await c.aclose()


@pytest.fixture
async def admin(connect: Connect) -> AsyncCtxgateClient:
    """A client with the platform admin token."""
    return connect(ADMIN_TOKEN)


@pytest.fixture
async def keys(admin: AsyncCtxgateClient, tenant: str) -> dict[str, str]:
    """A runtime, an ops and an admin key of this test's tenant."""
    roles: tuple[Role, ...] = ("runtime", "ops", "admin")
    return {role: (await admin.create_key(tenant_id=tenant, role=role,
                                          max_data_level="confidential")).api_key
            for role in roles}
